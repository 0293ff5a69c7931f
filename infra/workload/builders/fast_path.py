"""What the fast path (`blueprints/fast_path.py`) adds to a RayService's pods.

Every name below is read by Ray 2.58.0 (its wheel, `ray/serve/_private/constants.py` unless said):

- the switches ``RAY_SERVE_ENABLE_HA_PROXY``, ``RAY_SERVE_THROUGHPUT_OPTIMIZED`` and
  ``RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING`` (``ray/llm/_internal/serve/constants.py``), on the head
  AND the workers: the controller (head) reads the first at start, ``build_openai_app`` and every
  ``LLMServer`` replica (workers) the last;
- ``RAY_SERVE_DEFAULT_HTTP_HOST=0.0.0.0``: the replicas' direct-ingress servers must take
  connections from HAProxy on other pods. With HAProxy on, Ray 2.58 binds all interfaces whatever
  this says (and ``HTTPOptionsSchema.host`` of a Serve config defaults to 0.0.0.0); it is set so
  that the intent does not hang on that default;
- ``RAY_SERVE_HAPROXY_MAXCONN`` (default 20000): HAProxy's global ``maxconn``
  (``haproxy_templates.py``). HAProxy raises its own open-file limit to about 2.5 x maxconn (two
  descriptors per proxied connection and, with ``option splice-*``, maxconn / 4 pipes of two) plus
  a few: the 2026-11-28 probe's HAProxy refused to start, "Cannot raise FD limit to 50036, limit is
  20000", for the default 20000. :func:`maxconn` is chosen so that every stream the whole app
  admits fits one HAProxy, and at least :data:`MIN_MAXCONN`;
- ``RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT`` / ``..._MAX_HTTP_PORT`` (default 30000 / 31000, max
  exclusive: ``node_port_manager.py`` ``range(min_port, max_port)``): the ports the ingress
  replicas (``LLMServer``) and the ingress request routers (``LLMRouter``, one per proxy node,
  ``num_cpus=0``, so on the head too) bind. Narrowed to :data:`DIRECT_INGRESS_PORTS` so the pods
  can declare them; a released port stays out of the pool for 150 s
  (``RAY_SERVE_PORT_QUARANTINE_S``), which the spare ports cover. gRPC direct ingress (40000+) is
  bound only when Serve's gRPC options name servicers, which llmctl's config does not;
- ``RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY=1`` with ``serving.request_router: prefix_aware``
  only: HAProxy then sends the request body to ``LLMRouter``'s ``/internal/route`` (default: an
  empty body, on which a prefix router can only load-balance; ``ingress_request_router.lua.tmpl``);
- HAProxy's own listeners: the Serve port (8000, ``http_options.port``) on every pod that runs a
  proxy (head and workers), its stats page (``RAY_SERVE_HAPROXY_STATS_PORT`` 8404) and its
  Prometheus exporter (``RAY_SERVE_HAPROXY_METRICS_PORT`` 9101).

The open-file limit cannot be set through the Pod API (it has no rlimit field). KubeRay's generated
command raises it with ``ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}`` (ray-project/kuberay
v1.7.0 ray-operator/controllers/ray/common/pod.go, BuildPod), and llmctl's own start command (base
image mode, `ray.py`) does the same, so the containers carry ``RAY_START_ULIMIT_OPEN_FILES`` =
:func:`open_files`. HAProxy raises its soft limit itself; it fails only where the container's hard
limit is below what it asks for.
"""

from __future__ import annotations

from llmctl.blueprints import fast_path
from llmctl.blueprints.schema import Blueprint
from llmctl.blueprints.serving_limits import queue_limit
from llmctl.infra.workload.builders.common import Obj

