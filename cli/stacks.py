"""`llmctl stacks list` and `llmctl stacks gc`."""

from __future__ import annotations

from typing import Any

import typer

from llmctl.cli import options, output

app = typer.Typer(
    help="List stacks in the backend and remove expired ones (e.g. PR preview stacks).", no_args_is_help=True
)


def _engine(backend: str | None) -> Any:
    from llmctl.infra.aws.preflight import require_pulumi
    from llmctl.infra.lifecycle.backend import resolve_backend
    from llmctl.infra.lifecycle.engine import Engine

    require_pulumi()
    return Engine(resolve_backend(backend))


@app.command("list")
def list_stacks(
    backend: str | None = options.BACKEND,
    json_output: bool = options.JSON,
) -> None:
    """Every llmctl stack with its last update and resource count."""
    output.start(json_output=json_output)
    from llmctl.infra.lifecycle.stacks import all_stack_rows

    rows, notes = all_stack_rows(backend)
    for note in notes:  # on stderr: a --json caller's stdout stays one document
        output.err_console.print(f"note: {note}", markup=False, soft_wrap=True)
    if json_output:
        output.emit_json(rows)
        return
    for row in rows:  # each row says how it is shown (`size`): no branch on its kind here
        output.console.print(
            f"{row['stack']:12} {row['project']:28} {row['last_update'] or 'never':28} {row['size']}",
            markup=False,
        )
    if not rows:
        output.console.print("no stacks")


@app.command("gc")
def gc(
    older_than: str = typer.Option(..., "--older-than", help="Age since the last update: 3d, 12h or 90m."),
    prefix: str = typer.Option(
        "",
        "--prefix",
        help="Only stacks whose workload name (stack ci.pr-42: pr-42), or else stack name, starts with this "
        "(e.g. pr-). A platform goes only when no workload of its environment is left.",
    ),
    dry_run: bool = options.DRY_RUN,
    yes: bool = options.YES,
    backend: str | None = options.BACKEND,
    json_output: bool = options.JSON,
) -> None:
    """Destroy and remove stacks not updated for longer than --older-than."""
    output.start(json_output=json_output)
    from llmctl.cli.output import confirm
    from llmctl.infra.lifecycle.stacks import gc as run_gc
    from llmctl.infra.lifecycle.stacks import parse_age

    age = parse_age(older_than)
    result = run_gc(
        _engine(backend),
        age,
        prefix=prefix,
        dry_run=dry_run,
        confirm=lambda items: confirm("Destroy and remove?", items, yes=yes),
    )
    if json_output:
        from dataclasses import asdict

        output.emit_json(
            {
                "expired": result.expired,
                "removed": result.removed,
                "dry_run": dry_run,
                "notes": result.notes,
                "sweeps": [report.to_dict() for report in result.sweeps],
                "leftovers": [asdict(item) for item in result.leftovers],
                "ok": not result.leftovers,
            }
        )
        output.mode.json = False  # one JSON document on stdout; the verdict below goes to stderr
    else:
        output.console.print(f"expired: {', '.join(result.expired) or 'none'}", markup=False)
        for note in result.notes:
            output.console.print(f"note: {note}", markup=False)
        if not dry_run:
            output.console.print(f"removed: {', '.join(result.removed) or 'none'}", markup=False)
        for report in result.sweeps:
            output.console.print(
                f"sweep {report.cluster}: {len(report.found)} found, {len(report.deleted)} deleted, "
                f"{len(report.failed)} failed",
                markup=False,
            )
    result.check()


def register(root: typer.Typer) -> None:
    """Add `llmctl stacks`."""
    root.add_typer(app, name="stacks")
