"""The RayService shape the Ray runtimes share (those whose registry endpoint shape is `ray-serve`).

A CPU head (no replicas on it: `num-cpus: 0`) on the head pool, one worker group on the serving
pool with one serving replica per worker pod (or, for a replica over several nodes, one pod per
pipeline stage: `nodes_per_replica` pods per replica, kept in one zone with their EFA devices, `efa.py`), Serve on 8000 and the dashboard on 8265, and a
`serveConfigV2` that imports the app from `llmctl.serving.<runtime>.app:app_builder` with the whole
blueprint as its only argument.

Image modes (see :func:`common.serving_image` and `delivery.py`): a built llmctl image already
carries Ray and the app. With the upstream base image, an init container fetches the delivered
wheel and the pods install the runtime's pinned requirements (and Ray, when the base lacks it) and
that wheel at start (into the user site on a volume: the root filesystem is read-only, `writable.py`):
KubeRay is told not to write the container command (`ray.io/overwrite-container-cmd`, copied
from the RayService to its RayCluster) and the container runs `pip install ...` and then KubeRay's
generated command through `bash -c "$KUBERAY_GEN_RAY_START_CMD"`: the command carries shell quoting
(`--resources="{\"neuron_cores\": 24}"`) that a bare `$KUBERAY_GEN_RAY_START_CMD` would pass on
literally, breaking `ray start`.

Graceful stop (`stopping.py`): both pod templates get `terminationGracePeriodSeconds` sized to one
generation; the head's preStop sleeps while it leaves the endpoints; the workers' preStop drains
the shared app's replicas (runtimes whose registry entry `drains`) or, for Ray Serve LLM, waits out
the drain grace.
`rayClusterDeletionDelaySeconds` keeps a replaced RayCluster (a rolling update) serving its
in-flight streams for the same grace after traffic moves to the new one.

Readiness: Pulumi waits for the RayService's `Ready` condition (KubeRay >= 1.3; `status.serviceStatus`
is deprecated and only mirrors it).
"""

from __future__ import annotations

import json

import yaml

from llmctl.blueprints.runtimes import runtime, runtimes_with
from llmctl.blueprints.serving_limits import drain_grace_s
from llmctl.blueprints.versions import versions
from llmctl.infra.workload import meta
from llmctl.infra.workload.builders import common, efa, fast_path, placement, stopping, writable
from llmctl.infra.workload.builders.cache import cache_env
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.builders.exposure import port, serve_service
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import install_script, locked_names, runtime_lock, with_app
from llmctl.serving.lockfiles import locks, requirement_names
from llmctl.serving.phases import PHASE_LOG_ENV

SERVE_PORT = 8000
DASHBOARD_PORT = 8265
GCS_PORT = 6379
CLIENT_PORT = 10001
METRICS_PORT = 8080
READY = "condition=Ready"
OVERWRITE_CMD = "ray.io/overwrite-container-cmd"
HEAD_CPU = "2"
HEAD_MEMORY = "8Gi"
CONTAINER_STDOUT = "/proc/1/fd/1"
AUTOSCALER_RESOURCES = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}}
#: runtimes whose replicas serve the shared app and so watch the drain marker
DRAINING_RUNTIMES = frozenset(runtimes_with(drains=True))


def serve_service_name(config: WorkloadConfig) -> str:
    """Name of the Service in front of Ray Serve."""
    return f"{config.blueprint.name}-serve-svc"


def head_service_name(config: WorkloadConfig) -> str:
    """Name of the head Service KubeRay makes for a RayService (dashboard 8265)."""
    return f"{config.blueprint.name}-head-svc"


#: the blueprint's upgrade strategy as KubeRay's `spec.upgradeStrategy.type`, always explicit (unset
#: means NewCluster in KubeRay v1.7.0 unless the operator's ENABLE_ZERO_DOWNTIME is false:
#: rayservice_controller.go isZeroDowntimeUpgradeEnabled). surge: a second RayCluster beside the old
#: one; replace: KubeRay leaves the running cluster alone and `up` deletes it (docs/day-two.md)
UPGRADE_TYPES = {"surge": "NewCluster", "replace": "None"}


def upgrade_strategy(config: WorkloadConfig) -> Obj:
    """The RayService's `spec.upgradeStrategy` (not in KubeRay's cluster hash: switching rolls nothing)."""
    return {"type": UPGRADE_TYPES[config.upgrade_strategy]}


