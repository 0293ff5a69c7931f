"""Memory sizing: which instances and tensor-parallel degrees can hold a model.

Rules (numbers in GB of 1e9 bytes):
- need = weights + KV cache for `batch` sequences of `context` tokens (GQA KV heads replicated
  up to the tp degree);
- Neuron: each NeuronCore holds ``memory_per_core_gb`` (16 GB on Inferentia2/Trainium); the
  minimum cores is ceil(need / 16) and the minimum devices ceil(cores / cores per device);
- NVIDIA: each GPU holds its memory x ``gpu_memory_utilization``; attention heads must divide by tp;
- every option also needs host memory for the weights while they load (90 % of RAM).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from llmctl.blueprints.hardware import AcceleratorInfo, HardwareCatalog, Instance, ceil_div
from llmctl.blueprints.models import ModelArch
from llmctl.blueprints.schema import Dtype

GIB = 1024**3 / 1e9  # GB per GiB
HOST_MEMORY_SHARE = 0.9
CPU_MEMORY_SHARE = 0.8


@dataclass(frozen=True)
class FitResult:
    """Whether a model fits one instance at one tp degree, and why not."""

    fits: bool
    needed_gb: float
    available_gb: float
    reason: str = ""


@dataclass(frozen=True)
class SizeOption:
    """One instance type with the smallest tp degree that fits (or the largest tried)."""

    instance_type: str
    tp_degree: int
    fits: bool
    hourly_usd: float
    needed_gb: float
    available_gb: float
    reason: str = ""


@dataclass(frozen=True)
class SizeReport:
    """What `llmctl size` prints."""

    model: str
    accelerator: str
    dtype: str
    context: int
    batch: int
    weights_gb: float
    kv_cache_gb: float
    total_gb: float
    neuron_cores: int | None
    neuron_devices: int | None
    gpus: int | None
    options: list[SizeOption] = field(default_factory=list)
    recommended: SizeOption | None = None

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON keys."""
        data = asdict(self)
        for key in ("weights_gb", "kv_cache_gb", "total_gb"):
            data[key] = round(data[key], 3)
        for option in data["options"]:
            option["needed_gb"] = round(option["needed_gb"], 3)
            option["available_gb"] = round(option["available_gb"], 3)
        if self.recommended is not None:
            data["recommended"] = {
                "instance_type": self.recommended.instance_type,
                "tp_degree": self.recommended.tp_degree,
            }
        return data


def allowed_tp(info: AcceleratorInfo, transformers_neuronx: bool) -> list[int]:
    """The tp degrees an engine accepts on an accelerator family."""
    if transformers_neuronx and info.tp_degrees_transformers_neuronx:
        return info.tp_degrees_transformers_neuronx
    return info.tp_degrees


def check_fit(
    arch: ModelArch,
    instance: Instance,
    info: AcceleratorInfo,
    *,
    dtype: Dtype,
    tp: int,
    context: int,
    batch: int,
    gpu_memory_utilization: float = 0.9,
) -> FitResult:
    """Whether one replica of the model at tp fits on the instance."""
    weights = arch.weights_gb(dtype)
    host_gb = instance.memory_gib * GIB
    if info.kind == "cpu":
        need = weights + arch.kv_cache_gb(dtype, context, batch)
        available = host_gb * CPU_MEMORY_SHARE
        if need > available:
            return FitResult(False, need, available, f"needs {need:.1f} GB of RAM, {available:.1f} GB usable")
        return FitResult(True, need, available)
    if tp > instance.parallel_units:
        unit = "NeuronCores" if info.kind == "neuron" else "GPUs"
        return FitResult(
            False, 0.0, 0.0, f"tp {tp} exceeds the {instance.parallel_units} {unit} of {instance.name}"
        )
    need = weights + arch.kv_cache_gb(dtype, context, batch, tp)
    if info.kind == "neuron":
        per_core = info.memory_per_core_gb or 16.0
        available = tp * per_core
    else:
        available = tp * instance.accelerator_memory_gib * GIB * gpu_memory_utilization
        if arch.heads % tp:
            return FitResult(False, need, available, f"{arch.heads} attention heads do not divide by tp {tp}")
    if need > available:
        return FitResult(False, need, available, f"needs {need:.1f} GB, tp {tp} gives {available:.1f} GB")
    if weights > host_gb * HOST_MEMORY_SHARE:
        return FitResult(
            False,
            need,
            available,
            f"{instance.name} has {instance.memory_gib:g} GiB RAM, too little to load {weights:.1f} GB",
        )
    return FitResult(True, need, available)


def size_model(
    arch: ModelArch,
    catalog: HardwareCatalog,
    *,
    accelerator: str,
    dtype: Dtype,
    context: int,
    batch: int,
    transformers_neuronx: bool = False,
    gpu_memory_utilization: float = 0.9,
) -> SizeReport:
    """Weights, KV cache, minimum accelerators and every instance option for a model."""
    info = catalog.accelerator(accelerator)
    weights = arch.weights_gb(dtype)
    kv = arch.kv_cache_gb(dtype, context, batch)
    total = weights + kv
    cores = devices = gpus = None
    instances = catalog.of_accelerator(accelerator)
    if info.kind == "neuron":
        per_core = info.memory_per_core_gb or 16.0
        cores = ceil_div(total, per_core)
        per_device = max((row.cores_per_device for row in instances), default=2) or 2
        devices = ceil_div(cores, per_device)
    elif info.kind == "gpu":
        smallest = min((row.accelerator_memory_gib for row in instances), default=24.0)
        gpus = ceil_div(total, smallest * GIB * gpu_memory_utilization)
    options: list[SizeOption] = []
    degrees = allowed_tp(info, transformers_neuronx)
    for row in instances:
        candidates = [tp for tp in degrees if tp <= row.parallel_units] or [1]
        result = None
        chosen = candidates[-1]
        for tp in candidates:
            result = check_fit(
                arch,
                row,
                info,
                dtype=dtype,
                tp=tp,
                context=context,
                batch=batch,
                gpu_memory_utilization=gpu_memory_utilization,
            )
            chosen = tp
            if result.fits:
                break
        assert result is not None
        options.append(
            SizeOption(
                row.name,
                chosen,
                result.fits,
                row.on_demand_usd,
                result.needed_gb,
                result.available_gb,
                result.reason,
            )
        )
    fitting = [o for o in options if o.fits]
    recommended = min(fitting, key=lambda o: (o.hourly_usd, o.tp_degree)) if fitting else None
    return SizeReport(
        model=arch.key,
        accelerator=accelerator,
        dtype=dtype,
        context=context,
        batch=batch,
        weights_gb=weights,
        kv_cache_gb=kv,
        total_gb=total,
        neuron_cores=cores,
        neuron_devices=devices,
        gpus=gpus,
        options=options,
        recommended=recommended,
    )
