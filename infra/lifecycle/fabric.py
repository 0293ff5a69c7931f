"""The fabric preflight's verdict: the measured bus bandwidth against what the nodes' EFA should give.

The figure compared is the all-reduce bus bandwidth at the largest size measured (nccl-tests' busbw,
GB/s) and the expectation is the instance type's network bandwidth per node (Gbps / 8). Why that
bound: an all-reduce over rings moves 2 (n - 1) / n of the data over every link, which is what busbw
normalises away (NVIDIA/nccl-tests doc/PERFORMANCE.md), and a ring that crosses nodes leaves each node
once per ring, so over N nodes busbw is bounded by one node's network bandwidth; on two nodes NCCL's
trees send only half the data across the network, so busbw can reach up to 2x the network bandwidth
there (sjeaugey, NVIDIA/nccl#209, and NVIDIA/nccl-tests#22).

Thresholds, as shares of the node's network bandwidth, and the rule are the probe's
(`llmctl.serving.fabric.probe.verdict_of`: the pod judges with it and fails its Job, this module
judges the same logs with it for the message); their grounds, the recorded runs in
tests/lifecycle/data/fabric/, are in docs/fabric.md:

- ``ok``: at least :data:`OK_SHARE` (0.5). Recorded EFA runs at their largest size: 2 x p4de.24xlarge
  78.33 GB/s of 50 (1.57), 2 x p5.48xlarge 487.26 GB/s of 400 (1.22); both stay above 1.0 from 1 GiB on.
- ``degraded``: between :data:`FALLBACK_SHARE` and :data:`OK_SHARE`: EFA is used but slow (fewer
  interfaces given to the pod than the node has, no GPUDirect RDMA, a busy or split placement).
  Printed, not fatal (pipeline parallelism sends activations between nodes, not weights), unless strict.
- ``fallback``: below :data:`FALLBACK_SHARE` (0.1), or NCCL said it used TCP (its Socket network, or
  libfabric's tcp/sockets provider) whatever the figure: on a small NIC TCP can come close to the
  share (recorded on g4dn.8xlarge: TCP 2.00 GB/s, EFA without GPUDirect 2.83 GB/s, of 6.25), so the
  transport line decides there; NCCL's Socket network between two H200 GPUs gave the probe 3.83 GB/s
  (recorded on the device machine), 1 % of a p5.48xlarge's 400. `up` stops here.
- ``tcp-expected``: NCCL used TCP and the image carries no aws-ofi-nccl (`blueprints.inter_node`,
  `FabricSpec.efa_expected` false), so TCP is all it can do: `up` prints the figure with what the image
  lacks and how to get EFA, and goes on. Wrong elements or a failed Job still stop it.

`check_preflight` is the hook `up` calls with node 0's log once the workload update has run the Job
(it failed the update when the probe judged a fallback, before the model's objects were applied):
it turns the log into the verdict `up` prints, or into the FabricError `up` stops with instead of
Pulumi's "Job failed" (docs/fabric.md, "Wiring").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmctl.blueprints.inter_node import EFA_FIX
from llmctl.errors import FabricError
from llmctl.infra.lifecycle.kube import kubectl_json, kubectl_text
from llmctl.infra.workload.builders.preflight import PREFLIGHT_JOB, FabricSpec
from llmctl.serving.fabric.probe import FALLBACK_SHARE, OK_SHARE, Verdict, verdict_of
from llmctl.serving.fabric.report import AllReduceResult, parse

__all__ = [
    "FALLBACK_SHARE",
    "OK_SHARE",
    "FabricVerdict",
    "check_preflight",
    "judge",
    "node0_log",
    "preflight_verdict",
]

#: what the Job controller puts on each pod of an Indexed Job: the `job-name` label, and the completion
#: index as this annotation (kubernetes/kubernetes pkg/controller/job/indexed_job_utils.go,
#: getCompletionIndex; also a label where the PodIndexLabel feature is on, 1.28 and later)
JOB_NAME_LABEL = "job-name"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
#: below this size the all-reduce is latency-bound and its busbw says little about the fabric
#: (2 x p5.48xlarge reach 0.52 of their 400 GB/s at 64 MiB, 1.09 at 1 GiB: the recorded run)
SATURATING_BYTES = 1024**3

#: what to check, per what went wrong (the EFA path end to end)
CHECK_TCP = (
    "NCCL used TCP: check that the EFA device plugin runs on these nodes and the pods got their "
    "vpc.amazonaws.com/efa interfaces (`kubectl describe pod` shows the request), that the nodes' "
    "security group admits all traffic from itself (EFA needs the self rule, in and out), that the image "
    "carries the aws-ofi-nccl plugin (NCCL then logs 'Using network Libfabric'), and that FI_PROVIDER is "
    "efa or unset"
)
CHECK_SLOW = (
    "EFA is used but slow: check that each pod asks for all the node's EFA interfaces "
    "(vpc.amazonaws.com/efa), that GPUDirect RDMA is on (FI_EFA_USE_DEVICE_RDMA=1 where the "
    "instance supports it), and that the nodes are in one zone (and one placement group)"
)
CHECK_UNKNOWN = "NCCL's transport lines were not in the logs (NCCL_DEBUG=INFO), so the transport is unknown"


@dataclass(frozen=True)
class FabricVerdict:
    """The preflight's figure, the expectation, the transport NCCL reported and the verdict."""

    verdict: Verdict
    busbw: float  # GB/s at the largest size
    size: int  # bytes
    expected_gbs: float  # one node's network bandwidth, GB/s
    transport: str  # the probe's transport kind: efa, tcp, ib, intra-node, unknown
    network: str | None
    instance_type: str
    nodes: int
    ranks: int | None
    efa_expected: bool = True  # False: the image carries no aws-ofi-nccl (TCP is tcp-expected)
    image: str | None = None  # the image the preflight ran (the tcp-expected line names it)

    @property
    def share(self) -> float:
        """The measured bus bandwidth as a share of one node's network bandwidth."""
        return self.busbw / self.expected_gbs

    def line(self) -> str:
        """The figure `up` prints: measured, expected, transport, verdict."""
        ranks = f", {self.ranks} ranks" if self.ranks else ""
        seen = self.network or "no network line"
        if self.verdict == "tcp-expected":
            return (
                f"fabric preflight: all-reduce bus bandwidth {self.busbw:.2f} GB/s at {_size(self.size)} across "
                f"{self.nodes} x {self.instance_type}{ranks} over TCP ({seen}), as expected: the image "
                f"{self.image or '(unnamed)'} carries no aws-ofi-nccl, so NCCL cannot use the nodes' EFA "
                f"({self.share:.0%} of its {self.expected_gbs:g} GB/s); {EFA_FIX}: {self.verdict}"
            )
        return (
            f"fabric preflight: all-reduce bus bandwidth {self.busbw:.2f} GB/s at {_size(self.size)} across "
            f"{self.nodes} x {self.instance_type}{ranks}; {self.share:.0%} of the {self.expected_gbs:g} GB/s "
            f"({self.expected_gbs * 8:g} Gbps) of one node's EFA; transport {self.transport} ({seen}): {self.verdict}"
        )

    def hint(self) -> str | None:
        """What to check, for a verdict other than ok."""
        if self.verdict in ("ok", "tcp-expected"):  # tcp-expected: its line says it all
            return None
        if self.transport == "tcp":
            return CHECK_TCP
        advice = CHECK_SLOW if self.transport == "efa" else f"{CHECK_UNKNOWN}; {CHECK_TCP}"
        if self.size < SATURATING_BYTES:
            advice += f"; the largest size measured, {_size(self.size)}, is below the {_size(SATURATING_BYTES)} the thresholds assume"
        return advice

    def as_dict(self) -> dict[str, Any]:
        """Stable keys for `--json`."""
        return {
            "verdict": self.verdict,
            "busbw_gbs": round(self.busbw, 3),
            "size_bytes": self.size,
            "expected_gbs": self.expected_gbs,
            "share": round(self.share, 4),
            "transport": self.transport,
            "network": self.network,
            "instance_type": self.instance_type,
            "nodes": self.nodes,
            "ranks": self.ranks,
            "efa_expected": self.efa_expected,
        }