def serve_config(config: WorkloadConfig, import_path: str) -> str:
    """serveConfigV2: one application importing the llmctl serving app."""
    bp = config.blueprint
    app: Obj = {
        "name": bp.name,
        "route_prefix": bp.serving.route_prefix,
        "import_path": import_path,
        "args": {"blueprint": bp.pod_view()},
    }
    return yaml.safe_dump({"applications": [app]}, sort_keys=False)


#: the Ray head's own service account: KubeRay binds its autoscaler Role to the head pod's service
#: account (ray-project/kuberay v1.7.0 ray-operator/controllers/ray/common/rbac.go BuildRoleBinding,
#: utils.GetHeadGroupServiceAccountName) and, when the head names one, expects it to exist
#: (raycluster_controller.go reconcileAutoscalerServiceAccount); the workers run as
#: `common.SERVICE_ACCOUNT`, so neither that Role nor the head's bucket role reaches them
HEAD_SERVICE_ACCOUNT = "llmctl-ray-head"


def head_service_account(config: WorkloadConfig) -> list[Obj]:
    """The Ray head's service account (Ray runtimes only; its Pod Identity association targets it)."""
    if runtime(config.blueprint.runtime).endpoint != "ray-serve":
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": meta.metadata(config, HEAD_SERVICE_ACCOUNT, "serving"),
        }
    ]


RayPins = tuple[str, list[str]]


def ray_pins(config: WorkloadConfig) -> RayPins:
    """(Ray version, what base-image mode installs when the base has no Ray): the pinned Ray.

    A runtime whose image needs another Ray passes its own pins to :func:`rayservice`.
    """
    version = versions().python["ray"].value
    return version, [f"ray[serve]=={version}"]


def _start_command(config: WorkloadConfig, image: str, pins: RayPins) -> Obj:
    """Container command without a built image: install the runtime's lock (which must carry Ray when
    the base lacks it) and the delivered app, then start Ray."""

    # Ray from the lock, or the image's own (its constraints name it: the rayproject images, AWS's Ray LLM DLC)
    spec = runtime_lock(config, image)
    has_ray = "ray" in locked_names(config, image) or "ray" in requirement_names(
        locks().constraints_path(spec)
    )
    extra = [] if has_ray or image.startswith(("rayproject/", "docker.io/rayproject/")) else pins[1]
    install = install_script(config, image, extra, user_site=True)  # the root filesystem is read-only
    # as KubeRay's own command does: raise the open-file limit; then run its command in a shell that
    # honours the quoting inside it (only when the install succeeded)
    start = 'exec /bin/bash -c "$KUBERAY_GEN_RAY_START_CMD"'
    ulimit = f"ulimit -n ${{{fast_path.OPEN_FILES_ENV}:-65536}}"  # KubeRay's own form (fast_path.py)
    return {"command": ["/bin/bash", "-lc", "--"], "args": [f"{ulimit}; {install} && {start}"]}


def _container(
    config: WorkloadConfig, name: str, image: str, baked: bool, pins: RayPins, **fields: object
) -> Obj:
    container: Obj = {"name": name, "image": image, **fields}
    if not baked:
        container.update(_start_command(config, image, pins))
    return container


def _ray_resources(custom: dict[str, int]) -> dict[str, str]:
    """rayStartParams entry for custom Ray resources (quoted as KubeRay passes it to a shell)."""
    if not custom:
        return {}
    return {"resources": '"' + json.dumps(custom).replace('"', '\\"') + '"'}


