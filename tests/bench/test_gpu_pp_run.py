"""Issue 55 on the GPU machine, checked on the CPU (continued from test_gpu_pp.py): collect.py's
``pipeline_parallel`` row from synthetic records (tmp_path only: no record is added under
benchmarks/results/gpu-runs/), and, with Ray here, ``start-pp``'s own two ``ray start`` commands on
the CPU (fake GPUs) placing a PACK group of two {GPU: 1} bundles on two node ids (slow)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from gpu_support import ROOT, load
from test_gpu_pp import PP_BLUEPRINT, carried

SOCKET_PROBE = ROOT / "tests" / "lifecycle" / "data" / "fabric" / "h200-socket-2ranks.txt"
P2P_PROBE = SOCKET_PROBE.with_name("h200-p2p-1node.txt")


def synthetic_run() -> list[dict[str, Any]]:
    """A pp run's records as the steps write them (figures made up, the probe outputs the recorded
    ones of tests/lifecycle/data/fabric/)."""

    def bench(label: str, completed: int, ttft: float) -> dict[str, Any]:
        summary = {
            "metrics": {"ttft_s": {"p50": ttft, "p99": 2 * ttft, "mean": ttft}, "tpot_s": {"mean": 0.004}},
            "counts": {"completed": completed, "failed": 0, "errors_by_type": {}},
            "throughput": {"output_throughput_tok_s": 1000.0},
            "tokens": {"output_source": "usage"},
        }
        return {"kind": "llmctl_bench", "label": label, "summary": summary, "rc": 0}

    group = {
        "bundles": {"0": {"GPU": 1.0, "CPU": 1.0}, "1": {"GPU": 1.0}},
        "strategy": "PACK",
        "state": "CREATED",
        "bundles_to_node_id": {"0": "node-a", "1": "node-b"},
    }
    return [
        {"kind": "setup", "t": 1, "gpus": ["H200"], "cpus": 32, "versions": "{}"},
        {"kind": "pp_probe", "t": 2, "mode": "nccl-picks", "env": {}, "rc": [0, 0], "seconds": 20.0,
         "output": P2P_PROBE.read_text()},
        {"kind": "pp_probe", "t": 3, "mode": "network", "env": {"NCCL_P2P_DISABLE": "1"}, "rc": [3, 0],
         "seconds": 40.0, "output": SOCKET_PROBE.read_text()},
        {"kind": "start_pp", "t": 4, "servers": ["raypp"], "blueprint": PP_BLUEPRINT, "tensor_parallel": 1,
         "pipeline_parallel": 2, "max_context": 4096, "engine_extra": {"enforce_eager": True},
         "gpus": {"raypp": "0", "raypp-node2": "1"}, "fast_path": True},
        {"kind": "ready", "t": 5, "name": "raypp", "seconds": 200.0},
        {"kind": "ray_view", "t": 5, "name": "raypp", "changes": {"compute.pipeline_parallel": [2, 2]},
         "placement_groups": [group], "nodes": [{"node_id": "node-a"}, {"node_id": "node-b"}]},
        {"kind": "chat", "t": 6, "label": "raypp", "models": "", "completion": {"choices": [{"text": "x"}]},
         "llmctl_chat_rc": 0},
        bench("raypp-c1", 32, 0.02),
        bench("raypp-c16", 256, 0.05),
        {"kind": "pp_nccl", "t": 7, "name": "raypp", "files": {"worker-1.out": [
            "vm:1:1 [0] NCCL INFO Channel 00/1 : 0[0] -> 1[1] via P2P/CUMEM/read"]}},
    ]  # fmt: skip


def test_collect_makes_the_pipeline_parallel_row(tmp_path: Path) -> None:
    collect = load("collect")
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in synthetic_run()))
    (tmp_path / "notes.json").write_text("{}")
    collect.main(["--run", str(results), str(tmp_path / "notes.json"), "--out", str(tmp_path / "gpu.json")])
    (run,) = json.loads((tmp_path / "gpu.json").read_text())["runs"]
    row = run["measured"]["pipeline_parallel"]
    assert row["placement"]["spans_nodes"] == 2 and row["placement"]["strategy"] == "PACK"
    assert row["placement"]["bundles_to_node_id"] == {"0": "node-a", "1": "node-b"}
    removed = {"bundles": {"0": {"GPU": 1.0}}, "state": "REMOVED", "bundles_to_node_id": {"0": "node-a"}}
    view = next(r for r in synthetic_run() if r["kind"] == "ray_view")
    view["placement_groups"].append(removed)  # a group of a replica that was replaced, listed after
    assert load("collect_pp").placement(view)["spans_nodes"] == 2
    assert row["layout"]["pipeline_parallel"] == 2 and row["ready_s"] == 200.0 and row["started_at"] == 4
    probes = row["fabric_probe"]
    assert probes["network"]["transport"] == "tcp" and probes["network"]["busbw_gbs"] == 3.83
    assert probes["network"]["largest_bytes"] == 1073741824 and probes["network"]["rc"] == [3, 0]
    assert probes["nccl-picks"]["transport"] == "intra-node"
    assert sorted(row["bench"]) == ["c1", "c16"] and row["failed"] == 0
    assert row["bench"]["c16"]["completed"] == 256 and row["chat"]["llmctl_chat_rc"] == 0
    assert row["nccl_transport"]["summary"]["kind"] == "intra-node"
    assert row["nccl_transport"]["summary"]["channels"] == {"P2P": 1}
    differs = " ".join(row["differs_from_eks"])
    assert "No EFA" in differs and "One host" in differs and "tiny" in differs


def test_the_network_start_is_its_own_row_beside_the_first(tmp_path: Path) -> None:
    """A run with ``start-pp`` then ``start-pp-net``: the second start's figures under
    ``engine_over_network``, its transport Socket (tcp), the first's as before."""
    collect = load("collect")
    records = synthetic_run()
    records += [
        {"kind": "start_pp", "t": 20, "servers": ["rayppn"], "blueprint": PP_BLUEPRINT, "tensor_parallel": 1,
         "pipeline_parallel": 2, "max_context": 4096, "engine_extra": {"enforce_eager": True},
         "gpus": {"rayppn": "0", "raypp-node2": "1"}, "fast_path": True,
         "nccl_env": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}},
        {"kind": "ready", "t": 21, "name": "rayppn", "seconds": 150.0},
        {**next(r for r in records if r["kind"] == "llmctl_bench" and r["label"] == "raypp-c1"), "label": "rayppn-c1"},
        {"kind": "pp_nccl", "t": 22, "name": "rayppn", "files": {"worker-2.out": [
            "vm:2:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0"]}},
    ]  # fmt: skip
    row = collect.collect(records)["pipeline_parallel"]
    assert row["server"] == "raypp" and row["ready_s"] == 200.0 and sorted(row["bench"]) == ["c1", "c16"]
    assert row["nccl_transport"]["summary"]["kind"] == "intra-node"
    network = row["engine_over_network"]
    assert network["server"] == "rayppn" and network["ready_s"] == 150.0 and network["started_at"] == 20
    assert network["nccl_env"]["NCCL_P2P_DISABLE"] == "1" and list(network["bench"]) == ["c1"]
    assert network["nccl_transport"]["summary"]["kind"] == "tcp" and network["failed"] == 0
    assert network["placement"] is None  # no ray_view of its own recorded


