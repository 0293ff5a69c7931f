"""The messages of outside systems that tests feed the code, held to those systems' own sources.

- The KEDA scale-up the stand-in kubectl replays (tests/lifecycle/data/scaling/triton_scale_up.json)
  is composed (nobody recorded a live one): each object (a Deployment's status and replicas over the
  Deployment llmctl renders, as the stand-in overlays them) validates against the Kubernetes schema of
  the pinned EKS version, its HPA carries the name and external metric name KEDA derives from the
  ScaledObject llmctl renders (kedacore/keda v2.20.2 source), and each reported average is what the
  HPA controller computes (kubernetes/kubernetes replica_calculator.go): ceil(sum / current pods).
- Triton's /metrics text (tests/lifecycle/data/recorded/triton_metrics.txt, recorded from a Triton
  server's output in triton-inference-server/tensorrtllm_backend's README): the queue metric the
  runtime registry names is a gauge there, found the way KEDA's metrics-api scaler finds it.
- A RayCluster status (tests/lifecycle/data/recorded/raycluster_status.json, from KubeRay v1.7.0's
  own unit test): it validates against the pinned ray.io_rayclusters CRD's status schema, and
  `llmctl status` reads its worker counts.
- The NodeClaims past `Launched` that the join-watch tests feed the code
  (tests/lifecycle/karpenter_shapes.py from data/karpenter/registration_signals.yaml, every
  condition with its Karpenter v1.14.1 file and line): every state Karpenter writes (Launched;
  Registered and Initialized with each reason; being deleted with InstanceTerminating) passes the
  pinned karpenter.sh_nodeclaims.yaml (OpenAPI schema and CEL rules), and the events beside them
  (Nominated, Finalized) are valid Kubernetes Events in their source's words.
- A zero-downtime upgrade of a RayService (tests/lifecycle/data/kuberay/rayservice_upgrade.json,
  composed from KubeRay v1.7.0's source): its statuses validate against the pinned RayService CRD,
  its Pods and Nodes against Kubernetes' schema.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from crd_validation import json_schema, load_crds, validate
from prometheus_client.parser import text_string_to_metric_families
from upstream_files import upstream

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.runtimes import runtime
from llmctl.infra.lifecycle import replicas
from llmctl.infra.workload.scheduling.capacity import parse_quantity

TESTS = Path(__file__).parents[1]
DATA = TESTS / "lifecycle" / "data"
SCALE_UP = DATA / "scaling" / "triton_scale_up.json"
TRITON_METRICS = DATA / "recorded" / "triton_metrics.txt"
VLLM_METRICS = TESTS / "conformance" / "data" / "vllm-0.26.0-metrics.txt"
RAYCLUSTER = DATA / "recorded" / "raycluster_status.json"
BLUEPRINT = "llama2-triton-vllm-gpu"


def _workload_tests() -> None:
    """The workload tests' helpers (their folder is on sys.path only once a test there was collected)."""
    if str(TESTS / "workload") not in sys.path:
        sys.path.append(str(TESTS / "workload"))


def _schema_version() -> str:
    _workload_tests()
    from test_workload_builders import SCHEMA  # the newest schema <= the pinned EKS version

    return str(SCHEMA)


def _rendered(kind: str) -> dict[str, Any]:
    """The object of this kind llmctl renders for the blueprint."""
    _workload_tests()
    from workload_helpers import manifests_for

    [found] = [m for m in manifests_for(BLUEPRINT) if m["kind"] == kind]
    return found


def keda_metric_name(index: int, value_location: str) -> str:
    """KEDA's external metric name for a metrics-api trigger: `GenerateMetricNameWithIndex(index,
    NormalizeString("metric-api-" + valueLocation))` (kedacore/keda@68a5b502, metrics_api_scaler.go,
    scaler.go, util/normalize_string.go: `/ . : % ( )` become `-`)."""
    name = f"metric-api-{value_location}"
    for char in "/.:%()":
        name = name.replace(char, "-")
    return f"s{index}-{name}"


def test_the_keda_scale_up_objects_validate_against_the_kubernetes_schema() -> None:
    steps = json.loads(SCALE_UP.read_text())["steps"]
    deployment = _rendered("Deployment")
    for step in steps:
        for obj in step:
            if obj["kind"] == "Deployment":  # an overlay on the object the workload stack holds, as the
                assert obj["metadata"]["name"] == deployment["metadata"]["name"]  # stand-in serves it
                obj = {**deployment, "spec": {**deployment["spec"], **obj["spec"]}, "status": obj["status"]}
            kubernetes_validate.validate(obj, _schema_version(), strict=True)
    broken = json.loads(json.dumps(steps[0][1]))
    broken["status"]["currentMetrics"][0]["external"]["curent"] = broken["status"]["currentMetrics"][0][
        "external"
    ].pop("current")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, _schema_version(), strict=True)


