"""A model beyond one node (issue 55): the schema's pipeline_parallel, the rules that refuse it where it
cannot work, sizing that recommends the fewest nodes, and costs that count whole replicas of N nodes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from llmctl.blueprints.catalog import catalog_names, load_blueprint
from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.models import lookup_model
from llmctl.blueprints.pricing import blueprint_cost, node_plan
from llmctl.blueprints.schema import Blueprint
from llmctl.blueprints.sizing import GIB, SizeReport, size_model
from llmctl.errors import BlueprintError

BIG = "llama31-405b-vllm-gpu"


def _size_405b() -> SizeReport:
    return size_model(
        lookup_model("llama-3.1-405b"), hardware(), accelerator="nvidia", dtype="bf16", context=32768, batch=8
    )


def test_the_405b_numbers_are_its_config_json_ones() -> None:
    arch = lookup_model("meta-llama/Llama-3.1-405B-Instruct")
    assert (arch.layers, arch.hidden, arch.heads, arch.kv_heads, arch.vocab) == (126, 16384, 128, 8, 128256)
    assert arch.weights_gb("bf16") == pytest.approx(811.7, abs=0.05)
    assert arch.kv_bytes_per_token("bf16") == 504 * 1024  # 2 x 126 layers x 8 KV heads x 128 x 2 bytes


def test_no_single_gpu_node_holds_405b_and_size_recommends_the_fewest_nodes() -> None:
    report = _size_405b()
    single = [o for o in report.options if o.pipeline_parallel == 1]
    assert single and not any(o.fits for o in single)
    rec = report.recommended
    assert rec is not None
    # two nodes of 8 x 80 GB: p4de.24xlarge is the cheaper of the two-node layouts (p5.48xlarge the other)
    assert (rec.instance_type, rec.tp_degree, rec.pipeline_parallel) == ("p4de.24xlarge", 8, 2)
    assert rec.hourly_usd == pytest.approx(2 * 27.447)
    p5 = next(o for o in report.options if o.instance_type == "p5.48xlarge" and o.pipeline_parallel > 1)
    assert p5.pipeline_parallel == 2 and p5.fits
    assert p5.needed_gb == pytest.approx(811.7 + 516096 * 32768 * 8 / 1e9, abs=0.1)  # 947.0
    assert p5.available_gb == pytest.approx(2 * 8 * 80 * GIB * 0.9)  # 1237.0 GB
    data = report.to_dict()
    assert data["recommended"] == {
        "instance_type": "p4de.24xlarge",
        "tp_degree": 8,
        "pipeline_parallel": 2,
        "nodes": 2,
    }


def test_a_model_that_fits_one_node_keeps_its_size_output() -> None:
    arch = lookup_model("llama-2-70b")
    report = size_model(arch, hardware(), accelerator="nvidia", dtype="bf16", context=4096, batch=1)
    data = report.to_dict()
    assert all(o.pipeline_parallel == 1 for o in report.options)
    assert not any("pipeline_parallel" in option for option in data["options"])
    assert set(data["recommended"]) == {"instance_type", "tp_degree"}


def test_every_single_node_blueprint_spans_one_node_and_its_pods_see_no_new_field() -> None:
    for name in catalog_names():
        bp = load_blueprint(name)
        if name == BIG:
            continue
        assert bp.nodes_per_replica == 1
        assert "pipeline_parallel" not in bp.pod_view()["compute"]  # the serving pods' args are unchanged
        assert Blueprint.model_validate(bp.pod_view() | {"upgrade": bp.upgrade.model_dump()}) == bp


def test_the_405b_blueprint_spans_two_nodes_and_its_pods_read_it_back() -> None:
    bp = load_blueprint(BIG)
    assert bp.nodes_per_replica == 2 and bp.compute.tensor_parallel == 8
    assert bp.pod_view()["compute"]["pipeline_parallel"] == 2
    assert Blueprint.model_validate(bp.pod_view() | {"upgrade": bp.upgrade.model_dump()}) == bp


def test_cost_counts_whole_replicas_of_two_nodes() -> None:
    catalog = hardware()
    bp = load_blueprint(BIG)
    plan = node_plan(bp, catalog)
    assert (plan.nodes, plan.nodes_max, plan.nodes_per_replica, plan.replicas_per_node) == (2, 2, 2, 1)
    three = bp.model_copy(
        update={"scaling": bp.scaling.model_copy(update={"replicas": 3, "max_replicas": 4})}
    )
    plan = node_plan(three, catalog)
    assert (plan.nodes, plan.nodes_max) == (6, 8)
    cost = blueprint_cost(bp, catalog)
    assert cost.serving_hourly_usd == pytest.approx(2 * 55.04)
    assert cost.to_dict()["nodes_per_replica"] == 2
    to_zero = bp.model_copy(update={"scaling": bp.scaling.model_copy(update={"min_replicas": 0})})
    assert blueprint_cost(to_zero, catalog).zero_saving_hourly_usd == pytest.approx(2 * 55.04)
    assert "nodes_per_replica" not in blueprint_cost(load_blueprint("llama2-70b-vllm-gpu"), catalog).to_dict()


def test_plan_and_show_say_the_405b_runs_efa_between_its_nodes_and_tcp_on_the_ray_llm_image(
    write_blueprint: Callable[..., Path],
) -> None:
    """The shipped 405B runs on AWS's Ray LLM DLC, recorded with aws-ofi-nccl (aws/deep-learning-containers
    docker/ray_llm/Dockerfile.cuda at 140b5392 installs EFA 1.49.0): `blueprints show` and `plan` say EFA
    between the two nodes. A copy on the pinned ray-llm image, recorded without it (ray-project/ray
    docker/ray-llm/Dockerfile at 0168a92e installs no libfabric), says TCP with how to get EFA; a base
    llmctl does not record is taken to carry EFA, and `image.efa` states it."""
    from llmctl.blueprints.describe import describe
    from llmctl.blueprints.inter_node import inter_node
    from llmctl.blueprints.versions import image_efa, versions
    from llmctl.infra.plan.run import plan_cost

    dlc = versions().images["ray_vllm_gpu_efa"].image
    assert load_blueprint(BIG).image.base == dlc and image_efa(dlc) is True
    shown = describe(BIG)["derived"]["inter_node_transport"]
    assert shown == (
        f"between its 2 nodes NCCL runs over EFA: {dlc} carries aws-ofi-nccl (as versions.yaml records); "
        "the fabric preflight stops `up` on TCP"
    )
    [row] = plan_cost([load_blueprint(BIG)])["workloads"]
    assert row["inter_node_transport"] == shown
    pinned = versions().images["ray_vllm_gpu"].image
    assert image_efa(pinned) is False and image_efa(pinned + "@sha256:" + "0" * 64) is False
    assert image_efa("public.ecr.aws/example/ray-llm-efa:2.58.0") is None  # not recorded
    on_ray_llm = str(write_blueprint(BIG, {"image.base": pinned, "image.cuda": "13.0"}))
    tcp = describe(on_ray_llm)["derived"]["inter_node_transport"]
    assert tcp.startswith("between its 2 nodes NCCL runs over TCP (NET/Socket): " + pinned)
    assert "carries no aws-ofi-nccl" in tcp and "libfabric and aws-ofi-nccl in image.base" in tcp
    [tcp_row] = plan_cost([load_blueprint(on_ray_llm)])["workloads"]
    assert tcp_row["inter_node_transport"] == tcp
    assert "inter_node_transport" not in describe("llama2-70b-vllm-gpu")["derived"]  # one node: no line
    assert inter_node(load_blueprint("llama2-70b-vllm-gpu")) is None
    stated = inter_node(load_blueprint(str(write_blueprint(BIG, {"image.base": pinned, "image.efa": True}))))
    assert stated is not None and stated.efa and "EFA: " + pinned + " carries aws-ofi-nccl" in stated.line()
    unknown = write_blueprint(
        BIG,
        {
            "image.base": "public.ecr.aws/example/ray-llm-efa:2.58.0",
            "image.serving_image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/big@sha256:" + "ab" * 32,
        },
    )
    assumed = inter_node(load_blueprint(str(unknown)))
    assert assumed is not None and assumed.efa and assumed.source == "assumed"
    assert "stops `up` on TCP" in assumed.line() and "image.efa: false" in assumed.line()


def _problems(
    write_blueprint: Callable[..., Path], base: str, changes: dict[str, object]
) -> list[tuple[str, str]]:
    with pytest.raises(BlueprintError) as info:
        load_blueprint(str(write_blueprint(base, changes)))
    return info.value.problems


def test_pipeline_parallel_is_refused_on_neuron_and_cpu(write_blueprint: Callable[..., Path]) -> None:
    for base in ("llama3-vllm-inf2", "tiny-cpu"):
        problems = _problems(write_blueprint, base, {"compute.pipeline_parallel": 2})
        assert any(
            path == "compute.pipeline_parallel" and "NVIDIA GPUs only" in msg for path, msg in problems
        )


def test_pipeline_parallel_is_refused_on_a_runtime_without_it(write_blueprint: Callable[..., Path]) -> None:
    changes = {
        "compute.instance_type": "p5.48xlarge",
        "compute.tensor_parallel": 8,
        "compute.pipeline_parallel": 2,
    }
    problems = _problems(write_blueprint, "llama2-triton-vllm-gpu", changes)
    assert any(
        path == "compute.pipeline_parallel" and "triton-vllm cannot run one replica across nodes" in msg
        for path, msg in problems
    )


def test_pipeline_parallel_needs_efa_and_whole_nodes(write_blueprint: Callable[..., Path]) -> None:
    no_efa = {
        "compute.instance_type": "g6e.xlarge",
        "compute.tensor_parallel": 1,
        "compute.pipeline_parallel": 2,
    }
    problems = _problems(write_blueprint, "llama2-70b-vllm-gpu", no_efa)
    assert any(
        path == "compute.pipeline_parallel" and "g6e.xlarge has no EFA" in msg for path, msg in problems
    )
    problems = _problems(write_blueprint, BIG, {"compute.tensor_parallel": 4})
    assert any(
        path == "compute.tensor_parallel"
        and "takes a whole node" in msg
        and "the 8 GPUs of p5.48xlarge" in msg
        for path, msg in problems
    )


def test_405b_on_one_node_names_the_multi_node_layout(write_blueprint: Callable[..., Path]) -> None:
    problems = _problems(write_blueprint, BIG, {"compute.pipeline_parallel": 1})
    message = next(msg for path, msg in problems if path == "compute")
    assert "does not fit p5.48xlarge at tp 8" in message
    assert "pipeline_parallel 2" in message and "p4de.24xlarge" in message
