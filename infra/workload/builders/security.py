"""Security contexts, service-account tokens and Pod Security Admission for every workload pod.

One pass over the finished objects (`manifests.build_manifests`), so no builder can forget it:

- every container and init container (and KubeRay's autoscaler sidecar, through
  `autoscalerOptions.securityContext`; KubeRay copies the Ray container's context to the
  `wait-gcs-ready` init container it injects): no privilege escalation (this also stops the Ray
  images' passwordless `sudo`), every Linux capability dropped, not privileged;
- every pod: the runtime's default seccomp profile;
- a pod whose builder chose a non-root user (the model-mirror Job's, on python:slim) runs as it; else
  a pod whose containers run on an image with a known non-root user (versions.yaml `user`: the Ray
  images' `ray`, uid 1000, gid 100) runs as that user; either way init containers included, with
  `fsGroup` so its volumes and projected tokens (EKS Pod Identity's) are readable. Images without a
  recorded user (the Neuron and Triton images, Open WebUI, the gradio UI's python:slim) run as their
  own user, root;
- no service-account token automounted in any pod (EKS Pod Identity mounts its own token, so S3
  access does not need it); the Ray head of an autoscaling RayService gets one mounted into KubeRay's
  autoscaler sidecar alone (`autoscalerOptions.volumeMounts`), the only container that calls the
  Kubernetes API: the Ray container beside it, which runs Ray's code, holds none (issue 53, finding 2);
- the namespace enforces Pod Security `restricted` when every pod qualifies, else `baseline`, and
  warns and audits at `restricted` either way.

Read-only root filesystems are left off: every runtime writes into its image at start (the pip
install of base-image mode, Ray's session folder under /tmp, the compilers' caches); see
docs/security.md.
"""

from __future__ import annotations

from typing import Any

from llmctl.blueprints.versions import versions
from llmctl.infra.workload.pods import pod_templates

Obj = dict[str, Any]
PSA = "pod-security.kubernetes.io"
#: the lowest UID checkov's CKV_K8S_40 accepts
HIGH_UID = 10000
#: where a client in a pod finds its service-account credentials (Ray's KubeRay node provider reads
#: `token` and `ca.crt` there: ray 2.60 `autoscaler/_private/kuberay/node_provider.py`,
#: IN_CLUSTER_TOKEN_PATH and IN_CLUSTER_CA_CERT_PATH)
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
AUTOSCALER_TOKEN = "autoscaler-api-token"


def autoscaler_token_volume() -> Obj:
    """The head pod's service-account token as the automount would project it (token, the cluster's CA,
    the namespace), as a volume only the autoscaler sidecar mounts."""
    return {
        "name": AUTOSCALER_TOKEN,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ]
        },
    }


def image_user(image: str) -> tuple[int, int] | None:
    """(uid, gid) of a pinned image whose non-root user versions.yaml records, else None."""
    name = image.split("@", 1)[0]
    for entry in versions().images.values():
        if entry.image == name and entry.user:
            uid, _, gid = entry.user.partition(":")
            return int(uid), int(gid or uid)
    return None


def container_context(user: tuple[int, int] | None) -> Obj:
    """A container's securityContext (as the non-root `user` when given)."""
    context: Obj = {"allowPrivilegeEscalation": False, "privileged": False, "capabilities": {"drop": ["ALL"]}}
    if user is not None:
        context.update({"runAsNonRoot": True, "runAsUser": user[0], "runAsGroup": user[1]})
    return context


def _pod_user(spec: Obj) -> tuple[int, int] | None:
    """The pod's user: the non-root one its builder set (the pod's `runAsUser`, with `runAsGroup` or
    the same id), else its (regular) containers' image user when they all share one, else None."""
    chosen = spec.get("securityContext", {})
    if chosen.get("runAsUser"):
        uid = int(chosen["runAsUser"])
        return uid, int(chosen.get("runAsGroup", uid))
    users = {image_user(str(c.get("image", ""))) for c in spec.get("containers", [])}
    only = users.pop() if len(users) == 1 else None
    return only


def harden_pod(spec: Obj, *, needs_token: bool) -> bool:
    """Set the pod's and its containers' security contexts; True when the pod runs as non-root."""
    user = _pod_user(spec)
    pod_context: Obj = {"seccompProfile": {"type": "RuntimeDefault"}}
    if user is not None:
        pod_context.update(
            {"runAsNonRoot": True, "runAsUser": user[0], "runAsGroup": user[1], "fsGroup": user[1]}
        )
    spec["securityContext"] = pod_context
    for container in _containers(spec):
        container["securityContext"] = container_context(user)
    spec["automountServiceAccountToken"] = needs_token
    return user is not None


def _autoscaling_cluster(obj: Obj) -> Obj | None:
    if obj.get("kind") != "RayService":
        return None
    cluster: Obj = obj["spec"]["rayClusterConfig"]
    return cluster if cluster.get("enableInTreeAutoscaling") else None


