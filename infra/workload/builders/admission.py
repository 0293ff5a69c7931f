"""What the Ray head's Kubernetes identity and the model mirror's service account may do, held at
admission (issue 53, finding 2).

KubeRay v1.7.0 binds the head's service account to a Role of `pods` get/list/watch/patch,
`pods/resize` patch and `rayclusters` get/patch, without resourceNames
(`ray-operator/controllers/ray/common/rbac.go`, `BuildRole`), and a RayService compares only a hash
annotation with its RayCluster, so a direct patch of the RayCluster stays. With that token a caller
could add a worker group that runs as `llmctl-model-mirror` (whose Pod Identity role writes the
model's mirror), or change the image of any pod of the namespace. The Ray autoscaler needs much less:
it patches the RayCluster's `workerGroupSpecs[i].replicas` and `.scaleStrategy` (and, v2, its
finalizers and `idleSuspend`), and patches pods only for in-place resizing, which llmctl does not turn
on (ray 2.60 `autoscaler/_private/kuberay/node_provider.py`: `worker_replica_patch`,
`worker_delete_patch`; `autoscaler/v2/.../kuberay/cloud_provider.py`; `ippr_provider.py`).

So each workload namespace gets a ValidatingAdmissionPolicy (Kubernetes 1.30+, GA) and its binding:

- a request by the head's account that changes a pod is refused;
- a request by the head's account that changes a RayCluster's head group, autoscaler options, worker
  group names, pod templates or `rayStartParams` is refused (replicas and scale strategy may change);
- a pod that runs as `llmctl-model-mirror` must be controlled by a Job (the mirror Job's pods; a pod
  KubeRay makes is controlled by its RayCluster), whoever creates it.
"""

from __future__ import annotations

from llmctl.infra.workload.builders.cache import MIRROR_SERVICE_ACCOUNT
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.builders.ray import HEAD_SERVICE_ACCOUNT
from llmctl.infra.workload.config import WorkloadConfig

API = "admissionregistration.k8s.io/v1"
#: the first Kubernetes minor with ValidatingAdmissionPolicy in admissionregistration.k8s.io/v1
MIN_MINOR = 30

HEAD_CALLER = (
    f"request.userInfo.username == 'system:serviceaccount:' + request.namespace + ':{HEAD_SERVICE_ACCOUNT}'"
)


def _same(field: str) -> str:
    """CEL: an optional field of `object` equals the one of `oldObject` (both absent counts)."""
    new, old = f"object.{field}", f"oldObject.{field}"
    parent, _, leaf = field.rpartition(".")
    has_new, has_old = f"has(object.{parent}.{leaf})", f"has(oldObject.{parent}.{leaf})"
    return f"({has_new} == {has_old} && (!{has_new} || {new} == {old}))"


def _group_unchanged() -> str:
    """CEL: every worker group of the new object is an old one, with its template and start params."""
    params = "(has(g.rayStartParams) == has(o.rayStartParams) && (!has(g.rayStartParams) || g.rayStartParams == o.rayStartParams))"
    return (
        "size(object.spec.workerGroupSpecs) == size(oldObject.spec.workerGroupSpecs) && "
        "object.spec.workerGroupSpecs.all(g, oldObject.spec.workerGroupSpecs.exists(o, "
        f"o.groupName == g.groupName && o.template == g.template && {params}))"
    )


#: (CEL expression, message) of each rule; the expressions are tested with cel-python on the patches
#: Ray's autoscaler sends and on the attacks (tests/workload/test_admission_policy.py)
RAYCLUSTER_RULE = " && ".join(
    [
        "object.spec.headGroupSpec == oldObject.spec.headGroupSpec",
        _same("spec.autoscalerOptions"),
        "(!has(object.spec.workerGroupSpecs) || (has(oldObject.spec.workerGroupSpecs) && "
        + _group_unchanged()
        + "))",
    ]
)
MIRROR_RULE = (
    f"object.spec.serviceAccountName != '{MIRROR_SERVICE_ACCOUNT}' || "
    "(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, "
    "has(r.controller) && r.controller && r.apiVersion == 'batch/v1' && r.kind == 'Job'))"
)


def enabled(config: WorkloadConfig) -> bool:
    """Whether the cluster serves ValidatingAdmissionPolicy v1 (Kubernetes 1.30 and later)."""
    major, _, minor = config.platform.kubernetes_version.partition(".")
    return (int(major), int(minor or 0)) >= (1, MIN_MINOR)


def policy_name(config: WorkloadConfig) -> str:
    """The policy's name (cluster-scoped: one per workload namespace)."""
    return f"llmctl-{config.ns}-guard"


def admission_objects(config: WorkloadConfig) -> list[Obj]:
    """The ValidatingAdmissionPolicy and its binding for the workload's namespace (none before 1.30)."""
    if not enabled(config):
        return []
    name = policy_name(config)
    labels = {"app.kubernetes.io/managed-by": "llmctl", "llmctl.dev/namespace": config.ns}
    head_rules = [
        {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods", "pods/*"], "operations": ["UPDATE"]},
        {
            "apiGroups": ["ray.io"],
            "apiVersions": ["*"],
            "resources": ["rayclusters"],
            "operations": ["UPDATE"],
        },
        {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]},
    ]
    is_pod = "request.resource.resource == 'pods'"
    policy: Obj = {
        "apiVersion": API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": head_rules},
            "validations": [
                {
                    "expression": f"!({HEAD_CALLER}) || request.operation != 'UPDATE' || !({is_pod})",
                    "message": f"the Ray head's service account ({HEAD_SERVICE_ACCOUNT}) may not change pods",
                },
                {
                    "expression": f"!({HEAD_CALLER}) || request.resource.resource != 'rayclusters' || ({RAYCLUSTER_RULE})",
                    "message": f"the Ray head's service account ({HEAD_SERVICE_ACCOUNT}) may only scale the "
                    "RayCluster's worker groups (replicas, scale strategy), not change its pods",
                },
                {
                    "expression": f"!({is_pod} && request.operation == 'CREATE' && request.subResource == '') || "
                    f"({MIRROR_RULE})",
                    "message": f"only the model-mirror Job's pods run as {MIRROR_SERVICE_ACCOUNT}",
                },
            ],
        },
    }
    binding: Obj = {
        "apiVersion": API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": config.ns}}
            },
        },
    }
    return [policy, binding]
