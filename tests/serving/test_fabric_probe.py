"""The fabric probe runs for real (two nodes on localhost, gloo: the NCCL path differs only in the
backend), its bandwidths are nccl-tests' (checked against recorded nccl-tests output), and the parser
reads recorded nccl-tests output and the probe's own into one result."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from llmctl.serving.fabric import probe
from llmctl.serving.fabric.report import Measurement, parse

DATA = Path(__file__).resolve().parents[1] / "lifecycle" / "data" / "fabric"
GIB = 1024**3


def _recorded(name: str) -> str:
    return (DATA / name).read_text()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_probe_runs_across_two_nodes_on_gloo(tmp_path: Path) -> None:
    args = [
        *("--nodes", "2", "--gpus-per-node", "1", "--master", "127.0.0.1", "--port", str(_free_port())),
        *("--backend", "gloo", "-b", "1024", "-e", "16384", "-w", "1", "-n", "2", "--timeout", "120"),
        *("--work-dir", str(tmp_path / "work")),
        *("--expect-gbps", "3200"),  # a p5.48xlarge's EFA: gloo on localhost is far below it
    ]
    env = {**os.environ, "JOB_COMPLETION_INDEX": "0"}  # as Kubernetes sets it in an Indexed Job's pod
    launchers = [
        subprocess.Popen(
            [sys.executable, probe.__file__, *args, *([] if node == 0 else ["--node-rank", str(node)])],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for node in (0, 1)
    ]
    outputs = [launcher.communicate(timeout=180) for launcher in launchers]
    # node 0 judged the fabric fallen back and fails its pod (so the Job, so `up`); node 1 reports nothing
    assert [launcher.returncode for launcher in launchers] == [probe.FAR_BELOW, 0], outputs
    node0, node1 = outputs[0][0], outputs[1][0]
    assert node1 == ""  # rank 0 alone reports, as nccl-tests does
    result = parse(node0)
    assert result.source == probe.TOOL and result.ranks == 2 and result.wrong == 0
    assert [row.size for row in result.rows] == [1024, 2048, 4096, 8192, 16384]
    # the table says what the summary says (the parser reads either)
    table = parse("\n".join(line for line in node0.splitlines() if not line.startswith(probe.SUMMARY_PREFIX)))
    assert [row.size for row in table.rows] == [row.size for row in result.rows]
    for summary_row, table_row in zip(result.rows, table.rows, strict=True):
        assert summary_row.in_place is not None and table_row.in_place is not None
        assert table_row.out_of_place is None  # all_reduce in torch is in place: those columns stay blank
        assert table_row.in_place.busbw == pytest.approx(summary_row.in_place.busbw, abs=0.006)
        # 2 ranks: busbw = algbw * 2 (2 - 1) / 2
        assert summary_row.in_place.busbw == pytest.approx(summary_row.in_place.algbw)
    assert "# Avg bus bandwidth" in node0 and result.transport["kind"] == "unknown"  # gloo: no NCCL lines
    summary = json.loads(node0.splitlines()[-1].removeprefix(probe.SUMMARY_PREFIX))
    assert (summary["verdict"], summary["expected_gbps"]) == ("fallback", 3200)


@pytest.mark.slow
def test_a_worker_without_its_gpu_fails_the_pod_with_the_reason(tmp_path: Path) -> None:
    """A pod that sees fewer GPUs than it starts workers for (here none: CPU torch) exits with the
    first worker's code and says why, instead of a CUDA traceback or a wait for the lost rank."""
    done = subprocess.run(
        [
            *(
                sys.executable,
                probe.__file__,
                "--nodes",
                "1",
                "--gpus-per-node",
                "2",
                "--master",
                "127.0.0.1",
            ),
            *("--backend", "nccl", "--work-dir", str(tmp_path), "--timeout", "30"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "has no GPU (this pod sees 0)" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_node_zero_that_never_resolves_fails_the_pod_with_the_reason(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, probe.__file__, "--nodes", "2", "--gpus-per-node", "1"),
            *(
                "--master",
                "fabric-preflight-0.nowhere.invalid",
                "--timeout",
                "1",
                "--work-dir",
                str(tmp_path),
            ),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "did not resolve within 1 s" in done.stderr


# ranks of the recorded runs: 2 nodes x 8 GPUs (awsome-distributed-training's sbatch and MPIJob run 8
# tasks per node), and 2 ranks for the g4dn runs (busbw = algbw there)
RECORDED = {
    "p3dn-efa-2nodes-excerpt.txt": 16,
    "p4de-efa-2nodes.txt": 16,
    "p5-efa-2nodes.txt": 16,
    "g4dn-socket-2ranks.txt": 2,
    "g4dn-efa-2ranks.txt": 2,
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_bandwidths_are_nccl_tests_own(name: str) -> None:
    """Our formula, applied to the size and time nccl-tests printed, gives the algbw and busbw it
    printed (to its two decimals; the times are rounded to 3-5 digits, so 1 % slack)."""
    result = parse(_recorded(name))
    checked = 0
    for row in result.rows:
        for measured in (row.out_of_place, row.in_place):
            assert measured is not None
            if measured.algbw < 1:  # small sizes: two decimals of a tiny number say nothing
                continue
            algbw, busbw = probe.bandwidths(row.size, measured.time_us / 1e6, RECORDED[name])
            assert algbw == pytest.approx(measured.algbw, rel=0.01, abs=0.006)
            assert busbw == pytest.approx(measured.busbw, rel=0.01, abs=0.006)
            checked += 1
    assert checked >= 6


def test_an_older_nccl_tests_error_column_is_not_a_count_of_wrong_elements() -> None:
    """aws-ofi-nccl#33's nccl-tests prints no root column and the largest error (5e-07) where newer
    releases count wrong elements: read as not counted, so no verdict sees wrong elements."""
    old = parse(_recorded("p3dn-efa-2nodes-excerpt.txt"))
    assert [row.size for row in old.rows] == [1048576, 2097152, 4194304] and old.wrong == 0
    assert old.rows[0].in_place == Measurement(643.4, 1.63, 3.06, None)
    counted = parse(_recorded("p5-efa-2nodes.txt")).largest.in_place
    assert counted is not None and counted.wrong == 0


def test_parser_reads_recorded_nccl_tests_output_with_launcher_prefixes() -> None:
    p5 = parse(_recorded("p5-efa-2nodes.txt"))  # srun's "0: " before every line
    assert p5.source == "nccl-tests" and len(p5.rows) == 32
    assert p5.largest.size == 16 * GIB and p5.largest.busbw == 487.26  # the better of out of/in place
    assert p5.largest.out_of_place is not None and p5.largest.out_of_place.busbw == 487.09
    socket_run = parse(_recorded("g4dn-socket-2ranks.txt"))  # mpirun's "[1,0]<stdout>:"
    assert socket_run.avg_busbw == 0.733914 and socket_run.largest.size == GIB
    assert socket_run.largest.busbw == 2.00 and socket_run.rows[0].size == 0


def test_transport_from_recorded_nccl_lines() -> None:
    socket_run = parse(_recorded("g4dn-socket-2ranks.txt")).transport
    assert socket_run["kind"] == "tcp" and socket_run["network"] == "Socket"
    efa_run = parse(_recorded("g4dn-efa-2ranks.txt")).transport
    assert (efa_run["kind"], efa_run["network"], efa_run["provider"]) == ("efa", "AWS Libfabric", "efa")
    # libfabric's own TCP provider is TCP too, whatever NCCL's network is called
    tcp_provider = _recorded("g4dn-efa-2ranks.txt").replace(
        "Selected Provider is efa", "Selected Provider is tcp"
    )
    assert parse(tcp_provider).transport["kind"] == "tcp"
    assert (
        parse(_recorded("p5-efa-2nodes.txt")).transport["kind"] == "unknown"
    )  # the README kept no NCCL line


def test_recorded_nccl_runs_of_the_probe_say_what_carried_the_data() -> None:
    """The probe on two H200s (the device machine): over NVLink NCCL still names its network Socket,
    but no channel used it; with P2P and SHM off, every channel went over NET/Socket (TCP)."""
    nvlink = parse(_recorded("h200-p2p-1node.txt"))
    assert nvlink.source == probe.TOOL and nvlink.ranks == 2 and nvlink.wrong == 0
    assert [row.size for row in nvlink.rows] == probe.sizes(8 * 1024**2, 2 * GIB)
    assert nvlink.transport == {
        "kind": "intra-node",
        "network": "Socket",
        "provider": None,
        "channels": {"P2P": 48},
    }
    assert nvlink.largest.busbw == pytest.approx(338.50, abs=0.01)
    tcp = parse(_recorded("h200-socket-2ranks.txt"))
    assert tcp.transport["kind"] == "tcp" and tcp.transport["channels"] == {"NET/Socket": 8}
    assert tcp.largest.size == GIB and tcp.largest.busbw == pytest.approx(3.83, abs=0.01)
    # the rows printed above the summary are the summary's, to nccl-tests' two decimals
    table = parse(
        "\n".join(
            x for x in _recorded("h200-socket-2ranks.txt").splitlines() if probe.SUMMARY_PREFIX not in x
        )
    )
    assert [round(row.busbw, 2) for row in table.rows] == [round(row.busbw, 2) for row in tcp.rows]


def test_probe_rows_are_in_nccl_tests_columns() -> None:
    line = probe.row_line(2 * GIB, 0.0090745, 16, 0)
    # nccl-tests' preamble (src/util.cu: "%12li  %12li  %8s  %6s  %6s") then the blank out-of-place body
    assert line.startswith("  2147483648     536870912     float     sum      -1" + " " * 32)
    row = parse(line).largest
    assert row.out_of_place is None and row.in_place is not None
    assert (row.in_place.algbw, row.in_place.busbw, row.in_place.wrong) == (236.65, 443.72, 0)


def test_sizes_double_from_min_to_max() -> None:
    assert probe.sizes(8 * 1024**2, GIB)[:3] == [8 * 1024**2, 16 * 1024**2, 32 * 1024**2]
    assert probe.sizes(8 * 1024**2, 2 * GIB)[-1] == 2 * GIB and len(probe.sizes(8 * 1024**2, 2 * GIB)) == 9
    assert probe.sizes(1023, 4096) == [1020, 2040, 4080]  # whole float32 elements


def test_parser_refuses_output_without_rows() -> None:
    header_only = "\n".join(_recorded("g4dn-socket-2ranks.txt").splitlines()[:11])
    with pytest.raises(ValueError, match="no all_reduce row"):
        parse(header_only)


def test_tcp_is_expected_only_where_the_image_cannot_use_efa() -> None:
    """One rule for the pod and for `up` (`verdict_of`): TCP is a fallback whatever the figure unless the
    Job said the image has no aws-ofi-nccl (`--tcp-expected`); that spares TCP only, the figure still
    judges any other transport."""
    p5 = 400.0  # GB/s: a p5.48xlarge's 3200 Gbps
    recorded_tcp = 3.828  # the probe's NCCL Socket run on two H200 (h200-socket-2ranks.txt)
    assert probe.verdict_of(recorded_tcp, p5, "tcp") == "fallback"
    assert probe.verdict_of(recorded_tcp, p5, "tcp", efa_expected=False) == "tcp-expected"
    assert probe.verdict_of(p5, p5, "tcp", efa_expected=False) == "tcp-expected"
    for efa_expected in (True, False):
        assert probe.verdict_of(recorded_tcp, p5, "efa", efa_expected=efa_expected) == "fallback"
        assert probe.verdict_of(100.0, p5, "unknown", efa_expected=efa_expected) == "degraded"
        assert probe.verdict_of(487.26, p5, "efa", efa_expected=efa_expected) == "ok"
    assert probe.parse_args(["--nodes", "2", "--gpus-per-node", "8", "--master", "m"]).tcp_expected is False
    flagged = probe.parse_args(["--nodes", "2", "--gpus-per-node", "8", "--master", "m", "--tcp-expected"])
    assert flagged.tcp_expected is True
