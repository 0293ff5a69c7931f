"""`llmctl up`, `down`, `preview`, `status`, `endpoint` and `connect`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from llmctl.cli import output
from llmctl.cli.output import confirm
from llmctl.errors import LlmctlError, PrerequisiteError, UserAbort

STACK = typer.Option("dev", "--stack", help="Environment (stack) name.")
REGION = typer.Option(None, "--region", help="AWS region (default: AWS_REGION or the profile's region).")
BACKEND = typer.Option(
    None, "--backend", help="Pulumi backend URL, e.g. s3://bucket/prefix (default: a local file backend)."
)
YES = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")
JSON = typer.Option(False, "--json", help="Print JSON (stable keys).")
PROGRESS = typer.Option("rich", "--progress", help="rich (a live view) or plain (log lines, for CI).")
HF_TOKEN_FILE = typer.Option(
    None, "--hf-token-file", help="File holding the Hugging Face token for gated models (default: $HF_TOKEN)."
)
TARGET = typer.Option(
    "eks", "--target", help="eks, kubeconfig (an existing cluster) or local (this machine)."
)


def _engine(backend: str | None, progress: Any) -> Any:
    from llmctl.infra.lifecycle.backend import resolve_backend
    from llmctl.infra.lifecycle.engine import Engine

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


def _progress(mode: str, json_output: bool) -> Any:
    from llmctl.infra.lifecycle.progress import Progress

    if mode not in ("rich", "plain"):
        raise LlmctlError(f"unknown --progress {mode!r}", "use rich or plain")
    return Progress("quiet" if json_output else mode)  # type: ignore[arg-type]


def _check_target(target: str) -> None:
    if target not in ("eks", "kubeconfig", "local"):
        raise LlmctlError(f"unknown --target {target!r}", "use eks, kubeconfig or local")


def up(
    blueprint: str = typer.Option(..., "--blueprint", "-b", help="Catalog name or path of the blueprint."),
    stack: str = STACK,
    region: str | None = REGION,
    target: str = TARGET,
    kubeconfig: Path | None = typer.Option(
        None, "--kubeconfig", help="Kubeconfig of an existing cluster (--target kubeconfig)."
    ),
    pools: Path | None = typer.Option(
        None,
        "--pools",
        help="--target kubeconfig: YAML file naming the cluster's node pools (docs/workload.md).",
    ),
    hf_token_file: Path | None = HF_TOKEN_FILE,
    yes: bool = YES,
    backend: str | None = BACKEND,
    progress_mode: str = PROGRESS,
    no_wait: bool = typer.Option(False, "--no-wait", help="Do not wait for the pods to become ready."),
    wait_timeout: int = typer.Option(3600, "--wait-timeout", help="Seconds to wait for readiness."),
    model: str | None = typer.Option(
        None,
        "--model",
        help="--target local: a local model directory or Hugging Face id instead of the blueprint's.",
    ),
    port: int | None = typer.Option(
        None, "--port", min=1024, max=65535, help="--target local: the HTTP port."
    ),
    json_output: bool = JSON,
) -> None:
    """Deploy a blueprint: preflight, plan and cost, confirm, platform, workload, readiness, endpoint."""
    output.start(json_output=json_output)
    _check_target(target)
    if target != "local" and (model or port):
        raise LlmctlError(
            "--model and --port apply to --target local only",
            "on a cluster, set model.id (and serving.port) in a copy of the blueprint and pass its path",
        )
    if pools is not None and target != "kubeconfig":
        raise LlmctlError(
            "--pools applies to --target kubeconfig only",
            "pass --target kubeconfig --kubeconfig FILE to deploy to an existing cluster; on eks llmctl "
            "builds its own pools",
        )
    progress = _progress(progress_mode, json_output)
    if target == "local":
        from llmctl.serving.local import start_local

        with progress.phase("local"):
            endpoint = start_local(
                _load(blueprint),
                stack=stack,
                model=model,
                port=port,
                on_progress=progress.wait,
                timeout_s=wait_timeout,
            )
        _print_up(endpoint, None, progress.timeline, json_output)
        return
    from llmctl.infra.aws.preflight import preflight, preflight_pins, resolve_region
    from llmctl.infra.lifecycle.orchestrate import Lifecycle

    preflight(pulumi=True, aws=target == "eks", kubectl=target == "kubeconfig", region=region)
    for warning in preflight_pins(blueprint, stack=stack, region=region) if target == "eks" else []:
        output.err_console.print(f"warn: {warning}", soft_wrap=True, markup=False)
    resolved = resolve_region(region) if target == "eks" else (region or "us-west-2")
    lifecycle = Lifecycle(_engine(backend, progress), progress, stack=stack)

    def ask(plan: Any) -> bool:
        return confirm("Deploy?", plan.summary(), yes=yes)

    result = lifecycle.up(
        blueprint,
        region=resolved,
        target=target,  # type: ignore[arg-type]
        kubeconfig=kubeconfig,
        pools=pools,
        hf_token_file=hf_token_file,
        confirm=ask,
        wait=not no_wait,
        wait_timeout_s=wait_timeout,
    )
    _print_up(result.endpoint, result, progress.timeline, json_output)


def _load(blueprint: str) -> Any:
    from llmctl.blueprints.catalog import load_blueprint

    return load_blueprint(blueprint)


def _print_up(endpoint: Any, result: Any, timeline: Any, json_output: bool) -> None:
    from dataclasses import asdict

    from llmctl.infra.lifecycle.reports import next_commands

    bp, stack = endpoint.blueprint, endpoint.stack
    commands = next_commands(endpoint)
    if json_output:
        output.emit_json(
            {
                "endpoint": asdict(endpoint),
                "plan": result.plan.to_dict() if result and result.plan else None,
                "timeline": timeline.to_dict(),
                "starts": [start.to_dict() for start in (result.starts if result else [])],
                "next": commands,
            }
        )
        return
    con = output.console
    con.print(f"[bold green]ready:[/] {bp} on {endpoint.target} (stack {stack})")
    con.print(
        f"  endpoint   {endpoint.base_url}"
        + (
            "  (run `llmctl connect` first)"
            if "localhost" in endpoint.base_url and endpoint.target != "local"
            else ""
        )
    )
    if endpoint.dashboard_url:
        con.print(f"  dashboard  {endpoint.dashboard_url}")
    if endpoint.ui_url:
        con.print(f"  UI         {endpoint.ui_url}")
    con.print("next:\n" + "\n".join(f"  {c}" for c in commands))
    con.print("timeline:\n" + timeline.render(), markup=False)
    if result is not None and result.starts:
        from llmctl.infra.lifecycle.timeline import render_all

        con.print("start of each serving pod:\n" + render_all(result.starts), markup=False)


def down(
    blueprint: str | None = typer.Option(
        None, "--blueprint", "-b", help="Destroy only this blueprint's workload."
    ),
    all_: bool = typer.Option(False, "--all", help="Destroy every workload and the platform (the default)."),
    stack: str = STACK,
    region: str | None = REGION,
    target: str = TARGET,
    keep_platform: bool = typer.Option(
        False, "--keep-platform", help="Keep the platform (and skip the sweep)."
    ),
    yes: bool = YES,
    backend: str | None = BACKEND,
    progress_mode: str = PROGRESS,
    json_output: bool = JSON,
) -> None:
    """Tear down: workloads, then the platform, then a sweep of leftovers, then a final check."""
    output.start(json_output=json_output)
    _check_target(target)
    if blueprint and all_:
        raise LlmctlError("--blueprint and --all exclude each other", "pass one of them")
    progress = _progress(progress_mode, json_output)
    if target == "local":
        from llmctl.serving.local import stop_local

        if not confirm(
            "Stop?", [f"local serving of {blueprint or 'every blueprint'} in stack {stack}"], yes=yes
        ):
            raise UserAbort("nothing was changed", None)
        stopped = stop_local(stack=stack, blueprint=blueprint)
        if json_output:
            output.emit_json({"stack": stack, "stopped": stopped})
        else:
            output.console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return
    from llmctl.infra.aws.preflight import preflight, resolve_region
    from llmctl.infra.lifecycle.orchestrate import Lifecycle
    from llmctl.infra.lifecycle.reports import check_leftovers

    # On an existing cluster (kubeconfig) only the workload stacks are llmctl's: no platform, no sweep.
    existing = target == "kubeconfig"
    preflight(pulumi=True, aws=not existing, region=region)
    lifecycle = Lifecycle(_engine(backend, progress), progress, stack=stack)
    result = lifecycle.down(
        region=(region or "us-west-2") if existing else resolve_region(region),
        blueprint=blueprint,
        keep_platform=keep_platform or existing,
        confirm=lambda items: confirm("Destroy?", items, yes=yes),
    )
    if json_output:
        output.emit_json(result.to_dict())
    else:
        output.console.print("destroyed: " + (", ".join(result.destroyed) or "nothing (already gone)"))
        if result.sweep is not None:
            output.console.print(
                f"sweep: {len(result.sweep.found)} found, {len(result.sweep.deleted)} deleted, {len(result.sweep.failed)} failed"
            )
        output.console.print("timeline:\n" + result.timeline.render(), markup=False)
    check_leftovers(result)


def preview(
    blueprint: str = typer.Option(..., "--blueprint", "-b", help="Catalog name or path of the blueprint."),
    stack: str = STACK,
    region: str | None = REGION,
    backend: str | None = BACKEND,
    fmt: str = typer.Option("text", "--format", help="text, json or markdown (a PR comment)."),
    hf_token_file: Path | None = HF_TOKEN_FILE,
) -> None:
    """A real Pulumi preview of the platform and workload stacks, with the hourly cost."""
    if fmt not in ("text", "json", "markdown"):
        raise LlmctlError(f"unknown --format {fmt!r}", "use text, json or markdown")
    output.start(json_output=fmt == "json")
    from llmctl.infra.aws.preflight import preflight, resolve_region
    from llmctl.infra.lifecycle.orchestrate import Lifecycle

    preflight(pulumi=True, aws=True, region=region)
    progress = _progress("plain", True)
    report = Lifecycle(_engine(backend, progress), progress, stack=stack).preview(
        blueprint, region=resolve_region(region), hf_token_file=hf_token_file
    )
    if fmt == "json":
        output.emit_json(report.to_dict())
    elif fmt == "markdown":
        sys.stdout.write(report.to_markdown())
    else:
        for name, result in report.stacks.items():
            summary = ", ".join(f"{op} {n}" for op, n in result.changes.items()) or "no changes"
            output.console.print(f"[bold]{name}[/]/{stack}: {summary}")
        output.console.print(f"cost: about ${report.cost.total_hourly_usd:.2f}/h")


def status(
    stack: str = STACK,
    target: str = TARGET,
    blueprint: str | None = typer.Option(
        None, "--blueprint", "-b", help="Also show the start timeline of this blueprint's serving pods."
    ),
    backend: str | None = BACKEND,
    json_output: bool = JSON,
) -> None:
    """Stacks and their last update, the cluster, NodePools, nodes, plugins and each workload's endpoint."""
    output.start(json_output=json_output)
    _check_target(target)
    from llmctl.infra.lifecycle.status import collect_status

    engine = None
    if target != "local":
        from llmctl.infra.aws.preflight import require_pulumi

        require_pulumi()
        engine = _engine(backend, _progress("plain", True))
    data = collect_status(stack, target, engine, blueprint=blueprint)
    if json_output:
        output.emit_json(data)
        return
    con = output.console
    for row in data.get("stacks", []):
        con.print(
            f"{row['project']}/{row['stack']}  last update {row['last_update'] or 'never'}  resources {row['resources']}"
        )
    if data.get("cluster"):
        con.print(f"cluster {data['cluster']['cluster_name']} in {data['cluster']['region']}")
    kube = data.get("kubernetes") or {}
    if kube.get("error"):
        con.print(f"[yellow]kubernetes:[/] {kube['error']}")
    elif kube:
        con.print(f"nodepools: {', '.join(kube['nodepools']) or 'none'}; nodes: {len(kube['nodes'])}")
        for name, ready in {**kube["device_plugins"], **kube["schedulers"]}.items():
            con.print(f"  {name}: {ready} ready")
    for row in data.get("local") or []:
        state = (
            "healthy"
            if row.get("healthy")
            else ("running, not answering" if row.get("running") else "stopped")
        )
        con.print(
            f"local {row['blueprint']}: {row.get('url')} model {row.get('model')} pid {row.get('pid')} ({state})",
            markup=False,
        )
        if row.get("log"):
            con.print(f"  log: {row['log']}", markup=False)
    for e in data["endpoints"]:
        con.print(f"{e['blueprint']}: {e['base_url']} ({e['target']})")
    if not data["endpoints"]:
        con.print("no endpoints recorded in this stack")
    if data.get("starts"):
        from llmctl.infra.lifecycle.timeline import render_start_status

        con.print(render_start_status(data["starts"]), markup=False)


