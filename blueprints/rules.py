"""Cross-field rules: what cannot run, found before any cloud call.

Each rule returns problems as (field path, message with the fix). They need the hardware and
model catalogs, so they run after the schema has accepted the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from llmctl.blueprints import fast_path, request_router
from llmctl.blueprints.hardware import HardwareCatalog, Instance, in_range
from llmctl.blueprints.hub_names import is_path_id
from llmctl.blueprints.models import ModelArch, lookup_model
from llmctl.blueprints.runtimes import runtime, runtimes, runtimes_with
from llmctl.blueprints.schema import Blueprint
from llmctl.blueprints.sizing import allowed_tp, check_fit, size_model
from llmctl.errors import CatalogError

Problem = tuple[str, str]

# Capability sets, read from the runtime registry (blueprints/runtimes.py).
# Runtimes that drive transformers-neuronx, and those whose app serves the seeds' /infer route or
# the OpenAI API.
TRANSFORMERS_NEURONX = tuple(spec.name for spec in runtimes() if spec.engine == "transformers-neuronx")
INFER_ROUTE = runtimes_with(infer_route=True)
OPENAI_API = runtimes_with(openai_routes=True)
# Runtimes serving llmctl's shared app, which checks LLMCTL_API_KEY (serving/common/auth.py).
API_KEY_CHECKED = runtimes_with(api_key_check=True)
# Neuron runtimes whose compiled artifacts llmctl syncs with S3: transformers-neuronx's model.save()
# (serving/compile_cache.py) and NxD Inference's NEURON_COMPILED_ARTIFACTS under vLLM (ray_vllm/neuron_cache.py).
COMPILE_CACHED = runtimes_with(compile_cache=True)


def engine_of(blueprint: Blueprint) -> str:
    """The inference engine a blueprint's runtime drives on its accelerator."""
    return runtime(blueprint.runtime).engine_on(blueprint.compute.accelerator)


@dataclass(frozen=True)
class Context:
    """What the rules look at."""

    blueprint: Blueprint
    catalog: HardwareCatalog
    instance: Instance | None
    arch: ModelArch | None


def _instance(ctx: Context) -> list[Problem]:
    bp = ctx.blueprint
    if ctx.instance is None:
        try:
            ctx.catalog.instance(bp.compute.instance_type)
        except CatalogError as exc:
            return [("compute.instance_type", f"{exc.message}")]
        return []
    if ctx.instance.accelerator != bp.compute.accelerator:
        return [
            (
                "compute.instance_type",
                f"{ctx.instance.name} carries {ctx.instance.accelerator}, not {bp.compute.accelerator}; "
                f"pick a {bp.compute.accelerator} instance or change compute.accelerator",
            )
        ]
    return []


def _runtime(ctx: Context) -> list[Problem]:
    bp = ctx.blueprint
    info = ctx.catalog.accelerator(bp.compute.accelerator)
    if bp.runtime not in info.runtimes:
        return [
            (
                "runtime",
                f"runtime {bp.runtime} does not run on {bp.compute.accelerator}; "
                f"runtimes for {bp.compute.accelerator}: {', '.join(info.runtimes)}",
            )
        ]
    return []


def _software(ctx: Context) -> list[Problem]:
    bp, image = ctx.blueprint, ctx.blueprint.image
    engine = engine_of(bp)
    problems: list[Problem] = []
    if not bp.is_neuron:
        if image.neuron_sdk:
            problems.append(
                ("image.neuron_sdk", f"a Neuron SDK is set but the accelerator is {bp.compute.accelerator}")
            )
        if engine == "vllm-cuda" and not image.cuda:
            problems.append(("image.cuda", "GPU images must declare their CUDA version"))
        return problems
    if image.cuda:
        problems.append(("image.cuda", "a CUDA version is set but the accelerator is Neuron"))
    if not image.neuron_sdk:
        return [*problems, ("image.neuron_sdk", "Neuron images must declare their Neuron SDK version")]
    if engine == "vllm-neuron" and not image.vllm:
        return [*problems, ("image.vllm", "vLLM-on-Neuron images must declare their vLLM version")]
    family = ctx.instance.family if ctx.instance else None
    ranges = ctx.catalog.neuron_software.get(engine, [])
    sdk_ok = [r for r in ranges if in_range(image.neuron_sdk, r.sdk_min, r.sdk_max)]
    if engine == "vllm-neuron" and image.vllm:
        sdk_ok = [r for r in sdk_ok if in_range(image.vllm, r.vllm_min, r.vllm_max)]
    if not sdk_ok:
        allowed = "; ".join(
            f"SDK {r.sdk_min or 'any'}..{r.sdk_max or 'newer'}"
            + (f" with vLLM {r.vllm_min or 'any'}..{r.vllm_max or 'newer'}" if r.vllm_min else "")
            + f" on {', '.join(r.families)}"
            + (f" ({r.note})" if r.note else "")
            for r in ranges
        )
        version = f"Neuron SDK {image.neuron_sdk}" + (
            f" with vLLM {image.vllm}" if engine == "vllm-neuron" else ""
        )
        return [*problems, ("image.neuron_sdk", f"{engine} does not run on {version}; supported: {allowed}")]
    if family and not any(family in r.families for r in sdk_ok):
        families = sorted({f for r in sdk_ok for f in r.families})
        return [
            *problems,
            (
                "image.neuron_sdk",
                f"{engine} on Neuron SDK {image.neuron_sdk} does not support {family}; it runs on "
                f"{', '.join(families)} — pick an image whose SDK supports {family} or another instance",
            ),
        ]
    return problems


