"""`llmctl render`: a workload's Kubernetes manifests as YAML, for GitOps or review."""

from __future__ import annotations

from pathlib import Path

import typer

from llmctl.cli import options, output


def render(
    blueprint: str = options.BLUEPRINT,
    out: Path = typer.Option(
        None, "--out", "-o", help="Write one YAML file per object into this folder (default: print a stream)."
    ),
    stack: str = options.STACK,
    region: str = options.PLATFORM_REGION,
    pools: Path | None = options.POOLS,
    json: bool = options.JSON,
) -> None:
    """Render the workload's manifests (secrets redacted), identical to what `llmctl up` applies."""
    output.start(json_output=json)
    from llmctl.infra.workload.api import render_blueprint

    report = render_blueprint(blueprint, stack=stack, region=region, out_dir=out, pools=pools)
    if report["unpinned_images"] and not json:  # on stderr: the YAML stream on stdout stays clean
        output.err_console.print(
            f"note: stack {stack} recorded no digest for {', '.join(report['unpinned_images'])}: rendered "
            f"by tag (`llmctl images pin -b {report['blueprint']} --stack {stack}` or `llmctl up` pins them)",
            soft_wrap=True,
            markup=False,
        )
    if json:
        output.emit_json(report)
        return
    if out is None:
        typer.echo(report["yaml"], nl=False)
        return
    output.console.print(
        f"wrote {len(report['files'])} manifest(s) for [bold]{report['blueprint']}[/] to {out}"
    )
    for path in report["files"]:
        output.console.print(f"  {path}", soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `llmctl render` to the root app."""
    app.command("render")(render)
