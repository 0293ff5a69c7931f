"""Memory sizing: which instances and tensor-parallel degrees can hold a model.

Rules (numbers in GB of 1e9 bytes):
- need = weights + KV cache for `batch` sequences of `context` tokens (GQA KV heads replicated
  up to the tp degree);
- Neuron: each NeuronCore holds ``memory_per_core_gb`` (16 GB on Inferentia2/Trainium); the
  minimum cores is ceil(need / 16) and the minimum devices ceil(cores / cores per device);
- NVIDIA: each GPU holds its memory x ``gpu_memory_utilization``; attention heads must divide by tp;
- a model no single node holds (NVIDIA): pipeline_parallel stages of one whole node each (tp = the
  node's GPUs), over EFA; the memory of `pp` nodes holds the weights and the KV cache, and each
  node's pod loads only its stage's share of the weights;
- every option also needs host memory (`host_memory`: the weights while they load, the runtime, the
  KV cache on CPU, plus a margin) within what Karpenter lets one pod request on the instance
  (`blueprints.allocatable`: VM overhead, kube-reserved, eviction threshold, the platform's
  DaemonSets). The serving pods request exactly that host memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from llmctl.blueprints.allocatable import node_allocatable
from llmctl.blueprints.hardware import AcceleratorInfo, HardwareCatalog, Instance, ceil_div
from llmctl.blueprints.models import ModelArch
from llmctl.blueprints.schema import Dtype

GIB = 1024**3 / 1e9  # GB per GiB
# Host memory one replica needs besides what its engine puts on the accelerators (llmctl's
# estimates, per accelerator kind): the copies of the weights held in host memory while they load
# (Neuron engines keep the checkpoint and its sharded copy; vLLM on GPUs and CPU engines one copy)
# and the runtime itself (Python, torch, Ray, the Neuron runtime and compiler or the CUDA context).
WEIGHT_COPIES = {"neuron": 2.0, "gpu": 1.0, "cpu": 1.0}
RUNTIME_GIB = {"neuron": 8.0, "gpu": 6.0, "cpu": 1.5}
# The margin a serving pod requests on top: 20 % of the need, at least 2 GiB.
MEMORY_MARGIN_SHARE = 0.2
MEMORY_MARGIN_MIN_GIB = 2.0


@dataclass(frozen=True)
class HostMemory:
    """Host memory (GiB) one replica needs, and what its pod requests."""

    weights_gib: float
    kv_cache_gib: float
    runtime_gib: float

    @property
    def need_gib(self) -> float:
        """Weights while loading, host KV cache and runtime."""
        return self.weights_gib + self.kv_cache_gib + self.runtime_gib

    @property
    def margin_gib(self) -> float:
        """The margin on top of the need."""
        return max(MEMORY_MARGIN_MIN_GIB, MEMORY_MARGIN_SHARE * self.need_gib)

    @property
    def request_gib(self) -> float:
        """What the serving pod requests: need plus margin."""
        return self.need_gib + self.margin_gib


def host_memory(
    arch: ModelArch, accelerator: str, *, dtype: Dtype, context: int, batch: int, stages: int = 1
) -> HostMemory:
    """Host memory of one replica's pod: the KV cache is in host memory only on CPU engines; with
    `stages` pipeline stages (one pod per node) each pod loads its share of the weights."""
    kind = (
        "neuron"
        if accelerator in ("inferentia2", "trainium", "trainium2")
        else ("gpu" if accelerator == "nvidia" else "cpu")
    )
    kv = arch.kv_cache_gb(dtype, context, batch) / GIB if kind == "cpu" else 0.0
    return HostMemory(WEIGHT_COPIES[kind] * arch.weights_gb(dtype) / GIB / stages, kv, RUNTIME_GIB[kind])


@dataclass(frozen=True)
class FitResult:
    """Whether a model fits one instance at one tp degree, and why not."""

    fits: bool
    needed_gb: float
    available_gb: float
    reason: str = ""


@dataclass(frozen=True)
class SizeOption:
    """One instance type with the smallest tp degree that fits (or the largest tried); a multi-node
    option spans `pipeline_parallel` nodes and `hourly_usd` is the price of all of them."""

    instance_type: str
    tp_degree: int
    fits: bool
    hourly_usd: float
    needed_gb: float
    available_gb: float
    reason: str = ""
    pipeline_parallel: int = 1


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
            if option["pipeline_parallel"] == 1:  # single-node options keep their keys
                del option["pipeline_parallel"]
        if self.recommended is not None:
            data["recommended"] = {
                "instance_type": self.recommended.instance_type,
                "tp_degree": self.recommended.tp_degree,
            }
            if self.recommended.pipeline_parallel > 1:
                data["recommended"]["pipeline_parallel"] = self.recommended.pipeline_parallel
                data["recommended"]["nodes"] = self.recommended.pipeline_parallel
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
    pp: int = 1,
) -> FitResult:
    """Whether one replica of the model at tp fits on the instance (on `pp` of them, one pipeline
    stage each, when pp > 1)."""
    weights = arch.weights_gb(dtype)
    # what Karpenter lets one pod request on the node, GB
    host_gb = node_allocatable(instance).pod_memory_mib * 1024**2 / 1e9
    host = host_memory(arch, info.name, dtype=dtype, context=context, batch=batch, stages=pp)
    host_need = host.request_gib * GIB
    if info.kind == "cpu":
        if host_need > host_gb:
            return FitResult(
                False,
                host_need,
                host_gb,
                f"needs {host_need:.1f} GB of RAM with its margin, {host_gb:.1f} GB allocatable to a pod",
            )
        return FitResult(True, host_need, host_gb)
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
        available = pp * tp * instance.accelerator_memory_gib * GIB * gpu_memory_utilization
        if arch.heads % tp:
            return FitResult(False, need, available, f"{arch.heads} attention heads do not divide by tp {tp}")
    if need > available:
        layout = f"tp {tp}" + (f" x pp {pp}" if pp > 1 else "")
        return FitResult(False, need, available, f"needs {need:.1f} GB, {layout} gives {available:.1f} GB")
    if host_need > host_gb:
        return FitResult(
            False,
            need,
            available,
            f"loading {weights / pp:.1f} GB needs {host_need:.1f} GB of host memory; {instance.name} lets a pod "
            f"request {host_gb:.1f} GB (Karpenter's allocatable less DaemonSets)",
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
    if not fitting and info.kind == "gpu":
        options += multi_node_options(
            arch,
            catalog,
            info,
            dtype=dtype,
            context=context,
            batch=batch,
            gpu_memory_utilization=gpu_memory_utilization,
        )
        fitting = [o for o in options if o.fits]
    # the cheapest; across nodes the fewest first (each stage adds a hop over the network and its share
    # of the pipeline's bubbles), then the cheapest
    recommended = (
        min(fitting, key=lambda o: (o.pipeline_parallel, o.hourly_usd, o.tp_degree)) if fitting else None
    )
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


#: the most nodes one replica may span (ComputeSpec.pipeline_parallel's bound)
MAX_PIPELINE_STAGES = 16


def multi_node_options(
    arch: ModelArch,
    catalog: HardwareCatalog,
    info: AcceleratorInfo,
    *,
    dtype: Dtype,
    context: int,
    batch: int,
    gpu_memory_utilization: float = 0.9,
) -> list[SizeOption]:
    """For a model no single GPU node holds: on every EFA instance whose GPUs make an allowed tp degree,
    the fewest pipeline stages (whole nodes) that hold it, priced for all its nodes."""
    found: list[SizeOption] = []
    for row in catalog.of_accelerator(info.name):
        tp = row.accelerator_count
        if not row.efa_interfaces or tp not in info.tp_degrees:
            continue
        for pp in range(2, MAX_PIPELINE_STAGES + 1):
            result = check_fit(
                arch,
                row,
                info,
                dtype=dtype,
                tp=tp,
                context=context,
                batch=batch,
                gpu_memory_utilization=gpu_memory_utilization,
                pp=pp,
            )
            if result.fits:
                found.append(
                    SizeOption(
                        row.name,
                        tp,
                        True,
                        row.on_demand_usd * pp,
                        result.needed_gb,
                        result.available_gb,
                        pipeline_parallel=pp,
                    )
                )
                break
    return found