def test_the_hpa_is_named_and_measured_as_keda_and_the_hpa_controller_do() -> None:
    scaled = _rendered("ScaledObject")
    [trigger] = scaled["spec"]["triggers"]
    target = parse_quantity(trigger["metadata"]["targetValue"])
    waiting = []
    for step in json.loads(SCALE_UP.read_text())["steps"]:
        [hpa] = [o for o in step if o["kind"] == "HorizontalPodAutoscaler"]
        assert hpa["metadata"]["name"] == f"keda-hpa-{scaled['metadata']['name']}"
        assert hpa["spec"]["scaleTargetRef"] == scaled["spec"]["scaleTargetRef"]
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (
            scaled["spec"]["minReplicaCount"],
            scaled["spec"]["maxReplicaCount"],
        )
        [metric] = hpa["status"]["currentMetrics"]
        assert metric["external"]["metric"]["name"] == keda_metric_name(
            0, trigger["metadata"]["valueLocation"]
        )
        current = hpa["status"]["currentReplicas"]
        average = parse_quantity(metric["external"]["current"]["averageValue"])
        total = average * current  # what the scaler summed over the pods
        waiting.append(total)
        # the controller's average: ceil(total in milli-units / current pods)
        assert average == math.ceil(total * 1000 / current) / 1000
        wanted = max(scaled["spec"]["minReplicaCount"], math.ceil(total / target))
        ratio = total / (target * current)
        expected = current if abs(1 - ratio) <= 0.1 else min(wanted, scaled["spec"]["maxReplicaCount"])
        assert hpa["status"]["desiredReplicas"] == expected
    assert max(waiting) > 0  # the replay does scale


def test_the_runtime_queue_metric_is_a_gauge_of_the_recorded_vllm_metrics() -> None:
    """Triton's vLLM runtime scales on vLLM's own queue gauge (served beside Triton by
    serving/triton_vllm/queue_metrics.py): a gauge in a real vLLM server's /metrics (0.26.0 on an
    H200, tests/conformance/data/README.md), and not in Triton's, whose pending gauge stays near 0."""
    name = runtime(load_blueprint(BLUEPRINT).runtime).queue_metric
    assert name is not None
    families = {f.name: f for f in text_string_to_metric_families(VLLM_METRICS.read_text())}
    # KEDA's metrics-api scaler (format: prometheus) takes the family by the selector's name, then the
    # first series whose labels match (none here): metrics_api_scaler.go getValueFromPrometheusResponse
    family = families[name]
    assert family.type == "gauge"
    [sample] = family.samples
    assert set(sample.labels) == {"engine", "model_name"}
    triton = {f.name for f in text_string_to_metric_families(TRITON_METRICS.read_text())}
    assert name not in triton and "nv_inference_pending_request_count" in triton


def test_a_kuberay_raycluster_status_validates_and_status_reads_its_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded = json.loads(RAYCLUSTER.read_text())["status"]
    crd = load_crds(upstream("kuberay/ray.io_rayclusters.yaml"))[("ray.io/v1", "RayCluster")]
    status_schema = json_schema(crd.schema["properties"]["status"], root=False)
    jsonschema.Draft7Validator(status_schema).validate(recorded)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(status_schema).validate({**recorded, "workerReplicas": 1})

    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc"},
        "status": recorded,
    }

    def kubectl_json(kubeconfig: Any, *args: str, **_: Any) -> dict[str, Any]:
        return {"items": [cluster] if args[1] == "rayclusters" else []}

    monkeypatch.setattr(replicas, "kubectl_json", kubectl_json)
    assert replicas.workload_replicas(None, "ns") == [
        {"kind": "RayCluster", "name": "rc", "current": 1, "desired": 1, "signal": None}
    ]


def _karpenter_shapes() -> Any:
    """tests/lifecycle/karpenter_shapes.py (its folder is on sys.path only once a test there was collected)."""
    if str(TESTS / "lifecycle") not in sys.path:
        sys.path.append(str(TESTS / "lifecycle"))
    import karpenter_shapes

    return karpenter_shapes


# the values a condition message's Go %q verbs take in the tests
VALUES = {
    "hooks": "placementgroup",
    "taint": "node.kubernetes.io/not-ready:NoSchedule",
    "resource": "aws.amazon.com/neuron",
    "driver": "neuron.aws.com",
}


def _nodeclaim_states() -> list[dict[str, Any]]:
    """One NodeClaim per state Karpenter writes past Launched (registration_signals.yaml)."""
    shapes = _karpenter_shapes()
    conditions = shapes.registration()["conditions"]
    at = {"created": "2026-11-26T20:00:00Z", "launched": "2026-11-26T20:00:40Z"}
    claims = [shapes.nodeclaim("inferentia-inf2-n0", created=at["created"])]  # not launched yet
    for state in [*(k for k in conditions["registered"] if k not in ("source", "true")), "awaiting"]:
        claims.append(shapes.nodeclaim("inferentia-inf2-r0", **at, registered=state, **VALUES))
    for state in [*(k for k in conditions["initialized"] if k != "source"), "awaiting"]:
        claims.append(
            shapes.nodeclaim(
                "inferentia-inf2-i0",
                **at,
                registered="true",
                registered_at="2026-11-26T20:03:10Z",
                initialized=state,
                initialized_at="2026-11-26T20:03:12Z",
                **VALUES,
            )
        )
    claims.append(  # the liveness check's deletion: deletionTimestamp, InstanceTerminating
        shapes.nodeclaim(
            "inferentia-inf2-d0",
            **at,
            deleting="2026-11-26T20:15:01Z",
            terminating_at="2026-11-26T20:15:02Z",
            capacity_type="spot",
            instance_type="g5.2xlarge",
        )
    )
    return claims