def endpoint(
    blueprint: str = typer.Option(..., "--blueprint", "-b", help="Blueprint name."),
    stack: str = STACK,
    json_output: bool = JSON,
) -> None:
    """Print a deployed blueprint's endpoint."""
    output.start(json_output=json_output)
    from dataclasses import asdict

    from llmctl.state import load_endpoint

    found = load_endpoint(stack, blueprint)
    if json_output:
        output.emit_json(asdict(found))
    else:
        output.console.print(found.base_url, markup=False)


def connect(
    blueprint: str = typer.Option(..., "--blueprint", "-b", help="Blueprint name."),
    stack: str = STACK,
    port: int = typer.Option(8000, "--port", help="Local port for the serving endpoint."),
) -> None:
    """Port-forward the serving port, the Ray dashboard and the UI; Ctrl-C stops."""
    output.start()
    from llmctl.infra.aws.preflight import require_kubectl
    from llmctl.infra.lifecycle.kube import kubeconfig_path, port_forward
    from llmctl.state import load_endpoint

    require_kubectl()
    found = load_endpoint(stack, blueprint)
    if found.target == "local":
        output.console.print(f"local target: already at {found.base_url}", markup=False)
        return
    from llmctl.infra.lifecycle.status import port_forwards

    namespace = found.extra.get("namespace", blueprint)
    kube = found.extra.get("kubeconfig") or kubeconfig_path(stack)
    procs = []
    for label, service, local, remote, url in port_forwards(found, port):
        procs.append(port_forward(kube, namespace, service, local, remote))
        output.console.print(f"{label:10} {url}", markup=False)
    if not procs:
        raise PrerequisiteError("the endpoint has no service to forward", "re-run `llmctl up` to record it")
    output.console.print("forwarding; Ctrl-C to stop")
    try:
        for proc in procs:
            proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        for proc in procs:
            proc.terminate()


def register(app: typer.Typer) -> None:
    """Add the lifecycle commands to the root app."""
    app.command("up")(up)
    app.command("down")(down)
    app.command("preview")(preview)
    app.command("status")(status)
    app.command("endpoint")(endpoint)
    app.command("connect")(connect)
