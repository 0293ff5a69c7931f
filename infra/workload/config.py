"""What a workload stack needs to know: the blueprint and the facts of the platform it lands on.

`PlatformFacts` comes from the platform stack's outputs (`from_outputs`) on a deployed platform,
or is derived offline from :mod:`llmctl.blueprints.pools` (`for_blueprint`) so `llmctl render` and
`llmctl validate` need no cloud. On an existing cluster (target kubeconfig) it comes from the
user's cluster file (`for_existing_cluster`, see :mod:`llmctl.infra.workload.cluster`). `WorkloadConfig` bundles it with the blueprint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.pools import PoolSpec, pool_for_blueprint, pools_for
from llmctl.blueprints.schema import Blueprint
from llmctl.errors import BadInput, LlmctlError
from llmctl.infra.names import ClusterTarget
from llmctl.infra.platform.config import validate_config
from llmctl.infra.platform.manifests import pool_capacity_types
from llmctl.infra.workload.cluster import HINT, load_cluster_file
from llmctl.infra.workload.pins.model_revision import pinned_blueprint
from llmctl.infra.workload.scheduling.pool_facts import PoolFacts, _Strict
from llmctl.state import ModelPin

Target = ClusterTarget  # the cluster targets (names.py): a platform stack or an existing cluster


def _reserving(facts: PoolFacts, spec: PoolSpec, blueprint: Blueprint) -> PoolFacts:
    """The blueprint's serving pool allows `reserved` when it names capacity reservations, as the
    platform's NodePool does (manifests.pool_capacity_types)."""
    if blueprint.capacity is None or spec.name != pool_for_blueprint(blueprint, hardware()).name:
        return facts
    return facts.model_copy(update={"capacity_types": list(pool_capacity_types(spec, blueprint.capacity))})