# The Neuron SDK in an AWS Neuron DLC tag, e.g. `...-neuronx-py310-sdk2.25.0-ubuntu22.04`.
_TAG_SDK = re.compile(r"(?:^|[-_])sdk(\d+\.\d+(?:\.\d+)?)(?:$|[-_])")


def _sdk_in_tag(ctx: Context) -> list[Problem]:
    """The image tag and `image.neuron_sdk` both name the Neuron SDK: refuse when they disagree, so
    changing one alone cannot make an engine look supported."""
    image = ctx.blueprint.image
    tag = image.base.split("@", 1)[0].rpartition(":")[2]
    found = _TAG_SDK.search(tag)
    if found is None or image.neuron_sdk is None or found.group(1) == image.neuron_sdk:
        return []
    return [
        (
            "image.neuron_sdk",
            f"image.neuron_sdk is {image.neuron_sdk} but the image tag {tag!r} carries Neuron SDK "
            f"{found.group(1)}; make them agree (the tag is what runs)",
        )
    ]


def _parallelism(ctx: Context) -> list[Problem]:
    bp = ctx.blueprint
    info = ctx.catalog.accelerator(bp.compute.accelerator)
    tp = bp.compute.tensor_parallel
    degrees = allowed_tp(info, runtime(bp.runtime).engine == "transformers-neuronx")
    problems: list[Problem] = []
    if tp not in degrees:
        problems.append(
            (
                "compute.tensor_parallel",
                f"tp {tp} is not allowed on {bp.compute.accelerator}; use one of {degrees}",
            )
        )
    if ctx.instance is not None and info.kind != "cpu" and tp > ctx.instance.parallel_units:
        unit = "NeuronCores" if info.kind == "neuron" else "GPUs"
        problems.append(
            (
                "compute.tensor_parallel",
                f"tp {tp} is larger than the {ctx.instance.parallel_units} {unit} of {ctx.instance.name}",
            )
        )
    return problems


def _fit(ctx: Context) -> list[Problem]:
    bp, arch, instance = ctx.blueprint, ctx.arch, ctx.instance
    if arch is None or instance is None or instance.accelerator != bp.compute.accelerator:
        return []
    problems: list[Problem] = []
    if bp.model.max_context > arch.max_context:
        problems.append(
            (
                "model.max_context",
                f"{bp.model.max_context} exceeds the {arch.max_context} tokens {arch.key} supports",
            )
        )
    if bp.serving.max_new_tokens >= bp.model.max_context:
        problems.append(
            ("serving.max_new_tokens", f"must be smaller than model.max_context ({bp.model.max_context})")
        )
    info = ctx.catalog.accelerator(bp.compute.accelerator)
    if info.kind != "cpu" and bp.compute.tensor_parallel > instance.parallel_units:
        return problems  # reported by the parallelism rule
    result = check_fit(
        arch,
        instance,
        info,
        dtype=bp.model.dtype,
        tp=bp.compute.tensor_parallel,
        context=bp.model.max_context,
        batch=bp.model.batch_size,
        gpu_memory_utilization=bp.serving.gpu_memory_utilization,
        pp=bp.compute.pipeline_parallel,
    )
    if not result.fits:
        layout = f"tp {bp.compute.tensor_parallel}" + (
            f" x pipeline_parallel {bp.nodes_per_replica}" if bp.nodes_per_replica > 1 else ""
        )
        problems.append(
            (
                "compute",
                f"{arch.key} ({bp.model.dtype}, context {bp.model.max_context}, batch {bp.model.batch_size}) "
                f"does not fit {instance.name} at {layout}: {result.reason}; " + _size_hint(ctx, arch),
            )
        )
    return problems


