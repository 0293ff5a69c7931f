"""The blueprint schema: what to deploy, as typed pydantic models.

A blueprint is one YAML file. Every model forbids unknown keys and documents every field, so a
typo is an error with a field path, and `llmctl blueprints show --schema` can print the reference.
Field-level rules live here; rules that need the hardware or model catalogs live in
:mod:`llmctl.blueprints.rules`.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from llmctl.blueprints.hub_names import model_id_problem, revision_problem
from llmctl.blueprints.image_refs import parse_reference
from llmctl.blueprints.runtimes import RuntimeName, runtime, runtime_names

Dtype = Literal["bf16", "fp16", "fp32", "int8"]
Runtime = RuntimeName  # the names live in the runtime registry (blueprints/runtimes.py)
Accelerator = Literal["inferentia2", "trainium", "trainium2", "nvidia", "cpu"]
UI = Literal["gradio", "open-webui", "none"]
ExposureMode = Literal["port-forward", "internal-lb", "public"]
ScalingSignal = Literal["queue", "cpu"]
# Ray Serve's metrics_interval_s default (ray-project/ray python/ray/serve/config.py at 2.60.0,
# DEFAULT_METRICS_INTERVAL_S): a look-back window must be longer than it (see ScalingSpec)
RAY_METRICS_INTERVAL_S = 10.0

RUNTIMES: tuple[str, ...] = runtime_names()
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ModelSpec(_Strict):
    """The model to serve."""

    id: str = Field(
        description="Hugging Face model id (e.g. 'meta-llama/Llama-2-13b-chat-hf', the Hub's grammar: "
        "'name' or 'namespace/name' of A-Z a-z 0-9 _ - .) or a path inside the serving image / model mirror "
        "('/...' or './...').",
        min_length=1,
    )
    revision: str = Field(
        "main",
        description="Hugging Face revision (branch, tag or 40-hex commit; a git ref name of A-Z a-z 0-9 _ - . "
        "and '/') to download; pin a commit for reproducible deployments.",
    )
    dtype: Dtype = Field("bf16", description="Weight and activation precision: bf16, fp16, fp32 or int8.")
    max_context: int = Field(
        4096, ge=128, le=1_048_576, description="Maximum tokens per sequence (prompt plus generated tokens)."
    )
    batch_size: int = Field(
        1,
        ge=1,
        le=4096,
        description="Sequences whose full-context KV cache must fit in accelerator memory at once "
        "(the compiled batch size on Neuron).",
    )
    gated: bool | None = Field(
        None,
        description="Whether the model needs a Hugging Face token; None takes the value from the model "
        "catalog.",
    )
    architecture: str | None = Field(
        None,
        description="Model catalog key (e.g. 'llama-2-13b') when the id is not in the catalog's aliases.",
    )

    @field_validator("id")
    @classmethod
    def _hub_id(cls, value: str) -> str:
        problem = model_id_problem(value)
        if problem is not None:
            raise ValueError(
                f"{value!r} is not a Hugging Face model id or a path inside the image: {problem}; write the "
                "repository as on the Hub (e.g. 'meta-llama/Llama-2-7b-chat-hf') or an absolute path"
            )
        return value

    @field_validator("revision")
    @classmethod
    def _hub_revision(cls, value: str, info: ValidationInfo) -> str:
        # `id` is declared first, so it is in info.data when it passed its own check
        problem = revision_problem(value, str(info.data.get("id", "namespace/name")))
        if problem is not None:
            raise ValueError(
                f"revision {value!r} is refused: {problem}; write a branch, a tag or the 40-hex commit the "
                "Hub shows (e.g. 'main')"
            )
        return value


class ComputeSpec(_Strict):
    """Where each serving replica runs."""

    accelerator: Accelerator = Field(
        description="Accelerator family: inferentia2, trainium, trainium2, nvidia or cpu."
    )
    instance_type: str = Field(description="EC2 instance type of the serving nodes, e.g. 'inf2.48xlarge'.")
    tensor_parallel: int = Field(
        1,
        ge=1,
        le=64,
        description="Tensor-parallel degree: NeuronCores (Neuron) or GPUs (NVIDIA) per replica.",
    )
    pipeline_parallel: int = Field(
        1,
        ge=1,
        le=16,
        description="Pipeline-parallel degree = nodes per replica on NVIDIA: the model's layers split into "
        "this many stages, each running `tensor_parallel` GPUs on its own node, over EFA (docs/multi-node.md).",
    )
    cpus_per_replica: float | None = Field(
        None,
        gt=0,
        description="vCPUs requested by each replica; None derives a share of the node from the tp degree.",
    )
    memory_gib_per_replica: float | None = Field(
        None,
        gt=0,
        description="Memory (GiB) requested by each replica; None derives a share of the node.",
    )
    capacity_type: Literal["on-demand", "spot"] = Field(
        "on-demand", description="EC2 capacity type for the serving nodes."
    )


class ScalingSpec(_Strict):
    """How many replicas run, and the autoscaling bounds."""

    replicas: int = Field(1, ge=0, le=256, description="Replicas at start.")
    min_replicas: int = Field(1, ge=0, le=256, description="Autoscaling lower bound.")
    max_replicas: int = Field(1, ge=1, le=256, description="Autoscaling upper bound.")
    target_ongoing_requests: float = Field(
        8.0, gt=0, description="Autoscaling target: in-flight requests per replica (Ray Serve) or per pod."
    )
    signal: ScalingSignal = Field(
        "queue",
        description="What a Deployment runtime (endpoint `service` in the runtime registry) scales on: 'queue' "
        "(a KEDA ScaledObject on the server's own queue-depth metric) or 'cpu' (an HPA on CPU utilisation). "
        "Ray runtimes always scale on Ray Serve's ongoing requests per replica.",
    )
    target_queue: float = Field(
        2.0,
        gt=0,
        description="Queue-signal target: requests waiting per pod (averaged over the pods) above which "
        "KEDA adds a pod.",
    )
    queue_activation: float = Field(
        0.0,
        ge=0,
        description="Queue-signal activation threshold: KEDA counts the scaler active only above this many "
        "waiting requests (KEDA's activationTargetValue).",
    )
    upscale_delay_s: float | None = Field(
        None,
        ge=0,
        description="Seconds the signal must stay above target before a replica is added; None keeps the "
        "autoscaler's default (Ray Serve 30 s, the HPA 0 s).",
    )
    downscale_delay_s: float | None = Field(
        None,
        ge=0,
        description="Seconds the signal must stay below target before a replica is removed; None keeps the "
        "autoscaler's default (Ray Serve 600 s, the HPA 300 s).",
    )
    # The two fields below are Ray Serve's own (ray-project/ray python/ray/serve/config.py,
    # AutoscalingConfig, at ray 2.60.0, the version of the local target's venv; both fields are also in
    # the 2.53.0 and 2.58.0 of the serving locks: the second came with ray-project/ray#56573, in
    # 2.50): `look_back_period_s` is the
    # window its controller averages the ongoing-request metrics over (default 30 s), and Ray warns
    # (and says it will refuse) a window no longer than `metrics_interval_s`, the 10 s at which
    # replicas and proxies push those metrics; `downscale_to_zero_delay_s` replaces
    # `downscale_delay_s` for the last step, from one replica to none (autoscaling_policy.py).
    look_back_period_s: float | None = Field(
        None,
        description="Ray runtimes: the window in seconds over which Ray Serve averages the ongoing "
        "requests it scales on (Serve's look_back_period_s; None keeps its 30 s). Must be more than "
        f"{RAY_METRICS_INTERVAL_S:g} s, the interval at which Serve's replicas push their metrics. A "
        "shorter window reacts sooner to the end of a load. Deployment runtimes (KEDA, HPA) have no "
        "such window and refuse it.",
    )
    downscale_to_zero_delay_s: float | None = Field(
        None,
        ge=0,
        description="Ray runtimes with min_replicas 0: seconds the signal must stay at zero before "
        "the last replica is stopped (Serve's downscale_to_zero_delay_s; None uses downscale_delay_s). "
        "Deployment runtimes cannot scale to zero and refuse it.",
    )

    @field_validator("look_back_period_s")
    @classmethod
    def _window(cls, value: float | None) -> float | None:
        if value is not None and value <= RAY_METRICS_INTERVAL_S:
            raise ValueError(
                f"look_back_period_s ({value:g}) must be more than {RAY_METRICS_INTERVAL_S:g} s: Ray Serve's "
                f"replicas push their metrics every {RAY_METRICS_INTERVAL_S:g} s and Ray refuses a window "
                "no longer than that; leave it out for Serve's 30 s"
            )
        return value

    @model_validator(mode="after")
    def _bounds(self) -> ScalingSpec:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas ({self.min_replicas}) is larger than max_replicas ({self.max_replicas})"
            )
        if not self.min_replicas <= self.replicas <= self.max_replicas:
            raise ValueError(
                f"replicas ({self.replicas}) must lie between min_replicas ({self.min_replicas}) "
                f"and max_replicas ({self.max_replicas})"
            )
        return self


class ImageSpec(_Strict):
    """The serving container: the pinned upstream base and the versions it carries."""

    base: str = Field(
        description="Pinned upstream base image of the serving container (tag or digest, never 'latest').",
    )
    neuron_sdk: str | None = Field(None, description="Neuron SDK version inside the image (e.g. '2.21.1').")
    cuda: str | None = Field(None, description="CUDA version inside the image (e.g. '12.4').")
    vllm: str | None = Field(None, description="vLLM version inside the image, when the runtime uses vLLM.")
    serving_image: str | None = Field(
        None,
        description="The built llmctl serving image (registry/repo@sha256:...); None until "
        "`llmctl images build --push` records it.",
    )
    efa: bool | None = Field(
        None,
        description="Whether the image carries libfabric and NCCL's aws-ofi-nccl plugin (EFA between the "
        "nodes of a replica). Unset: what versions.yaml records for a pinned base, else true (the fabric "
        "preflight then stops `up` on TCP); false: TCP between the nodes is expected and reported, not fatal.",
    )

    @field_validator("base", "serving_image")
    @classmethod
    def _pinned(cls, value: str | None) -> str | None:
        if value is None:
            return value
        ref = parse_reference(value)  # the OCI reference grammar (image_refs.py)
        if ref.digest:
            return value
        tag = ref.tag
        if tag is None:
            raise ValueError(f"image {value!r} has no tag; pin a version tag or a digest")
        if tag == "latest":
            raise ValueError(f"image {value!r} uses 'latest'; pin a version tag or a digest")
        return value

    @field_validator("neuron_sdk", "cuda", "vllm")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is not None and not _VERSION.match(value):
            raise ValueError(f"{value!r} is not a version like '2.21' or '2.21.1'")
        return value


class ServingSpec(_Strict):
    """Serving-side settings shared by every runtime."""

    port: int = Field(8000, ge=1024, le=65535, description="Port the serving container listens on.")
    route_prefix: str = Field("/", description="Route prefix of the serving app.")
    max_new_tokens: int = Field(
        256, ge=1, le=131072, description="Default and upper bound of tokens generated per request."
    )
    max_concurrent_requests: int = Field(
        32, ge=1, le=4096, description="In-flight requests per replica before requests queue."
    )
    max_queued_requests: int | None = Field(
        None,
        ge=0,
        le=65536,
        description="Requests that may wait per replica once max_concurrent_requests are in flight; "
        "beyond that new requests are refused at once with 429 and Retry-After. Default: "
        "max_concurrent_requests (one more round of work).",
    )
    max_request_bytes: int | None = Field(
        None,
        ge=1024,
        le=1 << 30,
        description="Largest request body accepted, checked before the body is parsed or tokenised "
        "(413 beyond it). Default: derived from model.max_context (32 bytes per token + 64 KiB).",
    )
    streaming: bool = Field(True, description="Whether the endpoint streams tokens (SSE).")
    micro_batch_size: int = Field(
        1, ge=1, le=256, description="Requests combined into one batch by the server (TorchServe, Triton)."
    )
    micro_batch_delay_ms: int = Field(
        0, ge=0, le=10_000, description="How long the server waits to fill a micro-batch, in milliseconds."
    )
    gpu_memory_utilization: float = Field(
        0.9, gt=0.1, le=0.98, description="Share of GPU memory vLLM may use (NVIDIA only)."
    )
    ray_fast_path: bool | None = Field(
        None,
        description="Ray's fast path: Ray Serve's HAProxy ingress, Ray Serve LLM's direct streaming (the "
        "LLMServer replica serves HTTP itself, no OpenAiIngress hop) and throughput-optimized mode, set on "
        "the Ray head and workers (Ray Serve LLM runtimes on Ray >= 2.55 only). Unset: on wherever the blueprint can take "
        "it; `llmctl blueprints show` says why a blueprint cannot. false keeps Ray's Python proxy.",
    )
    request_router: Literal["default", "prefix_aware"] = Field(
        "default",
        description="Which replica takes a request (Ray Serve LLM runtimes only): default is Ray's own "
        "router; prefix_aware is Ray Serve LLM's PrefixCacheAffinityRouter, which sends a prompt to the "
        "replica that served its longest prefix (its vLLM prefix cache). `llmctl blueprints show` says why.",
    )

    @field_validator("route_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("route_prefix must start with '/'")
        return value


_ACM_CERTIFICATE = re.compile(r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[A-Za-z0-9-]+$")


class ExposureSpec(_Strict):
    """How the endpoint is reached."""

    mode: ExposureMode = Field(
        "port-forward",
        description="port-forward (ClusterIP, reached with `llmctl connect`), internal-lb (an internal NLB) "
        "or public (an internet-facing NLB with a TLS listener that requires an API key, allowed_cidrs "
        "and tls_certificate_arn).",
    )
    allowed_cidrs: list[str] = Field(
        default_factory=list,
        description="Source CIDRs allowed to reach the load balancer: required for public; for internal-lb "
        "empty means whatever can reach the VPC's internal addresses.",
    )
    api_key: bool = Field(
        False, description="Require an API key (generated and stored as a secret); required for public."
    )
    tls_certificate_arn: str | None = Field(
        None,
        description="ACM certificate ARN for a TLS listener on the load balancer (HTTPS to the endpoint): "
        "required for public, optional for internal-lb.",
    )

    @field_validator("allowed_cidrs")
    @classmethod
    def _cidrs(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                ipaddress.ip_network(value, strict=False)
            except ValueError:
                raise ValueError(f"{value!r} is not a CIDR like '203.0.113.0/24'") from None
        return values

    @field_validator("tls_certificate_arn")
    @classmethod
    def _certificate(cls, value: str | None) -> str | None:
        if value is not None and not _ACM_CERTIFICATE.match(value):
            raise ValueError(
                f"{value!r} is not an ACM certificate ARN like "
                "'arn:aws:acm:us-east-1:123456789012:certificate/<id>'"
            )
        return value

    @model_validator(mode="after")
    def _public_needs_key(self) -> ExposureSpec:
        if self.mode == "public" and not self.api_key:
            raise ValueError("a public endpoint must set api_key: true")
        if self.mode == "public" and not self.allowed_cidrs:
            raise ValueError(
                "a public endpoint must list allowed_cidrs (the client networks, e.g. '203.0.113.0/24'); "
                "use internal-lb or port-forward for an endpoint no one outside reaches"
            )
        if self.mode == "public" and self.tls_certificate_arn is None:
            raise ValueError(
                "a public endpoint must set tls_certificate_arn (an ACM certificate for the load balancer's "
                "TLS listener): the API key must not cross the internet in clear"
            )
        if self.mode == "port-forward" and (self.allowed_cidrs or self.tls_certificate_arn):
            raise ValueError(
                "allowed_cidrs and tls_certificate_arn only apply to internal-lb and public exposure"
            )
        return self


class CacheSpec(_Strict):
    """S3-backed caches that make the second start fast."""

    model_mirror: bool = Field(
        False, description="Mirror the model weights to the platform's S3 bucket once and load from there."
    )
    compile_cache: bool = Field(
        False,
        description="Keep what the engine compiles in S3 (Neuron artifacts; vLLM's torch.compile, Triton "
        "and FlashInfer caches on NVIDIA GPUs) so a restart skips compilation.",
    )


class ObservabilitySpec(_Strict):
    """Metrics and logs."""

    cloudwatch: bool = Field(
        True, description="Send container and Neuron metrics to CloudWatch (observability add-on)."
    )
    prometheus: bool = Field(
        True, description="Expose Prometheus metrics from the serving pods (annotations)."
    )


_RESERVATION_ID = re.compile(r"^cr-[0-9a-z]+$")


class CapacitySpec(_Strict):
    """EC2 capacity reservations (On-Demand Capacity Reservations or Capacity Blocks for ML) the
    serving nodes launch into. The serving pool's EC2NodeClass selects them
    (`capacityReservationSelectorTerms`) and its NodePool allows `karpenter.sh/capacity-type:
    reserved`, which Karpenter fills before on-demand."""

    reservations: list[str | dict[str, str]] = Field(
        min_length=1,
        max_length=30,
        description="Reservations: an ID ('cr-0123abcd') or a map of tags selecting them ('*' matches any value).",
    )
    fallback: Literal["on-demand", "none"] = Field(
        "on-demand",
        description="When the reservations are full: launch on-demand nodes, or none (wait for reserved capacity).",
    )

    @field_validator("reservations")
    @classmethod
    def _terms(cls, terms: list[str | dict[str, str]]) -> list[str | dict[str, str]]:
        for term in terms:
            if isinstance(term, str) and not _RESERVATION_ID.match(term):
                raise ValueError(
                    f"{term!r} is not a capacity reservation ID (cr- then lowercase letters and digits)"
                )
            if isinstance(term, dict) and (
                not term or len(term) > 20 or any(not key or not value for key, value in term.items())
            ):
                raise ValueError("a tag selector needs 1 to 20 tags, none with an empty key or value")
        return terms

    def selector_terms(self) -> list[dict[str, object]]:
        """The EC2NodeClass `capacityReservationSelectorTerms`."""
        return [{"id": term} if isinstance(term, str) else {"tags": dict(term)} for term in self.reservations]

    @property
    def capacity_types(self) -> tuple[str, ...]:
        """The NodePool's `karpenter.sh/capacity-type` values."""
        return ("reserved", "on-demand") if self.fallback == "on-demand" else ("reserved",)


