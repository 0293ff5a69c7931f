"""The runtime registry: every serving runtime llmctl knows, as data (``data/runtimes.yaml``).

One entry per runtime says what it is (engine, accelerators), what it can do (API key check,
compile cache, streaming, OpenAI routes, the seeds' /infer route, the local target) and where its
parts live (the versions.yaml image key, the serving package, the endpoint shape). Everything
else reads it: the blueprint schema's runtime type, the rules, the accelerator catalog's runtime
lists, the image table, the workload builders' lookup and the endpoint description.

Adding a runtime = one entry in data/runtimes.yaml (and its name in `RuntimeName`) + one builder
(`infra/workload/builders/<package>.py`, which registers itself) + one serving folder
(`serving/<package>/` with its Dockerfile); see docs/contributing.md. `tests/foundation/test_foundation_runtimes.py` fails when a part is missing.

Pure data: no cloud, Kubernetes or serving import.
"""

from __future__ import annotations

import functools
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from llmctl.errors import BlueprintError, did_you_mean

# The names, as a type the blueprint schema and mypy can check; :func:`runtimes` refuses a data file
# whose names differ.
RuntimeName = Literal["ray-neuronx", "ray-vllm", "triton-vllm", "torchserve-neuronx", "ray-cpu"]
EndpointShape = Literal["ray-serve", "service"]
NEURON = ("inferentia2", "trainium", "trainium2")


class RuntimeSpec(BaseModel):
    """One serving runtime."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: RuntimeName = Field(description="The name blueprints use in `runtime:`.")
    summary: str = Field(description="One line for docs and listings.")
    engine: str = Field(
        description="The inference engine it drives (a key of accelerators.yaml's neuron_software on Neuron)."
    )
    neuron_engine: str | None = Field(
        None, description="The engine it drives on Neuron accelerators, when that differs from `engine`."
    )
    accelerators: tuple[str, ...] = Field(description="Accelerator families it runs on.")
    api_key_check: bool = Field(
        description="Its app checks LLMCTL_API_KEY (serving/common/auth.py), so exposure.api_key is allowed."
    )
    compile_cache: bool = Field(
        description="On Neuron it keeps compiled artifacts (transformers-neuronx model.save(), NxD "
        "Inference's NEURON_COMPILED_ARTIFACTS) that the S3 compile cache syncs."
    )
    drains: bool = Field(
        description="Its app drains on stop (serving/common/overload.py): readiness off, in-flight streams "
        "finish within the grace period or end with an error event; its pods' preStop starts that."
    )
    min_token_rate: float = Field(
        gt=0,
        description="The slowest decode rate per stream (tokens/s) expected at full load; a pod's drain "
        "grace lets a request of serving.max_new_tokens finish at this rate.",
    )
    streaming: bool = Field(description="It can stream generated tokens.")
    openai_routes: bool = Field(description="It serves the OpenAI API (/v1/...), which open-webui needs.")
    infer_route: bool = Field(description="It serves the seeds' /infer route, which the gradio UI uses.")
    local: bool = Field(False, description="`--target local` can run it (Ray on this machine, CPU only).")
    serve_llm: bool = Field(
        False,
        description="Its app is Ray Serve LLM's OpenAI app (serving/serve_llm/), so Ray's fast path "
        "(HAProxy and direct streaming, blueprints/fast_path.py) can apply to it.",
    )
    pipeline_parallel: bool = Field(
        False,
        description="It can run one replica across several nodes (compute.pipeline_parallel > 1): its engine "
        "splits the model's layers into stages, one node each, on NVIDIA GPUs (Ray Serve LLM's vLLM with its "
        "Ray executor).",
    )
    versions_key: str = Field(description="Key of its pinned base image under `images:` in versions.yaml.")
    package: str = Field(
        description="Its serving package (`serving/<package>/`, with the Dockerfile) and builder module "
        "(`infra/workload/builders/<package>.py`)."
    )
    endpoint: EndpointShape = Field(
        description="ray-serve: Ray Serve's Service on port 8000 at the blueprint's route prefix, with the "
        "Ray dashboard beside it; service: the runtime's own Service and port, at the root."
    )

    queue_metric: str | None = Field(
        None,
        description="A Deployment runtime's queue-depth gauge on its metrics port (one series per pod), "
        "which its KEDA ScaledObject reads; None when the server exports none (then only the CPU "
        "signal or fixed replicas are possible). Ray runtimes scale on Ray Serve's own signal.",
    )
    queue_metric_source: str | None = Field(
        None, description="Where the metric name was checked (repository and file)."
    )

    def engine_on(self, accelerator: str) -> str:
        """The engine it drives on an accelerator family."""
        if accelerator in NEURON and self.neuron_engine:
            return self.neuron_engine
        return self.engine

    @property
    def uis(self) -> tuple[str, ...]:
        """The blueprint `ui:` values it can serve."""
        return (
            *(("gradio",) if self.infer_route else ()),
            *(("open-webui",) if self.openai_routes else ()),
            "none",
        )


@functools.lru_cache(maxsize=1)
def runtimes() -> tuple[RuntimeSpec, ...]:
    """Every registry entry, in registry order (read once from data/runtimes.yaml)."""
    from llmctl.blueprints._data import load_yaml

    rows = load_yaml("data", "runtimes.yaml")["runtimes"]
    specs = tuple(RuntimeSpec.model_validate({"name": name, **row}) for name, row in rows.items())
    if tuple(spec.name for spec in specs) != get_args(RuntimeName):
        raise BlueprintError(
            "data/runtimes.yaml and RuntimeName in blueprints/runtimes.py list different runtimes",
            "list every runtime in both, in the same order",
        )
    return specs


def runtime_names() -> tuple[str, ...]:
    """Every runtime name, in registry order (without reading the data file)."""
    return get_args(RuntimeName)


def runtime(name: str) -> RuntimeSpec:
    """The registry entry of a runtime; an unknown name gets a did-you-mean."""
    for spec in runtimes():
        if spec.name == name:
            return spec
    names = runtime_names()
    raise BlueprintError(
        f"unknown runtime {name!r}", did_you_mean(name, names) or f"runtimes: {', '.join(names)}"
    )


def runtimes_with(**capabilities: bool) -> tuple[str, ...]:
    """Names of the runtimes whose capability flags have the given values, in registry order."""
    return tuple(
        spec.name
        for spec in runtimes()
        if all(getattr(spec, flag) is value for flag, value in capabilities.items())
    )


def runtimes_on(accelerator: str) -> list[str]:
    """Names of the runtimes that run on an accelerator family, in registry order."""
    return [spec.name for spec in runtimes() if accelerator in spec.accelerators]