def rayservice(
    config: WorkloadConfig,
    *,
    import_path: str,
    group: str,
    worker_env: list[Obj],
    ray_resources: dict[str, int] | None = None,
    pins: RayPins | None = None,
) -> Obj:
    """A RayService for the blueprint (`pins`: the runtime's Ray, default :func:`ray_pins`)."""
    bp = config.blueprint
    pins = pins or ray_pins(config)
    image, baked = common.serving_image(config)
    shared_env = [
        *common.token_env(config),
        *common.api_key_env(config),
        *cache_env(config),
        # Ray writes replica output to files under /tmp/ray; the start-phase lines also go to the
        # container's stdout (PID 1's), where `kubectl logs` and the start timeline read them
        {"name": PHASE_LOG_ENV, "value": CONTAINER_STDOUT},
        # HAProxy and direct streaming where the blueprint takes them, head and workers alike
        *fast_path.env(bp),
    ]
    drains = bp.runtime in DRAINING_RUNTIMES
    worker_stop = stopping.drain_hook(config) if drains else stopping.wait_hook(config)
    if drains:
        worker_env = [*worker_env, stopping.drain_env()]
    pod_annotations = common.prometheus_annotations(config, METRICS_PORT)
    head_ports = [
        {"name": "gcs-server", "containerPort": GCS_PORT},
        {"name": "dashboard", "containerPort": DASHBOARD_PORT},
        {"name": "client", "containerPort": CLIENT_PORT},
        {"name": "serve", "containerPort": SERVE_PORT},
        {"name": "metrics", "containerPort": METRICS_PORT},
        *fast_path.ports(bp, head=True),
    ]
    head_pool = placement.head_pool(config)
    head_template: Obj = {
        "metadata": {
            "labels": meta.labels(config, "ray-head"),
            "annotations": {**pod_annotations, **placement.head_annotations(head_pool)},
        },
        "spec": {
            "serviceAccountName": HEAD_SERVICE_ACCOUNT,
            **placement.scheduling(head_pool),
            **stopping.termination_grace(config),
            "containers": [
                _container(
                    config,
                    "ray-head",
                    image,
                    baked,
                    pins,
                    ports=head_ports,
                    env=shared_env,
                    resources={
                        "requests": {"cpu": HEAD_CPU, "memory": HEAD_MEMORY},
                        "limits": {"memory": HEAD_MEMORY},
                    },
                    **stopping.sleep_hook(),
                )
            ],
        },
    }
    worker_template: Obj = {
        "metadata": {"labels": meta.labels(config, "ray-worker"), "annotations": pod_annotations},
        "spec": {
            "serviceAccountName": common.SERVICE_ACCOUNT,
            **placement.scheduler_name(config),
            **placement.serving_scheduling(config),
            **efa.same_zone(config),
            **stopping.termination_grace(config),
            "containers": [
                _container(
                    config,
                    "ray-worker",
                    image,
                    baked,
                    pins,
                    env=[*shared_env, *worker_env],
                    **({"ports": worker_ports} if (worker_ports := fast_path.ports(bp, head=False)) else {}),
                    resources=placement.serving_resources(config),
                    volumeMounts=[{"name": "dshm", "mountPath": "/dev/shm"}],
                    **worker_stop,
                )
            ],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        },
    }
    for template, container in ((head_template, "ray-head"), (worker_template, "ray-worker")):
        # the delivered wheel, fetched before start; every place Ray writes on a volume (`writable.py`)
        template["spec"] = writable.read_only_root(
            with_app(config, template["spec"]), container, installs=not baked
        )
    autoscale = bp.scaling.max_replicas > bp.scaling.min_replicas
    span = bp.nodes_per_replica  # worker pods per serving replica: one per pipeline stage (node)
    cluster: Obj = {
        "rayVersion": pins[0],
        # Ray's token auth (Ray >= 2.52) on the GCS, dashboard and Jobs API: KubeRay makes a Secret
        # with a random token and gives it to every Ray container, its autoscaler and itself
        "authOptions": {"mode": "token"},
        "enableInTreeAutoscaling": autoscale,
        "headGroupSpec": {
            "serviceType": "ClusterIP",
            "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "0"},
            "template": head_template,
        },
        "workerGroupSpecs": [
            {
                "groupName": group,
                "replicas": bp.scaling.replicas * span,
                "minReplicas": bp.scaling.min_replicas * span,
                "maxReplicas": bp.scaling.max_replicas * span,
                "rayStartParams": _ray_resources(ray_resources or {}),
                "template": worker_template,
            }
        ],
    }
    if autoscale:
        cluster["autoscalerOptions"] = {"idleTimeoutSeconds": 600, "resources": AUTOSCALER_RESOURCES}
    annotations = {**common.readiness(config, READY), **efa.replica_annotations(config)}
    if not baked:
        annotations[OVERWRITE_CMD] = "true"
    ports = [port("serve", SERVE_PORT)]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": meta.metadata(config, bp.name, "serving", annotations),
        "spec": {
            "serveConfigV2": serve_config(config, import_path),
            "serveService": serve_service(config, serve_service_name(config), ports),
            "rayClusterDeletionDelaySeconds": drain_grace_s(bp),
            "upgradeStrategy": upgrade_strategy(config),
            "rayClusterConfig": cluster,
        },
    }
