"""The fabric preflight's verdict on recorded nccl-tests output: EFA runs on p4de and p5 pass, a TCP run
stops `up` with the figure, the expectation, the transport and what to check, unless the image cannot
use EFA (no aws-ofi-nccl): then TCP is tcp-expected, printed in one line, and `up` goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from standin_support import StandinEngine

from llmctl.errors import EXIT_CODES, FabricError
from llmctl.infra.lifecycle.fabric import (
    FALLBACK_SHARE,
    INDEX_ANNOTATION,
    JOB_NAME_LABEL,
    OK_SHARE,
    check_preflight,
    judge,
    preflight_verdict,
)
from llmctl.infra.workload.builders.preflight import PREFLIGHT_JOB, FabricSpec, preflight_objects
from llmctl.serving.fabric.report import parse

DATA = Path(__file__).resolve().parent / "data" / "fabric"

# Network bandwidth per node (Gbps) of the recorded runs' instance types, as the multinode blueprint's
# instance data carries them (DescribeInstanceTypes NetworkInfo; EC2 accelerated-computing specifications):
# p4de.24xlarge 400, p5.48xlarge 3200, g4dn.8xlarge 50.
P4DE, P5, G4DN = 400.0, 3200.0, 50.0


def _text(name: str) -> str:
    return (DATA / name).read_text()


def _spec(
    instance_type: str, gbps: float, *, gpus: int = 8, efa: int = 4, efa_expected: bool = True
) -> FabricSpec:
    return FabricSpec(
        name="multinode",
        namespace="multinode",
        labels={"app.kubernetes.io/component": "preflight"},
        nodes=2,
        gpus_per_node=gpus,
        instance_type=instance_type,
        efa_interfaces=efa,
        expected_gbps=gbps,
        image="rayproject/ray-llm",
        node_selector={},
        efa_expected=efa_expected,
    )


@pytest.mark.parametrize(
    ("name", "instance", "gbps", "share"),
    [("p4de-efa-2nodes.txt", "p4de.24xlarge", P4DE, 1.567), ("p5-efa-2nodes.txt", "p5.48xlarge", P5, 1.218)],
)
def test_recorded_efa_runs_pass(name: str, instance: str, gbps: float, share: float) -> None:
    verdict = check_preflight(_text(name), _spec(instance, gbps))
    assert verdict.verdict == "ok" and verdict.share == pytest.approx(share, abs=0.001)
    assert verdict.hint() is None
    # two nodes: NCCL's trees let busbw pass one node's network bandwidth (NVIDIA/nccl#209), never
    # by more than 2x
    assert 1 < verdict.share < 2


def test_recorded_tcp_run_stops_up_with_the_figure_the_expectation_and_the_transport() -> None:
    with pytest.raises(FabricError) as caught:
        check_preflight(_text("g4dn-socket-2ranks.txt"), _spec("g4dn.8xlarge", G4DN, gpus=1, efa=1))
    error = caught.value
    assert error.exit_code == 1 and "fabric preflight" in EXIT_CODES[1]
    assert "2.00 GB/s at 1 GiB" in error.message and "6.25 GB/s (50 Gbps)" in error.message
    assert "transport tcp (Socket): fallback" in error.message
    for check in (
        "EFA device plugin",
        "vpc.amazonaws.com/efa",
        "security group",
        "aws-ofi-nccl",
        "FI_PROVIDER",
    ):
        assert check in (error.hint or "")


def test_the_probe_s_own_tcp_run_stops_up() -> None:
    """The probe's recorded NCCL run over its Socket network (two H200 ranks on the device machine), as
    the logs of a p5.48xlarge replica's preflight: TCP, and 1 % of the 400 GB/s of the nodes' EFA."""
    with pytest.raises(FabricError) as caught:
        check_preflight(_text("h200-socket-2ranks.txt"), _spec("p5.48xlarge", P5, efa=32))
    assert "3.83 GB/s at 1 GiB" in caught.value.message and "2 ranks" in caught.value.message
    assert "transport tcp (Socket): fallback" in caught.value.message


@pytest.mark.parametrize(
    ("name", "instance", "gbps", "efa", "figure"),
    [
        ("h200-socket-2ranks.txt", "p5.48xlarge", P5, 32, "3.83 GB/s at 1 GiB"),
        ("g4dn-socket-2ranks.txt", "g4dn.8xlarge", G4DN, 1, "2.00 GB/s at 1 GiB"),
    ],
)
def test_tcp_on_an_image_without_aws_ofi_nccl_is_expected_and_passes(
    name: str, instance: str, gbps: float, efa: int, figure: str
) -> None:
    """The same recorded TCP runs, from an image that cannot use EFA: reported with what the image lacks
    and how to get EFA, not a FabricError; from one that can, the fallback that stops `up`."""
    without = _spec(instance, gbps, efa=efa, efa_expected=False)
    verdict = check_preflight(_text(name), without)
    assert (verdict.verdict, verdict.transport, verdict.efa_expected) == ("tcp-expected", "tcp", False)
    line = verdict.line()
    assert figure in line and "over TCP (Socket), as expected" in line
    assert "the image rayproject/ray-llm carries no aws-ofi-nccl" in line
    assert "name an image with libfabric and aws-ofi-nccl in image.base" in line
    assert verdict.hint() is None and verdict.as_dict()["efa_expected"] is False  # one line, nothing more
    with pytest.raises(FabricError, match="transport tcp \\(Socket\\): fallback"):
        check_preflight(_text(name), without.model_copy(update={"efa_expected": True}))


def test_an_image_without_efa_still_fails_on_wrong_elements_and_strictly_judges_efa() -> None:
    """tcp-expected spares TCP only: a corrupt all-reduce still stops `up`, and EFA found anyway (an
    image that has the plugin after all) is judged by the figure, a strict degraded one stopping too."""
    without = _spec("g4dn.8xlarge", G4DN, gpus=1, efa=1, efa_expected=False)
    rows = _text("g4dn-socket-2ranks.txt").splitlines()
    last = max(i for i, line in enumerate(rows) if " 1073741824 " in line)
    rows[last] = rows[last].rstrip()[:-1] + "7"  # the in-place #wrong column of the largest size: 7
    with pytest.raises(FabricError, match="wrong elements"):
        check_preflight("\n".join(rows), without)
    assert check_preflight(_text("g4dn-efa-2ranks.txt"), without).verdict == "degraded"
    with pytest.raises(FabricError, match="degraded"):
        check_preflight(_text("g4dn-efa-2ranks.txt"), without.model_copy(update={"strict": True}))


def test_the_transport_line_decides_where_the_figure_cannot() -> None:
    """On a 50 Gbps g4dn, TCP (2.00 GB/s) and EFA without GPUDirect (2.83 GB/s) are both between the
    thresholds: TCP falls back because NCCL said Socket, EFA is degraded (printed, not fatal)."""
    socket_run = judge(
        parse(_text("g4dn-socket-2ranks.txt")), expected_gbps=G4DN, instance_type="g4dn.8xlarge", nodes=2
    )
    assert FALLBACK_SHARE < socket_run.share < OK_SHARE and socket_run.verdict == "fallback"
    spec = _spec("g4dn.8xlarge", G4DN, gpus=1, efa=1)
    efa_run = check_preflight(_text("g4dn-efa-2ranks.txt"), spec)
    assert FALLBACK_SHARE < efa_run.share < OK_SHARE and efa_run.verdict == "degraded"
    assert "all the node's EFA interfaces" in (efa_run.hint() or "")
    with pytest.raises(FabricError, match="degraded"):
        check_preflight(_text("g4dn-efa-2ranks.txt"), spec.model_copy(update={"strict": True}))


def test_far_below_the_instance_fabric_is_a_fallback_whatever_the_transport() -> None:
    """The recorded g4dn EFA figure measured between two p5.48xlarge would be 0.7 % of their fabric."""
    verdict = judge(
        parse(_text("g4dn-efa-2ranks.txt")), expected_gbps=P5, instance_type="p5.48xlarge", nodes=2
    )
    assert verdict.transport == "efa" and verdict.share < FALLBACK_SHARE and verdict.verdict == "fallback"
    assert verdict.as_dict()["expected_gbs"] == 400.0


def test_a_preflight_without_a_result_is_an_error_that_says_where_to_look() -> None:
    header_only = "\n".join(_text("g4dn-socket-2ranks.txt").splitlines()[:11])
    with pytest.raises(FabricError, match="no all-reduce result") as caught:
        check_preflight(header_only, _spec("p5.48xlarge", P5))
    assert "job-completion-index=0" in (caught.value.hint or "")


def _pod(spec: FabricSpec, index: int, name: str, created: str) -> dict[str, Any]:
    """A pod of the preflight Job as the Job controller makes it: the Job's template, with the
    `job-name` label and the completion-index annotation (and label) it adds
    (kubernetes/kubernetes pkg/controller/job/indexed_job_utils.go)."""
    template = next(obj for obj in preflight_objects(spec) if obj["kind"] == "Job")["spec"]["template"]
    index_meta = {INDEX_ANNOTATION: str(index)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": spec.namespace,
            "creationTimestamp": created,
            "labels": {**template["metadata"]["labels"], JOB_NAME_LABEL: PREFLIGHT_JOB, **index_meta},
            "annotations": index_meta,
        },
        "spec": template["spec"],
    }


def _kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text("clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\n")
    return path


def test_up_judges_the_newest_node_zero_pod_s_log(engine: StandinEngine, tmp_path: Path) -> None:
    """Two runs of the Job left pods: the verdict comes from node 0 of the newest run (node 1 prints no
    report), and its TCP stops `up`."""
    spec = _spec("p5.48xlarge", P5, efa=32)
    engine.kube(
        _pod(spec, 0, "fabric-preflight-0-aaaaa", "2026-11-28T20:00:00Z"),
        _pod(spec, 1, "fabric-preflight-1-bbbbb", "2026-11-28T21:00:00Z"),
        _pod(spec, 0, "fabric-preflight-0-ccccc", "2026-11-28T21:00:00Z"),
    )
    engine.kube_log(spec.namespace, "fabric-preflight-0-aaaaa", _text("p5-efa-2nodes.txt"))
    engine.kube_log(spec.namespace, "fabric-preflight-0-ccccc", _text("h200-socket-2ranks.txt"))
    with pytest.raises(FabricError, match=r"3\.83 GB/s at 1 GiB"):
        preflight_verdict(_kubeconfig(tmp_path), spec)
    assert ["logs", "-n", spec.namespace, "fabric-preflight-0-ccccc"] in [
        call[-4:] for call in engine.kubectl_calls()
    ]
    # the newest run's pods gone (the stand-in's deletion overlay): the older run's EFA figure passes
    gone = {"name": "fabric-preflight-0-ccccc", "namespace": spec.namespace, "deleted": True}
    engine.kube({"apiVersion": "v1", "kind": "Pod", "metadata": gone})
    assert preflight_verdict(_kubeconfig(tmp_path), spec).verdict == "ok"


def test_no_node_zero_pod_says_what_to_look_at(engine: StandinEngine, tmp_path: Path) -> None:
    spec = _spec("p5.48xlarge", P5, efa=32)
    engine.kube(_pod(spec, 1, "fabric-preflight-1-bbbbb", "2026-11-28T21:00:00Z"))
    with pytest.raises(FabricError, match="no pod for node 0") as caught:
        preflight_verdict(_kubeconfig(tmp_path), spec)
    assert f"describe job {PREFLIGHT_JOB}" in (caught.value.hint or "")


# ---- the call site: `up` of the 405B blueprint through the stand-in engine and kubectl ---------------
BIG = "llama31-405b-vllm-gpu"
#: an image llmctl records nothing about (so EFA is expected of it), as a built serving image made from it
EFA_BASE = "public.ecr.aws/example/ray-llm-efa:2.58.0-py312-cu130"
BUILT = "123456789012.dkr.ecr.us-west-2.amazonaws.com/llmctl/dev/llama31-405b-vllm-gpu@sha256:" + "ab" * 32


def _efa_blueprint(tmp_path: Path) -> str:
    """The 405B blueprint on an EFA-capable image: its base one llmctl does not record (so the strict
    path), the pods running the serving image built from it."""
    import yaml

    from llmctl.blueprints._data import data_file
    from llmctl.blueprints.catalog import CATALOG_DIR

    data = yaml.safe_load(data_file(CATALOG_DIR, f"{BIG}.yaml").read_text(encoding="utf-8"))
    data["image"].update({"base": EFA_BASE, "serving_image": BUILT})
    path = tmp_path / f"{BIG}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _ray_llm_blueprint(tmp_path: Path) -> str:
    """The 405B blueprint on the pinned rayproject/ray-llm image, which versions.yaml records without
    aws-ofi-nccl (the shipped one runs AWS's Ray LLM DLC, which carries it): the TCP path."""
    import yaml

    from llmctl.blueprints._data import data_file
    from llmctl.blueprints.catalog import CATALOG_DIR
    from llmctl.blueprints.versions import versions

    data = yaml.safe_load(data_file(CATALOG_DIR, f"{BIG}.yaml").read_text(encoding="utf-8"))
    pinned = versions().images["ray_vllm_gpu"]
    data["image"].update({"base": pinned.image, "cuda": pinned.cuda})
    path = tmp_path / f"{BIG}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _big_spec(ref: str = BIG) -> FabricSpec:
    """The preflight `up` renders for the 405B blueprint (its Job's pods are the stand-in's)."""
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.infra.workload.builders.preflight import replica_spec
    from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig

    bp = load_blueprint(ref)
    spec = replica_spec(WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp)))
    assert spec is not None and (spec.nodes, spec.expected_gbps) == (2, P5)
    return spec


