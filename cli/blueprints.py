"""`llmctl blueprints list|show|validate|schema`."""

from __future__ import annotations

from pathlib import Path

import typer

from llmctl.cli import options, output

app = typer.Typer(help="List, show and validate blueprints.", no_args_is_help=True)


@app.command("list")
def list_blueprints(json: bool = options.JSON) -> None:
    """List the blueprints shipped with llmctl."""
    output.start(json_output=json)
    from llmctl.blueprints.describe import summaries

    rows = summaries()
    if json:
        output.emit_json({"blueprints": rows})
        return
    from rich import box
    from rich.table import Table

    # no vertical rules: the six whole columns fit in 80
    table = Table(
        title="llmctl blueprints",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),
    )
    for column in ("name", "runtime", "instance", "tp", "replicas", "$/h"):
        table.add_column(
            column, justify="right" if column in ("tp", "replicas", "$/h") else "left", no_wrap=True
        )
    for row in rows:
        table.add_row(
            row["name"],
            row["runtime"],
            row["instance_type"],
            str(row["tensor_parallel"]),
            f"{row['min_replicas']}-{row['max_replicas']}",
            f"{row['hourly_usd']:.2f}",
        )
    output.console.print(table)
    from llmctl.blueprints.hardware import hardware

    # what the column covers, and what a deployment adds (plan and cost show the sum)
    output.console.print(
        "$/h: the serving nodes at the starting replicas, on demand; the platform (control plane, "
        f"NAT, core nodes) adds ${hardware().platform_hourly():.2f}/h, which `llmctl plan` and `llmctl cost` "
        "include.",
        markup=False,
    )
    output.console.print(
        "Show one with [bold]llmctl blueprints show NAME[/]; size a model with [bold]llmctl size MODEL[/]."
    )


@app.command("show")
def show(
    blueprint: str = typer.Argument(..., help="Catalog name or path to a blueprint YAML file."),
    json: bool = options.JSON,
) -> None:
    """Show a blueprint with what follows from it (engine, nodes, cost)."""
    output.start(json_output=json)
    from llmctl.blueprints.describe import describe

    data = describe(blueprint)
    if json:
        output.emit_json(data)
        return
    import yaml
    from rich.syntax import Syntax

    derived = data.pop("derived")
    output.console.print(
        Syntax(yaml.safe_dump(data["blueprint"], sort_keys=False), "yaml", theme="ansi_dark")
    )
    # what follows from it, in the same YAML (false, not Python's False)
    output.console.print(
        Syntax("# derived\n" + yaml.safe_dump(derived, sort_keys=False), "yaml", theme="ansi_dark")
    )


@app.command("validate")
def validate(
    refs: list[str] = typer.Argument(None, help="Catalog names or YAML paths (default: the whole catalog)."),
    json: bool = options.JSON,
) -> None:
    """Validate blueprints before any cloud call; exits 2 when one cannot run."""
    output.start(json_output=json)
    from rich.markup import escape

    from llmctl.blueprints.catalog import FIELDS_HINT, catalog_names, validate_ref
    from llmctl.errors import BlueprintError

    reports = [validate_ref(ref) for ref in (refs or catalog_names())]
    failed = [r for r in reports if not r.ok]
    if json:
        output.emit_json(
            {
                "ok": not failed,
                "results": [
                    {
                        "ref": r.ref,
                        "ok": r.ok,
                        "name": r.name,
                        "message": r.message,
                        "problems": [
                            {"path": p, "message": m, "line": r.lines.get(p)} for p, m in r.problems
                        ],
                    }
                    for r in reports
                ],
            }
        )
    else:
        for report in reports:
            if report.ok:
                output.console.print(f"[green]✓[/] {report.ref}")
            else:
                output.console.print(f"[red]✗[/] {report.ref}: {report.message}", soft_wrap=True)
                for path, message in report.problems:
                    at = f" (line {report.lines[path]})" if path in report.lines else ""
                    output.console.print(
                        f"    [bold]{escape(path)}[/]{at}: {escape(message)}", soft_wrap=True
                    )
    if failed:
        output.mode.json = False  # the report above already carried the details
        raise BlueprintError(
            f"{len(failed)} of {len(reports)} blueprint(s) failed validation",
            FIELDS_HINT if any(r.problems for r in failed) else "fix what is listed above",
        )


@app.command("schema")
def schema(
    json: bool = options.JSON,
    out: Path = typer.Option(None, "--out", help="Write the JSON schema to this file."),
) -> None:
    """Print every blueprint field with its type and description."""
    output.start(json_output=json)
    from llmctl.blueprints.describe import field_reference, json_schema, write_json_schema

    if out is not None:
        written = write_json_schema(out)
        if json:
            output.emit_json({"path": str(written)})
            return
        output.console.print(f"wrote {written}")
        return
    if json:
        output.emit_json(json_schema())
        return
    from rich.table import Table

    table = Table(title="blueprint fields", title_justify="left")
    for column in ("field", "type", "default", "description"):
        table.add_column(column, overflow="fold")
    for row in field_reference():
        table.add_row(row["field"], row["type"], row["default"], row["description"])
    output.console.print(table)