#: checkov's Kubernetes checks this design leaves failing on purpose, each with its reason (and when
#: it applies); the reasons go into the object's `checkov.io/skipN` annotations, where checkov reads
#: them, so a reader of the manifest sees why (checkov splits the value at "=", the delivery tests split
#: every manifest string as a shell does: no "=", no quote and no install command in a reason)
ROOT_REASON = (
    "the image runs as its own user, root (the Neuron and Triton images, Open WebUI and python:slim record "
    "no non-root one); every capability is dropped and privilege escalation is off"
)
SKIPS: dict[str, str] = {
    "CKV_K8S_11": "no CPU limit by design: a limit throttles token generation; the CPU request reserves the share",
    "CKV_K8S_15": "images are pinned by tag or digest; IfNotPresent reuses the multi-GB image already on the node",
    "CKV_K8S_22": (
        "the runtimes write into their image at start (the package install of base-image mode, the Ray "
        "session folder under /tmp, compiler caches)"
    ),
    "CKV_K8S_23": ROOT_REASON,
    "CKV_K8S_35": (
        "the apps read the HF token and API key from their environment, set by secretKeyRef (never in the "
        "manifest)"
    ),
    "CKV_K8S_40": (
        "runs as the user of the image (uid 1000 owns the Python of the Ray images); another UID could not "
        "install packages"
    ),
    "CKV_K8S_8": "KubeRay adds a liveness probe to the Ray container (ray-project/kuberay v1.7.0 pod.go)",
    "CKV_K8S_9": "KubeRay adds a readiness probe to the Ray container (ray-project/kuberay v1.7.0 pod.go)",
    "CKV_K8S_43": (
        "versions.yaml records no digest for this image yet (llmctl doctor prints it); pods run image@digest "
        "once it is recorded"
    ),
}


def _containers(spec: Obj) -> list[Obj]:
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def checkov_skips(obj: Obj, *, non_root: bool) -> dict[str, str]:
    """`checkov.io/skipN` annotations for an object with pod templates: only the checks it fails."""
    containers = [c for template in pod_templates(obj) for c in _containers(template.spec)]
    if not containers:
        return {}
    skipped = ["CKV_K8S_11", "CKV_K8S_15", "CKV_K8S_22"]
    # checkov wants a UID of 10000 or more: root and the Ray images' 1000 are below (the mirror Job's is not)
    if any((t.spec.get("securityContext") or {}).get("runAsUser", 0) < HIGH_UID for t in pod_templates(obj)):
        skipped.append("CKV_K8S_40")
    if obj.get("kind") == "RayService":
        skipped += ["CKV_K8S_8", "CKV_K8S_9"]
    if not non_root:
        skipped.append("CKV_K8S_23")
    if any("secretKeyRef" in (env.get("valueFrom") or {}) for c in containers for env in c.get("env", [])):
        skipped.append("CKV_K8S_35")
    if any("@sha256:" not in str(c.get("image", "")) for c in containers):
        skipped.append("CKV_K8S_43")
    ordered = sorted(skipped, key=lambda check: int(check.rsplit("_", 1)[1]))
    return {f"checkov.io/skip{i}": f"{check}={SKIPS[check]}" for i, check in enumerate(ordered, start=1)}


def harden(objects: list[Obj]) -> bool:
    """Harden every pod template of the objects in place; True when every pod runs as non-root."""
    all_non_root = True
    for obj in objects:
        autoscaling = _autoscaling_cluster(obj)
        non_root = True
        for template in pod_templates(obj):
            non_root &= harden_pod(template.spec, needs_token=False)
            if autoscaling is not None and template.where == "head group":
                options = autoscaling.setdefault("autoscalerOptions", {})
                options["securityContext"] = container_context(_pod_user(template.spec))
                # the token for the sidecar alone: KubeRay v1.7.0 appends autoscalerOptions.volumeMounts
                # to the sidecar it injects (controllers/ray/common/pod.go, mergeAutoscalerOverrides)
                template.spec.setdefault("volumes", []).append(autoscaler_token_volume())
                mount = {"name": AUTOSCALER_TOKEN, "mountPath": SA_DIR, "readOnly": True}
                options["volumeMounts"] = [*options.get("volumeMounts", []), mount]
        if skips := checkov_skips(obj, non_root=non_root):
            obj["metadata"]["annotations"] = {**obj["metadata"].get("annotations", {}), **skips}
        all_non_root &= non_root
    return all_non_root


def pod_security_labels(restricted: bool) -> dict[str, str]:
    """Pod Security Admission labels of the workload namespace."""
    return {
        f"{PSA}/enforce": "restricted" if restricted else "baseline",
        f"{PSA}/warn": "restricted",
        f"{PSA}/audit": "restricted",
    }
