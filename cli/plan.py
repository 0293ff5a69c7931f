"""`llmctl plan`: the platform's resource tree and policy verdict, offline (no credentials)."""

from __future__ import annotations

import typer

from llmctl.cli import options, output
from llmctl.errors import LlmctlError, PrerequisiteError


def plan(
    blueprint: list[str] = options.BLUEPRINTS,
    all_pools: bool = typer.Option(
        False, "--all-pools", help="Create every node pool, not just the blueprints' ones."
    ),
    offline: bool = typer.Option(
        False, "--offline", help="Run the program under Pulumi mocks: no credentials, no CLI."
    ),
    stack: str = options.STACK,
    region: str = options.PLATFORM_REGION,
    json: bool = options.JSON,
) -> None:
    """Show what the platform stack would create and check it against the policy rules."""
    output.start(json_output=json)
    if not offline:
        raise PrerequisiteError(
            "`llmctl plan` only runs offline (under Pulumi mocks)",
            "add --offline to see the resource tree and policy verdict; for a real preview against AWS "
            "run `llmctl preview --blueprint NAME`",
        )
    from llmctl.infra.plan import offline_plan

    result = offline_plan(blueprint, stack=stack, region=region, all_pools=all_pools)
    if json:
        output.emit_json(result.to_dict())
        if not result.ok:
            raise typer.Exit(1)
        return
    _print(result)
    if not result.ok:
        raise LlmctlError(
            f"policy check failed: {sum(v.severity == 'error' for v in result.violations)} violation(s)",
            "fix the violations listed above, then run the plan again",
        )


def _print(result: object) -> None:
    from rich.markup import escape
    from rich.tree import Tree

    from llmctl.infra.plan import PlanResult, summarize_inputs

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
            label += f" [dim]{escape(summarize_inputs(res.inputs))}[/]"
        nodes[res.name] = parent.add(label)
    output.console.print(root, soft_wrap=True)
    output.console.print(f"{len(result.resources)} resources; unknown values show as <unknown>")
    for violation in result.violations:
        colour = "red" if violation.severity == "error" else "yellow"
        output.console.print(
            f"[{colour}]{violation.severity}[/] {escape(f'[{violation.rule}]')} {violation.resource}: "
            f"{escape(violation.message)}",
            soft_wrap=True,
        )
    if result.ok:
        output.console.print("[green]policy: passed[/]")


def register(app: typer.Typer) -> None:
    """Add `llmctl plan` to the root app."""
    app.command("plan")(plan)
