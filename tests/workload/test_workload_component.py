"""The workload graph under Pulumi mocks: one typed resource per object, all parented to the
Workload component, secrets marked secret, readiness annotations in place."""

from __future__ import annotations

import json
from typing import Any

import pytest
from workload_helpers import TOKEN, blueprint, config_for, manifests_for

from llmctl.errors import BlueprintError, PrerequisiteError
from llmctl.infra.plan.offline import OfflineMocks, run_offline
from llmctl.infra.workload.builders.common import needs_hf_token
from llmctl.infra.workload.component import resource_name
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.delivery.wheelhouse import wheelhouse_key
from llmctl.infra.workload.program import build_workload
from llmctl.infra.workload.render import redact
from llmctl.serving.lockfiles import locks

WORKLOAD = "llmctl:workload:Workload"


def test_workload_graph(catalog_name: str) -> None:
    config = config_for(catalog_name)
    registered = run_offline(lambda: build_workload(config, hf_token=TOKEN))
    [component] = [r for r in registered if r.type == WORKLOAD]
    assert component.name == catalog_name
    k8s = [r for r in registered if r.type.startswith("kubernetes:")]
    manifests = manifests_for(catalog_name)
    by_key = {(r.type.split(":")[-1], r.name): r for r in k8s}
    assert len(by_key) == len(k8s) == len(manifests)  # registration order is async, keys are not
    assert sorted(by_key) == sorted((m["kind"], resource_name(m)) for m in manifests)
    assert all(r.parent == component.urn for r in k8s)
    for manifest in manifests:
        resource = by_key[(manifest["kind"], resource_name(manifest))]
        if manifest["kind"] == "Secret" and manifest["metadata"]["name"] == "open-webui-secret":
            # made by the program (random, kept after creation): never the empty placeholder
            assert "stringData" in resource.secret_inputs
            assert len(resource.inputs["stringData"]["WEBUI_SECRET_KEY"]) >= 32
        elif manifest["kind"] == "Secret":
            assert "stringData" in resource.secret_inputs
            assert resource.inputs["stringData"] == manifest["stringData"]
        else:
            assert not resource.secret_inputs
            expected = redact([manifest])[0]
            assert resource.inputs["metadata"] == expected["metadata"]
            for key in ("spec", "data"):
                if key in expected:
                    assert resource.inputs[key] == expected[key], key
    serving = [
        r
        for r in k8s
        if r.type in ("kubernetes:ray.io/v1:RayService", "kubernetes:apps/v1:Deployment")
        and r.inputs["metadata"]["labels"]["app.kubernetes.io/component"] == "serving"
    ]
    assert len(serving) == 1
    assert int(serving[0].inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]) >= 1200
    for rayservice in (r for r in k8s if r.type == "kubernetes:ray.io/v1:RayService"):
        annotations = rayservice.inputs["metadata"]["annotations"]
        assert annotations["pulumi.com/waitFor"] == "condition=Ready"
        before = manifests[: next(i for i, m in enumerate(manifests) if m["kind"] == "RayService")]
        prerequisites = {by_key[(m["kind"], resource_name(m))].urn for m in before}
        assert prerequisites and prerequisites <= set(rayservice.dependencies)
    secrets = [
        r for r in k8s if r.type == "kubernetes:core/v1:Secret" and not r.name.endswith("/open-webui-secret")
    ]
    assert bool(secrets) == needs_hf_token(config)
    # the image repository belongs to `llmctl images build --push` (so an image can exist before the
    # first up), never to the workload stack
    assert not [r for r in registered if r.type == "aws:ecr/repository:Repository"]