class UpgradeSpec(_Strict):
    """How a change to the deployed serving pods rolls out (`llmctl plan` shows it before `up`; see
    docs/day-two.md)."""

    strategy: Literal["surge", "replace"] = Field(
        "surge",
        description="surge: new serving pods (a second RayCluster, or one more Deployment pod) start beside "
        "the old ones and take over when ready; `up` first checks the quota, NodePool limits and "
        "reservations hold the extra nodes. replace: the old pods stop first (downtime until the new ones "
        "serve), no extra nodes; `llmctl up --replace` does this for one run.",
    )


class Blueprint(_Strict):
    """One deployable system: a model on a runtime on an accelerator, with its UI and exposure."""

    name: str = Field(description="Blueprint name: lowercase letters, digits and '-', at most 40 characters.")
    description: str = Field("", description="One line shown by `llmctl blueprints list`.")
    seed: str | None = Field(None, description="The guide this blueprint reproduces, for reference.")
    model: ModelSpec = Field(description="The model to serve.")
    runtime: Runtime = Field(description=f"Serving runtime: {', '.join(RUNTIMES[:-1])} or {RUNTIMES[-1]}.")
    compute: ComputeSpec = Field(description="Accelerator, instance type and parallelism.")
    scaling: ScalingSpec = Field(default_factory=ScalingSpec, description="Replicas and autoscaling bounds.")
    image: ImageSpec = Field(description="The serving container image and its versions.")
    serving: ServingSpec = Field(default_factory=ServingSpec, description="Serving-side settings.")
    ui: UI = Field(
        "none", description="Optional UI: gradio (uses /infer), open-webui (uses the OpenAI API) or none."
    )
    exposure: ExposureSpec = Field(default_factory=ExposureSpec, description="How the endpoint is reached.")
    caches: CacheSpec = Field(
        default_factory=CacheSpec, description="S3 model mirror and Neuron compile cache."
    )
    observability: ObservabilitySpec = Field(
        default_factory=ObservabilitySpec, description="CloudWatch and Prometheus toggles."
    )
    capacity: CapacitySpec | None = Field(
        None, description="Capacity reservations for the serving nodes (none: on-demand or spot capacity)."
    )
    upgrade: UpgradeSpec = Field(
        default_factory=UpgradeSpec,
        description="How a change to the serving pods rolls out: beside the old ones (surge) or after them (replace).",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                "use lowercase letters, digits and '-' (at most 40 characters, no leading or trailing '-')"
            )
        return value

    @model_validator(mode="after")
    def _reserved_is_not_spot(self) -> Blueprint:
        if self.capacity is not None and self.compute.capacity_type == "spot":
            raise ValueError(
                "capacity.reservations are reserved on-demand capacity; set compute.capacity_type: on-demand "
                "or drop capacity"
            )
        return self

    def pod_view(self) -> dict[str, object]:
        """The blueprint as the serving pods receive it (Ray's app args, `LLMCTL_BLUEPRINT`): every field
        but `upgrade`, which is llmctl's and not the pods' (changing it then redeploys nothing), and a
        single-node replica's `pipeline_parallel` of 1 (the default the pods read back), so that the
        field's arrival changed no deployed blueprint's pods."""
        exclude: dict[str, Any] = {"upgrade": True}
        if self.compute.pipeline_parallel == 1:
            exclude["compute"] = {"pipeline_parallel"}
        return self.model_dump(mode="json", exclude=exclude)

    @property
    def nodes_per_replica(self) -> int:
        """Nodes one serving replica spans: its pipeline-parallel degree (1 for a single-node replica)."""
        return self.compute.pipeline_parallel

    @property
    def is_neuron(self) -> bool:
        """True for Inferentia and Trainium blueprints."""
        return self.compute.accelerator in ("inferentia2", "trainium", "trainium2")

    @property
    def runs_locally(self) -> bool:
        """Whether the local target can run it: CPU, on a runtime the registry marks `local`."""
        return self.compute.accelerator == "cpu" and runtime(self.runtime).local
