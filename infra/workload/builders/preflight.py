"""The fabric preflight Job: an all-reduce across one replica's nodes before the model loads.

Objects (pure dicts, like every builder), from a :class:`FabricSpec`:

- a NetworkPolicy ``allow-preflight``: the Job's pods accept connections from each other on every port
  (the rendezvous, NCCL's bootstrap and, without EFA, its sockets pick ports of their own), where the
  workload namespace denies everything else (`network_policy.py`); EFA's own traffic bypasses the
  kernel's network stack, which such policies filter;
- a ConfigMap with the probe program (`llmctl.serving.fabric.probe`: standard library and torch, so
  the serving image runs it as a file, whether llmctl is in the image or not);
- a headless Service: each pod of the Job gets the DNS name ``<job>-<index>.<service>`` (the pod's
  hostname and subdomain), so the pods find node 0, the rendezvous, at ``fabric-preflight-0.<service>``;
  ``publishNotReadyAddresses`` because the pods have no readiness probe to pass first;
- an Indexed Job, ``completions = parallelism = nodes``: one pod per node (each asks for all the node's
  GPUs and its EFA interfaces, and a required anti-affinity on the hostname says so), node rank =
  the completion index (Kubernetes sets ``JOB_COMPLETION_INDEX`` in each container of an Indexed
  Job's pod), the serving pods' nodeSelector and tolerations plus their one zone, ``restartPolicy:
  Never`` and ``backoffLimit: 0`` (a measurement is not retried: a failed pod is the verdict), a
  deadline and a TTL so nothing lingers. The probe is given the instance's network bandwidth
  (``--expect-gbps``) and exits 3 when the fabric fell back: the Job fails, and since the Workload
  component makes every later object depend on the Jobs before it (`component.PREREQUISITE_KINDS`) and
  Pulumi waits for a Job to complete, the model's objects are not applied. An image without
  aws-ofi-nccl (`blueprints.inter_node`) adds ``--tcp-expected``: TCP is then measured and reported,
  not failed (the all-reduce must still complete, every element right).

The pods run as the image's non-root user where one is known, on a read-only root filesystem: they write
only /tmp (NCCL's debug files, HOME) and /dev/shm (NCCL's shared memory: a container's default 64 MiB
is too small for NCCL across 8 GPUs), both emptyDirs.

`fabric_spec` fills the spec from a workload's config (pool, image, user, labels) and its arguments;
`replica_spec` gives it a multi-node blueprint's node count, its instance type's EFA interfaces and
network bandwidth (the instance catalog) and the serving pods' NCCL environment (`efa.nccl_env`).
`preflight_hook` is where a Ray runtime's builder renders the objects, ahead of the RayService; `up`
reads the same spec to judge the run (docs/fabric.md, "Wiring").
"""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.inter_node import inter_node
from llmctl.errors import CatalogError
from llmctl.infra.workload.builders import efa
from llmctl.infra.workload.builders.common import TIMEOUT, Obj, serving_image
from llmctl.infra.workload.builders.placement import serving_scheduling
from llmctl.infra.workload.builders.security import container_context, image_user
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.meta import labels
from llmctl.infra.workload.scheduling.capacity import NVIDIA_GPU
from llmctl.serving.fabric import probe

PREFLIGHT_JOB = "fabric-preflight"
PREFLIGHT_POLICY = "allow-preflight"
PREFLIGHT_SERVICE = "fabric-preflight"
PROBE_SCRIPT = "fabric-probe-script"
PROBE_DIR = "/opt/llmctl/fabric"
PROBE_FILE = "probe.py"
COMPONENT = "preflight"
EFA_RESOURCE = "vpc.amazonaws.com/efa"  # the EFA device plugin's extended resource
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
RENDEZVOUS_PORT = 29500
GIB = 1024**3
#: how much longer than the Job's deadline Pulumi awaits it (its failure, not Pulumi's timeout, ends it)
AWAIT_MARGIN_S = 120


