"""Security contexts, service-account tokens and Pod Security Admission for every workload pod.

One pass over the finished objects (`manifests.build_manifests`), so no builder can forget it:

- every container and init container (and KubeRay's autoscaler sidecar, through
  `autoscalerOptions.securityContext`; KubeRay copies the Ray container's context to the
  `wait-gcs-ready` init container it injects): no privilege escalation (this also stops the Ray
  images' passwordless `sudo`), every Linux capability dropped, not privileged;
- every pod: the runtime's default seccomp profile;
- a pod whose builder chose a non-root user (the model-mirror Job's, on python:slim) runs as it; else
  a pod whose containers run on an image with a known non-root user (versions.yaml `user`: the Ray
  images' `ray`, uid 1000, gid 100; the Triton image's `triton-server`, uid and gid 1000) runs as that
  user; either way init containers included, with `fsGroup` so its volumes and projected tokens (EKS
  Pod Identity's) are readable (the gradio UI and the model-mirror Job choose llmctl's non-root user,
  `delivery.NON_ROOT_USER`, and so does Open WebUI, whose image has only root; the Neuron images' pods
  get it from `device_user.py` where their devices allow it). Pods still without a user (Neuron pods on
  a pool that keeps devices root's) run as root, but for a container whose builder chose a non-root
  user of its own (the AWS CLI init container);
- no service-account token automounted in any pod (EKS Pod Identity mounts its own token, so S3
  access does not need it); the Ray head of an autoscaling RayService gets one mounted into KubeRay's
  autoscaler sidecar alone (`autoscalerOptions.volumeMounts`), the only container that calls the
  Kubernetes API: the Ray container beside it, which runs Ray's code, holds none (issue 53, finding 2);
- the namespace enforces Pod Security `restricted` when every pod qualifies, else `baseline`, and
  warns and audits at `restricted` either way.

A container runs on a read-only root filesystem where its builder asks for it (`readOnlyRootFilesystem`
in the container's securityContext), having mounted a volume at each place it writes: the AWS CLI init
containers, the model-mirror Job, both UIs and the runtimes' containers (Ray, Triton, TorchServe:
`writable.py`, base-image mode installing into the user site on a volume; Open WebUI: `ui.py`, its
static folder on a volume, checked with the pinned release by benchmarks/verify_open_webui.py).

No `checkov.io/skip` annotation is set: checkov's accepted findings are listed, container by container,
in the test suite (tests/workload/checkov_accepted.yaml; docs/security.md).
"""

from __future__ import annotations

from typing import Any

from llmctl.blueprints.versions import versions
from llmctl.infra.workload.scheduling.pods import pod_templates

Obj = dict[str, Any]
PSA = "pod-security.kubernetes.io"
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


def container_context(user: tuple[int, int] | None, *, read_only: bool = False) -> Obj:
    """A container's securityContext (as the non-root `user` when given; a read-only root filesystem
    when its builder mounted a volume at each place the process writes)."""
    context: Obj = {"allowPrivilegeEscalation": False, "privileged": False, "capabilities": {"drop": ["ALL"]}}
    if user is not None:
        context.update({"runAsNonRoot": True, "runAsUser": user[0], "runAsGroup": user[1]})
    if read_only:
        context["readOnlyRootFilesystem"] = True
    return context


def _own_user(container: Obj) -> tuple[int, int] | None:
    """The non-root user a container's builder chose for it (the AWS CLI init containers'), else None."""
    chosen = container.get("securityContext") or {}
    if not chosen.get("runAsUser"):
        return None
    uid = int(chosen["runAsUser"])
    return uid, int(chosen.get("runAsGroup", uid))


def pod_user(spec: Obj) -> tuple[int, int] | None:
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
    user = pod_user(spec)
    pod_context: Obj = {"seccompProfile": {"type": "RuntimeDefault"}}
    if user is not None:
        pod_context.update(
            {"runAsNonRoot": True, "runAsUser": user[0], "runAsGroup": user[1], "fsGroup": user[1]}
        )
    spec["securityContext"] = pod_context
    for container in all_containers(spec):
        # the pod's user wins (it owns the pod's volumes); in a pod of a root image, a container whose
        # builder chose a non-root user of its own (the AWS CLI init container) keeps it
        chosen = container.get("securityContext") or {}
        read_only = bool(chosen.get("readOnlyRootFilesystem"))
        container["securityContext"] = container_context(user or _own_user(container), read_only=read_only)
    spec["automountServiceAccountToken"] = needs_token
    return user is not None


def _autoscaling_cluster(obj: Obj) -> Obj | None:
    if obj.get("kind") != "RayService":
        return None
    cluster: Obj = obj["spec"]["rayClusterConfig"]
    return cluster if cluster.get("enableInTreeAutoscaling") else None


def all_containers(spec: Obj) -> list[Obj]:
    """A pod's init containers, then its containers."""
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


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
                options["securityContext"] = container_context(pod_user(template.spec))
                # the token for the sidecar alone: KubeRay v1.7.0 appends autoscalerOptions.volumeMounts
                # to the sidecar it injects (controllers/ray/common/pod.go, mergeAutoscalerOverrides)
                template.spec.setdefault("volumes", []).append(autoscaler_token_volume())
                mount = {"name": AUTOSCALER_TOKEN, "mountPath": SA_DIR, "readOnly": True}
                options["volumeMounts"] = [*options.get("volumeMounts", []), mount]
        all_non_root &= non_root
    return all_non_root


def pod_security_labels(restricted: bool) -> dict[str, str]:
    """Pod Security Admission labels of the workload namespace."""
    return {
        f"{PSA}/enforce": "restricted" if restricted else "baseline",
        f"{PSA}/warn": "restricted",
        f"{PSA}/audit": "restricted",
    }
