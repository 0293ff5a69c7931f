"""Issue 45 (medium): security contexts, service-account tokens and Pod Security Admission.

The namespace may only enforce `restricted` when every pod of the workload meets it (else the API
server refuses the workload's own pods): the rules below are the restricted profile's container and
pod fields (Kubernetes Pod Security Standards), checked on every pod template, KubeRay's autoscaler
sidecar included.
"""

from __future__ import annotations

from typing import Any

from workload_helpers import find, manifests_for

from llmctl.infra.workload.builders.security import AUTOSCALER_TOKEN, SA_DIR
from llmctl.infra.workload.scheduling.pods import pod_templates

Obj = dict[str, Any]


#: the volume types the restricted profile admits (kubernetes/kubernetes 13a1804a
#: staging/src/k8s.io/pod-security-admission/policy/check_restrictedVolumes.go)
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"
}  # fmt: skip


def _restricted_problems(spec: Obj, extra: list[Obj]) -> list[str]:
    """What the `restricted` profile refuses in a pod (the same folder's check_*.go: restrictedVolumes,
    hostNamespaces, hostPorts, privileged, allowPrivilegeEscalation, capabilities_restricted,
    runAsNonRoot, runAsUser, seccompProfile_restricted)."""
    problems = []
    pod = spec.get("securityContext") or {}
    if (pod.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        problems.append("pod seccompProfile")
    for volume in spec.get("volumes", []):
        if not set(volume) - {"name"} <= RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']}: type")
    problems += [f"pod {field}" for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field)]
    for container in [*spec.get("initContainers", []), *spec["containers"], *extra]:
        ctx = container.get("securityContext") or {}
        name = container.get("name", "autoscaler")
        if ctx.get("privileged"):
            problems.append(f"{name}: privileged")
        if any(p.get("hostPort") for p in container.get("ports", [])):
            problems.append(f"{name}: hostPort")
        if set((ctx.get("capabilities") or {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: capabilities.add")
        if ctx.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation")
        if "ALL" not in (ctx.get("capabilities") or {}).get("drop", []):
            problems.append(f"{name}: capabilities.drop ALL")
        if not (ctx.get("runAsNonRoot") or pod.get("runAsNonRoot")):
            problems.append(f"{name}: runAsNonRoot")
        if ctx.get("runAsUser", pod.get("runAsUser")) == 0:
            problems.append(f"{name}: runAsUser 0")
    return problems


def test_every_container_is_hardened_and_tokens_are_mounted_only_for_the_autoscaler(
    catalog_name: str,
) -> None:
    """Fails on the old code: no securityContext anywhere, every pod with an automounted token."""
    objects = manifests_for(catalog_name)
    labels = objects[0]["metadata"]["labels"]
    restricted = labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert (
        labels["pod-security.kubernetes.io/warn"]
        == labels["pod-security.kubernetes.io/audit"]
        == "restricted"
    )
    assert labels["pod-security.kubernetes.io/enforce"] in ("restricted", "baseline")
    seen = 0
    for obj in objects:
        cluster = obj["spec"].get("rayClusterConfig") if obj["kind"] == "RayService" else None
        autoscaling = bool(cluster and cluster.get("enableInTreeAutoscaling"))
        for template in pod_templates(obj):
            seen += 1
            spec = template.spec
            assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            for container in [*spec.get("initContainers", []), *spec["containers"]]:
                ctx = container["securityContext"]
                assert ctx["allowPrivilegeEscalation"] is False and ctx["privileged"] is False
                assert ctx["capabilities"] == {"drop": ["ALL"]}
            head = template.where == "head group"
            # issue 53, finding 2: no pod automounts a token; an autoscaling head's goes to its sidecar alone
            assert spec["automountServiceAccountToken"] is False, (obj["kind"], template.where)
            mounted = [
                m["name"]
                for c in [*spec.get("initContainers", []), *spec["containers"]]
                for m in c.get("volumeMounts", [])
            ]
            assert AUTOSCALER_TOKEN not in mounted
            has_token = AUTOSCALER_TOKEN in [v["name"] for v in spec.get("volumes", [])]
            assert has_token is (autoscaling and head)
            if has_token and cluster:
                assert cluster["autoscalerOptions"]["volumeMounts"] == [
                    {"name": AUTOSCALER_TOKEN, "mountPath": SA_DIR, "readOnly": True}
                ]
            sidecar = (
                [cluster["autoscalerOptions"]["securityContext"]] if autoscaling and head and cluster else []
            )
            problems = _restricted_problems(spec, [{"securityContext": s} for s in sidecar])
            if restricted:
                assert not problems, (template.kind, template.where, problems)
    assert seen


def test_ray_images_run_as_their_ray_user() -> None:
    tiny = manifests_for("tiny-cpu")
    head = find(tiny, "RayService")["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
    assert head["securityContext"] | {"seccompProfile": None} == {
        "seccompProfile": None,
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 100,
        "fsGroup": 100,
    }
    # the init container that fetches the wheel runs as the same user (it writes the shared volume)
    assert all(c["securityContext"]["runAsUser"] == 1000 for c in head.get("initContainers", []))
    assert tiny[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


NON_ROOT = {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532}


def _neuron_pods(objects: list[Obj]) -> dict[str, Obj]:
    return {
        f"{o['kind']} {o['metadata']['name']} {t.where}": t.spec
        for o in objects
        for t in pod_templates(o)
        if o["kind"] != "Job"
    }


def test_neuron_images_run_as_non_root_on_pools_that_give_devices_to_the_pods_user() -> None:
    """Issue 53: the Neuron DLC records no user; on llmctl's Neuron pools (containerd gives a pod's devices
    to its user: infra/platform/node_config.py) every pod of the Neuron blueprints runs as llmctl's
    non-root user, with USER/LOGNAME for an uid the image's passwd lacks, and the namespace is restricted."""
    for name in ("llama2-inf2", "llama2-torchserve-inf2", "llama3-vllm-inf2"):
        objects = manifests_for(name)
        assert objects[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted", name
        pods = _neuron_pods(objects)
        assert any("worker group" in key or key.startswith("Deployment") for key in pods), pods.keys()
        for key, spec in pods.items():
            assert spec["securityContext"] | {"seccompProfile": None, "fsGroup": None} == {
                **NON_ROOT, "seccompProfile": None, "fsGroup": None
            }, key  # fmt: skip
            for container in [*spec.get("initContainers", []), *spec["containers"]]:
                env = {e["name"]: e.get("value") for e in container.get("env", [])}
                if container["image"].startswith("public.ecr.aws/neuron/"):
                    assert (env["USER"], env["LOGNAME"]) == ("llmctl", "llmctl"), (key, container["name"])
                assert container["securityContext"]["runAsUser"] == 65532, (key, container["name"])


def test_neuron_workers_stay_root_where_containerd_keeps_the_hosts_device_owner() -> None:
    """Pools that do not give devices to the pod's user (a platform stack from before llmctl set it, whose
    `node_pools` output has no `device_ownership`; a kubeconfig pool that does not declare it):
    `/dev/neuron*` stays root's, so the pods using Neuron devices run as root and the namespace enforces
    baseline; the Ray head, which opens no device, still runs as non-root. A kubeconfig cluster file
    that declares it makes them non-root."""
    from workload_helpers import TOKEN, config_for

    from llmctl.infra.workload.config import PlatformFacts
    from llmctl.infra.workload.manifests import build_manifests

    config = config_for("llama2-inf2")
    old_rows = [p.model_dump(exclude={"device_ownership"}) for p in config.platform.pools]
    outputs = {"cluster_name": "llmctl-dev", "region": "us-west-2", "node_pools": old_rows}
    older = PlatformFacts.from_outputs(outputs).model_copy(
        update={"cache_bucket": config.platform.cache_bucket}
    )
    objects = build_manifests(config.model_copy(update={"platform": older}), hf_token=TOKEN)
    assert objects[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    cluster = find(objects, "RayService")["spec"]["rayClusterConfig"]
    worker = cluster["workerGroupSpecs"][0]["template"]["spec"]
    assert "runAsUser" not in worker["securityContext"]
    assert "USER" not in {e["name"] for e in worker["containers"][0]["env"]}
    # its AWS CLI init container keeps the non-root user its builder chose
    [fetch] = worker["initContainers"]
    assert fetch["securityContext"] | {"capabilities": None} == {
        "capabilities": None,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        **NON_ROOT,
        "readOnlyRootFilesystem": True,
    }
    head = cluster["headGroupSpec"]["template"]["spec"]
    assert head["securityContext"]["runAsUser"] == 65532

    for declared, enforce, user in ((False, "baseline", None), (True, "restricted", 65532)):
        pools = [
            p.model_copy(update={"device_ownership": declared, "managed_by": "existing"})
            for p in config.platform.pools
        ]
        facts = config.platform.model_copy(
            update={"target": "kubeconfig", "pools": pools, "cache_bucket": None}
        )
        objects = build_manifests(config.model_copy(update={"platform": facts}), hf_token=TOKEN)
        assert objects[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == enforce
        spec = find(objects, "RayService")["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"][
            "spec"
        ]
        assert spec["securityContext"].get("runAsUser") == user


def _gradio_app(api_key: bool) -> str:
    from workload_helpers import TOKEN, blueprint, config_for

    from llmctl.infra.workload.manifests import build_manifests

    bp = blueprint("llama2-inf2")
    bp = bp.model_copy(
        update={"exposure": bp.exposure.model_validate({"mode": "internal-lb", "api_key": api_key})}
    )
    config = config_for("llama2-inf2").model_copy(update={"blueprint": bp})
    objects = build_manifests(config, hf_token=TOKEN, api_key="k" * 40)
    return str(find(objects, "ConfigMap", "llama2-inf2-gradio-app")["data"]["app.py"])


def _auth_of(app: str, key: str) -> Any:
    """The app's login check, run as the pod runs it (its module top, up to the gradio import)."""
    import ast
    import os
    from unittest import mock

    tree = ast.parse(app)
    head = [
        n for n in tree.body if not (isinstance(n, ast.Import) and n.names[0].name in ("gradio", "httpx"))
    ]
    head = head[
        : next(i for i, n in enumerate(head) if isinstance(n, ast.Assign) and "ENDPOINT" in ast.unparse(n))
    ]
    namespace: dict[str, Any] = {}
    with mock.patch.dict(os.environ, {"LLMCTL_API_KEY": key}):
        exec(compile(ast.Module(body=head, type_ignores=[]), "app.py", "exec"), namespace)
    return namespace["allowed"]


def test_gradio_ui_asks_for_the_api_key_itself() -> None:
    """Issue 45: the UI proxied /infer with the key and checked none (anyone reaching it used the key)."""
    app = _gradio_app(api_key=True)
    assert "auth=allowed if KEY else None" in app
    allowed = _auth_of(app, "k" * 40)
    assert allowed("anyone", "k" * 40)
    assert not allowed("anyone", "wrong") and not allowed("anyone", "")
    assert not _auth_of(app, "")("anyone", "")  # no key configured: the check admits nothing (auth is off)


def test_open_webui_signs_sessions_with_a_key_from_a_secret() -> None:
    """Issue 45 (low): without WEBUI_SECRET_KEY Open WebUI makes a signing key per start in its data
    folder; the key now comes from a Secret the program generates once and keeps."""
    from workload_helpers import TOKEN, config_for

    from llmctl.infra.workload.manifests import build_manifests

    objects = build_manifests(config_for("llama3-vllm-inf2"), hf_token=TOKEN, webui_secret="s" * 43)
    assert find(objects, "Secret", "open-webui-secret")["stringData"] == {"WEBUI_SECRET_KEY": "s" * 43}
    webui = find(objects, "Deployment", "llama3-vllm-inf2-open-webui")["spec"]["template"]["spec"][
        "containers"
    ][0]
    [env] = [e for e in webui["env"] if e["name"] == "WEBUI_SECRET_KEY"]
    assert env["valueFrom"]["secretKeyRef"] == {"name": "open-webui-secret", "key": "WEBUI_SECRET_KEY"}


def test_the_mirror_job_and_the_gradio_ui_run_as_their_own_user_on_a_read_only_image() -> None:
    """One pin of python:slim serves both pods: their non-root user is each builder's own choice (set
    on the pod; hardening keeps it), not a property of the image, which has only root. Issue 53, finding
    8: the gradio UI ran as root; both now run as 65532 on a read-only root filesystem, writing only
    their emptyDir work volume (home, venv) and /tmp."""
    from llmctl.blueprints.versions import versions
    from llmctl.infra.workload.builders.cache import MIRROR_USER

    inf2 = manifests_for("llama2-inf2")
    job = find(inf2, "Job", "model-mirror")["spec"]["template"]["spec"]
    ui = find(inf2, "Deployment", "llama2-inf2-gradio")["spec"]["template"]["spec"]
    image = versions().images["python_slim"].image
    assert [c["image"].split("@")[0] for c in (*job["containers"], *ui["containers"])] == [image, image]
    uid, gid = MIRROR_USER
    assert uid >= 10000  # checkov's CKV_K8S_40
    assert job["securityContext"] | {"seccompProfile": None} == {
        "seccompProfile": None,
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "fsGroup": gid,
    }
    for container in [*job.get("initContainers", []), *job["containers"]]:  # the wheelhouse fetch too
        assert container["securityContext"]["runAsUser"] == uid, container["name"]
        assert container["securityContext"]["runAsNonRoot"] is True
    for pod in (job, ui):
        assert pod["securityContext"]["runAsUser"] == uid and pod["securityContext"]["runAsNonRoot"] is True
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            assert container["securityContext"]["runAsUser"] == uid, container["name"]
            assert container["securityContext"]["readOnlyRootFilesystem"] is True, container["name"]
        assert not _restricted_problems(pod, [])
        [main] = pod["containers"]
        emptydirs = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
        writable = {m["mountPath"] for m in main["volumeMounts"] if m["name"] in emptydirs}
        home = next(e["value"] for e in main["env"] if e["name"] == "HOME")
        assert {"/tmp", home} <= writable, (main["name"], writable)
        assert f"-m venv --without-pip --system-site-packages {home}/venv " in main["command"][-1]


def test_a_cpu_ray_workload_with_the_gradio_ui_enforces_restricted() -> None:
    """Fails on the old code (the gradio UI ran as root, so its namespace stayed `baseline`)."""
    from workload_helpers import blueprint, config_for

    from llmctl.infra.workload.manifests import build_manifests

    bp = blueprint("tiny-cpu").model_copy(update={"ui": "gradio"})
    objects = build_manifests(config_for("tiny-cpu").model_copy(update={"blueprint": bp}), hf_token=None)
    assert find(objects, "Deployment", "tiny-cpu-gradio")
    assert objects[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_restricted_rules_catch_what_the_profile_refuses() -> None:
    """The check above is not vacuous: a hostPath volume, a host namespace, a hostPort, an added
    capability and a root user are each found."""
    spec = {
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True},
        "hostNetwork": True,
        "volumes": [{"name": "v", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/"}}],
        "containers": [
            {
                "name": "c",
                "ports": [{"containerPort": 80, "hostPort": 80}],
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]},
                    "runAsUser": 0,
                },
            }
        ],
    }
    assert sorted(_restricted_problems(spec, [])) == [
        "c: capabilities.add",
        "c: hostPort",
        "c: runAsUser 0",
        "pod hostNetwork",
        "volume h: type",
    ]


def test_triton_runs_as_its_images_non_root_user_and_its_namespace_is_restricted() -> None:
    """Fails on the old code (Triton as root, the namespace `baseline`): the NGC image's `triton-server`
    user (uid and gid 1000, versions.yaml) runs the pod, its init container included, on a read-only
    root; every pod of the namespace qualifies, so it enforces `restricted`."""
    objects = manifests_for("llama2-triton-vllm-gpu")
    spec = find(objects, "Deployment", "llama2-triton-vllm-gpu-triton")["spec"]["template"]["spec"]
    assert spec["securityContext"] | {"seccompProfile": None} == {
        "seccompProfile": None,
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "fsGroup": 1000,
    }
    for container in [*spec["initContainers"], *spec["containers"]]:
        assert container["securityContext"]["runAsUser"] == 1000, container["name"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, container["name"]
    assert objects[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
