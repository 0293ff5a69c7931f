"""Every catalog blueprint builds; objects validate against the Kubernetes schema (custom objects:
against the upstream CRDs in tests/conformance/); the seeds' facts (devices, scheduler, pools, ports, env) hold."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate import utils as kv_utils
from workload_helpers import CATALOG, TOKEN, blueprint, config_for, find, manifests_for, worker

from llmctl.blueprints.pools import INSTANCE_TYPE_LABEL, POOL_LABEL
from llmctl.blueprints.versions import versions
from llmctl.infra.workload.builders.common import serving_image
from llmctl.infra.workload.config import Delivery
from llmctl.infra.workload.crd_models import serve_config
from llmctl.infra.workload.schedulability import pod_templates


def _schema_version() -> str:
    """Newest schema kubernetes-validate ships that is <= the pinned EKS version."""
    target = tuple(int(x) for x in versions().eks.kubernetes_version.value.split("."))
    usable = [v for v in kv_utils.all_versions() if tuple(int(x) for x in v.split(".")[:2]) <= target]
    assert usable, "kubernetes-validate ships no schema old enough"
    return usable[-1]


SCHEMA = _schema_version()


def test_schema_version_matches_cluster() -> None:
    assert SCHEMA.startswith(versions().eks.kubernetes_version.value)


def test_every_catalog_blueprint_builds_in_apply_order(catalog_name: str) -> None:
    objects = manifests_for(catalog_name)
    kinds = [o["kind"] for o in objects]
    assert kinds[0] == "Namespace" and kinds[1] == "ServiceAccount"
    serving_at = min(i for i, k in enumerate(kinds) if k in ("RayService", "Deployment"))
    assert all(k not in ("Secret", "Job") for k in kinds[serving_at:])
    names = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(names) == len(set(names))
    assert all(o["metadata"].get("namespace", catalog_name) == catalog_name for o in objects)


def test_core_objects_validate_against_kubernetes_schema(catalog_name: str) -> None:
    validated = []
    for obj in manifests_for(catalog_name):
        if obj["apiVersion"] in ("ray.io/v1", "keda.sh/v1alpha1"):  # CRDs: tests/conformance/test_crds.py
            continue
        kubernetes_validate.validate(obj, SCHEMA, strict=True)
        validated.append(obj)
    assert {"Namespace", "ServiceAccount"} <= {o["kind"] for o in validated}
    # the validator is strict: the same namespace with a misspelt field is refused
    namespace = {**validated[0], "metdata": validated[0]["metadata"]}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(namespace, SCHEMA, strict=True)


# The blueprints whose runtime runs on a RayService (the others render a Deployment), written out
# here so that a blueprint that stopped rendering one, or a test that found none, fails.
RAY_SERVICE_BLUEPRINTS = {
    "llama2-70b-vllm-gpu",
    "llama2-7b-cpu",
    "llama2-inf2",
    "llama3-vllm-inf2",
    "llama31-405b-vllm-gpu",
    "tiny-cpu",
}


def test_rayservice_serve_config_and_pod_templates_validate(catalog_name: str) -> None:
    ray_services = [obj for obj in manifests_for(catalog_name) if obj["kind"] == "RayService"]
    assert len(ray_services) == (catalog_name in RAY_SERVICE_BLUEPRINTS)
    validated = []
    for obj in ray_services:
        app = serve_config(obj["spec"]["serveConfigV2"]).applications[0]
        assert app.args == {"blueprint": blueprint(catalog_name).pod_view()}
        assert (
            app.import_path
            == f"llmctl.serving.{blueprint(catalog_name).runtime.replace('-', '_')}.app:app_builder"
        )
        for template in pod_templates(obj):
            wrapped = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": "t", "namespace": "n"},
                "template": {"metadata": {}, "spec": template.spec},
            }
            kubernetes_validate.validate(wrapped, SCHEMA, strict=True)
            validated.append(template.where)
    # the head and the one worker group of each RayService
    assert len(validated) == 2 * len(ray_services) and validated.count("head group") == len(ray_services)


def test_serve_config_model_rejects_a_typo() -> None:
    obj = find(manifests_for("tiny-cpu"), "RayService")
    config = yaml.safe_load(obj["spec"]["serveConfigV2"])
    config["applications"][0]["route_prefx"] = "/"
    with pytest.raises(ValueError, match="route_prefx"):
        serve_config(yaml.safe_dump(config))


def test_llama2_inf2_worker_takes_12_devices_with_neuron_scheduler() -> None:
    group = worker(manifests_for("llama2-inf2"))
    spec = group["template"]["spec"]
    container = spec["containers"][0]
    assert container["resources"]["requests"]["aws.amazon.com/neuron"] == "12"
    assert container["resources"]["limits"]["aws.amazon.com/neuron"] == "12"
    assert spec["schedulerName"] == "my-scheduler"
    assert spec["nodeSelector"] == {POOL_LABEL: "inferentia-inf2", INSTANCE_TYPE_LABEL: "inf2.48xlarge"}
    assert {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NEURON_RT_NUM_CORES"] == "24"
    # Ray reads a pod-level NEURON_RT_VISIBLE_CORES as a comma list ("0-23" = one core) and would
    # refuse `ray start --resources='{"neuron_cores": 24}'`; Ray sets it per actor instead
    assert "NEURON_RT_VISIBLE_CORES" not in env
    # one variable for the compiled-artifact cache (transformers-neuronx never read NEURON_COMPILE_CACHE_URL)
    assert env["LLMCTL_COMPILE_CACHE_URL"] == "s3://llmctl-dev-us-west-2-cache/neuron-cache/llama2-inf2"
    assert "NEURON_COMPILE_CACHE_URL" not in env
    assert "HF_TOKEN" not in env  # NousResearch mirror is not gated
    assert json.loads(group["rayStartParams"]["resources"].strip('"').replace('\\"', '"')) == {
        "neuron_cores": 24
    }


def test_worker_requests_what_the_model_needs_plus_a_margin() -> None:
    resources = worker(manifests_for("llama2-inf2"))["template"]["spec"]["containers"][0]["resources"]
    # Llama-2-13b bf16: 26.03 GB = 24.24 GiB, two copies while loading on Neuron (48.49) + 8 GiB
    # runtime = 56.49 GiB need, + 20 % margin (11.30) = 67.79 -> 68Gi; not the 735Gi of "the node"
    assert resources["requests"]["memory"] == "68Gi"
    # the limit is what one inf2.48xlarge lets a pod request (718602 MiB = 701.8 GiB), floored
    assert resources["limits"]["memory"] == "701Gi"
    # CPU: the node's 190.714 vCPU less 10 %
    assert resources["requests"]["cpu"] == "171600m"


@pytest.mark.parametrize("name", CATALOG)
def test_no_catalog_blueprint_asks_for_more_than_karpenters_allocatable(name: str) -> None:
    from llmctl.blueprints.allocatable import node_allocatable
    from llmctl.blueprints.hardware import hardware
    from llmctl.infra.workload.builders.placement import replica_sizing
    from llmctl.infra.workload.scheduling.capacity import parse_quantity

    config = config_for(name)
    sizing = replica_sizing(config)
    node = node_allocatable(hardware().instance(config.blueprint.compute.instance_type))
    share_mib = node.pod_memory_mib * sizing.share
    assert sizing.memory_request_gib * 1024 <= share_mib
    assert sizing.memory_limit_gib * 1024 <= max(share_mib, sizing.memory_request_gib * 1024)
    assert sizing.cpu_request * 1000 <= node.cpu_m * sizing.share
    assert sizing.memory_margin_gib is not None and sizing.memory_margin_gib > 0, "request below the need"
    # the rendered serving pod carries exactly these numbers
    manifests = manifests_for(name)
    if any(m["kind"] == "RayService" for m in manifests):
        spec = worker(manifests)["template"]["spec"]
    else:  # Triton / TorchServe: the Deployment whose pods take the accelerators
        [spec] = [
            m["spec"]["template"]["spec"]
            for m in manifests
            if m["kind"] == "Deployment"
            and any(
                k in c["resources"]["requests"]
                for c in m["spec"]["template"]["spec"]["containers"]
                for k in ("aws.amazon.com/neuron", "nvidia.com/gpu")
            )
        ]
    requests = spec["containers"][0]["resources"]["requests"]
    assert parse_quantity(requests["memory"]) == sizing.memory_request_gib * 1024**3
    assert parse_quantity(requests["cpu"]) == pytest.approx(sizing.cpu_request)


def test_validate_refuses_a_request_above_karpenters_allocatable_naming_both_numbers() -> None:
    from llmctl.blueprints.schema import Blueprint
    from llmctl.infra.workload.schedulability import validate_workload

    data = blueprint("llama2-inf2").model_dump(mode="json")
    data["compute"]["memory_gib_per_replica"] = 735  # what the builders asked for before Karpenter's numbers
    [problem] = validate_workload(Blueprint.model_validate(data))
    assert "memory 735 GiB > 701.76 GiB allocatable on inf2.48xlarge" in problem.message
    assert "Karpenter's allocatable less the platform's DaemonSets" in problem.message


def test_llama3_vllm_inf2_takes_one_device_on_default_scheduler() -> None:
    spec = worker(manifests_for("llama3-vllm-inf2"))["template"]["spec"]
    assert spec["containers"][0]["resources"]["requests"]["aws.amazon.com/neuron"] == "1"
    assert "schedulerName" not in spec
    assert spec["nodeSelector"][INSTANCE_TYPE_LABEL] == "inf2.8xlarge"
    # the catalog turns the compile cache on: the vLLM replicas sync NxD Inference's artifacts there,
    # and their start-phase lines go to the container's stdout for the start timeline
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["LLMCTL_COMPILE_CACHE_URL"] == "s3://llmctl-dev-us-west-2-cache/neuron-cache/llama3-vllm-inf2"
    assert env["LLMCTL_PHASE_LOG"] == "/proc/1/fd/1"


def test_ray_head_is_a_cpu_head_on_the_head_pool_with_dashboard_and_serve() -> None:
    head = find(manifests_for("llama2-inf2"), "RayService")["spec"]["rayClusterConfig"]["headGroupSpec"]
    spec = head["template"]["spec"]
    assert spec["nodeSelector"] == {POOL_LABEL: "ray-head"}
    assert head["template"]["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    assert "tolerations" not in spec
    ports = {p["name"]: p["containerPort"] for p in spec["containers"][0]["ports"]}
    assert ports["dashboard"] == 8265 and ports["serve"] == 8000
    assert head["rayStartParams"]["num-cpus"] == "0"
    assert "aws.amazon.com/neuron" not in spec["containers"][0]["resources"]["requests"]


def test_gpu_vllm_requests_tp_gpus_and_scaling_bounds() -> None:
    group = worker(manifests_for("llama2-70b-vllm-gpu"))
    spec = group["template"]["spec"]
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert spec["tolerations"][0]["key"] == "nvidia.com/gpu"
    # the catalog turns the compile cache on for the GPU too: vLLM's caches synced under the same prefix
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert (
        env["LLMCTL_COMPILE_CACHE_URL"] == "s3://llmctl-dev-us-west-2-cache/neuron-cache/llama2-70b-vllm-gpu"
    )
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (4, 2, 4)
    rs = find(manifests_for("llama2-70b-vllm-gpu"), "RayService")
    assert rs["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] is True


def test_hf_token_only_for_gated_models() -> None:
    gated = manifests_for("llama2-7b-cpu")
    secret = find(gated, "Secret", "hf-token")
    assert secret["stringData"] == {"HF_TOKEN": TOKEN}
    env = worker(gated)["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}} in env
    assert not [o for o in manifests_for("tiny-cpu") if o["kind"] == "Secret"]
    assert "HF_TOKEN" not in json.dumps(manifests_for("tiny-cpu"))


def test_cpu_blueprint_is_int8_on_the_default_pool() -> None:
    spec = worker(manifests_for("llama2-7b-cpu"))["template"]["spec"]
    assert spec["nodeSelector"] == {POOL_LABEL: "default", INSTANCE_TYPE_LABEL: "m7i.8xlarge"}
    assert spec["containers"][0]["resources"]["requests"]["cpu"] == "30"
    rs = find(manifests_for("llama2-7b-cpu"), "RayService")
    app = yaml.safe_load(rs["spec"]["serveConfigV2"])["applications"][0]
    assert app["args"]["blueprint"]["model"]["dtype"] == "int8"


def test_triton_ports_repository_and_autoscaler() -> None:
    objects = manifests_for("llama2-triton-vllm-gpu")
    deployment = find(objects, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "http": 8000,
        "grpc": 8001,
        "metrics": 8002,
        "vllm-metrics": 8003,  # vLLM's own gauges, the queue KEDA reads
    }
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert "replicas" not in deployment["spec"]  # KEDA's HPA owns the count
    scaled = find(objects, "ScaledObject")
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (1, 5)
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert not [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]  # the queue, not CPU
    assert "-m llmctl.serving.triton_vllm.start" in " ".join(container["command"])
    # the start module renders the repository: the only init container fetches the delivered wheel
    inits = deployment["spec"]["template"]["spec"]["initContainers"]
    assert "--http-port=8000" in container["args"] and [c["name"] for c in inits] == ["fetch-llmctl"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["LLMCTL_MODEL_URI"].startswith("s3://") and "LLMCTL_BLUEPRINT" in env
    assert not [
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-repository")
    ]


def test_torchserve_tp12_on_inf2_24xlarge_with_ports_and_config() -> None:
    objects = manifests_for("llama2-torchserve-inf2")
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["requests"]["aws.amazon.com/neuron"] == "6"
    assert pod["schedulerName"] == "my-scheduler"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"inference": 8080, "metrics": 8082}
    assert "-m llmctl.serving.torchserve_neuronx.start" in " ".join(container["command"])
    assert any(e["name"] == "LLMCTL_BLUEPRINT" for e in container["env"])
    exposed = find(objects, "Service", "llama2-torchserve-inf2-torchserve")
    assert [p["port"] for p in exposed["spec"]["ports"]] == [8080]
    # the management API is on the pod's loopback: no Service carries 8081
    ports = [p["port"] for o in objects if o["kind"] == "Service" for p in o["spec"]["ports"]]
    assert 8081 not in ports


def test_only_the_inference_port_goes_on_a_load_balancer(catalog_name: str) -> None:
    """Triton's gRPC (8001) and metrics (8002), TorchServe's metrics: ClusterIP only, whatever the exposure."""
    bp = blueprint(catalog_name)
    exposure = bp.exposure.model_validate({"mode": "internal-lb"})
    config = config_for(catalog_name).model_copy(
        update={"blueprint": bp.model_copy(update={"exposure": exposure})}
    )
    from llmctl.infra.workload.manifests import build_manifests, endpoint_info

    objects = build_manifests(config, hf_token=TOKEN)
    endpoint = endpoint_info(config)
    balanced = [o for o in objects if o["kind"] == "Service" and o["spec"]["type"] == "LoadBalancer"]
    balanced += [o["spec"]["serveService"] for o in objects if o["kind"] == "RayService"]
    assert balanced
    assert {p["port"] for svc in balanced for p in svc["spec"]["ports"]} == {endpoint.port}


def test_ui_builders_point_at_the_right_routes() -> None:
    webui = find(manifests_for("llama3-vllm-inf2"), "Deployment", "llama3-vllm-inf2-open-webui")
    env = {e["name"]: e.get("value") for e in webui["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (
        env["OPENAI_API_BASE_URL"]
        == "http://llama3-vllm-inf2-serve-svc.llama3-vllm-inf2.svc.cluster.local:8000/v1"
    )
    gradio = manifests_for("llama2-inf2")
    app = find(gradio, "ConfigMap", "llama2-inf2-gradio-app")["data"]["app.py"]
    assert '"/infer"' in app and '"sentence"' in app
    assert find(gradio, "Service", "llama2-inf2-ui")["spec"]["type"] == "ClusterIP"


def test_exposure_modes() -> None:
    internal = find(manifests_for("llama2-inf2"), "RayService")["spec"]["serveService"]
    assert internal["spec"]["type"] == "LoadBalancer"
    assert (
        internal["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"]
        == "internal"
    )
    assert (
        internal["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"]
        == "ip"
    )
    default = find(manifests_for("tiny-cpu"), "RayService")["spec"]["serveService"]
    assert default["spec"]["type"] == "ClusterIP" and "annotations" not in default["metadata"]
    bp = blueprint("tiny-cpu").model_copy(
        update={
            "exposure": blueprint("tiny-cpu").exposure.model_validate(
                {
                    "mode": "public",
                    "api_key": True,
                    "allowed_cidrs": ["203.0.113.0/24"],
                    "tls_certificate_arn": CERTIFICATE,
                }
            )
        }
    )
    from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
    from llmctl.infra.workload.manifests import build_manifests

    objects = build_manifests(
        WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp)), hf_token=None, api_key="k"
    )
    public = find(objects, "RayService")["spec"]["serveService"]
    assert (
        public["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"]
        == "internet-facing"
    )
    assert public["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    assert find(objects, "Secret", "api-key")["stringData"] == {"LLMCTL_API_KEY": "k"}
    # TLS at the NLB with the blueprint's ACM certificate, on the one (serving) port
    annotations = public["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] == CERTIFICATE
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] == "serve"
    assert [p["name"] for p in public["spec"]["ports"]] == ["serve"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy"].startswith(
        "ELBSecurityPolicy-TLS13"
    )
    assert not [k for k in internal["metadata"]["annotations"] if "ssl" in k]  # no certificate: plain TCP


CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789"


def test_readiness_annotations_are_longer_for_neuron() -> None:
    neuron = find(manifests_for("llama2-inf2"), "RayService")["metadata"]["annotations"]
    cpu = find(manifests_for("tiny-cpu"), "RayService")["metadata"]["annotations"]
    # KubeRay >= 1.3: the Ready condition; status.serviceStatus is deprecated
    assert neuron["pulumi.com/waitFor"] == "condition=Ready"
    assert int(neuron["pulumi.com/timeoutSeconds"]) > int(cpu["pulumi.com/timeoutSeconds"]) >= 1200


def test_serving_image_modes() -> None:
    config = config_for("tiny-cpu")
    assert serving_image(config) == ("rayproject/ray:2.58.0-py312-cpu", False)
    rs = find(manifests_for("tiny-cpu"), "RayService")
    args = rs["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "--no-deps /opt/llmctl/app/llmctl_eks-" in args and "llmctl==" not in args
    assert "$KUBERAY_GEN_RAY_START_CMD" in args and "ray[serve]" not in args
    registry = config.model_copy(
        update={"platform": config.platform.model_copy(update={"ecr_registry": "1.dkr.ecr"})}
    )
    # the registry exists on every platform; its image only once `up` found it (prepare/delivery.py)
    assert serving_image(registry) == ("rayproject/ray:2.58.0-py312-cpu", False)
    found = Delivery(mode="image", image="1.dkr.ecr/llmctl/dev/tiny-cpu@sha256:ab", reason="found")
    assert serving_image(registry.model_copy(update={"delivery": found})) == (found.image, True)
    assert serving_image(config.model_copy(update={"image": "my/img:1"})) == ("my/img:1", True)


# Per blueprint, the pods that run on the serving pool (kind, where in the object): written out here,
# not derived from the builders, so a pod that lost its pool selector is missed and the test fails.
SERVING_POOL_PODS = {
    "llama2-70b-vllm-gpu": [("RayService", "worker group p4de")],
    "llama2-7b-cpu": [("RayService", "worker group cpu")],
    "llama2-inf2": [("RayService", "worker group inf2")],
    "llama2-torchserve-inf2": [("Deployment", "pod")],
    "llama2-triton-vllm-gpu": [("Deployment", "pod")],
    "llama3-vllm-inf2": [("RayService", "worker group inf2")],
    # the fabric preflight's Job (one pod per node of a replica) ahead of the RayService
    "llama31-405b-vllm-gpu": [("Job", "pod"), ("RayService", "worker group p5")],
    "tiny-cpu": [("RayService", "worker group cpu")],
}


@pytest.mark.parametrize("name", CATALOG)
def test_nodeselectors_match_the_platform_nodepools(name: str) -> None:
    """The serving pods select exactly what the platform's NodePool labels and taints."""
    from llmctl.blueprints.hardware import hardware
    from llmctl.blueprints.pools import pool_for_blueprint
    from llmctl.infra.platform import manifests as platform

    spec = pool_for_blueprint(blueprint(name), hardware())
    nodepool = platform.nodepool_manifest(spec)
    template = nodepool["spec"]["template"]
    checked = []
    for obj in manifests_for(name):
        for pod in pod_templates(obj):
            selector = pod.spec.get("nodeSelector", {})
            if selector.get(POOL_LABEL) != spec.name:
                continue
            labels = {
                **template.get("metadata", {}).get("labels", {}),
                POOL_LABEL: nodepool["metadata"]["name"],
            }
            assert all(labels.get(k) == v for k, v in selector.items() if k != INSTANCE_TYPE_LABEL)
            assert selector[INSTANCE_TYPE_LABEL] == blueprint(name).compute.instance_type
            taints = {(t["key"], t["effect"]) for t in template["spec"].get("taints", [])}
            tolerated = {(t["key"], t["effect"]) for t in pod.spec.get("tolerations", [])}
            assert taints <= tolerated
            checked.append((pod.kind, pod.where))
    assert checked == SERVING_POOL_PODS[name]