class FabricSpec(BaseModel):
    """What the preflight Job needs to know of one replica: its nodes, the fabric they should have, and
    where and as what the serving pods run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The workload's name (the blueprint's), for the objects' labels.")
    namespace: str = Field(description="The workload's namespace: the Job runs beside the serving pods.")
    labels: dict[str, str] = Field(
        description="Labels of the Job's objects and pods (the workload's, component preflight)."
    )
    nodes: int = Field(ge=2, description="Nodes of one replica: the Job's completions and parallelism.")
    gpus_per_node: int = Field(
        ge=1, description="GPUs of each node: a pod asks for all of them, one probe worker each."
    )
    instance_type: str = Field(description="The nodes' instance type (the message names it).")
    efa_interfaces: int = Field(
        ge=0, description="EFA interfaces of the instance type: a pod asks for all of them."
    )
    expected_gbps: float = Field(
        gt=0, description="The instance type's network bandwidth in Gbps (its EFA), per node."
    )
    image: str = Field(description="The serving image (torch and NCCL, with aws-ofi-nccl for EFA).")
    python: str = Field("python", description="The image's Python (the Ray images': `python`).")
    user: tuple[int, int] | None = Field(None, description="The image's non-root (uid, gid), when known.")
    node_selector: dict[str, str] = Field(
        description="The serving pods' nodeSelector (pool, instance type, capacity type)."
    )
    tolerations: list[dict[str, str]] = Field(
        default_factory=list, description="The serving pods' tolerations."
    )
    zone: str | None = Field(
        None, description="The one availability zone of the replica's nodes, when chosen."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="NCCL/libfabric environment of the serving pods (FI_PROVIDER, ...)."
    )
    min_bytes: int = Field(8 * 1024**2, ge=4, description="Smallest all-reduce size (bytes).")
    max_bytes: int = Field(
        2 * GIB, ge=4, description="Largest size: the one compared with the fabric (bytes)."
    )
    warmup: int = Field(5, ge=0, description="Warm-up calls per size.")
    iters: int = Field(20, ge=1, description="Timed calls per size.")
    strict: bool = Field(
        False, description="A degraded fabric (EFA, but below half its bandwidth) fails the preflight too."
    )
    efa_expected: bool = Field(
        True,
        description="Whether the image carries aws-ofi-nccl (blueprints.inter_node): false makes a TCP "
        "transport the expected one (verdict tcp-expected), not a fallback that fails the preflight.",
    )
    deadline_seconds: int = Field(
        1200, ge=60, description="The Job's activeDeadlineSeconds (image pull included)."
    )
    ttl_seconds: int = Field(
        3600, ge=0, description="ttlSecondsAfterFinished: the finished Job and its logs stay this long."
    )


@functools.cache
def probe_source() -> str:
    """The probe program, shipped to the pods in the ConfigMap (read on first use)."""
    return Path(probe.__file__).read_text(encoding="utf-8")


def master_host(spec: FabricSpec) -> str:
    """Node 0's pod under the headless Service: the rendezvous of every worker."""
    return f"{PREFLIGHT_JOB}-0.{PREFLIGHT_SERVICE}.{spec.namespace}.svc"


def probe_command(spec: FabricSpec) -> list[str]:
    """The container's command (the node rank comes from JOB_COMPLETION_INDEX)."""
    return [
        spec.python,
        f"{PROBE_DIR}/{PROBE_FILE}",
        *("--nodes", str(spec.nodes), "--gpus-per-node", str(spec.gpus_per_node)),
        *("--master", master_host(spec), "--port", str(RENDEZVOUS_PORT), "--backend", "nccl"),
        *(
            "-b",
            str(spec.min_bytes),
            "-e",
            str(spec.max_bytes),
            "-w",
            str(spec.warmup),
            "-n",
            str(spec.iters),
        ),
        *("--expect-gbps", f"{spec.expected_gbps:g}", *(["--strict"] if spec.strict else [])),
        *([] if spec.efa_expected else ["--tcp-expected"]),
        *("--work-dir", "/tmp/llmctl-fabric"),
    ]


def _meta(spec: FabricSpec, name: str) -> Obj:
    return {"name": name, "namespace": spec.namespace, "labels": dict(spec.labels)}


def _resources(spec: FabricSpec) -> Obj:
    whole = {NVIDIA_GPU: str(spec.gpus_per_node)}
    if spec.efa_interfaces:
        whole[EFA_RESOURCE] = str(spec.efa_interfaces)
    # NCCL's proxies and buffers: as nccl-tests' own EKS worker asks (awsome-distributed-training
    # micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml, 0162aac: memory 32000Mi)
    return {
        "requests": {"cpu": "4", "memory": "32Gi", **whole},
        "limits": {"memory": "32Gi", **whole},
    }


def _affinity(spec: FabricSpec) -> Obj:
    """One pod per node (anti-affinity on the hostname) and, without a zone given, every pod in the
    first one's zone (the serving pods' rule, `efa.same_zone`): EFA does not cross zones."""
    pods = {"labelSelector": {"matchLabels": dict(spec.labels)}}
    affinity: Obj = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{**pods, "topologyKey": HOSTNAME_LABEL}]
        }
    }
    if not spec.zone:
        term = {**pods, "topologyKey": ZONE_LABEL}
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    return affinity