class PlatformFacts(_Strict):
    """What the platform a workload lands on provides."""

    cluster_name: str = Field(description="EKS cluster name (or a label for a kubeconfig target).")
    region: str = Field(description="AWS region of the cluster.")
    kubernetes_version: str = Field(description="Kubernetes minor version, e.g. '1.35'.")
    pools: list[PoolFacts] = Field(description="Node pools, as the platform stack's `node_pools` output.")
    cache_bucket: str | None = Field(None, description="S3 bucket for the model mirror and compile cache.")
    ecr_registry: str | None = Field(None, description="ECR registry host for built serving images.")
    target: Target = Field("eks", description="eks (a platform stack) or kubeconfig (an existing cluster).")
    kubeconfig: str | None = Field(
        None, repr=False, exclude=True, description="Kubeconfig of the cluster (a secret; never printed)."
    )
    present_parts: list[str] = Field(
        default_factory=list,
        description="kubeconfig target: platform parts the cluster file declares present (not detected).",
    )

    def pool(self, name: str) -> PoolFacts | None:
        """A pool by name."""
        return next((p for p in self.pools if p.name == name), None)

    @classmethod
    def from_outputs(cls, outputs: dict[str, Any], *, target: Target = "eks") -> PlatformFacts:
        """Facts from the platform stack's exports (plain values, Automation API `.value`s unwrapped)."""
        values = {k: getattr(v, "value", v) for k, v in outputs.items()}
        missing = [key for key in ("cluster_name", "region", "node_pools") if not values.get(key)]
        if missing:
            raise LlmctlError(
                f"the platform stack has no output(s) {', '.join(missing)}",
                "run `llmctl up` for the platform first, or check that it finished",
            )
        pools = []
        for raw in values["node_pools"]:
            row = dict(raw)
            row.setdefault("instance_families", row.pop("families", []))
            pools.append(PoolFacts.model_validate(row))
        kubeconfig = values.get("kubeconfig")
        if isinstance(kubeconfig, dict):
            kubeconfig = json.dumps(kubeconfig)
        found = values.get("versions") or {}
        k8s_version = (
            (found.get("kubernetes_version") or found.get("kubernetes")) if isinstance(found, dict) else None
        )
        if not k8s_version:
            from llmctl.blueprints.versions import versions  # lazy: read at call time: tests swap versions()

            k8s_version = versions().eks.kubernetes_version.value
        return cls(
            cluster_name=str(values["cluster_name"]),
            region=str(values["region"]),
            kubernetes_version=str(k8s_version),
            pools=pools,
            cache_bucket=values.get("cache_bucket") or None,
            ecr_registry=values.get("ecr_registry") or None,
            target=target,
            kubeconfig=kubeconfig,
        )

    @classmethod
    def for_blueprint(
        cls, blueprint: Blueprint, *, stack: str = "dev", region: str = "us-west-2"
    ) -> PlatformFacts:
        """The facts the platform WOULD have for this blueprint, from :mod:`llmctl.blueprints.pools` (offline)."""
        from llmctl.blueprints.versions import versions  # lazy: read at call time: tests swap versions()

        # The same stack-name and region rules as the platform (a bad one fails here, not in the cluster).
        validate_config({"stack": stack, "region": region}, source="--stack / --region")
        catalog = hardware()
        core_type = str(catalog.platform_fixed.core_nodes["instance_type"])
        caches = blueprint.caches.model_mirror or blueprint.caches.compile_cache
        return cls(
            cluster_name=f"llmctl-{stack}",
            region=region,
            kubernetes_version=versions().eks.kubernetes_version.value,
            pools=[
                _reserving(PoolFacts.from_spec(spec, core_type), spec, blueprint)
                for spec in pools_for([blueprint], catalog)
            ],
            cache_bucket=f"llmctl-{stack}-{region}-cache" if caches else None,
            target="eks",
        )

    @classmethod
    def for_existing_cluster(
        cls,
        pools_file: Path | str | None,
        *,
        kubeconfig: Path | str | None = None,
        stack: str = "dev",
        region: str = "on-prem",
    ) -> PlatformFacts:
        """The facts of an existing cluster (target kubeconfig) from its cluster file (`--pools FILE`).

        No cache bucket and no ECR registry: llmctl did not build them, so caches are off and the
        serving image is the blueprint's (or the upstream base image).
        """
        from llmctl.blueprints.versions import versions  # lazy: read at call time: tests swap versions()

        if pools_file is None:
            raise BadInput("--target kubeconfig needs --pools FILE (the cluster's node pools)", HINT)
        cluster = load_cluster_file(pools_file)
        text = None
        if kubeconfig is not None:
            path = Path(kubeconfig).expanduser()
            if not path.is_file():
                raise BadInput(
                    f"kubeconfig {kubeconfig} does not exist",
                    "pass --kubeconfig with your cluster's kubeconfig file",
                )
            text = path.read_text(encoding="utf-8")
        return cls(
            cluster_name=cluster.name or (Path(kubeconfig).stem if kubeconfig else f"{stack}-cluster"),
            region=region,
            kubernetes_version=versions().eks.kubernetes_version.value,
            pools=[pool.to_facts() for pool in cluster.pools],
            target="kubeconfig",
            kubeconfig=text,
            present_parts=list(cluster.present),
        )


DeliveryMode = Literal["image", "wheel", "configmap"]


class Delivery(_Strict):
    """How the serving code reaches the pods: a built image, a wheel in S3, or a wheel in a ConfigMap."""

    mode: DeliveryMode = Field(
        description="image: the app is baked into `image`; wheel: the pods fetch `wheel_uri` from S3 with "
        "their Pod Identity and install it; configmap: the wheel at `wheel_path` goes into ConfigMaps "
        "mounted into the pods, which install it (existing clusters)."
    )
    image: str = Field(description="The image the serving containers run.")
    wheel_uri: str | None = Field(None, description="wheel mode: s3://<bucket>/<key> of the llmctl wheel.")
    wheel_path: str | None = Field(
        None, description="configmap mode: the local wheel file `up` built (None in an offline plan)."
    )
    wheel_digest: str | None = Field(
        None,
        description="configmap mode: sha256 of the wheel's contents (names the ConfigMaps of its parts).",
    )
    wheel_sha256: str | None = Field(
        None,
        description="wheel and configmap modes: sha256 of the wheel file `up` uploaded or split into "
        "ConfigMaps; each pod checks the file it fetched or joined against it before installing (None in an "
        "offline plan, where no wheel was built).",
    )
    outside_uri: str | None = Field(
        None,
        description="wheel mode, a runtime lock that leaves projects out (a CPU torch): s3:// prefix "
        "of their wheels and hash-pinned requirements, downloaded at the first `up` (None offline: planned).",
    )
    outside_requirements: str | None = Field(
        None,
        description="configmap mode, a runtime lock that leaves projects out (a CPU torch): the hash-pinned "
        "requirements of their wheels as the stack recorded them (downloaded at the first `up`, as on EKS); "
        "None when nothing was recorded (an offline plan), and then the pods refuse to start.",
    )
    reason: str = Field(description="Why this delivery was chosen (printed by `up`).")
    decided: bool = Field(
        False, description="True when `up` checked ECR and uploaded the wheel; False for an offline plan."
    )

    @property
    def baked(self) -> bool:
        """Whether the image already carries the app."""
        return self.mode == "image"

    @property
    def wheel_file(self) -> str | None:
        """File name of the delivered wheel."""
        where = self.wheel_uri or self.wheel_path
        return where.rsplit("/", 1)[-1] if where else None