def test_cache_access_uses_pod_identity_for_the_serving_account() -> None:
    config = config_for("llama2-inf2")
    registered = run_offline(lambda: build_workload(config))
    associations = {
        r.inputs["serviceAccount"]: r
        for r in registered
        if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"
    }
    # one per kind of pod: the Ray workers, the Ray head, the mirror Job and the Gradio UI
    assert sorted(associations) == ["llmctl-model-mirror", "llmctl-ray-head", "llmctl-serving", "llmctl-ui"]
    association = associations["llmctl-serving"]
    assert association.inputs["namespace"] == "llama2-inf2"
    assert association.inputs["clusterName"] == "llmctl-dev"
    namespace = next(r for r in registered if r.type == "kubernetes:core/v1:Namespace")
    assert association.urn in namespace.dependencies  # pods start only once S3 access exists
    assert all(a.urn in namespace.dependencies for a in associations.values())
    # each role: only its own service account of this namespace, cluster and account may assume it
    roles = {
        r.name: json.loads(r.inputs["assumeRolePolicy"]) for r in registered if r.type == "aws:iam/role:Role"
    }
    for role, account in (
        ("cache-access-role", "llmctl-serving"),
        ("head-access-role", "llmctl-ray-head"),
        ("mirror-access-role", "llmctl-model-mirror"),
        ("ui-access-role", "llmctl-ui"),
    ):
        [statement] = roles[role]["Statement"]
        assert statement["Condition"]["StringEquals"] == {
            "aws:SourceAccount": "123456789012",
            "aws:RequestTag/eks-cluster-name": "llmctl-dev",
            "aws:RequestTag/kubernetes-namespace": "llama2-inf2",
            "aws:RequestTag/kubernetes-service-account": account,
        }


def test_each_kind_of_pod_runs_as_its_own_service_account_with_its_own_role() -> None:
    """The Ray head, the Ray workers and the mirror Job no longer share one service account (and so
    one role, and the Role KubeRay binds to the head's account): each pod template names its own, the
    workload creates it, and the role associated with it grants only what that pod does."""
    config = config_for("llama2-inf2")  # Ray, wheel delivery, mirror, compile cache, the Gradio UI
    manifests = manifests_for("llama2-inf2")
    accounts = {m["metadata"]["name"] for m in manifests if m["kind"] == "ServiceAccount"}
    rayservice = next(m for m in manifests if m["kind"] == "RayService")["spec"]["rayClusterConfig"]
    job = next(m for m in manifests if m["kind"] == "Job")["spec"]["template"]["spec"]
    head = rayservice["headGroupSpec"]["template"]["spec"]
    [workers] = [group["template"]["spec"] for group in rayservice["workerGroupSpecs"]]
    runs_as = {
        "head": head["serviceAccountName"],
        "workers": workers["serviceAccountName"],
        "mirror": job["serviceAccountName"],
    }
    assert runs_as == {
        "head": "llmctl-ray-head",
        "workers": "llmctl-serving",
        "mirror": "llmctl-model-mirror",
    }
    assert set(runs_as.values()) <= accounts  # KubeRay requires the head's named account to exist
    # the Kubernetes API token: automounted nowhere (an autoscaling head's sidecar mounts its own)
    assert head["automountServiceAccountToken"] is False
    assert workers["automountServiceAccountToken"] is False and job["automountServiceAccountToken"] is False

    registered = run_offline(lambda: build_workload(config))
    role_of = {
        r.inputs["serviceAccount"]: r.name.removesuffix("-association")
        for r in registered
        if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"
    }
    policies = {
        r.name.removesuffix("-s3"): json.loads(r.inputs["policy"])["Statement"]
        for r in registered
        if r.type == "aws:iam/rolePolicy:RolePolicy"
    }
    bucket = f"arn:aws:s3:::{config.platform.cache_bucket}"

    def grants(account: str) -> tuple[list[str], list[str]]:
        statements = policies[role_of[account]]
        reads = next(s["Resource"] for s in statements if s["Action"] == ["s3:GetObject"])
        writes = next((s["Resource"] for s in statements if "s3:PutObject" in s["Action"]), [])
        return [r.removeprefix(f"{bucket}/") for r in reads], [w.removeprefix(f"{bucket}/") for w in writes]

    mirror = "models/NousResearch/Llama-2-13b-chat-hf/main/*"
    packages = f"{wheelhouse_key(locks().locks['model-mirror'])}/*"
    assert grants("llmctl-ray-head") == (["llmctl/wheelhouse/*", "llmctl/wheels/*"], [])
    assert grants("llmctl-serving") == (
        ["llmctl/wheelhouse/*", "llmctl/wheels/*", mirror, "neuron-cache/llama2-inf2/*"],
        ["neuron-cache/llama2-inf2/*"],
    )
    assert grants("llmctl-model-mirror") == ([packages, mirror], [mirror])


