"""The start timeline from recorded kubectl JSON (pods, events, NodeClaims, nodes) and pod logs.

tests/lifecycle/data/timeline/*.json hold three starts of llama3-vllm-inf2 in the shapes kubectl
prints: a cold start (Karpenter launches a node, the image is pulled, the model compiles and is
published), a warm restart on that node (image cached, compiled artifacts from S3) and a start
whose image tag does not exist. No live cluster recorded them: their objects are held to the
Kubernetes API and the Karpenter CRD at the pinned versions, and every event to its component's own
message format (data/timeline/sources.yaml, checked by tests/conformance/test_timeline_shapes.py).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from standin_support import StandinEngine
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.infra.lifecycle.status import start_status
from llmctl.infra.lifecycle.timeline import (
    PHASE_ORDER,
    StartTimeline,
    build_timeline,
    go_duration,
    render_start_status,
    serving_pods,
    start_timelines,
)
from llmctl.infra.targets.registry import collect_status
from llmctl.state import Endpoint, save_endpoint

DATA = Path(__file__).parent / "data" / "timeline"


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return data


def timelines(name: str) -> list[StartTimeline]:
    data = recorded(name)
    pods = serving_pods(data["pods"], data["logs"])
    return [
        build_timeline(
            p, data["events"], data["nodeclaims"], data["nodes"], data["logs"][p["metadata"]["name"]]
        )
        for p in pods
    ]


def table(timeline: StartTimeline) -> list[tuple[str, str, float | None]]:
    return [(p.name, p.status, None if p.seconds is None else round(p.seconds, 1)) for p in timeline.phases]


def test_cold_start_phases_and_durations() -> None:
    (start,) = timelines("cold")  # the Ray head logs no phases and is Ready: not a serving start
    assert start.pod.endswith("-inf2-worker-8zlmd") and start.node == "ip-10-0-1-7.us-west-2.compute.internal"
    assert table(start) == [
        ("node", "launched", 284.0),  # NodeClaim created 09:00:02 -> Ready 09:04:46
        ("image", "pulled", 101.2),  # the kubelet's own pull time from the Pulled event
        ("weights", "mirror", 62.0),
        ("compile", "compiled", 195.0),
        ("engine", "loaded", 20.0),
        ("healthy", "healthy", 4.0),
    ]
    assert start.total_seconds == 689.0  # NodeClaim created -> first healthy check
    assert start.phase("compile").detail == "published"
    assert start.phase("weights").detail.startswith("s3://llmctl-dev-us-west-2-cache/models/")


def test_warm_start_shows_the_compile_cache_hit() -> None:
    (start,) = timelines("warm")
    assert table(start) == [
        ("node", "existing", 0.0),
        ("image", "cached", 0.0),
        ("weights", "mirror", 38.0),
        ("compile", "cache hit", 8.0),  # the S3 restore, no neuronx-cc
        ("engine", "loaded", 20.0),
        ("healthy", "healthy", 3.0),
    ]
    assert start.total_seconds == 89.0  # pod created -> healthy: the node was already there
    assert "compile: cache hit" in start.render()
    assert start.phase("compile").detail == "from s3"


def test_failed_pull_stops_the_timeline_at_the_image() -> None:
    (start,) = timelines("failed_pull")
    assert table(start) == [
        ("node", "launched", 180.0),
        ("image", "failed", 3.0),  # Pulling 11:03:10 -> first Failed 11:03:13
        ("weights", "pending", None),
        ("compile", "pending", None),
        ("engine", "pending", None),
        ("healthy", "pending", None),
    ]
    assert start.total_seconds is None and "not ready" in start.render()
    assert (
        "not found" in start.phase("image").detail and "Failed to pull image" in start.phase("image").detail
    )


def test_to_dict_carries_every_phase_in_order() -> None:
    (start,) = timelines("cold")
    data = start.to_dict()
    assert [p["name"] for p in data["phases"]] == list(PHASE_ORDER)
    assert data["total_seconds"] == 689.0 and data["phases"][1] == {
        "name": "image",
        "status": "pulled",
        "seconds": 101.2,
        "detail": "",
    }
    text = render_start_status({"blueprint": "llama3-vllm-inf2", "pods": [data]})
    assert text.splitlines()[0] == "start of llama3-vllm-inf2's serving pods:"
    assert "compile: compiled" in text and "4m 44s" in text and "11m 29s" in text


def test_a_pod_still_compiling_and_expired_events() -> None:
    data = recorded("cold")
    worker = data["pods"][1]
    log = "\n".join(line for line in data["logs"][worker["metadata"]["name"]].splitlines()[:6])
    worker["status"]["conditions"][-1]["status"] = "False"
    start = build_timeline(worker, [], data["nodeclaims"], data["nodes"], log)
    assert [(p.name, p.status) for p in start.phases] == [
        ("node", "launched"),
        ("image", "unknown"),  # Kubernetes dropped the events (about an hour)
        ("weights", "mirror"),
        ("compile", "running"),
        ("engine", "pending"),
        ("healthy", "pending"),
    ]
    assert start.total_seconds is None


def test_go_durations() -> None:
    assert go_duration("1m41.2s") == pytest.approx(101.2)
    assert go_duration("512ms") == pytest.approx(0.512)
    assert go_duration("1h2m3s") == 3723.0
    assert go_duration("soon") is None and go_duration("3s later") is None


# kubectl [--kubeconfig F] get <resource> ... -o json / logs -n NS POD: answers from recorded data
KUBECTL = """
import json, os, sys
data = json.load(open(os.environ["FAKE_TIMELINE"]))
args = sys.argv[1:]
if args[:1] == ["--kubeconfig"]:
    args = args[2:]
