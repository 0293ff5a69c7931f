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
from llmctl.infra.workload.program import build_workload
from llmctl.infra.workload.render import redact
from llmctl.infra.workload.wheelhouse import wheelhouse_key
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
    assert sorted(associations) == ["llmctl-serving", "llmctl-ui"]  # the Gradio UI has its own
    association = associations["llmctl-serving"]
    assert association.inputs["namespace"] == "llama2-inf2"
    assert association.inputs["clusterName"] == "llmctl-dev"
    namespace = next(r for r in registered if r.type == "kubernetes:core/v1:Namespace")
    assert association.urn in namespace.dependencies  # pods start only once S3 access exists
    assert associations["llmctl-ui"].urn in namespace.dependencies
    # each role: only its own service account of this namespace, cluster and account may assume it
    roles = {
        r.name: json.loads(r.inputs["assumeRolePolicy"]) for r in registered if r.type == "aws:iam/role:Role"
    }
    for role, account in (("cache-access-role", "llmctl-serving"), ("ui-access-role", "llmctl-ui")):
        [statement] = roles[role]["Statement"]
        assert statement["Condition"]["StringEquals"] == {
            "aws:SourceAccount": "123456789012",
            "aws:RequestTag/eks-cluster-name": "llmctl-dev",
            "aws:RequestTag/kubernetes-namespace": "llama2-inf2",
            "aws:RequestTag/kubernetes-service-account": account,
        }


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
    # the serving pods' role writes its own caches only (the mirror of its model, its compile cache)
    [writes] = [s for s in policies["cache-access-s3"]["Statement"] if "s3:PutObject" in s["Action"]]
    assert writes["Resource"] == [
        f"{bucket}/models/NousResearch/Llama-2-13b-chat-hf/main/*",
        f"{bucket}/neuron-cache/llama2-inf2/*",
    ]
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
