"""`llmctl status` data and `llmctl connect`'s forwards, below the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from standin_support import StandinEngine

from llmctl.infra.lifecycle.status import kube_status, port_forwards
from llmctl.infra.targets.registry import collect_status
from llmctl.state import Endpoint, save_endpoint


def test_port_forwards_follow_what_the_endpoint_recorded() -> None:
    found = Endpoint(
        "dev",
        "llama2-inf2",
        "eks",
        "http://localhost:8000/v1",
        "m",
        extra={"service": "serve-svc", "port": "8000", "dashboard_service": "head-svc", "ui_service": "ui"},
    )
    assert port_forwards(found, 9000) == [
        ("endpoint", "serve-svc", 9000, 8000, "http://localhost:9000/v1"),
        ("dashboard", "head-svc", 8265, 8265, "http://localhost:8265"),
        ("UI", "ui", 7860, 80, "http://localhost:7860"),
    ]
    bare = Endpoint("dev", "tiny-cpu", "eks", "http://localhost:8000/v1", "m", extra={"service": "s"})
    assert [f[0] for f in port_forwards(bare, 8000)] == ["endpoint"]
    assert port_forwards(Endpoint("dev", "x", "eks", "http://h/v1", "m"), 8000) == []


def test_local_status_lists_the_recorded_endpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path))
    save_endpoint(Endpoint("dev", "tiny-cpu", "local", "http://127.0.0.1:9/v1", "m"))
    data = collect_status("dev", "local")
    assert data["stack"] == "dev" and data["target"] == "local" and data["local"] == []
    assert [e["blueprint"] for e in data["endpoints"]] == ["tiny-cpu"]
    assert "stacks" not in data and collect_status("other", "local")["endpoints"] == []


def test_kube_status_without_a_saved_kubeconfig_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path))
    assert "run `llmctl up` first" in kube_status("dev")["error"]


def test_connect_forwards_each_recorded_service_until_interrupted(
    engine: StandinEngine, tmp_path: Path
) -> None:
    """`llmctl connect`: one port-forward per service the endpoint recorded, to the Services the
    stand-in Kubernetes holds under that name and namespace; Ctrl-C stops them all."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    kube = tmp_path / "kube.yaml"
    kube.write_text("clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\n")
    extra = {
        "namespace": "tiny-cpu",
        "service": "tiny-cpu-serve-svc",
        "dashboard_service": "tiny-cpu-head-svc",
    }
    save_endpoint(
        Endpoint(
            stack="dev",
            blueprint="tiny-cpu",
            target="eks",
            base_url="http://localhost:8000/v1",
            model="m",
            extra={**extra, "port": "8000", "kubeconfig": str(kube)},
        )
    )
    for name in ("tiny-cpu-serve-svc", "tiny-cpu-head-svc"):  # what KubeRay makes of the RayService
        engine.kube(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "tiny-cpu", "name": name}}
        )
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmctl", "connect", "-b", "tiny-cpu", "--port", "18000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    log = engine.root / "port-forwards.jsonl"
    # the command says when it forwards (a Ctrl-C before that stops what started, with exit 130)
    assert proc.stdout is not None
    said = []
    for line in proc.stdout:
        said.append(line)
        if line.startswith("forwarding; Ctrl-C to stop"):
            break
    deadline = time.monotonic() + 300  # a bound for a busy machine; the loop ends when both started
    while (not log.exists() or len(log.read_text().splitlines()) < 2) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)  # only the process this test started
    rest, err = proc.communicate(timeout=300)
    out = "".join(said) + rest
    assert proc.returncode == 0, err
    assert "endpoint   http://localhost:18000/v1" in out and "dashboard  http://localhost:8265" in out
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted((e["service"], e["local"], e["remote"], e["event"]) for e in events) == [
        ("tiny-cpu-head-svc", "8265", "8265", "started"),
        ("tiny-cpu-head-svc", "8265", "8265", "stopped"),
        ("tiny-cpu-serve-svc", "18000", "8000", "started"),
        ("tiny-cpu-serve-svc", "18000", "8000", "stopped"),
    ]


def test_environment_rules_without_an_engine() -> None:
    """Names, namespaces, the union of records and the gc prefix rule (pure functions)."""
    from datetime import datetime

    from llmctl.errors import LlmctlError
    from llmctl.infra.lifecycle.engine import StackInfo
    from llmctl.infra.lifecycle.environment import WorkloadRecord, union
    from llmctl.infra.lifecycle.stacks import _matches
    from llmctl.infra.names import check_workload, namespace, split_stack, workload_stack

    assert workload_stack("ci", "pr-42") == "ci.pr-42" and workload_stack("dev", None) == "dev"
    assert split_stack("ci.pr-42") == ("ci", "pr-42") and split_stack("dev") == ("dev", None)
    for bad in ("PR-42", "pr_42", "-pr", "pr-", "x" * 33):
        with pytest.raises(LlmctlError):
            check_workload(bad)
    assert namespace("tiny-cpu", "pr-42") == "tiny-cpu-pr-42" and namespace("tiny-cpu", None) is None
    with pytest.raises(LlmctlError, match="longer than 63"):
        namespace("b" * 40, "w" * 30)
    a = WorkloadRecord(
        blueprint="a", pools=["core", "inferentia-inf2"], instance_types=["inf2.48xlarge"], namespace="a"
    )
    b = WorkloadRecord(blueprint="b", pools=["gpu-nvidia"], instance_types=["p4de.24xlarge"], namespace="b")
    assert (
        union([a, b])
        == union([b, a])
        == (
            ["core", "default", "gpu-nvidia", "inferentia-inf2", "ray-head"],
            ["inf2.48xlarge", "p4de.24xlarge"],
        )
    )

    def info(project: str, stack: str) -> StackInfo:
        return StackInfo(project, stack, datetime(2026, 1, 1), 3, False)

    assert _matches(info("llmctl-b", "ci.pr-42"), "pr-") and not _matches(
        info("llmctl-platform", "ci"), "pr-"
    )
    assert _matches(info("llmctl-b", "pr-7"), "pr-") and _matches(info("llmctl-platform", "ci"), "")
    assert not _matches(info("llmctl-b", "pr-7.x"), "pr-")
