"""`llmctl up`, `down`, `preview`, `status`, `endpoint` and `connect`.

Each command picks its target from the registry (:mod:`llmctl.infra.targets`) and calls it; what
differs between eks, kubeconfig and local lives in the targets, not here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from llmctl.cli import options, output
from llmctl.cli.output import confirm
from llmctl.errors import BadInput


def _confirm(yes: bool) -> Any:
    return lambda question, items: confirm(question, items, yes=yes)


def up(
    blueprint: str = options.BLUEPRINT,
    stack: str = options.STACK,
    workload: str | None = options.WORKLOAD,
    region: str | None = options.REGION,
    target: str = options.TARGET,
    kubeconfig: Path | None = typer.Option(
        None, "--kubeconfig", help="Kubeconfig of an existing cluster (--target kubeconfig)."
    ),
    pools: Path | None = options.POOLS,
    hf_token_file: Path | None = options.HF_TOKEN_FILE,
    yes: bool = options.YES,
    backend: str | None = options.BACKEND,
    progress_mode: str = options.PROGRESS,
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
    reselect_azs: bool = options.RESELECT_AZS,
    accept_moved_tags: bool = options.ACCEPT_MOVED_TAGS,
    replace: bool = typer.Option(
        False,
        "--replace",
        help="This run replaces the serving pods instead of starting new ones beside them: no extra "
        "accelerator nodes, downtime until the new pods serve (stated before it asks).",
    ),
    json_output: bool = options.JSON,
) -> None:
    """Deploy a blueprint: preflight, plan and cost, confirm, platform, workload, readiness, endpoint."""
    output.start(json_output=json_output)
    from llmctl.infra.lifecycle.progress import open_progress
    from llmctl.infra.plan.drift_reader import read_drift
    from llmctl.infra.targets.base import UpRequest
    from llmctl.infra.targets.registry import get_target, run_up

    request = UpRequest(
        blueprint=blueprint,
        stack=stack,
        region=region,
        backend=backend,
        hf_token_file=hf_token_file,
        kubeconfig=kubeconfig,
        pools=pools,
        model=model,
        port=port,
        wait=not no_wait,
        wait_timeout_s=wait_timeout,
        workload=workload,
        reselect_azs=reselect_azs,
        accept_moved_tags=accept_moved_tags,
        replace=replace,
    )
    chosen = get_target(target, request)
    progress = open_progress(progress_mode, quiet=json_output)
    # the plan says which running nodes the platform change replaces
    result = run_up(chosen, request, progress, _confirm(yes), drift=read_drift)
    _print_up(result, json_output)


def _print_up(result: Any, json_output: bool) -> None:
    from dataclasses import asdict

    from llmctl.infra.lifecycle.reports import next_commands

    endpoint, timeline = result.endpoint, result.timeline
    bp, stack = endpoint.blueprint, endpoint.stack
    commands = next_commands(endpoint)
    if json_output:
        output.emit_json(
            {
                "endpoint": asdict(endpoint),
                "plan": result.plan.to_dict() if result.plan else None,
                "timeline": timeline.to_dict(),
                "starts": [start.to_dict() for start in (result.starts if result else [])],
                "fabric": result.fabric,
                "next": commands,
            }
        )
        return
    con = output.console
    where = f"stack {stack}" + (f", workload {endpoint.workload}" if endpoint.workload else "")
    con.print(f"[bold green]ready:[/] {bp} on {endpoint.target} ({where})")
    for note in result.plan.notes if result.plan else []:  # shown with --yes too (CI logs)
        con.print(f"  {note}", markup=False)
    if result.plan and result.plan.at_zero:  # the saving at zero and the cold start it costs
        from llmctl.infra.lifecycle.cold_start import render_at_zero  # off the start-up path

        con.print(f"  {render_at_zero(result.plan.at_zero)}", markup=False)
    if endpoint.extra.get("note"):  # e.g. the tiny model's answers are random
        con.print(f"  note: {endpoint.extra['note']}", markup=False)
    con.print(
        f"  endpoint   {endpoint.base_url}" + ("  (run `llmctl connect` first)" if result.via_connect else "")
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
    blueprint: str | None = options.SOME_DEPLOYED,
    all_: bool = typer.Option(False, "--all", help="Destroy every workload and the platform (the default)."),
    stack: str = options.STACK,
    workload: str | None = options.WORKLOAD,
    region: str | None = options.REGION,
    target: str | None = options.FOUND_TARGET,
    keep_platform: bool = typer.Option(
        False, "--keep-platform", help="Keep the platform (and skip the sweep)."
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Destroy with PULUMI_K8S_DELETE_UNREACHABLE=true even though the cluster may exist: objects of an "
        "unreachable cluster are dropped from state, not deleted. Lists what it drops and asks first.",
    ),
    yes: bool = options.YES,
    backend: str | None = options.BACKEND,
    progress_mode: str = options.PROGRESS,
    json_output: bool = options.JSON,
) -> None:
    """Tear down workloads; the platform shrinks to what the others need, or goes with the last one
    (then a sweep of leftovers and a final check)."""
    output.start(json_output=json_output)
    from llmctl.infra.lifecycle.progress import open_progress
    from llmctl.infra.plan.drift_reader import read_drift
    from llmctl.infra.targets.base import DownRequest
    from llmctl.infra.targets.registry import get_target, resolve_target

    request = DownRequest(
        stack=stack,
        region=region,
        backend=backend,
        blueprint=blueprint,
        workload=workload,
        all_workloads=all_,
        keep_platform=keep_platform,
        force=force,
    )
    chosen = get_target(resolve_target(target, stack, blueprint, backend), request)
    progress = open_progress(progress_mode, quiet=json_output)
    # a platform kept and updated: which running nodes that replaces, said before it asks
    result = chosen.down(request, progress, _confirm(yes), drift=read_drift)
    if json_output:
        output.emit_json(result.to_dict())
        # stdout holds one JSON document (with the verdict); the error below goes to stderr only
        output.mode.json = False
    else:
        for line in result.lines():
            output.console.print(line, markup=False)
    result.check()


def preview(
    blueprint: str = options.BLUEPRINT,
    stack: str = options.STACK,
    workload: str | None = options.WORKLOAD,
    region: str | None = options.REGION,
    backend: str | None = options.BACKEND,
    fmt: str = typer.Option("text", "--format", help="text, json or markdown (a PR comment)."),
    hf_token_file: Path | None = options.HF_TOKEN_FILE,
    json_output: bool = options.JSON,
) -> None:
    """A real Pulumi preview of the platform and workload stacks, with the hourly cost."""
    fmt = "json" if json_output else fmt
    if fmt not in ("text", "json", "markdown"):
        raise BadInput(f"unknown --format {fmt!r}", "use text, json or markdown")
    output.start(json_output=fmt == "json")
    from llmctl.infra.plan.drift_reader import read_drift
    from llmctl.infra.targets.base import UpRequest
    from llmctl.infra.targets.registry import default_target

    request = UpRequest(
        blueprint=blueprint,
        stack=stack,
        region=region,
        backend=backend,
        hf_token_file=hf_token_file,
        workload=workload,
    )
    report = default_target().preview(request, drift=read_drift)  # with the node drift `up` says
    if fmt == "json":
        output.emit_json(report.to_dict())
    elif fmt == "markdown":
        sys.stdout.write(report.to_markdown())
    else:
        for line in report.lines():
            output.console.print(line, markup=False)
        output.console.print(f"cost: about ${report.cost.total_hourly_usd:.2f}/h")


def status(
    stack: str = options.STACK,
    target: str | None = options.FOUND_TARGET,
    blueprint: str | None = options.SOME_DEPLOYED,
    workload: str | None = options.WORKLOAD,
    backend: str | None = options.BACKEND,
    json_output: bool = options.JSON,
) -> None:
    """Stacks and their last update, the cluster, NodePools, nodes, plugins and each workload's endpoint."""
    output.start(json_output=json_output)
    from llmctl.infra.lifecycle.status import only_workload
    from llmctl.infra.targets.registry import get_target, resolve_target

    data = get_target(resolve_target(target, stack, blueprint, backend)).status(
        stack, backend=backend, blueprint=blueprint
    )
    data = only_workload(data, workload) if workload else data
    if json_output:
        output.emit_json(data)
        return
    _print_status(data)


