"""The RayService of a replica over two nodes (llama31-405b-vllm-gpu): one worker pod per pipeline stage
holding a whole p5.48xlarge with its EFA devices, all in one zone, with the NCCL/EFA environment, and
the Serve LLM config that places tp x pp GPUs over them; single-node blueprints render none of it."""

from __future__ import annotations

from typing import Any

from workload_helpers import blueprint, config_for, find, manifests_for, worker

from llmctl.blueprints.hardware import hardware
from llmctl.infra.workload.builders.efa import ZONE_LABEL
from llmctl.infra.workload.schedulability import check_schedulable
from llmctl.infra.workload.scheduling.capacity import EFA_DEVICE, NVIDIA_GPU
from llmctl.infra.workload.scheduling.rollout import desired_workers
from llmctl.serving.ray_vllm.app import llm_config

BIG = "llama31-405b-vllm-gpu"
SINGLE = "llama2-70b-vllm-gpu"


def _worker_spec(name: str) -> dict[str, Any]:
    spec: dict[str, Any] = worker(manifests_for(name))["template"]["spec"]
    return spec


def _env(spec: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in spec["containers"][0]["env"]}


def test_one_replica_is_two_worker_pods_of_a_whole_node_each() -> None:
    group = worker(manifests_for(BIG))
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 2, 2)
    assert desired_workers(group) == 2
    resources = group["template"]["spec"]["containers"][0]["resources"]
    p5 = hardware().instance("p5.48xlarge")
    for side in ("requests", "limits"):
        assert resources[side][NVIDIA_GPU] == "8"
        assert resources[side][EFA_DEVICE] == str(p5.efa_interfaces) == "32"
    # each pod loads its stage's half of the weights: 811.7 GB / 2 = 378 GiB + 6 GiB runtime + 20 %
    assert resources["requests"]["memory"] == "461Gi"


def test_the_worker_pods_share_one_zone() -> None:
    spec = _worker_spec(BIG)
    terms = spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [term["topologyKey"] for term in terms] == [ZONE_LABEL]
    labels = worker(manifests_for(BIG))["template"]["metadata"]["labels"]
    selector = terms[0]["labelSelector"]["matchLabels"]
    assert selector.items() <= labels.items()  # the pods select each other
    assert labels["app.kubernetes.io/component"] == "ray-worker"


def test_the_nccl_environment_is_set_for_efa_and_leaves_nvlink_multicast_alone() -> None:
    env = _env(_worker_spec(BIG))
    assert env["FI_PROVIDER"] == "efa"
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert env["FI_EFA_USE_HUGE_PAGE"] == "0"
    assert env["NCCL_DEBUG"] == "INFO" and "NET" in env["NCCL_DEBUG_SUBSYS"]
    assert not [name for name in env if name.startswith("NCCL_NVLS")]


def test_a_single_node_blueprint_renders_no_efa_zone_or_nccl_settings() -> None:
    spec = _worker_spec(SINGLE)
    assert "affinity" not in spec
    resources = spec["containers"][0]["resources"]
    assert EFA_DEVICE not in resources["requests"] and EFA_DEVICE not in resources["limits"]
    assert not [name for name in _env(spec) if name.startswith(("FI_", "NCCL_"))]
    assert worker(manifests_for(SINGLE))["replicas"] == blueprint(SINGLE).scaling.replicas


def test_serve_llm_places_tp_x_pp_gpus_packed_node_by_node() -> None:
    from ray.llm._internal.common.placement import PlacementGroupConfig

    config = llm_config(blueprint(BIG))
    assert config["engine_kwargs"]["tensor_parallel_size"] == 8
    assert config["engine_kwargs"]["pipeline_parallel_size"] == 2
    placement = PlacementGroupConfig(**config["placement_group_config"])  # Ray's own validation
    # STRICT_PACK would need 16 GPUs on one node; PACK fills each 8-GPU worker with one stage
    assert placement.strategy == "PACK"
    single = llm_config(blueprint(SINGLE))
    assert "pipeline_parallel_size" not in single["engine_kwargs"]
    assert single["placement_group_config"]["strategy"] == "STRICT_PACK"


def test_the_rayservice_schedules_and_an_efa_request_beyond_the_node_does_not() -> None:
    pools = config_for(BIG).platform.pools
    manifests = manifests_for(BIG)
    assert check_schedulable(manifests, pools, hardware()) == []
    resources = worker(manifests)["template"]["spec"]["containers"][0]["resources"]
    resources["requests"][EFA_DEVICE] = resources["limits"][EFA_DEVICE] = "33"
    problems = check_schedulable(manifests, pools, hardware())
    assert any(f"{EFA_DEVICE} 33 > 32" in p.message for p in problems)


def test_the_serve_application_receives_the_pipeline_degree() -> None:
    import yaml

    serve = yaml.safe_load(find(manifests_for(BIG), "RayService")["spec"]["serveConfigV2"])
    assert serve["applications"][0]["args"]["blueprint"]["compute"]["pipeline_parallel"] == 2


def test_validate_says_its_sizing_line_is_per_pod_of_a_replica() -> None:
    from llmctl.infra.workload.api import validate_blueprint

    report = validate_blueprint(BIG)
    assert report["ok"] and report["serving_what"].startswith("each of a replica's 2 pods")
    assert report["serving"]["requests"]["memory_gib"] == 461.0
    assert validate_blueprint(SINGLE)["serving_what"] == "serving replica"