def _size_hint(ctx: Context, arch: ModelArch) -> str:
    """What `llmctl size` recommends for the blueprint's model (a multi-node layout when no single
    node holds it), with the command that shows every option."""
    bp = ctx.blueprint
    command = f"run `llmctl size {arch.key} --accelerator {bp.compute.accelerator}` for options"
    report = size_model(
        arch,
        ctx.catalog,
        accelerator=bp.compute.accelerator,
        dtype=bp.model.dtype,
        context=bp.model.max_context,
        batch=bp.model.batch_size,
        gpu_memory_utilization=bp.serving.gpu_memory_utilization,
    )
    rec = report.recommended
    if rec is None or rec.pipeline_parallel == 1:
        return command
    return (
        f"no single {bp.compute.accelerator} node holds it: set compute.instance_type {rec.instance_type}, "
        f"tensor_parallel {rec.tp_degree} and pipeline_parallel {rec.pipeline_parallel} ({rec.pipeline_parallel} "
        f"nodes per replica over EFA, ${rec.hourly_usd:.2f}/h), or {command}"
    )


def _pipeline(ctx: Context) -> list[Problem]:
    """A replica over several nodes (pipeline_parallel > 1) runs only where it can work: vLLM's
    pipeline stages under Ray Serve LLM on NVIDIA GPUs, one whole node per stage, over EFA."""
    bp, instance = ctx.blueprint, ctx.instance
    pp = bp.compute.pipeline_parallel
    if pp == 1:
        return []
    field = "compute.pipeline_parallel"
    if bp.compute.accelerator != "nvidia":
        return [
            (
                field,
                f"pipeline_parallel {pp} spans nodes on NVIDIA GPUs only; {bp.compute.accelerator} serves one "
                "replica per node: set it to 1 (or pick an nvidia instance type)",
            )
        ]
    if not runtime(bp.runtime).pipeline_parallel:
        able = ", ".join(runtimes_with(pipeline_parallel=True))
        return [
            (
                field,
                f"{bp.runtime} cannot run one replica across nodes; runtimes that can: {able}; or set "
                "pipeline_parallel to 1",
            )
        ]
    if instance is None or instance.accelerator != bp.compute.accelerator:
        return []  # reported by the instance rule
    problems: list[Problem] = []
    if not instance.efa_interfaces:
        efa = sorted(row.name for row in ctx.catalog.of_accelerator("nvidia") if row.efa_interfaces)
        problems.append(
            (
                field,
                f"{instance.name} has no EFA, so the pipeline stages would talk over the pod network (TCP); "
                f"pick an EFA instance type ({', '.join(efa)}) or set pipeline_parallel to 1",
            )
        )
    if bp.compute.tensor_parallel != instance.accelerator_count:
        problems.append(
            (
                "compute.tensor_parallel",
                f"each pipeline stage takes a whole node: tensor_parallel must be the {instance.accelerator_count} "
                f"GPUs of {instance.name}, not {bp.compute.tensor_parallel}",
            )
        )
    if ctx.arch is not None and pp > ctx.arch.layers:
        problems.append((field, f"{ctx.arch.key} has {ctx.arch.layers} layers, fewer than {pp} stages"))
    return problems


def _resources(ctx: Context) -> list[Problem]:
    bp, instance = ctx.blueprint, ctx.instance
    if instance is None:
        return []
    problems: list[Problem] = []
    if bp.compute.cpus_per_replica and bp.compute.cpus_per_replica > instance.vcpu:
        problems.append(("compute.cpus_per_replica", f"{instance.name} has only {instance.vcpu} vCPUs"))
    if bp.compute.memory_gib_per_replica and bp.compute.memory_gib_per_replica > instance.memory_gib:
        problems.append(
            ("compute.memory_gib_per_replica", f"{instance.name} has only {instance.memory_gib:g} GiB")
        )
    return problems


def _features(ctx: Context) -> list[Problem]:
    bp = ctx.blueprint
    problems: list[Problem] = []
    if bp.ui == "gradio" and bp.runtime not in INFER_ROUTE:
        problems.append(
            (
                "ui",
                f"gradio talks to the /infer route, which {bp.runtime} does not serve; use open-webui or none",
            )
        )
    if bp.ui == "open-webui" and bp.runtime not in OPENAI_API:
        problems.append(
            ("ui", f"open-webui needs the OpenAI API, which {bp.runtime} does not serve; use none")
        )
    if bp.exposure.api_key and bp.runtime not in API_KEY_CHECKED:
        problems.append(
            (
                "exposure.api_key",
                f"{bp.runtime} cannot check an API key (only {', '.join(API_KEY_CHECKED)} do); "
                "use exposure.mode port-forward or internal-lb without api_key",
            )
        )
    if bp.serving.ray_fast_path and (why_not := fast_path.blocker(bp)) is not None:
        problems.append(
            ("serving.ray_fast_path", f"this blueprint cannot take it: {why_not}; remove it or set false")
        )
    if bp.serving.request_router != "default" and (why_not := request_router.blocker(bp)) is not None:
        problems.append(
            ("serving.request_router", f"this blueprint cannot route by prefix: {why_not}; use default")
        )
    if bp.caches.model_mirror and is_path_id(bp.model.id):
        problems.append(
            (
                "caches.model_mirror",
                f"the mirror copies a Hugging Face repository; {bp.model.id!r} is a path inside the image: "
                "set it to false, or model.id to the Hub repository",
            )
        )
    if bp.caches.compile_cache and not runtime(bp.runtime).compile_cache:
        problems.append(
            (
                "caches.compile_cache",
                f"the S3 compile cache syncs what {', '.join(COMPILE_CACHED)} compile (Neuron artifacts, "
                f"vLLM's GPU caches); {bp.runtime} has nothing llmctl can sync: set it to false",
            )
        )
    return problems