def _print_status(data: dict[str, Any]) -> None:
    from llmctl.infra.lifecycle.ray_upgrade import upgrade_lines

    con = output.console
    for row in data.get("stacks", []):
        con.print(
            f"{row['project']}/{row['stack']}  last update {row['last_update'] or 'never'}  resources {row['resources']}"
        )
    for row in data.get("workloads") or []:
        con.print(
            f"workload {row['blueprint']}"
            + (f" ({row['workload']})" if row["workload"] else "")
            + f"  namespace {row['namespace']}  pools {', '.join(row['pools'])}",
            markup=False,
        )
        replicas = row.get("replicas")
        if isinstance(replicas, dict):
            con.print(f"  replicas: {replicas['error']}", markup=False)
        for scaled in replicas or []:
            signal = f", signal {scaled['signal']}" if scaled.get("signal") else ""
            con.print(
                f"  {scaled['kind']} {scaled['name']}: {scaled['current']} running, {scaled['desired']} desired{signal}",
                markup=False,
            )
        services = row.get("rayservices")
        if isinstance(services, dict):
            con.print(f"  RayServices: {services['error']}", markup=False)
        for service in services or []:
            for line in upgrade_lines(service):
                con.print(f"  {line}", markup=False)
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
        replicas = row.get("replicas")
        if replicas:
            con.print(
                f"  replicas: {replicas['running']} running, {replicas['desired']} desired", markup=False
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
    blueprint: str = options.DEPLOYED,
    stack: str = options.STACK,
    workload: str | None = options.WORKLOAD,
    json_output: bool = options.JSON,
) -> None:
    """Print a deployed blueprint's endpoint."""
    output.start(json_output=json_output)
    from dataclasses import asdict

    from llmctl.serving.client.deployed import find_endpoint

    found = find_endpoint(stack, blueprint, workload)
    if json_output:
        output.emit_json(asdict(found))
    else:
        output.console.print(found.base_url, markup=False)


def connect(
    blueprint: str = options.DEPLOYED,
    stack: str = options.STACK,
    workload: str | None = options.WORKLOAD,
    port: int = typer.Option(8000, "--port", help="Local port for the serving endpoint."),
) -> None:
    """Port-forward the serving port, the Ray dashboard and the UI; Ctrl-C stops."""
    output.start()
    from llmctl.infra.targets.registry import connect as open_connection

    connection = open_connection(stack, blueprint, port, workload)
    connection.run(lambda line: output.console.print(line, markup=False))


def register(app: typer.Typer) -> None:
    """Add the lifecycle commands to the root app."""
    app.command("up")(up)
    app.command("down")(down)
    app.command("preview")(preview)
    app.command("status")(status)
    app.command("endpoint")(endpoint)
    app.command("connect")(connect)