def test_a_run_without_start_pp_has_no_row_and_a_run_that_never_got_ready_says_so() -> None:
    collect = load("collect")
    records = synthetic_run()
    assert "pipeline_parallel" not in collect.collect([r for r in records if r["kind"] != "start_pp"])
    cut = [r for r in records if r["kind"] in ("setup", "pp_probe", "start_pp")]
    cut.append({"kind": "not_ready", "t": 9, "name": "raypp", "waited": 420, "log_tail": ""})
    row = collect.collect(cut)["pipeline_parallel"]
    assert row["not_ready"] and row["placement"] is None and row["bench"] == {} and row["ready_s"] is None
    assert row["waits_cut_s"] == [420]
    assert row["fabric_probe"]["network"]["busbw_gbs"] == 3.83


DRIVER = """
import json, sys, ray
from ray.util.placement_group import placement_group, placement_group_table
ray.init(address=sys.argv[1])
group = placement_group([{"GPU": 1}, {"GPU": 1}], strategy="PACK")
ray.get(group.ready(), timeout=90)
table = placement_group_table(group)
print(json.dumps({"table": {k: table[k] for k in ("strategy", "state", "bundles_to_node_id")},
                  "nodes": ray.nodes(), "session": ray._private.worker.global_worker.node.get_session_dir_path()}))
ray.shutdown()
"""