def test_ray_vllm_on_neuron_installs_the_ray_pinned_for_its_vllm() -> None:
    """Base-image mode on the Neuron vLLM container (no Ray inside): Ray 2.53.0 + pyarrow, and the
    RayCluster's rayVersion says so; the GPU blueprint keeps the ray-llm image's Ray."""
    from llmctl.serving.ray_vllm.image import neuron_ray_version

    cluster = find(manifests_for("llama3-vllm-inf2"), "RayService")["spec"]["rayClusterConfig"]
    assert cluster["rayVersion"] == neuron_ray_version() == "2.53.0"
    for spec in (
        cluster["headGroupSpec"]["template"]["spec"],
        cluster["workerGroupSpecs"][0]["template"]["spec"],
    ):
        args = spec["containers"][0]["args"][0]
        assert "--require-hashes -r /opt/llmctl/app/wheelhouse/requirements.txt" in args
    from llmctl.serving.lockfiles import locks, parse_lock

    locked = parse_lock(locks().locks["ray-vllm-neuron"].path.read_text())
    assert locked["ray"][0] == "2.53.0" and "pyarrow" in locked
    gpu = find(manifests_for("llama2-70b-vllm-gpu"), "RayService")["spec"]["rayClusterConfig"]
    assert gpu["rayVersion"] == versions().python["ray"].value


