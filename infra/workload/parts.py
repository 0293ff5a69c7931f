"""Which platform parts a workload needs, and which of them an existing cluster lacks (pure).

On the `eks` target the platform stack installs everything; a kubeconfig target is a cluster
llmctl did not build, so before its workload stack goes up `llmctl up` reads the cluster's CRDs,
DaemonSets and Deployments (the edge: :mod:`llmctl.infra.lifecycle.inventory`) and reports every
missing part at once, with the pinned chart that installs it. The decisions live here, on plain data:

- `required_parts(manifests)`: what the workload's own objects use (a RayService needs KubeRay,
  Neuron or GPU requests need their device plugin, `schedulerName: my-scheduler` needs the Neuron
  scheduler, a LoadBalancer Service needs something that implements it);
- `missing_parts(needs, inventory, present)`: which of those the inventory does not show.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from llmctl.blueprints.pools import NEURON_SCHEDULER
from llmctl.errors import PrerequisiteError
from llmctl.infra.workload.scheduling.pods import pod_templates

PartName = Literal[
    "kuberay",
    "neuron-device-plugin",
    "neuron-scheduler",
    "nvidia-device-plugin",
    "efa-device-plugin",
    "load-balancer",
]
Obj = dict[str, Any]

RAYSERVICE_CRD = "rayservices.ray.io"
NEURON_RESOURCES = ("aws.amazon.com/neuron", "aws.amazon.com/neuroncore")
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"  # a multi-node replica's pods (builders/efa.py)


@dataclass(frozen=True)
class Controller:
    """A DaemonSet or Deployment of the cluster: where it runs and the images it uses."""

    namespace: str
    name: str
    images: tuple[str, ...] = ()

    def mentions(self, *words: str) -> bool:
        """Whether its name or one of its images contains one of the words."""
        return any(word in text for word in words for text in (self.name, *self.images))

    @classmethod
    def from_object(cls, obj: Obj) -> Controller:
        """From a `kubectl get daemonsets/deployments -o json` item."""
        meta = obj.get("metadata") or {}
        pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        containers = [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]
        return cls(
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            tuple(str(c.get("image") or "") for c in containers),
        )


@dataclass(frozen=True)
class Inventory:
    """What the cluster runs, as far as the parts check cares."""

    crds: frozenset[str] = frozenset()
    daemonsets: tuple[Controller, ...] = ()
    deployments: tuple[Controller, ...] = ()

    @classmethod
    def from_lists(cls, crds: Obj, daemonsets: Obj, deployments: Obj) -> Inventory:
        """From the JSON of `kubectl get crd`, `get daemonsets -A` and `get deployments -A`."""
        return cls(
            frozenset(str((item.get("metadata") or {}).get("name")) for item in crds.get("items") or []),
            tuple(Controller.from_object(item) for item in daemonsets.get("items") or []),
            tuple(Controller.from_object(item) for item in deployments.get("items") or []),
        )


@dataclass(frozen=True)
class Need:
    """A part the workload needs, and which of its objects needs it."""

    part: PartName
    reason: str


@dataclass(frozen=True)
class Missing:
    """A part the cluster lacks: what it is, why the workload needs it, how to install it."""

    part: PartName
    title: str
    reasons: tuple[str, ...]
    install: str

    def as_dict(self) -> dict[str, Any]:
        """Stable keys for `--json`."""
        return {
            "part": self.part,
            "title": self.title,
            "needed_by": list(self.reasons),
            "install": self.install,
        }


def _requests(spec: Obj) -> set[str]:
    names: set[str] = set()
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        names.update((resources.get("requests") or {}).keys(), (resources.get("limits") or {}).keys())
    return names


def _load_balancer_services(obj: Obj) -> list[str]:
    """Services of type LoadBalancer an object creates: itself, or a RayService's serve/head service."""
    kind, name = obj.get("kind", ""), (obj.get("metadata") or {}).get("name", "")
    spec = obj.get("spec") or {}
    if kind == "Service":
        return [f"Service/{name}"] if spec.get("type") == "LoadBalancer" else []
    if kind != "RayService":
        return []
    found = []
    serve = spec.get("serveService") or {}
    if (serve.get("spec") or {}).get("type") == "LoadBalancer":
        found.append(
            f"RayService/{name} serveService {(serve.get('metadata') or {}).get('name', '')}".rstrip()
        )
    head = (spec.get("rayClusterConfig") or {}).get("headGroupSpec") or {}
    if head.get("serviceType") == "LoadBalancer":
        found.append(f"RayService/{name} head service")
    return found


def required_parts(manifests: list[Obj]) -> list[Need]:
    """The platform parts the workload's objects use, each once, with the first object that uses it."""

    needs: dict[PartName, str] = {}
    for obj in manifests:
        kind, name = obj.get("kind", ""), (obj.get("metadata") or {}).get("name", "")
        if kind == "RayService":
            needs.setdefault("kuberay", f"RayService/{name}")
        for service in _load_balancer_services(obj):
            needs.setdefault("load-balancer", f"{service} (type LoadBalancer)")
        for template in pod_templates(obj):
            where = f"{template.kind}/{template.name} ({template.where})"
            resources = _requests(template.spec)
            if resources & set(NEURON_RESOURCES):
                needs.setdefault("neuron-device-plugin", where)
            if GPU_RESOURCE in resources:
                needs.setdefault("nvidia-device-plugin", where)
            if EFA_RESOURCE in resources:
                needs.setdefault("efa-device-plugin", where)
            if template.spec.get("schedulerName") == NEURON_SCHEDULER:
                needs.setdefault("neuron-scheduler", where)
    return [Need(part, reason) for part, reason in needs.items()]