def ours(marker: str) -> list[int]:
    """The processes whose command line names ``marker`` (this test's temp folder): Ray's daemons."""
    listed = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, check=False)
    return [int(line.split()[0]) for line in listed.stdout.splitlines()[1:] if marker in line]


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_the_two_raylets_start_as_start_pp_starts_them_and_a_pack_group_spans_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``start-pp``'s own two ``ray start`` commands on this CPU (fake GPUs: ``--num-gpus=1`` each, in the
    foreground with ``--block`` so that the test owns them): the second raylet joins the head, writes
    into the head's session folder, and a PACK group of two {GPU: 1} bundles lands on two node ids,
    which collect.py's row reads as spanning two nodes."""
    pytest.importorskip("ray")
    device, variables = carried(tmp_path, monkeypatch)
    pp = device.pp
    starts: list[tuple[list[str], dict[str, str]]] = []
    monkeypatch.setattr(
        device.servers, "ray_start", lambda name, argv, env, **_: starts.append((argv, env)) or 0
    )
    device.servers.ray_head(
        "raypp", 1, gpus="0", rendered=variables["head"], extra_env=pp.ingress(variables["head"])
    )
    starts.append((pp.node2_argv(), pp.node2_env(variables["worker"])))
    temp = tempfile.mkdtemp(prefix="pp2r", dir="/tmp")  # short: Ray's socket paths live under it
    processes = []
    try:
        for index, (argv, environ) in enumerate(starts):
            argv = [f"--temp-dir={temp}" if flag.startswith("--temp-dir=") else flag for flag in argv]
            environ = {k: v for k, v in environ.items() if k != "PYTHONPATH"}
            log = (tmp_path / f"ray{index}.log").open("w")
            command = [sys.executable, "-m", "ray.scripts.scripts", *argv[1:], "--block"]
            processes.append(
                subprocess.Popen(
                    command, env=environ, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            )
            if index == 0:  # the head's GCS before the second raylet joins it
                deadline = time.time() + 60
                while time.time() < deadline:
                    with socket.socket() as probe:
                        if probe.connect_ex(("127.0.0.1", 6391)) == 0:
                            break
                    time.sleep(0.5)
        assert "--temp-dir" not in " ".join(starts[1][0])
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(DRIVER), "127.0.0.1:6391"],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:] + (tmp_path / "ray1.log").read_text()[-2000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        raylets = sorted(p.name for p in Path(seen["session"], "logs").glob("raylet*.out"))
    finally:
        for process in processes:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        for process in processes:  # `ray start --block` takes longer than that to end on SIGTERM
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
        for pid in ours(temp):  # anything of ours left behind (in a session of its own), by its id
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for process in processes:  # reaped, so that nothing of this test outlives it
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        shutil.rmtree(temp, ignore_errors=True)
    # both nodes log in the head's session folder (the second raylet was given no --temp-dir)
    assert seen["session"].startswith(temp) and len(raylets) == 2, raylets
    assert seen["table"]["strategy"] == "PACK" and seen["table"]["state"] == "CREATED"
    on = seen["table"]["bundles_to_node_id"]
    assert len(set(on.values())) == 2
    nodes = load("ray_driver").nodes(seen["nodes"])
    assert sorted(n["node_id"] for n in nodes if n["alive"]) == sorted(set(on.values()))
    assert [n["head"] for n in nodes].count(True) == 1 and all(n["gpus"] == 1.0 for n in nodes)
    row = load("collect_pp").placement(
        {
            "placement_groups": [{"bundles": {"0": {"GPU": 1.0}, "1": {"GPU": 1.0}}, **seen["table"]}],
            "nodes": nodes,
        }
    )
    assert row is not None and row["spans_nodes"] == 2


def recorded_row(path: Path) -> dict[str, Any]:
    """collect.py's ``pipeline_parallel`` row of a recorded run (benchmarks/results/gpu-runs/)."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    row: dict[str, Any] = load("collect").collect(records)["pipeline_parallel"]
    return row


def served(row: dict[str, Any]) -> tuple[Any, ...]:
    """(completed at c1 and c16 with the failed count), c1 TTFT p50 and tok/s, c16 TTFT p50 and tok/s."""
    c1, c16 = row["bench"]["c1"], row["bench"]["c16"]
    return (
        (c1["completed"], c16["completed"], row["failed"]),
        c1["ttft_p50_ms"],
        c1["output_tok_s"],
        c16["ttft_p50_ms"],
        c16["output_tok_s"],
    )


PP1_RUN = ROOT / "benchmarks" / "results" / "gpu-runs" / "2026-11-29-h200-pp1.jsonl"


def test_one_h200_pipeline_parallel_2_over_two_ray_nodes_sharing_its_gpu() -> None:
    """2026-11-29, the one-GPU kind: the 405B blueprint's app at pp 2 over two raylets both given GPU 0,
    NCCL 2.30.7 in its multi-rank mode: the placement group on two node ids, chat and both loads with 0
    failed, the stages' send and receive through P2P within the GPU, ready after one wait was cut."""
    row = recorded_row(PP1_RUN)
    assert row["server"] == "raypp1" and row["gpus"] == {"raypp1": "0", "raypp-node2": "0"}
    assert row["layout"]["pipeline_parallel"] == 2 and row["layout"]["tensor_parallel"] == 1
    placement = row["placement"]
    assert placement["strategy"] == "PACK" and placement["state"] == "CREATED"
    assert placement["spans_nodes"] == 2 and [n["head"] for n in placement["nodes"]] == [True, False]
    assert row["ready_s"] == 347.4 and not row["not_ready"] and row["waits_cut_s"] == [300.0]
    assert row["chat"]["llmctl_chat_rc"] == 0 and row["chat"]["completion_error"] is None
    assert served(row) == (
        (32, 256, 0),
        21.23,
        182.8,
        48.03,
        1657.6,
    )
    transport = row["nccl_transport"]
    assert transport["nccl_versions"] == ["2.30.7+cuda13.3"]
    assert transport["summary"]["kind"] == "intra-node" and transport["summary"]["channels"] == {"P2P": 114}
    lines = [line for found in transport["files"].values() for line in found]
    assert any("0[0] -> 1[0] via P2P/CUMEM" in line for line in lines)
    # NCCL keeps P2P between two ranks of one GPU whatever NCCL_P2P_DISABLE says: both modes alike
    probe = row["fabric_probe"]
    assert {mode: (p["busbw_gbs"], p["transport"]) for mode, p in probe.items()} == {
        "nccl-picks": (59.13, "intra-node"),
        "network": (59.17, "intra-node"),
    }
    assert row["differs_from_eks"][0].startswith("One host and ONE GPU")
    assert "PATH_LOC" in row["differs_from_eks"][1]


PP2_RUN = ROOT / "benchmarks" / "results" / "gpu-runs" / "2026-11-29-h200x2-pp.jsonl"


def test_two_h200s_pipeline_parallel_2_over_two_ray_nodes_of_a_gpu_each() -> None:
    """2026-11-29, the two-GPU kind: the 405B blueprint's app at pp 2 over two raylets of one GPU each:
    the placement group on two node ids, chat and both loads with 0 failed, P2P between the GPUs, the
    probe's Socket path judged a fallback against the p5's EFA."""
    row = recorded_row(PP2_RUN)
    assert row["server"] == "raypp" and row["gpus"] == {"raypp": "0", "raypp-node2": "1"}
    placement = row["placement"]
    assert placement["strategy"] == "PACK" and placement["spans_nodes"] == 2
    assert placement["bundles"] == {"0": {"CPU": 1.0, "GPU": 1.0}, "1": {"GPU": 1.0}}
    assert row["ready_s"] == 275.6 and not row["not_ready"] and row["waits_cut_s"] == []
    assert row["chat"]["llmctl_chat_rc"] == 0 and row["chat"]["completion_error"] is None
    assert served(row) == (
        (32, 256, 0),
        19.23,
        155.3,
        51.73,
        1751.6,
    )
    transport = row["nccl_transport"]
    assert transport["nccl_versions"] == ["2.28.9+cuda13.0"] and transport["summary"]["kind"] == "intra-node"
    lines = [line for found in transport["files"].values() for line in found]
    assert any("1[1] -> 0[0] via P2P/CUMEM" in line for line in lines)
    probe = row["fabric_probe"]
    assert (probe["nccl-picks"]["busbw_gbs"], probe["nccl-picks"]["transport"]) == (339.22, "intra-node")
    assert (probe["network"]["busbw_gbs"], probe["network"]["transport"], probe["network"]["rc"]) == (
        3.09,
        "tcp",
        [3, 0],
    )
    assert row["differs_from_eks"][0].startswith("One host, not two nodes")
