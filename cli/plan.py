"""`llmctl plan`: the platform's resource tree and policy verdict, offline (no credentials), and
`llmctl plan diff OLD NEW` between two such plans."""

from __future__ import annotations

from pathlib import Path

import typer

from llmctl.cli import options, output
from llmctl.errors import LlmctlError

app = typer.Typer(
    no_args_is_help=False, help="Show what the platform and workload stacks would create, offline."
)


@app.callback(invoke_without_command=True)
def plan(
    ctx: typer.Context,
    blueprint: list[str] = options.BLUEPRINTS,
    all_pools: bool = typer.Option(
        False, "--all-pools", help="Create every node pool, not just the blueprints' ones."
    ),
    offline: bool = typer.Option(
        False,
        "--offline",
        help="Plan from the programs alone: no backend, no pulumi CLI, no credentials. Without it, each "
        "blueprint whose workload stack is deployed is also compared with it: what the next `up` rolls, "
        "the extra nodes and whether they fit; and the deployed platform's Karpenter pools: which running "
        "nodes the next `up` replaces (drift).",
    ),
    backend: str | None = options.BACKEND,
    skip_missing: bool = typer.Option(
        False,
        "--skip-missing",
        help="Leave out blueprints that do not exist (a file a pull request adds, planned on its base "
        "revision); the plan lists them under missing_blueprints.",
    ),
    stack: str = options.STACK,
    workload: str | None = options.WORKLOAD,
    region: str = options.PLATFORM_REGION,
    json: bool = options.JSON,
) -> None:
    """Show what the platform and workload stacks would create and check the platform against the
    policy rules (Pulumi's mocks: no credentials, no pulumi CLI). Against a deployed workload stack
    (not with --offline) it also says what the next `up` does to it: which pods roll, a second
    RayCluster's nodes and cost, the quota; against the deployed platform, the Karpenter pools whose
    running nodes it replaces. `--json` lists every input of every resource (secrets redacted): the
    input of `llmctl plan diff`; `rollouts` and `drift` carry the comparison."""
    if ctx.invoked_subcommand is not None:
        return
    output.start(json_output=json)
    from llmctl.infra.plan.run import offline_plan

    result = offline_plan(
        options.flat_list(blueprint),
        stack=stack,
        region=region,
        all_pools=all_pools,
        workload=workload,
        skip_missing=skip_missing,
        deployed=not offline,
        backend=backend,
    )
    if json:
        output.emit_json(result.to_dict())
        if not result.ok:
            raise typer.Exit(1)
        return
    _print(result)
    if result.missing:
        output.console.print(f"left out (not found): {', '.join(result.missing)}")
    if not result.ok:
        raise LlmctlError(
            f"policy check failed: {sum(v.severity == 'error' for v in result.violations)} violation(s)",
            "fix the violations listed above, then run the plan again",
        )


