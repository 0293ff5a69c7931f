"""Every catalog blueprint's platform and workload programs through the Automation API and the
stand-in engine (its own environment each), and an interrupted `llmctl up` that the next run resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from lifecycle_support import lifecycle, short
from standin_support import StandinEngine

from llmctl.blueprints.catalog import catalog_names
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT
from llmctl.state import load_endpoint


@pytest.mark.parametrize("name", catalog_names())
def test_catalog_blueprint_deploys_through_the_engine(
    name: str, engine: StandinEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    result = lifecycle(stack="cat").up(name, region="us-west-2", wait=False)
    platform = engine.resources(PLATFORM_PROJECT, "cat")
    assert result.plan is not None and result.plan.changes["platform"] == {"create": len(platform)}
    workload = engine.outputs(f"llmctl-{name}", "cat")
    endpoint = load_endpoint("cat", name)
    assert endpoint.extra["namespace"] == workload["namespace"]
    assert endpoint.extra["service"] == workload["service"]
    assert endpoint.extra["port"] == str(int(workload["port"]))
    # the pools the platform exports are the ones its NodePools were made for
    pools = {pool["name"] for pool in engine.outputs(PLATFORM_PROJECT, "cat")["node_pools"]}
    made = {short(u).split("::")[1] for u in platform if "karpenter.sh/v1:NodePool" in u}
    assert {f"nodepools-{pool}-nodepool" for pool in pools - {"core"}} == made
    # one update, and it succeeded
    history = engine.history(f"llmctl-{name}", "cat")
    assert [h["result"] for h in history] == ["succeeded"]


def test_ctrl_c_on_llmctl_up_stops_the_engine_cleanly_and_the_next_up_resumes(
    engine: StandinEngine, aws: str
) -> None:
    engine.control(hang_on="karpenter-release")
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmctl", "up", "-b", "tiny-cpu", "--yes", "--no-wait", "--progress", "plain"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    marker = engine.root / "hanging"
    # bounds for a busy 2-core machine (the suite runs on every core): they end early when done
    deadline = time.monotonic() + 300
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), proc.communicate(timeout=300)
    proc.send_signal(signal.SIGINT)  # the llmctl process this test started, as a terminal's Ctrl-C would
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "interrupted: Pulumi stopped the update of llmctl-platform/dev" in err
    assert "run the same command again to resume" in err
    saved = engine.resources(PLATFORM_PROJECT, "dev")
    assert saved and not any(u.endswith("::karpenter-release") for u in saved)
    assert engine.history(PLATFORM_PROJECT, "dev")[-1]["result"] == "failed"
    assert not list((engine.backend / ".pulumi" / "locks").rglob("*.json"))  # a clean stop frees the lock
    engine.control(hang_on=None)
    result = lifecycle().up("tiny-cpu", region=aws, wait=False)
    assert result.plan is not None
    total = len(engine.resources(PLATFORM_PROJECT, "dev"))
    assert result.plan.changes["platform"] == {"same": len(saved), "create": total - len(saved)}