class WorkloadConfig(_Strict):
    """One workload stack: a blueprint on a platform."""

    blueprint: Blueprint = Field(description="The validated blueprint to deploy.")
    stack: str = Field(
        "dev",
        description="Workload stack name: the environment (platform stack), e.g. 'dev', or "
        "'<environment>.<workload>' for a named workload (it names the ECR repository).",
    )
    platform: PlatformFacts = Field(description="Facts of the platform the workload lands on.")
    hf_token_present: bool = Field(
        False, description="Whether a Hugging Face token was supplied (never the token)."
    )
    namespace: str | None = Field(None, description="Kubernetes namespace; None uses the blueprint name.")
    image: str | None = Field(
        None, description="Serving image override (wins over the blueprint and the registry)."
    )
    delivery: Delivery | None = Field(
        None,
        description="How the serving code reaches the pods, decided by `up` (infra/workload/delivery/serving_code.py); "
        "None: the offline plan (`planned_delivery`).",
    )
    image_pins: dict[str, str] = Field(
        default_factory=dict,
        description="Digests the workload stack recorded for the image tags its pods run (image as named "
        "-> sha256:...; `llmctl.state.StackPins`): those containers name `image@digest`. Empty: by tag.",
    )
    model_pin: ModelPin | None = Field(
        None,
        description="The commit the stack pinned the blueprint's model revision to, with the Hub's checksum "
        "of each file (`model_revision.py`); the blueprint then names the commit (derived from the pin "
        "here). None: not pinned.",
    )

    @model_validator(mode="before")
    @classmethod
    def _blueprint_names_the_pinned_commit(cls, data: Any) -> Any:
        """With a model pin, the blueprint's model revision becomes the pinned commit: derived from the
        pin in one place, so no caller can hand over a blueprint that disagrees with it."""
        if isinstance(data, dict):
            pin, blueprint = data.get("model_pin"), data.get("blueprint")
            if isinstance(pin, ModelPin) and isinstance(blueprint, Blueprint):
                return {**data, "blueprint": pinned_blueprint(blueprint, pin)}
        return data

    @model_validator(mode="after")
    def _pin_and_revision_agree(self) -> WorkloadConfig:
        if self.model_pin is not None and self.blueprint.model.revision != self.model_pin.commit:
            raise ValueError(
                f"the blueprint names model revision {self.blueprint.model.revision!r}, the stack pinned "
                f"commit {self.model_pin.commit!r}: give the blueprint as loaded and the pin; the config "
                "derives the revision from the pin"
            )
        return self

    upgrade: Literal["surge", "replace"] | None = Field(
        None,
        description="This run's upgrade strategy (`llmctl up --replace`); None: the blueprint's "
        "upgrade.strategy.",
    )

    @property
    def upgrade_strategy(self) -> Literal["surge", "replace"]:
        """The upgrade strategy in effect: this run's, else the blueprint's."""
        return self.upgrade or self.blueprint.upgrade.strategy

    @property
    def ns(self) -> str:
        """The namespace in effect."""
        return self.namespace or self.blueprint.name
