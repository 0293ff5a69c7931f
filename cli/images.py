"""`llmctl images build` and `llmctl images list`: the bundled serving containers."""

from __future__ import annotations

from pathlib import Path

import typer

from llmctl.cli import options, output

app = typer.Typer(help="Build and push the serving container images.", no_args_is_help=True)


@app.command("build")
def build(
    runtime: str = typer.Option(
        None,
        "--runtime",
        help="ray-cpu, ray-neuronx, ray-vllm, triton-vllm or torchserve-neuronx (default: the blueprint's).",
    ),
    blueprint: str = typer.Option(
        None,
        "--blueprint",
        "-b",
        help="Build for this blueprint: its runtime, base image and ECR repository.",
    ),
    stack: str = options.STACK,
    workload: str | None = options.WORKLOAD,
    push: bool = typer.Option(
        False,
        "--push",
        help="Push to the workload stack's ECR repository llmctl/<stack>/<blueprint> (needs --blueprint).",
    ),
    region: str = typer.Option(None, "--region", help="AWS region of the ECR registry (needed with --push)."),
    tag: str = typer.Option(
        None,
        "--tag",
        help="Image tag (default: <version>-<code digest>, the tag `up` looks for; another tag is not found by `up`).",
    ),
    base: str = typer.Option(None, "--base", help="Override the pinned base image (tag or digest)."),
    json: bool = options.JSON,
) -> None:
    """Build a runtime's image with the local Docker engine (buildx), optionally pushing it."""
    output.start(json_output=json)
    from llmctl.infra.names import workload_stack
    from llmctl.infra.workload.prepare.delivery import build_image

    result = build_image(
        runtime,
        blueprint=blueprint,
        stack=workload_stack(stack, workload),
        push=push,
        region=region,
        tag=tag,
        base=base,
    ).to_dict()
    if json:
        output.emit_json(result)
        return
    output.console.print(f"built {result['image']} (base {result['base']})")
    if result["serving_image"]:
        output.console.print(
            f"put this in the blueprint:\n  image:\n    serving_image: {result['serving_image']}"
        )


@app.command("pin")
def pin(
    blueprint: str = options.BLUEPRINT,
    stack: str = options.STACK,
    workload: str | None = options.WORKLOAD,
    pools: Path | None = options.POOLS,
    accept_moved_tags: bool = options.ACCEPT_MOVED_TAGS,
    json: bool = options.JSON,
) -> None:
    """Record the digest of each image tag the workload's pods run, as its first `up` does."""
    output.start(json_output=json)
    from llmctl.infra.workload.api import pin_blueprint

    report = pin_blueprint(
        blueprint, stack=stack, workload=workload, pools=pools, accept_moved=accept_moved_tags
    )
    if json:
        output.emit_json(report)
        return
    output.console.print(f"image digests of {report['blueprint']} in stack {report['stack']}:")
    for line in report["notes"]:
        output.console.print(f"  {line}", soft_wrap=True, markup=False)
    for image, digest in report["images"].items():
        output.console.print(f"  {image}@{digest}", soft_wrap=True, markup=False)


@app.command("list")
def list_cmd(json: bool = options.JSON) -> None:
    """List the runtimes, their Dockerfiles and pinned base images."""
    output.start(json_output=json)
    from llmctl.infra.aws.images import list_images

    rows = list_images()
    if json:
        output.emit_json(rows)
        return
    # The base image reference on its own line, never broken (some are longer than 80 columns:
    # a narrower terminal wraps the line itself, and it copies whole).
    for row in rows:
        output.console.print(f"{row['runtime']:<20} {row['dockerfile']}", markup=False)
        output.console.print(f"  base {row['base']}", markup=False, soft_wrap=True)


def register(root: typer.Typer) -> None:
    """Add `llmctl images` to the root app."""
    root.add_typer(app, name="images")