# --- detection ------------------------------------------------------------------------------------

_LB_CRDS = ("ipaddresspools.metallb.io", "ciliumloadbalancerippools.cilium.io")


def _has_load_balancer(inv: Inventory) -> bool:
    """The AWS Load Balancer Controller, MetalLB, kube-vip, Cilium LB IPAM or k3s servicelb (`svclb-*`)."""
    return (
        any(d.mentions("aws-load-balancer-controller", "kube-vip-cloud-provider") for d in inv.deployments)
        or any(c.namespace == "metallb-system" for c in (*inv.deployments, *inv.daemonsets))
        or any(d.name.startswith("svclb-") for d in inv.daemonsets)
        or bool(inv.crds & set(_LB_CRDS))
    )


DETECT: dict[PartName, Callable[[Inventory], bool]] = {
    "kuberay": lambda inv: RAYSERVICE_CRD in inv.crds,
    "neuron-device-plugin": lambda inv: any(d.mentions("neuron-device-plugin") for d in inv.daemonsets),
    "neuron-scheduler": lambda inv: any(d.name == NEURON_SCHEDULER for d in inv.deployments),
    "nvidia-device-plugin": lambda inv: any(
        d.mentions("nvidia-device-plugin", "k8s-device-plugin") for d in inv.daemonsets
    ),
    # aws/eks-charts' aws-efa-k8s-device-plugin: the DaemonSet and its image carry the name
    "efa-device-plugin": lambda inv: any(d.mentions("efa-k8s-device-plugin") for d in inv.daemonsets),
    "load-balancer": _has_load_balancer,
}

TITLES: dict[PartName, str] = {
    "kuberay": f"KubeRay operator (CRD {RAYSERVICE_CRD})",
    "neuron-device-plugin": "Neuron device plugin (DaemonSet)",
    "neuron-scheduler": f"Neuron scheduler `{NEURON_SCHEDULER}` (Deployment)",
    "nvidia-device-plugin": "NVIDIA device plugin (DaemonSet)",
    "efa-device-plugin": "EFA device plugin (DaemonSet, vpc.amazonaws.com/efa)",
    "load-balancer": "a LoadBalancer implementation (AWS Load Balancer Controller, MetalLB, k3s servicelb)",
}


def helm_install(key: str, release: str, namespace: str, *settings: str) -> str:
    """`helm upgrade --install ...` for a chart pinned in versions.yaml."""
    from llmctl.blueprints.versions import versions  # lazy: read at call time: tests swap versions()

    chart = versions().charts[key]
    ref = (
        f"{chart.repository.rstrip('/')}/{chart.chart}"
        if chart.repository.startswith("oci://")
        else f"{chart.chart} --repo {chart.repository}"
    )
    sets = "".join(f" --set {item}" for item in settings)
    return f"helm upgrade --install {release} {ref} --version {chart.version} -n {namespace} --create-namespace{sets}"


def install_hint(part: PartName) -> str:
    """How to install a part (the chart and version llmctl pins)."""
    if part == "kuberay":
        return helm_install("kuberay_operator", "kuberay-operator", "kuberay")
    if part == "neuron-device-plugin":
        return helm_install("neuron", "neuron", "kube-system", "devicePlugin.enabled=true")
    if part == "neuron-scheduler":
        return helm_install(  # a superset of the device plugin's command: one release serves both
            "neuron",
            "neuron",
            "kube-system",
            "devicePlugin.enabled=true",
            "scheduler.enabled=true",
            "scheduler.customScheduler.enabled=true",
        )
    if part == "nvidia-device-plugin":
        return helm_install("nvidia_device_plugin", "nvidia-device-plugin", "kube-system")
    if part == "efa-device-plugin":
        return helm_install("aws_efa_device_plugin", "aws-efa-k8s-device-plugin", "kube-system")
    return (
        f"on EKS: {helm_install('aws_load_balancer_controller', 'aws-load-balancer-controller', 'kube-system', 'clusterName=<cluster>')}"
        " (plus its IAM role); elsewhere MetalLB or k3s servicelb; or set exposure.mode: port-forward; "
        "if the cluster has one llmctl cannot see, add `present: [load-balancer]` to the cluster file"
    )


def missing_parts(needs: Iterable[Need], inventory: Inventory, present: Iterable[str] = ()) -> list[Missing]:
    """The needed parts the inventory does not show (parts declared `present` are taken as there)."""
    declared = set(present)
    reasons: dict[PartName, list[str]] = {}
    for need in needs:
        if need.part not in declared and not DETECT[need.part](inventory):
            reasons.setdefault(need.part, []).append(need.reason)
    return [Missing(part, TITLES[part], tuple(why), install_hint(part)) for part, why in reasons.items()]


class MissingPartsError(PrerequisiteError):
    """The cluster lacks platform parts the workload needs; `problems` lists each with its install."""

    def __init__(self, cluster: str, blueprint: str, missing: list[Missing]) -> None:
        names = ", ".join(m.part for m in missing)
        super().__init__(
            f"cluster {cluster} lacks {len(missing)} part(s) blueprint {blueprint!r} needs: {names}",
            "install the parts listed (the charts and versions llmctl pins), then run `llmctl up` again; "
            "no workload was deployed",
        )
        self.missing = missing
        self.problems = [
            (m.title, f"needed by {', '.join(m.reasons)}; install: {m.install}") for m in missing
        ]
