"""`llmctl bench` replicas for a blueprint on a cluster (issue 28): the bench samples the same
rows as `llmctl status` (infra/lifecycle/replicas.py, through kubectl) while its load runs. The
stand-in kubectl replays the KEDA scale-up of the Triton workload
(tests/lifecycle/data/scaling/triton_scale_up.json: composed, as no live one was recorded, and checked
against its sources by tests/conformance/test_recorded_shapes.py), one step per reading; the samples
land in summary.json and scaling.png as on the local target."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_scaling_status import DATA, NAMESPACE, kubectl  # noqa: F401 (kubectl: a fixture)
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.infra.lifecycle.replicas import bench_source, cluster_replicas
from llmctl.serving.client.bench.testserver import FakeTiming, running_server
from llmctl.state import Endpoint, save_endpoint

BP = "llama2-triton-vllm-gpu"
# (running, desired) of the Deployment at each recorded step: idle, KEDA wants 4, pods come
REPLAY = [(1, 1), (1, 4), (1, 4), (2, 4), (4, 4)]


@pytest.fixture
def server() -> Iterator[str]:
    # slow enough that a short run spans several readings on a busy machine
    with running_server(FakeTiming(ttft=0.2, tpot=0.01)) as url:
        yield url


def test_one_reading_sums_the_scaled_objects_and_keeps_the_signal(kubectl: Path) -> None:  # noqa: F811
    readings = [cluster_replicas(kubectl, NAMESPACE) for _ in REPLAY]
    assert [(r["running"], r["desired"]) for r in readings if r] == REPLAY
    assert readings[1] is not None and readings[1]["signal"] == "8 per pod"
    assert cluster_replicas(kubectl, "other") is None  # nothing scaled there: no reading


def test_bench_source_uses_what_up_recorded_and_none_for_a_plain_endpoint(
    kubectl: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    assert bench_source("dev", None, None) is None
    extra = {"kubeconfig": str(kubectl), "namespace": NAMESPACE}
    save_endpoint(Endpoint("dev", BP, "kubeconfig", "http://192.168.1.50:8000/v1", "m", extra=extra))
    source = bench_source("dev", BP, None)
    assert source is not None and source() == {"running": 1, "desired": 1, "signal": "0 per pod"}


def test_bench_samples_the_cluster_replicas_into_summary_and_plot(
    kubectl: Path,  # noqa: F811
    server: str,
    tmp_path: Path,
) -> None:
    # `up` recorded the namespace; the kubeconfig is the stack's saved one (the fixture's)
    save_endpoint(Endpoint("dev", BP, "eks", server, "fake-model", extra={"namespace": NAMESPACE}))
    out = tmp_path / "bench"
    args = ["bench", "--blueprint", BP, "--requests", "10", "--concurrency", "1", "--warmup", "0"]
    args += ["--mean-output-tokens", "20", "--stddev-output-tokens", "0"]  # about 0.4 s a request
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--json"])
    assert result.exit_code == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    seen = [(s["running"], s["desired"]) for s in summary["replicas"]]
    # one reading per sample, each a step further in the replay (the last step stays)
    assert len(seen) >= 2 and seen == [REPLAY[min(i, len(REPLAY) - 1)] for i in range(len(seen))]
    times = [s["t_s"] for s in summary["replicas"]]
    assert times == sorted(times)
    assert (out / "scaling.png").stat().st_size > 0
    assert json.loads(DATA.read_text())["advance_on"] == "RayCluster"  # the replay moves once a reading