def autoscaled(blueprint: Blueprint) -> bool:
    """Whether the blueprint lets its replica count move (max_replicas above min_replicas)."""
    return blueprint.scaling.max_replicas > blueprint.scaling.min_replicas


def queue_scaled(blueprint: Blueprint) -> bool:
    """Whether the blueprint's Deployment scales on its queue through a KEDA ScaledObject (so the
    platform must run KEDA)."""
    return (
        autoscaled(blueprint)
        and blueprint.scaling.signal == "queue"
        and runtime(blueprint.runtime).endpoint == "service"
    )


def _scaling(ctx: Context) -> list[Problem]:
    """Each runtime scales on its queue, or the blueprint says which other signal; no bound is
    changed silently (docs/autoscaling.md)."""
    bp, scaling = ctx.blueprint, ctx.blueprint.scaling
    spec = runtime(bp.runtime)
    if spec.endpoint == "ray-serve":
        if scaling.signal != "queue":
            return [
                (
                    "scaling.signal",
                    f"{bp.runtime} scales on Ray Serve's ongoing requests per replica; remove scaling.signal",
                )
            ]
        return []
    problems: list[Problem] = []
    ray_only = {
        "look_back_period_s": "the HPA (also the one KEDA drives) scales on the metric's latest value, "
        "with no averaging window to set; upscale_delay_s and downscale_delay_s are its smoothing",
        "downscale_to_zero_delay_s": "it never scales to zero",
    }
    for field, what in ray_only.items():
        if getattr(scaling, field) is not None:
            problems.append(
                (f"scaling.{field}", f"{bp.runtime} cannot use scaling.{field}: {what}; remove it")
            )
    if scaling.min_replicas == 0:
        why = (
            "an HPA on CPU utilisation cannot go below one pod"
            if scaling.signal == "cpu"
            else f"its queue metric ({spec.queue_metric or 'none'}) is read from its own pods, so at zero pods "
            "nothing would report a waiting request and nothing would wake it"
        )
        problems.append(
            (
                "scaling.min_replicas",
                f"{bp.runtime} cannot scale to zero: {why}; set min_replicas to 1 or more, or use a Ray "
                "runtime (Ray Serve holds requests while a replica starts)",
            )
        )
    if autoscaled(bp) and scaling.signal == "queue" and spec.queue_metric is None:
        problems.append(
            (
                "scaling.signal",
                f"{bp.runtime} exports no queue-depth metric to scale on; set scaling.signal: cpu (an HPA on "
                "CPU utilisation) or min_replicas equal to max_replicas",
            )
        )
    return problems


RULES: tuple[Callable[[Context], list[Problem]], ...] = (
    _instance,
    _runtime,
    _software,
    _sdk_in_tag,
    _parallelism,
    _pipeline,
    _fit,
    _resources,
    _features,
    _scaling,
)


def check(blueprint: Blueprint, catalog: HardwareCatalog) -> list[Problem]:
    """Every problem with the blueprint; empty when it can run."""
    try:
        instance: Instance | None = catalog.instance(blueprint.compute.instance_type)
    except CatalogError:
        instance = None
    problems: list[Problem] = []
    try:
        arch: ModelArch | None = lookup_model(
            blueprint.model.architecture or blueprint.model.id, allow_hub=False
        )
    except CatalogError:
        arch = None
        problems.append(
            (
                "model.id",
                f"{blueprint.model.id!r} is not in the model catalog, so memory fit cannot be checked; "
                "set model.architecture to a catalog key (`llmctl catalog models`)",
            )
        )
    ctx = Context(blueprint, catalog, instance, arch)
    for rule in RULES:
        problems.extend(rule(ctx))
    return problems


def is_gated(blueprint: Blueprint) -> bool:
    """Whether the model needs a Hugging Face token (the blueprint wins over the catalog)."""
    if blueprint.model.gated is not None:
        return blueprint.model.gated
    try:
        return lookup_model(blueprint.model.architecture or blueprint.model.id, allow_hub=False).gated
    except CatalogError:
        return False