def _print(result: object) -> None:
    from rich.markup import escape
    from rich.tree import Tree

    from llmctl.infra.plan.run import PlanResult, key_inputs, summarize_inputs

    assert isinstance(result, PlanResult)
    config = result.config
    root = Tree(
        f"[bold]platform[/] stack={config.stack} cluster={config.cluster_name} region={config.region} "
        f"pools={','.join(config.pools)}"
    )
    nodes: dict[str, Tree] = {}
    for res in result.resources:
        parent = nodes.get(res.parent_name or "", root)
        label = f"[cyan]{res.type}[/] [bold]{res.name}[/]"
        if not res.component and res.inputs:
            label += f" [dim]{escape(summarize_inputs(key_inputs(res)))}[/]"
        nodes[res.name] = parent.add(label)
    output.console.print(root, soft_wrap=not output.fits_width())  # wraps at 80 columns too
    output.console.print(f"{len(result.resources)} resources; unknown values show as <unknown>")
    if config.vpc.existing_vpc_id:
        subnet_tags = [
            f"{r.inputs.get('resourceId')} {r.inputs.get('key')}={r.inputs.get('value')}"
            for r in result.resources
            if r.type == "aws:ec2/tag:Tag" and str(r.inputs.get("resourceId", "")).startswith("subnet-")
        ]
        output.console.print(
            f"subnet tags llmctl manages (added by up, removed by down): {escape(', '.join(subnet_tags))}; "
            "a tag already on a subnet is found by preview and up, left alone and listed there",
            soft_wrap=True,
        )
    for work in result.workloads:
        output.console.print(
            f"[bold]workload[/] {work.project}/{work.stack} (namespace {work.namespace}): "
            f"{len(work.resources)} resources "
            "(`--json` lists them with every input)"
        )
    if result.cost:
        output.console.print(
            f"cost: ${result.cost['hourly_usd']:,.2f} per hour on demand: platform "
            f"${result.cost['platform_hourly_usd']:,.2f} + serving nodes ${result.cost['serving_hourly_usd']:,.2f} "
            "(`blueprints list` shows the serving nodes alone)",
            markup=False,
        )
        for row in result.cost["workloads"]:
            if row.get("nodes_per_replica"):  # a replica over several nodes: what one replica costs
                output.console.print(
                    f"  {row['blueprint']}: {row['nodes']} x {row['instance_type']}, "
                    f"{row['nodes_per_replica']} nodes per replica at ${row['replica_hourly_usd']:,.2f}/h a replica",
                    markup=False,
                )
                if row.get("inter_node_transport"):
                    output.console.print(f"  {row['blueprint']}: {row['inter_node_transport']}", markup=False)
            if row.get("at_zero"):  # a blueprint that scales to zero: the saving and the cold start
                from llmctl.infra.lifecycle.cold_start import render_at_zero  # off the start-up path

                output.console.print(f"  {row['blueprint']}: {render_at_zero(row['at_zero'])}", markup=False)
    for violation in result.violations:
        colour = "red" if violation.severity == "error" else "yellow"
        output.console.print(
            f"[{colour}]{violation.severity}[/] {escape(f'[{violation.rule}]')} {violation.resource}: "
            f"{escape(violation.message)}",
            soft_wrap=not output.fits_width(),
        )
    if result.ok:
        output.console.print("[green]policy: passed[/]")
    for line in result.day_two_notes:
        output.console.print(line, markup=False, soft_wrap=True)
    for line in result.drift_lines():  # the deployed platform's pools whose nodes are replaced
        output.console.print(line, markup=False, soft_wrap=True)
    for found in result.day_two:  # the next `up` against the deployed workload
        text = (
            "\n".join(found.lines()) or f"day two: the next `up` of {found.blueprint} restarts no serving pod"
        )
        output.console.print(text, markup=False, soft_wrap=True)


FORMATS = ("text", "json", "markdown")


@app.command("diff")
def diff(
    old: Path = typer.Argument(..., help="The plan before (`llmctl plan --offline --json > old.json`)."),
    new: Path = typer.Argument(..., help="The plan after."),
    format: str = typer.Option("text", "--format", help="text, json, or markdown (a PR comment)."),
    allow_version_mismatch: bool = typer.Option(
        False, "--allow-version-mismatch", help="Compare plans written by different llmctl versions."
    ),
) -> None:
    """Resources added, removed and changed between two plans, with the changed inputs, the hourly
    cost and the Karpenter pools whose running nodes the change replaces (drift). Exit code: 0 no
    changes, 1 changes (like `diff`), 2 bad input."""
    output.start(json_output=format == "json")
    from llmctl.infra.plan.file import PlanFileError, load_plan

    if format not in FORMATS:
        raise PlanFileError(f"unknown --format {format!r}", f"use one of: {', '.join(FORMATS)}")
    from llmctl.infra.plan.diff import diff_plans
    from llmctl.infra.plan.render import render_markdown, render_text

    result = diff_plans(
        load_plan(old, allow_version_mismatch=allow_version_mismatch),
        load_plan(new, allow_version_mismatch=allow_version_mismatch),
    )
    if format == "json":
        output.emit_json(result.to_dict())
    else:
        typer.echo(render_markdown(result) if format == "markdown" else render_text(result), nl=False)
    raise typer.Exit(1 if result.changed else 0)


def register(root: typer.Typer) -> None:
    """Add `llmctl plan` (and `llmctl plan diff`) to the root app."""
    root.add_typer(app, name="plan")