def _pod_spec(spec: FabricSpec) -> Obj:
    selector = dict(spec.node_selector)
    if spec.zone:
        selector[ZONE_LABEL] = spec.zone
    pod: Obj = {
        "subdomain": PREFLIGHT_SERVICE,
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "nodeSelector": selector,
        "affinity": _affinity(spec),
        "containers": [
            {
                "name": "probe",
                "image": spec.image,
                "command": probe_command(spec),
                "env": [{"name": "HOME", "value": "/tmp"}]
                + [{"name": k, "value": v} for k, v in sorted(spec.env.items())],
                "ports": [{"name": "rendezvous", "containerPort": RENDEZVOUS_PORT}],
                "resources": _resources(spec),
                "securityContext": container_context(spec.user, read_only=True),
                "volumeMounts": [
                    {"name": "probe", "mountPath": PROBE_DIR, "readOnly": True},
                    {"name": "tmp", "mountPath": "/tmp"},
                    {"name": "shm", "mountPath": "/dev/shm"},
                ],
            }
        ],
        "volumes": [
            {"name": "probe", "configMap": {"name": PROBE_SCRIPT}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        ],
    }
    context: Obj = {"seccompProfile": {"type": "RuntimeDefault"}}
    if spec.user is not None:
        uid, gid = spec.user
        context.update({"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": gid, "fsGroup": gid})
    pod["securityContext"] = context
    if spec.tolerations:
        pod["tolerations"] = [dict(t) for t in spec.tolerations]
    return pod


def preflight_objects(spec: FabricSpec) -> list[Obj]:
    """The pods' NetworkPolicy, the probe's ConfigMap, the headless Service and the Indexed Job, in
    apply order."""
    pods = {"matchLabels": dict(spec.labels)}
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(spec, PREFLIGHT_POLICY),
        "spec": {
            "podSelector": pods,
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": pods}]}],
        },
    }
    script = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(spec, PROBE_SCRIPT),
        "data": {PROBE_FILE: probe_source()},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(spec, PREFLIGHT_SERVICE),
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": dict(spec.labels),
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "targetPort": RENDEZVOUS_PORT}],
        },
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        # Pulumi awaits a Job 10 minutes unless told (pulumi/pulumi-kubernetes provider/pkg/await/job.go,
        # DefaultJobTimeoutMins, v4 at 4c15d1d6): longer than the Job's own deadline, which then decides
        "metadata": {
            **_meta(spec, PREFLIGHT_JOB),
            "annotations": {TIMEOUT: str(spec.deadline_seconds + AWAIT_MARGIN_S)},
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": spec.nodes,
            "parallelism": spec.nodes,
            "backoffLimit": 0,
            "activeDeadlineSeconds": spec.deadline_seconds,
            "ttlSecondsAfterFinished": spec.ttl_seconds,
            "template": {"metadata": {"labels": dict(spec.labels)}, "spec": _pod_spec(spec)},
        },
    }
    return [policy, script, service, job]


def fabric_spec(
    config: WorkloadConfig,
    *,
    nodes: int,
    efa_interfaces: int,
    expected_gbps: float,
    zone: str | None = None,
    env: dict[str, str] | None = None,
) -> FabricSpec:
    """The spec of a workload's preflight: its serving pods' image, user, pool and labels, and whether
    that image can use EFA (`inter_node`); the rest (what the instance data carries) as arguments."""
    image, _ = serving_image(config)
    placement = serving_scheduling(config)
    gpus = int(config.blueprint.compute.tensor_parallel)
    network = inter_node(config.blueprint, config.image)
    return FabricSpec(
        name=config.blueprint.name,
        namespace=config.ns,
        labels=labels(config, COMPONENT),
        nodes=nodes,
        gpus_per_node=gpus,
        instance_type=config.blueprint.compute.instance_type,
        efa_interfaces=efa_interfaces,
        expected_gbps=expected_gbps,
        image=image,
        user=image_user(image),
        node_selector=placement["nodeSelector"],
        tolerations=placement.get("tolerations", []),
        zone=zone,
        env=env or {},
        efa_expected=network is None or network.efa,
    )


def replica_spec(config: WorkloadConfig) -> FabricSpec | None:
    """The preflight of a blueprint whose replica spans nodes (None for one node): its nodes, the
    instance type's EFA interfaces and network bandwidth, the serving pods' NCCL/libfabric env. No
    zone: the pods keep to the first one's (`_affinity`), as the serving pods do."""
    if not efa.multi_node(config):
        return None
    instance = hardware().instance(config.blueprint.compute.instance_type)
    if not instance.network_gbps:
        raise CatalogError(
            f"the instance catalog gives no network bandwidth for {instance.name}, which the fabric "
            "preflight compares the replica's all-reduce with",
            f"add network_gbps for {instance.name} to blueprints/data/instances.yaml (DescribeInstanceTypes "
            "NetworkInfo)",
        )
    env = {item["name"]: str(item["value"]) for item in efa.nccl_env(config, instance)}
    return fabric_spec(
        config,
        nodes=config.blueprint.nodes_per_replica,
        efa_interfaces=instance.efa_interfaces,
        expected_gbps=instance.network_gbps,
        env=env,
    )


def preflight_hook(config: WorkloadConfig) -> list[Obj]:
    """The preflight's objects, rendered before the RayService (the Workload component makes them its
    prerequisites), for a replica over several nodes; none otherwise."""
    spec = replica_spec(config)
    return [] if spec is None else preflight_objects(spec)
