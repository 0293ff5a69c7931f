"""The day-two plan's other parts (llmctl.infra.lifecycle.day_two): the caches a change makes cold,
the uploads it needs, the downtime of a replace from the last recorded start, and the assembly."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from workload_helpers import config_for, find, rendered

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.schema import Blueprint
from llmctl.infra.aws.checks import Check
from llmctl.infra.lifecycle.cold_start import record_start
from llmctl.infra.lifecycle.day_two import assess, cache_lines, deployed_objects, pool_limits, upload_lines
from llmctl.infra.lifecycle.timeline import Phase, StartTimeline
from llmctl.infra.workload.manifests import build_manifests


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path / "state"))


def recorded(blueprint: str, compile_s: float, total_s: float) -> None:
    start = StartTimeline(
        pod="p",
        node="n",
        phases=[Phase("node", "launched", 80.0), Phase("compile", "compiled", compile_s)],
        total_seconds=total_s,
    )
    record_start([start], blueprint=blueprint, target="eks", stack="dev")


def changed(name: str, **fields: Any) -> Blueprint:
    data = load_blueprint(name).model_dump(mode="json")
    for path, value in fields.items():
        section, key = path.split("__")
        data[section][key] = value
    return Blueprint.model_validate(data)


def test_a_new_neuron_compile_key_is_a_cold_compile_with_the_last_ones_length() -> None:
    old = rendered("llama2-inf2")
    bp = changed("llama2-inf2", serving__max_new_tokens=512)  # the context-length estimates move
    assert cache_lines(old, old, load_blueprint("llama2-inf2")) == [
        "compile cache: same key: the compiled graphs are reused"
    ]
    [line] = cache_lines(old, old, bp)
    assert line.startswith(
        "compile cache: a new key (context_length_estimate changed): a cold Neuron compile; "
    )
    assert line.endswith("no start of it recorded")
    recorded("llama2-inf2", compile_s=2460.0, total_s=2900.0)
    [line] = cache_lines(old, old, bp)
    assert "the last compile took 41 min (" in line and "status compiled" in line


def test_a_ray_vllm_engine_argument_is_a_new_compile_key_and_a_scaling_bound_is_not() -> None:
    """The key the replicas compute (serving/ray_vllm/app.py): every engine argument is in its digest,
    so a new max_num_seqs compiles again; a replica bound is not an engine argument."""
    old = rendered("llama2-70b-vllm-gpu")
    bp = load_blueprint("llama2-70b-vllm-gpu")
    assert cache_lines(old, old, bp) == ["compile cache: same key: the compiled graphs are reused"]
    more = changed("llama2-70b-vllm-gpu", serving__max_concurrent_requests=128)
    [line] = cache_lines(old, old, more)
    assert line.startswith("compile cache: a new key (meta-llama-llama-2-70b-chat-hf@main-tp4-bf16-b256-")
    assert "-b128-" in line and line.endswith("no start of it recorded")
    wider = changed("llama2-70b-vllm-gpu", scaling__max_replicas=bp.scaling.max_replicas + 1)
    assert cache_lines(old, old, wider) == ["compile cache: same key: the compiled graphs are reused"]


def test_a_new_model_revision_misses_the_mirror_and_the_engine_caches() -> None:
    old = rendered("llama2-triton-vllm-gpu")
    bp = changed("llama2-triton-vllm-gpu", model__revision="0123456789abcdef0123456789abcdef01234567")
    new = build_manifests(
        config_for("llama2-triton-vllm-gpu").model_copy(update={"blueprint": bp}), hf_token=None
    )
    lines = cache_lines(old, new, bp)
    assert lines[0].startswith("compile cache: model revision main -> 0123456789abcdef")
    assert (
        lines[1].startswith("model mirror: s3://")
        and "/models/meta-llama/Llama-2-7b-chat-hf/0123456789" in lines[1]
    )
    assert lines[1].endswith("the mirror Job copies the weights again")


def test_uploads_are_the_new_content_addressed_keys_only() -> None:
    old, new = rendered("llama2-inf2"), rendered("llama2-inf2", digest="c" * 64)
    [line] = upload_lines(old, new)
    assert line.startswith(f"the llmctl wheel s3://llmctl-dev-us-west-2-cache/llmctl/wheels/{'c' * 64}/")
    assert upload_lines(old, copy.deepcopy(old)) == []


def test_deployed_objects_are_the_kubernetes_inputs_of_the_state() -> None:
    rayservice = find(rendered("tiny-cpu"), "RayService")
    state = [
        {"type": "pulumi:pulumi:Stack", "urn": "s", "custom": False},
        {"type": "kubernetes:ray.io/v1:RayService", "custom": True, "inputs": rayservice},
        {"type": "aws:s3/bucket:Bucket", "custom": True, "inputs": {"bucketPrefix": "x"}},
        {"type": "kubernetes:karpenter.sh/v1:NodePool", "custom": True, "inputs": {
            "kind": "NodePool", "metadata": {"name": "inferentia-inf2"},
            "spec": {"limits": {"cpu": "1152", "aws.amazon.com/neuron": "72", "memory": "4000Gi"}},
        }},
    ]  # fmt: skip
    assert [o["kind"] for o in deployed_objects(state)] == ["RayService", "NodePool"]
    assert pool_limits(state, "inferentia-inf2") == {
        "cpu": 1152.0,
        "aws.amazon.com/neuron": 72.0,
        "memory": 4000 * 1024**3,
    }
    assert pool_limits(state, "gpu-nvidia") is None


def test_the_assembly_checks_capacity_only_for_a_surge_that_needs_nodes() -> None:
    asked: list[tuple[dict[str, int], str | None]] = []

    def capacity(extra: dict[str, int], pool: str | None) -> list[Check]:
        asked.append((extra, pool))
        return [Check("vCPU quota L-1945791B (upgrade)", False, "192 < 384", "raise it")]

    old, new = rendered("llama2-inf2"), rendered("llama2-inf2", digest="c" * 64)
    bp = load_blueprint("llama2-inf2")
    plan = assess(old, new, bp, strategy="surge", capacity=capacity)
    assert asked == [({"inf2.48xlarge": 1}, "inferentia-inf2")]
    assert [c.name for c in plan.refused] == ["vCPU quota L-1945791B (upgrade)"] and not plan.to_dict()[
        "fits"
    ]
    refusal = plan.refusal()
    assert refusal.exit_code == 3 and "needs 1 more inf2.48xlarge" in refusal.message
    assert (refusal.hint or "").startswith("raise it; or replace instead")
    replaced = assess(
        rendered("llama2-inf2", upgrade="replace"),
        rendered("llama2-inf2", upgrade="replace", digest="c" * 64),
        bp,
        strategy="replace",
        capacity=capacity,
    )
    assert len(asked) == 1 and replaced.replaces_cluster and replaced.capacity == []
    assert replaced.to_dict()["downtime"].startswith("unknown (no start recorded)")
    recorded("llama2-inf2", compile_s=60.0, total_s=1260.0)
    again = assess(old, new, bp, strategy="replace")
    assert again.downtime is not None and again.downtime.startswith(
        "about 21 min (the last recorded start of llama2-inf2, "
    )
    assert "  downtime: about 21 min" in "\n".join(again.lines())
    assert assess(old, copy.deepcopy(old), bp, strategy="surge").lines() == []


def test_the_405b_moving_to_the_efa_pool_is_a_new_cluster_with_downtime() -> None:
    """A 405B deployed before the gpu-nvidia-efa pool selected gpu-nvidia; today's render selects the new
    pool (pools.pool_for_blueprint): the worker pods' nodeSelector changes, so KubeRay builds a new
    RayCluster (its upgrade.strategy replace), and the preflight Job runs again."""
    from llmctl.infra.lifecycle.day_two import serving_pool

    name = "llama31-405b-vllm-gpu"
    new = rendered(name)
    old = copy.deepcopy(new)
    moved = 0
    for obj in old:
        for pod in _pod_specs(obj):
            if pod.get("nodeSelector", {}).get("karpenter.sh/nodepool") == "gpu-nvidia-efa":
                pod["nodeSelector"]["karpenter.sh/nodepool"] = "gpu-nvidia"
                moved += 1
    assert moved == 2  # the RayService's worker group and the fabric preflight's pods
    assert (serving_pool(old), serving_pool(new)) == ("gpu-nvidia", "gpu-nvidia-efa")
    plan = assess(old, new, load_blueprint(name), strategy="replace")
    kinds = [(r.object, r.kind) for r in plan.rollouts]
    assert kinds == [("Job/fabric-preflight", "job-replaced"), (f"RayService/{name}", "replace-cluster")]
    assert plan.has_downtime


def _pod_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "RayService":
        groups = spec["rayClusterConfig"].get("workerGroupSpecs") or []
        return [spec["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]] + [
            g["template"]["spec"] for g in groups
        ]
    template = spec.get("template") or {}
    return [template["spec"]] if "spec" in template else []