#: the floor of HAProxy's maxconn (the probe's working value); HAProxy then asks for ~10,300 files
MIN_MAXCONN = 4096
#: KubeRay's own default open-file limit for `ray start`; the fast path never asks for less
KUBERAY_OPEN_FILES = 65536
#: HAProxy's descriptors beyond 2.5 per connection (listeners, pollers, sockets; 36 in the probe)
HAPROXY_FD_MARGIN = 64
HTTP_PORT = 8000
STATS_PORT = 8404
METRICS_PORT = 9101
DIRECT_INGRESS_FIRST = 30000
#: ports per pod for direct ingress: one LLMServer and one LLMRouter replica live, six spare
DIRECT_INGRESS_COUNT = 8
DIRECT_INGRESS_PORTS = tuple(range(DIRECT_INGRESS_FIRST, DIRECT_INGRESS_FIRST + DIRECT_INGRESS_COUNT))
OPEN_FILES_ENV = "RAY_START_ULIMIT_OPEN_FILES"
#: HAProxy hands the ingress request router the request body (serving/serve_llm/routing.py)
FORWARD_BODY_ENV = "RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY"


def admitted_streams(blueprint: Blueprint) -> int:
    """Requests the whole app holds at once: each replica's slots and queue, at the most replicas."""
    per_replica = blueprint.serving.max_concurrent_requests + queue_limit(blueprint)
    return per_replica * blueprint.scaling.max_replicas


def maxconn(blueprint: Blueprint) -> int:
    """HAProxy's connection limit: every admitted stream fits one HAProxy (clients may all arrive
    through one pod), rounded up to 1024, at least :data:`MIN_MAXCONN`. Beyond it HAProxy stops
    accepting and connections wait in the kernel's backlog; the app refuses beyond its queue anyway."""
    needed = -(-admitted_streams(blueprint) // 1024) * 1024
    return max(MIN_MAXCONN, needed)


def haproxy_files(connections: int) -> int:
    """Open files HAProxy asks for at a maxconn (2.5 per connection and a margin)."""
    return 2 * connections + connections // 2 + HAPROXY_FD_MARGIN


def open_files(blueprint: Blueprint) -> int:
    """The container's `ulimit -n`: KubeRay's 65536, or more when HAProxy needs more."""
    return max(KUBERAY_OPEN_FILES, haproxy_files(maxconn(blueprint)))


def env(blueprint: Blueprint) -> list[Obj]:
    """The fast path's environment, for the head and the worker containers alike."""
    if not fast_path.enabled(blueprint):
        return []
    values = {
        "RAY_SERVE_ENABLE_HA_PROXY": "1",
        "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING": "1",
        "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
        "RAY_SERVE_DEFAULT_HTTP_HOST": "0.0.0.0",
        "RAY_SERVE_HAPROXY_MAXCONN": str(maxconn(blueprint)),
        "RAY_SERVE_HAPROXY_STATS_PORT": str(STATS_PORT),
        "RAY_SERVE_HAPROXY_METRICS_PORT": str(METRICS_PORT),
        "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(DIRECT_INGRESS_PORTS[0]),
        "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(DIRECT_INGRESS_PORTS[-1] + 1),  # exclusive
        OPEN_FILES_ENV: str(open_files(blueprint)),
    }
    if blueprint.serving.request_router == "prefix_aware":  # the prefix router reads the prompt
        values[FORWARD_BODY_ENV] = "1"
    return [{"name": name, "value": value} for name, value in values.items()]


def ports(blueprint: Blueprint, *, head: bool) -> list[Obj]:
    """Container ports the fast path listens on beyond the head's usual ones (the head already
    declares the Serve port, where HAProxy takes over from Serve's proxy)."""
    if not fast_path.enabled(blueprint):
        return []
    out: list[Obj] = [] if head else [{"name": "serve", "containerPort": HTTP_PORT}]
    out += [
        {"name": "haproxy-stats", "containerPort": STATS_PORT},
        {"name": "haproxy-metrics", "containerPort": METRICS_PORT},
    ]
    out += [{"name": f"ingress-{port}", "containerPort": port} for port in DIRECT_INGRESS_PORTS]
    return out
