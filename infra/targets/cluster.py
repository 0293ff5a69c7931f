"""What the two Kubernetes targets share: Pulumi stacks run by :class:`~llmctl.infra.lifecycle.
orchestrate.Lifecycle`, the cluster's status and `kubectl port-forward` for `connect`."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from llmctl import interrupts
from llmctl.errors import PrerequisiteError
from llmctl.infra.lifecycle.kube import kubeconfig_path, port_forward
from llmctl.infra.names import ClusterTarget
from llmctl.infra.targets.base import Confirm, Connection, DownRequest, Target, UpRequest

if TYPE_CHECKING:
    from llmctl.infra.lifecycle.drift_notes import DriftReader
    from llmctl.infra.lifecycle.engine import Engine
    from llmctl.infra.lifecycle.orchestrate import Lifecycle
    from llmctl.infra.lifecycle.progress import Progress
    from llmctl.infra.lifecycle.reports import DownResult, UpResult
    from llmctl.state import Endpoint


def open_engine(backend: str | None, progress: Progress) -> Engine:
    """The Pulumi engine on the backend given (or the default one), reporting Ctrl-C on `progress`."""
    from llmctl.infra.lifecycle.backend import resolve_backend  # lazy: off the CLI start-up path
    from llmctl.infra.lifecycle.engine import Engine  # lazy: off the CLI start-up path

    resolved = resolve_backend(backend)
    if resolved.notice:
        progress.note(resolved.notice)

    def interrupted(count: int) -> None:
        progress.note(
            "stopping: Pulumi is finishing the operations in flight and saving its state (Ctrl-C again to stop at once)"
            if count == 1
            else "stopping at once; the next run may need `pulumi cancel`"
        )

    return Engine(resolved, on_interrupt=interrupted)


def plan_offline(request: UpRequest) -> str:
    """The command that shows what `up` would build, with no credentials or pulumi CLI."""
    region = f" --region {request.region}" if request.region else ""
    return f"llmctl plan --offline --blueprint {request.blueprint} --stack {request.stack}{region}"


def local_up(request: UpRequest) -> str:
    """The `up` of a CPU blueprint on this machine (no cloud, pulumi CLI or credentials)."""
    stack = f" --stack {request.stack}" if request.stack != "dev" else ""
    return f"llmctl up --blueprint {request.blueprint} --target local{stack}"


class KubernetesTarget(Target):
    """A workload stack on a Kubernetes cluster (and, for eks, the platform stack under it)."""

    name: ClassVar[ClusterTarget]
    takes_workloads = True
    # Whether llmctl owns the platform (stack, cluster, sweep) or only the workloads on it.
    owns_platform: ClassVar[bool]

    def region(self, given: str | None) -> str:
        """The region the stacks are recorded under."""
        return given or "us-west-2"

    def _lifecycle(
        self, stack: str, backend: str | None, progress: Progress, drift: DriftReader | None = None
    ) -> Lifecycle:
        from llmctl.infra.lifecycle.orchestrate import Lifecycle  # lazy: off the CLI start-up path

        return Lifecycle(open_engine(backend, progress), progress, stack=stack, drift=drift)

    def check_account(self, request: UpRequest, progress: Progress) -> None:
        """What `up` checks against the account after the preflight (nothing here; eks adds pins)."""

    def up(
        self, request: UpRequest, progress: Progress, confirm: Confirm, *, drift: DriftReader | None = None
    ) -> UpResult:
        blueprint = self.check_offline(request)  # a typo in the blueprint or region first, before any tool
        self.preflight(
            "up",
            region=request.region,
            kubeconfig=request.kubeconfig,
            look_offline=plan_offline(request),
            instead=local_up(request) if blueprint.runs_locally else None,
            blueprint=request.blueprint,
            hf_token_file=request.hf_token_file,
        )
        self.check_account(request, progress)
        region = self.region(request.region)
        result = self._lifecycle(request.stack, request.backend, progress, drift).up(
            request.blueprint,
            region=region,
            target=self.name,
            kubeconfig=request.kubeconfig,
            pools=request.pools,
            hf_token_file=request.hf_token_file,
            confirm=lambda plan: confirm("Deploy?", plan.summary()),
            wait=request.wait,
            wait_timeout_s=request.wait_timeout_s,
            workload=request.workload,
            reselect_azs=request.reselect_azs,
            accept_moved_tags=request.accept_moved_tags,
            replace=request.replace,
        )
        # A port-forwarded service answers on localhost only once `llmctl connect` runs.
        return replace(result, via_connect="localhost" in result.endpoint.base_url)

    def down(
        self, request: DownRequest, progress: Progress, confirm: Confirm, *, drift: DriftReader | None = None
    ) -> DownResult:
        self.preflight("down", region=request.region)
        lifecycle = self._lifecycle(request.stack, request.backend, progress, drift)
        return lifecycle.down(
            region=self.region(request.region),
            blueprint=request.blueprint,
            workload=request.workload,
            keep_platform=request.keep_platform or not self.owns_platform,
            force=request.force,
            confirm=lambda items: confirm("Destroy?", items),
        )

    def status_sections(self, stack: str, engine: Any = None, blueprint: str | None = None) -> dict[str, Any]:
        from llmctl.infra.lifecycle.status import cluster_sections  # lazy: off the CLI start-up path

        return cluster_sections(stack, engine, blueprint)

    def status(
        self, stack: str, *, backend: str | None = None, blueprint: str | None = None
    ) -> dict[str, Any]:
        from llmctl.infra.lifecycle.progress import Progress  # lazy: off the CLI start-up path

        self.preflight("status")
        return self.status_data(stack, open_engine(backend, Progress("quiet")), blueprint)

    def connect(self, endpoint: Endpoint, port: int) -> Connection:
        from llmctl.infra.lifecycle.status import port_forwards  # lazy: off the CLI start-up path

        namespace = endpoint.extra.get("namespace", endpoint.blueprint)
        kube = endpoint.extra.get("kubeconfig") or kubeconfig_path(endpoint.stack)
        connection = Connection(lines=[])
        # every forward started is in `connection` at once (no Ctrl-C in between), and a failure or
        # Ctrl-C before the last has started stops those already running
        try:
            for label, service, local, remote, url in port_forwards(endpoint, port):
                with interrupts.deferred():
                    connection.procs.append(port_forward(kube, namespace, service, local, remote))
                connection.lines.append(f"{label:10} {url}")
        except BaseException:
            connection.stop()
            raise
        if not connection.procs:
            raise PrerequisiteError(
                "the endpoint has no service to forward", "re-run `llmctl up` to record it"
            )
        return connection