@pytest.mark.parametrize("name", ["llama2-inf2", "llama2-70b-vllm-gpu"])
def test_the_mirror_job_runs_on_demand_undisrupted_with_a_sized_volume_and_no_retry_when_too_big(
    name: str,
) -> None:
    # issue 25, item 3: the `default` pool offers spot and consolidates after a minute
    from llmctl.infra.workload.builders.cache import MIRROR_NO_ROOM, MIRROR_VOLUME_GIB

    job = find(manifests_for(name), "Job", "model-mirror")
    template = job["spec"]["template"]
    spec = template["spec"]
    assert spec["nodeSelector"] == {
        "karpenter.sh/nodepool": "default",
        "karpenter.sh/capacity-type": "on-demand",
    }
    assert template["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    [work] = [v for v in spec["volumes"] if v["name"] == "work"]
    assert work == {"name": "work", "emptyDir": {"sizeLimit": f"{MIRROR_VOLUME_GIB}Gi"}}
    [container] = spec["containers"]
    assert container["resources"]["requests"]["ephemeral-storage"] == f"{MIRROR_VOLUME_GIB}Gi"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["MIRROR_VOLUME_BYTES"] == str(MIRROR_VOLUME_GIB * 1024**3)
    assert spec["restartPolicy"] == "Never"
    assert job["spec"]["podFailurePolicy"]["rules"] == [
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": "mirror", "operator": "In", "values": [MIRROR_NO_ROOM]},
        }
    ]