if args[0] == "logs":
    print(data["logs"].get(args[3], ""), end="")
    sys.exit(0)
key = {"pods": "pods", "events": "events", "nodeclaims.karpenter.sh": "nodeclaims", "nodes": "nodes"}
print(json.dumps({"items": data[key[args[1]]] if args[1] in key else []}))
"""


@pytest.fixture
def kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "kubectl-bin"
    bin_dir.mkdir()
    script = bin_dir / "kubectl"
    script.write_text(f"#!{sys.executable}\n{KUBECTL}")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    recording = tmp_path / "recording.json"
    monkeypatch.setenv("FAKE_TIMELINE", str(recording))
    return recording


def test_start_timelines_fetches_with_kubectl(kubectl: Path, tmp_path: Path) -> None:
    kubectl.write_text(json.dumps(recorded("warm")))
    (start,) = start_timelines(tmp_path / "kubeconfig", "llama3-vllm-inf2")
    assert start.phase("compile").status == "cache hit" and start.total_seconds == 89.0


def test_status_for_a_blueprint_uses_what_up_recorded(kubectl: Path, tmp_path: Path) -> None:
    kubectl.write_text(json.dumps(recorded("failed_pull")))
    kube = tmp_path / "existing.yaml"
    assert "run `llmctl up` first" in start_status("dev", "llama3-vllm-inf2")["error"]
    kube.write_text("apiVersion: v1\n")
    extra = {"kubeconfig": str(kube), "namespace": "llama3-vllm-inf2"}
    save_endpoint(Endpoint("dev", "llama3-vllm-inf2", "kubeconfig", "http://h/v1", "m", extra=extra))
    starts = start_status("dev", "llama3-vllm-inf2")
    assert starts["namespace"] == "llama3-vllm-inf2"
    (pod,) = starts["pods"]
    assert [p["status"] for p in pod["phases"]][:2] == ["launched", "failed"]
    assert "not found" in render_start_status(starts)
    assert "starts" not in collect_status("dev", "local", blueprint="llama3-vllm-inf2")


def test_status_blueprint_prints_the_timeline_and_carries_it_in_json(
    engine: StandinEngine, kubectl: Path, tmp_path: Path
) -> None:
    # `engine` first: the recorded-events kubectl below goes ahead of the stand-in's on PATH.
    kubectl.write_text(json.dumps(recorded("warm")))
    kube = tmp_path / "kubeconfig.yaml"
    kube.write_text("apiVersion: v1\n")
    extra = {"kubeconfig": str(kube), "namespace": "llama3-vllm-inf2"}
    save_endpoint(Endpoint("dev", "llama3-vllm-inf2", "eks", "http://localhost:8000/v1", "m", extra=extra))
    result = CliRunner().invoke(app, ["status", "--blueprint", "llama3-vllm-inf2", "--json"])
    assert result.exit_code == 0, result.stderr
    (pod,) = json.loads(result.stdout)["starts"]["pods"]
    assert [p["status"] for p in pod["phases"]] == [
        "existing",
        "cached",
        "mirror",
        "cache hit",
        "loaded",
        "healthy",
    ]
    assert pod["total_seconds"] == 89.0
    result = CliRunner().invoke(app, ["status", "--blueprint", "llama3-vllm-inf2"])
    assert result.exit_code == 0, result.stderr
    assert "start of llama3-vllm-inf2's serving pods:" in result.stdout
    assert "compile: cache hit" in result.stdout


def test_up_collects_the_starts_after_readiness_and_only_notes_a_kubectl_failure(
    kubectl: Path, tmp_path: Path
) -> None:
    import io

    from llmctl.infra.lifecycle.orchestrate import Lifecycle
    from llmctl.infra.lifecycle.progress import Progress

    stream = io.StringIO()
    lifecycle = Lifecycle(engine=None, progress=Progress("plain", stream), stack="dev")  # type: ignore[arg-type]
    kubectl.write_text(json.dumps(recorded("cold")))
    (start,) = lifecycle._starts(tmp_path / "kubeconfig", "llama3-vllm-inf2")
    assert start.phase("compile").status == "compiled" and start.total_seconds == 689.0
    kubectl.write_text("not json")  # kubectl itself fails: `up` still succeeds, without timelines
    assert lifecycle._starts(tmp_path / "kubeconfig", "llama3-vllm-inf2") == []
    assert "no start timeline: `kubectl get pods" in stream.getvalue()