def test_the_nodeclaims_past_launched_pass_the_pinned_nodeclaim_crd() -> None:
    crds = load_crds(upstream("karpenter/karpenter.sh_nodeclaims.yaml"))
    claims = _nodeclaim_states()
    launch_failures = [  # and the Launched=Unknown ones of launch_signals.yaml
        _karpenter_shapes().launched_unknown("gpu-nvidia-x1", name)
        for name in _karpenter_shapes().signals()["launched_unknown"]["conditions"]
    ]
    for claim in launch_failures:
        result = validate(claim, crds)
        assert result.ok, f"{claim['metadata']['name']}: {result.report()}"
    reasons = {c["reason"] for claim in claims for c in claim["status"]["conditions"]}
    # every reason of registration_signals.yaml is in one of them
    shapes = _karpenter_shapes().registration()["conditions"]
    recorded = {
        entry["reason"]
        for kind in ("launched", "registered", "initialized", "instance_terminating", "ready")
        for name, entry in shapes[kind].items()
        if name != "source"
    }
    assert recorded | {shapes["awaiting"]["reason"]} == reasons
    for claim in claims:
        # metadata beyond name and labels (creation, deletion, finalizers, owner) is the API server's
        # ObjectMeta, which the CRD does not describe
        meta = {k: claim["metadata"][k] for k in ("name", "labels")}
        result = validate({**claim, "metadata": meta}, crds)
        assert result.ok and result.cel_evaluated, f"{claim['metadata']['name']}: {result.report()}"
        assert [c["type"] for c in claim["status"]["conditions"]][
            -1
        ] == "Ready"  # the root last (operatorpkg)
    # the CRD does refuse what Karpenter would never write
    broken = json.loads(json.dumps(claims[1]))
    broken["status"]["conditions"][0]["reason"] = "Node not found"
    broken["metadata"] = {"name": "inferentia-inf2-r0"}
    assert not validate(broken, crds).ok
    no_time = json.loads(json.dumps(claims[1]))
    del no_time["status"]["conditions"][0]["lastTransitionTime"]
    no_time["metadata"] = {"name": "inferentia-inf2-r0"}
    assert not validate(no_time, crds).ok


def test_the_events_beside_the_nodeclaims_are_valid_events_in_their_source_s_words() -> None:
    shapes = _karpenter_shapes()
    nominated = shapes.nominated("serve-0", "inferentia-inf2-n0", "2026-11-26T20:00:02Z")
    finalized = shapes.finalized("inferentia-inf2-d0", "2026-11-26T20:15:09Z")
    for event in (nominated, finalized):
        kubernetes_validate.validate(event, _schema_version(), strict=True)
    timeline = yaml.safe_load((DATA / "timeline" / "sources.yaml").read_text())["events"]
    [source] = [s for s in timeline if (s["component"], s["reason"]) == ("karpenter", "Nominated")]
    assert nominated["message"] == source["format"].replace("%s", "nodeclaim/inferentia-inf2-n0")
    assert finalized["message"] == "Finalized karpenter.sh/termination"
    assert (finalized["reason"], finalized["type"]) == ("Finalized", "Normal")


RAYSERVICE_UPGRADE = DATA / "kuberay" / "rayservice_upgrade.json"


def test_a_kuberay_upgrade_sequence_validates_against_the_rayservice_crd_and_kubernetes() -> None:
    """tests/lifecycle/data/kuberay/rayservice_upgrade.json (composed from KubeRay v1.7.0's source, which
    it names): every RayService status validates against the pinned ray.io_rayservices CRD's status
    schema, its conditions carry the types and reasons calculateConditions sets, and every Pod and Node
    validates against the Kubernetes schema of the pinned EKS version."""
    crd = load_crds(upstream("kuberay/ray.io_rayservices.yaml"))[("ray.io/v1", "RayService")]
    status_schema = json_schema(crd.schema["properties"]["status"], root=False)
    validator = jsonschema.Draft7Validator(status_schema)
    reasons = set()
    for step in json.loads(RAYSERVICE_UPGRADE.read_text())["steps"]:
        for obj in step:
            if obj["kind"] == "RayService":
                validator.validate(obj["status"])
                reasons |= {(c["type"], c["status"], c["reason"]) for c in obj["status"]["conditions"]}
            else:
                kubernetes_validate.validate(obj, _schema_version(), strict=True)
    assert reasons == {
        ("Ready", "True", "NonZeroServeEndpoints"),
        ("UpgradeInProgress", "False", "NoPendingCluster"),
        ("UpgradeInProgress", "True", "BothActivePendingClustersExist"),
    }
    with pytest.raises(jsonschema.ValidationError):  # the schema does check: a misspelt field fails
        validator.validate({"pendingServiceStatus": {"rayClusterNme": "x"}})