def test_the_ui_role_reads_only_its_locks_wheelhouse() -> None:
    """The Gradio UI pod's role: list and get under the gradio lock's wheelhouse prefix, no writes."""
    config = config_for("llama2-inf2")
    registered = run_offline(lambda: build_workload(config))
    policies = {
        r.name: json.loads(r.inputs["policy"])
        for r in registered
        if r.type == "aws:iam/rolePolicy:RolePolicy"
    }
    prefix = wheelhouse_key(locks().locks["gradio"])
    bucket = f"arn:aws:s3:::{config.platform.cache_bucket}"
    assert policies["ui-access-s3"]["Statement"] == [
        {
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [bucket],
            "Condition": {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}},
        },
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"{bucket}/{prefix}/*"]},
    ]
    # the serving pods' role writes its own compile cache only; the mirror Job's its model's mirror only
    [writes] = [s for s in policies["cache-access-s3"]["Statement"] if "s3:PutObject" in s["Action"]]
    assert writes["Resource"] == [f"{bucket}/neuron-cache/llama2-inf2/*"]
    [writes] = [s for s in policies["mirror-access-s3"]["Statement"] if "s3:PutObject" in s["Action"]]
    assert writes["Resource"] == [f"{bucket}/models/NousResearch/Llama-2-13b-chat-hf/main/*"]
    # no UI (or Open WebUI, whose image carries its packages): no UI role
    registered = run_offline(lambda: build_workload(config_for("tiny-cpu")))
    assert not [r for r in registered if r.name == "ui-access-s3"]


def test_kubeconfig_provider_is_secret_and_used() -> None:
    bp = blueprint("tiny-cpu")
    facts = PlatformFacts.for_blueprint(bp).model_copy(
        update={"kubeconfig": "apiVersion: v1\nkind: Config\n"}
    )
    registered = run_offline(lambda: build_workload(WorkloadConfig(blueprint=bp, platform=facts)))
    [provider] = [r for r in registered if r.type == "pulumi:providers:kubernetes"]
    assert "kubeconfig" in provider.secret_inputs


def test_gated_model_without_token_is_refused() -> None:
    config = config_for("llama2-7b-cpu")
    with pytest.raises(PrerequisiteError, match="gated"):
        build_workload(config, hf_token=None)


def test_unschedulable_workload_cannot_be_brought_up() -> None:
    bp = blueprint("llama2-inf2")
    facts = PlatformFacts.for_blueprint(bp)
    facts = facts.model_copy(update={"pools": [p for p in facts.pools if p.name != "inferentia-inf2"]})

    class Recording(OfflineMocks):
        def __init__(self) -> None:
            super().__init__()
            self.made: list[str] = []

        def new_resource(self, args: Any) -> tuple[str | None, dict[Any, Any]]:
            self.made.append(args.typ)
            return super().new_resource(args)

    mocks = Recording()
    with pytest.raises(BlueprintError, match="Pending"):
        run_offline(lambda: build_workload(WorkloadConfig(blueprint=bp, platform=facts)), mocks=mocks)
    assert mocks.made == []  # refused before the first registration
    run_offline(
        lambda: build_workload(WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp))),
        mocks=mocks,
    )
    assert "kubernetes:ray.io/v1:RayService" in mocks.made  # the same recorder sees a schedulable one


PUBLIC = {
    "mode": "public",
    "api_key": True,
    "allowed_cidrs": ["203.0.113.0/24"],
    "tls_certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789",
}


def test_generated_api_key_is_secret_and_kept_stable() -> None:
    bp = blueprint("tiny-cpu")
    bp = bp.model_copy(update={"exposure": bp.exposure.model_validate(PUBLIC)})
    config = WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp))
    registered = run_offline(lambda: build_workload(config))
    [secret] = [r for r in registered if r.type == "kubernetes:core/v1:Secret"]
    assert "stringData" in secret.secret_inputs
    assert len(secret.inputs["stringData"]["LLMCTL_API_KEY"]) >= 32