def _size(size: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} B"


def judge(
    result: AllReduceResult,
    *,
    expected_gbps: float,
    instance_type: str,
    nodes: int,
    efa_expected: bool = True,
    image: str | None = None,
) -> FabricVerdict:
    """The verdict on one all-reduce result against a node's network bandwidth (`expected_gbps`), for
    an image that can use EFA or, `efa_expected` false, cannot (`image`, named in the line)."""
    largest = result.largest
    expected = expected_gbps / 8
    kind = str(result.transport.get("kind", "unknown"))
    return FabricVerdict(
        verdict=verdict_of(largest.busbw, expected, kind, efa_expected=efa_expected),
        busbw=largest.busbw,
        size=largest.size,
        expected_gbs=expected,
        transport=kind,
        network=result.transport.get("network"),
        instance_type=instance_type,
        nodes=nodes,
        ranks=result.ranks,
        efa_expected=efa_expected,
        image=image,
    )


def check_preflight(logs: str, spec: FabricSpec) -> FabricVerdict:
    """The verdict on the preflight Job's logs (node 0's pod prints the report); raises FabricError when
    the probe printed no result, found wrong elements, or the fabric fell back (or degraded, with
    `spec.strict`): the same verdict the probe gave its exit code from (TCP with `spec.efa_expected`
    false is tcp-expected, returned)."""
    try:
        result = parse(logs)
    except ValueError as exc:
        raise FabricError(
            f"the fabric preflight printed no all-reduce result ({exc})",
            f"read node 0's log: `kubectl -n {spec.namespace} logs -l {JOB_NAME_LABEL}={PREFLIGHT_JOB},"
            f"{INDEX_ANNOTATION}=0 --tail=-1`; a pod that never started (Pending) means the nodes or their "
            "EFA interfaces are not there",
        ) from exc
    if result.wrong:
        raise FabricError(
            f"the fabric preflight's all-reduce returned {result.wrong:g} wrong elements across "
            f"{spec.nodes} x {spec.instance_type}",
            "a node's GPUs or network corrupt data: replace the nodes (delete them; Karpenter launches new ones)",
        )
    verdict = judge(
        result,
        expected_gbps=spec.expected_gbps,
        instance_type=spec.instance_type,
        nodes=spec.nodes,
        efa_expected=spec.efa_expected,
        image=spec.image,
    )
    if verdict.verdict == "fallback" or (spec.strict and verdict.verdict == "degraded"):
        raise FabricError(verdict.line(), verdict.hint())
    return verdict