def _ran(engine: StandinEngine, log: str, ref: str = BIG) -> FabricSpec:
    """The Job's two pods, node 0's printing the recorded run."""
    spec = _big_spec(ref)
    engine.kube(
        _pod(spec, 0, "fabric-preflight-0-x7k2p", "2026-11-28T21:00:00Z"),
        _pod(spec, 1, "fabric-preflight-1-q9m4t", "2026-11-28T21:00:00Z"),
    )
    engine.kube_log(spec.namespace, "fabric-preflight-0-x7k2p", _text(log))
    return spec


def test_up_stops_with_the_fabric_error_not_pulumi_s_job_failure(
    engine: StandinEngine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On an EFA-capable image the probe judged TCP and failed its Job, so the workload update failed
    there (the stand-in fails the Job's step as Pulumi's Job await does): `up` reads node 0's log and
    stops with the figure, the expectation, the transport and what to check (and what still runs),
    before the model was applied."""
    import io

    from lifecycle_support import lifecycle

    from llmctl.errors import EngineError
    from llmctl.infra.lifecycle.fabric import CHECK_TCP
    from llmctl.infra.lifecycle.progress import Progress

    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    ref = _efa_blueprint(tmp_path)
    spec = _ran(engine, "h200-socket-2ranks.txt", ref)
    assert spec.efa_expected and spec.image == BUILT  # an unknown base: EFA expected of it
    engine.control(fail={f"{spec.namespace}/{PREFLIGHT_JOB}": "Job has reached the specified backoff limit"})
    with pytest.raises(FabricError) as caught:
        lifecycle(Progress("plain", io.StringIO())).up(ref, region="us-west-2", wait=False)
    error = caught.value
    assert error.message.startswith(
        "fabric preflight: all-reduce bus bandwidth 3.83 GB/s at 1 GiB across 2 x p5.48xlarge"
    )
    assert "of the 400 GB/s (3200 Gbps) of one node's EFA; transport tcp" in error.message
    assert error.hint is not None and error.hint.startswith(CHECK_TCP) and "llmctl down" in error.hint
    assert isinstance(error.__cause__, EngineError)  # Pulumi's failure, kept as the cause
    assert error.exit_code == 1  # a failed verdict, not the engine's 5
    kinds = {res["type"].rsplit(":", 1)[-1] for res in engine.resources(f"llmctl-{BIG}", "dev").values()}
    assert "Job" in kinds and "RayService" not in kinds  # the model's objects were never applied


def test_up_of_the_405b_on_the_ray_llm_image_goes_on_over_tcp_with_one_line(
    engine: StandinEngine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The 405B on rayproject/ray-llm (no aws-ofi-nccl): its Job's probe is told TCP is expected and
    passes (the stand-in lets the Job complete); `up` completes, printing the figure, what the image
    lacks and how to get EFA in one line, and carries tcp-expected in `--json`. The shipped 405B runs
    AWS's Ray LLM DLC, which carries aws-ofi-nccl: its probe expects EFA."""
    import io

    from lifecycle_support import lifecycle

    from llmctl.infra.lifecycle.progress import Progress

    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    shipped = _big_spec()
    assert shipped.efa_expected and shipped.image.startswith("public.ecr.aws/deep-learning-containers/ray:")
    ref = _ray_llm_blueprint(tmp_path)
    spec = _ran(engine, "h200-socket-2ranks.txt", ref)
    assert not spec.efa_expected and spec.image.startswith("rayproject/ray-llm:2.58.0-py312-cu130")
    said = io.StringIO()
    result = lifecycle(Progress("plain", said)).up(ref, region="us-west-2", wait=False)
    assert result.fabric is not None
    assert (result.fabric["verdict"], result.fabric["transport"], result.fabric["busbw_gbs"]) == (
        "tcp-expected",
        "tcp",
        3.828,  # the probe's summary, exact (its table prints 3.83)
    )
    lines = [line for line in said.getvalue().splitlines() if "fabric preflight" in line]
    assert len(lines) == 1, lines
    assert "3.83 GB/s at 1 GiB across 2 x p5.48xlarge" in lines[0] and "over TCP (Socket)" in lines[0]
    assert "rayproject/ray-llm:2.58.0-py312-cu130 carries no aws-ofi-nccl" in lines[0]
    assert "libfabric and aws-ofi-nccl in image.base" in lines[0]
    kinds = {res["type"].rsplit(":", 1)[-1] for res in engine.resources(f"llmctl-{BIG}", "dev").values()}
    assert "RayService" in kinds  # the model's objects were applied


def test_up_reports_the_figure_and_carries_it_in_json(
    engine: StandinEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Job passed (the recorded 2 x p5.48xlarge EFA run): `up` prints the verdict's line and its
    result carries the figure `--json` prints."""
    import io

    from lifecycle_support import lifecycle

    from llmctl.infra.lifecycle.progress import Progress

    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    _ran(engine, "p5-efa-2nodes.txt")
    said = io.StringIO()
    result = lifecycle(Progress("plain", said)).up(BIG, region="us-west-2", wait=False)
    assert result.fabric is not None
    # the published run kept nccl-tests' table only, no NCCL transport lines: the figure decides
    assert (result.fabric["verdict"], result.fabric["busbw_gbs"], result.fabric["transport"]) == (
        "ok",
        487.26,
        "unknown",
    )
    assert (result.fabric["nodes"], result.fabric["expected_gbs"]) == (2, 400.0)
    assert (
        "fabric preflight: all-reduce bus bandwidth 487.26 GB/s at 16 GiB across 2 x p5.48xlarge"
        in said.getvalue()
    )


def test_a_failure_after_a_passed_preflight_is_the_update_s_own(
    engine: StandinEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Job passed and the RayService failed: `up` stops with the engine's error, not a FabricError,
    having said the figure; a later `up` whose Job's pods are gone says it did not measure."""
    import io

    from lifecycle_support import lifecycle

    from llmctl.errors import EngineError
    from llmctl.infra.lifecycle.progress import Progress

    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    spec = _ran(engine, "p5-efa-2nodes.txt")
    engine.control(fail={f"{spec.namespace}/{BIG}": "the RayService did not become Ready"})
    said = io.StringIO()
    with pytest.raises(EngineError, match="did not become Ready"):
        lifecycle(Progress("plain", said)).up(BIG, region="us-west-2", wait=False)
    assert "487.26 GB/s at 16 GiB across 2 x p5.48xlarge" in said.getvalue()
    engine.control(fail={})
    for name in ("fabric-preflight-0-x7k2p", "fabric-preflight-1-q9m4t"):  # the Job's TTL deleted them
        gone = {"name": name, "namespace": spec.namespace, "deleted": True}
        engine.kube({"apiVersion": "v1", "kind": "Pod", "metadata": gone})
    said = io.StringIO()
    result = lifecycle(Progress("plain", said)).up(BIG, region="us-west-2", wait=False)
    assert result.fabric is None
    assert (
        "fabric preflight: not measured this time (the fabric preflight has no pod for node 0"
        in said.getvalue()
    )