def test_the_render_runs_the_fabric_preflight_across_a_replica_s_nodes_before_the_rayservice() -> None:
    """Fails on the old code (preflight_hook returned nothing): the 405B render holds the preflight's
    NetworkPolicy, probe ConfigMap, headless Service and Indexed Job, ahead of the RayService, one pod
    per node of a replica with the node's GPUs and EFA interfaces, kept in one zone, judged against the
    p5.48xlarge's network bandwidth, in the serving pods' NCCL environment."""
    from llmctl.infra.workload.builders.preflight import (
        PREFLIGHT_JOB,
        PREFLIGHT_POLICY,
        PREFLIGHT_SERVICE,
        PROBE_SCRIPT,
    )
    from llmctl.infra.workload.component import prerequisite
    from llmctl.serving.fabric import probe

    manifests = manifests_for(BIG)
    keys = [(o["kind"], o["metadata"]["name"]) for o in manifests]
    preflight = [
        ("NetworkPolicy", PREFLIGHT_POLICY),
        ("ConfigMap", PROBE_SCRIPT),
        ("Service", PREFLIGHT_SERVICE),
        ("Job", PREFLIGHT_JOB),
    ]
    rayservice = keys.index(("RayService", BIG))
    assert all(keys.index(key) < rayservice for key in preflight)
    # every one of them is a prerequisite: the RayService waits for the Job to complete
    assert all(prerequisite(find(manifests, kind, name)) for kind, name in preflight)
    job = find(manifests, "Job", PREFLIGHT_JOB)["spec"]
    nodes = blueprint(BIG).nodes_per_replica
    assert job["completions"] == job["parallelism"] == nodes == 2
    pod = job["template"]["spec"]
    p5 = hardware().instance("p5.48xlarge")
    resources = pod["containers"][0]["resources"]
    assert resources["limits"][EFA_DEVICE] == resources["requests"][EFA_DEVICE] == str(p5.efa_interfaces)
    assert resources["limits"][NVIDIA_GPU] == "8"
    # one zone: every pod of the Job in the first one's (EFA does not cross zones), one pod per node
    [zone] = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    [host] = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    labels = job["template"]["metadata"]["labels"]
    assert zone["topologyKey"] == ZONE_LABEL and host["topologyKey"] == "kubernetes.io/hostname"
    assert zone["labelSelector"]["matchLabels"] == host["labelSelector"]["matchLabels"] == labels
    args = probe.parse_args(pod["containers"][0]["command"][2:])
    assert (args.nodes, args.gpus_per_node, args.expect_gbps) == (2, 8, p5.network_gbps) == (2, 8, 3200)
    serving = _env(_worker_spec(BIG))
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    nccl = {k: v for k, v in serving.items() if k.startswith(("FI_", "NCCL_"))}
    assert nccl and nccl.items() <= env.items()
    # its pods are admitted to each other like every other pod's: the policy is among the namespace's
    policies = [i for i, (kind, _) in enumerate(keys) if kind == "NetworkPolicy"]
    assert max(policies) < min(keys.index(("Job", PREFLIGHT_JOB)), rayservice)


def test_a_single_node_blueprint_renders_no_preflight() -> None:
    from llmctl.infra.workload.builders.preflight import COMPONENT

    components = {o["metadata"]["labels"].get("app.kubernetes.io/component") for o in manifests_for(SINGLE)}
    assert COMPONENT not in components


def test_the_preflight_job_schedules_and_an_efa_request_beyond_the_node_does_not() -> None:
    """check_schedulable counts vpc.amazonaws.com/efa for the preflight's pods as for the workers."""
    from llmctl.infra.workload.builders.preflight import PREFLIGHT_JOB

    pools = config_for(BIG).platform.pools
    manifests = manifests_for(BIG)
    assert check_schedulable(manifests, pools, hardware()) == []
    job = find(manifests, "Job", PREFLIGHT_JOB)
    resources = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"][EFA_DEVICE] = resources["limits"][EFA_DEVICE] = "33"
    problems = check_schedulable(manifests, pools, hardware())
    assert [
        p
        for p in problems
        if str(p).startswith(f"Job/{PREFLIGHT_JOB} ") and f"{EFA_DEVICE} 33 > 32" in str(p)
    ]


def test_an_existing_cluster_needs_the_efa_device_plugin_for_a_multi_node_replica() -> None:
    """The parts check (`--target kubeconfig`) names the EFA device plugin, with the pinned chart,
    for the pods that request vpc.amazonaws.com/efa, and counts a cluster that runs it."""
    from llmctl.blueprints.versions import versions
    from llmctl.infra.workload.parts import Controller, Inventory, missing_parts, required_parts

    needs = required_parts(manifests_for("llama31-405b-vllm-gpu"))
    parts = {need.part: need.reason for need in needs}
    assert "efa-device-plugin" in parts and "nvidia-device-plugin" in parts
    assert "efa-device-plugin" not in {n.part for n in required_parts(manifests_for("llama2-70b-vllm-gpu"))}
    (missing,) = [m for m in missing_parts(needs, Inventory()) if m.part == "efa-device-plugin"]
    chart = versions().charts["aws_efa_device_plugin"]
    assert f"{chart.chart} --repo {chart.repository} --version {chart.version}" in missing.install
    plugin = Controller(
        "kube-system",
        "aws-efa-k8s-device-plugin-daemonset",
        ("602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20",),
    )
    assert "efa-device-plugin" not in {m.part for m in missing_parts(needs, Inventory(daemonsets=(plugin,)))}
