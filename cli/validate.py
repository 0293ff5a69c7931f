"""`llmctl validate`: blueprint rules plus the offline schedulability check."""

from __future__ import annotations

from pathlib import Path

import typer

from llmctl.cli import options, output

EXIT_PROBLEMS = 2


def validate(
    blueprint: str = options.BLUEPRINT,
    stack: str = options.STACK,
    region: str = options.PLATFORM_REGION,
    pools: Path | None = options.POOLS,
    json: bool = options.JSON,
) -> None:
    """Check that every pod of the workload can be scheduled on the platform the blueprint builds."""
    output.start(json_output=json)
    from llmctl.infra.workload.api import validate_blueprint

    report = validate_blueprint(blueprint, stack=stack, region=region, pools=pools)
    if json:
        output.emit_json(report)
    elif report["ok"]:
        output.console.print(
            f"[green]ok[/] {report['blueprint']}: {len(report['pods'])} pod template(s) schedulable on pools "
            + ", ".join(p["name"] for p in report["pools"])
        )
        if report.get("serving_line"):
            from rich.markup import escape

            output.console.print(
                f"  {report['serving_what']}: {escape(report['serving_line'])}", soft_wrap=True
            )
    else:
        output.err_console.print(
            f"[bold red]error:[/] {report['blueprint']}: {len(report['problems'])} pod problem(s) would leave pods Pending"
        )
        from rich.markup import escape

        for problem in report["problems"]:
            where = f" ({problem['where']})" if problem["where"] else ""
            path = escape(f"{problem['kind']}/{problem['name']}{where}")
            output.err_console.print(
                f"  [red]•[/] [bold]{path}[/]: {escape(problem['message'])}", soft_wrap=True
            )
            output.err_console.print(f"    [yellow]fix:[/] {escape(problem['hint'])}", soft_wrap=True)
    if not report["ok"]:
        raise typer.Exit(EXIT_PROBLEMS)


def register(app: typer.Typer) -> None:
    """Add `llmctl validate` to the root app."""
    app.command("validate")(validate)