def node0_log(kubeconfig: Path | str | None, namespace: str) -> str:
    """The log of the preflight's node-0 pod (the one that prints the report; the newest, if the Job
    ran more than once); FabricError when there is none."""
    pods = kubectl_json(
        kubeconfig, "get", "pods", "-n", namespace, "-l", f"{JOB_NAME_LABEL}={PREFLIGHT_JOB}", "-o", "json"
    )
    node0 = [
        pod
        for pod in pods.get("items") or []
        if (pod["metadata"].get("annotations") or {}).get(INDEX_ANNOTATION) == "0"
    ]
    if not node0:
        raise FabricError(
            f"the fabric preflight has no pod for node 0 in namespace {namespace}",
            f"`kubectl -n {namespace} describe job {PREFLIGHT_JOB}` says why (never created, or deleted "
            "by its TTL an hour after it finished: run `llmctl up` again to measure again)",
        )
    newest = max(node0, key=lambda pod: str(pod["metadata"].get("creationTimestamp", "")))
    return kubectl_text(kubeconfig, "logs", "-n", namespace, newest["metadata"]["name"])


def preflight_verdict(kubeconfig: Path | str | None, spec: FabricSpec) -> FabricVerdict:
    """The call `up` makes once the workload's update ran the Job: node 0's log, judged (raises
    FabricError on a fallback)."""
    return check_preflight(node0_log(kubeconfig, spec.namespace), spec)
