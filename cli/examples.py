"""One or two examples per command: the Examples section of its `--help` and of the generated CLI
reference (a test keeps the two in step). Keys are the command path after `llmctl`."""

from __future__ import annotations

from llmctl.cli.help_format import keep_lines

EXAMPLES: dict[str, tuple[str, ...]] = {
    "up": ("llmctl up --blueprint tiny-cpu --target local", "llmctl up -b llama2-inf2 --region us-west-2"),
    "down": ("llmctl down --yes", "llmctl down --blueprint llama2-inf2 --keep-platform"),
    "preview": ("llmctl preview -b llama2-inf2 --region us-west-2 --format markdown",),
    "status": ("llmctl status", "llmctl status --stack ci --json"),
    "endpoint": ("llmctl endpoint -b tiny-cpu",),
    "connect": ("llmctl connect -b llama2-inf2 --port 8000",),
    "doctor": ("llmctl doctor -b llama2-inf2 --region us-west-2",),
    "sweep": ("llmctl sweep --stack dev --region us-west-2 --dry-run",),
    "stacks list": ("llmctl stacks list --json",),
    "stacks gc": ("llmctl stacks gc --older-than 3d --prefix pr- --dry-run",),
    "blueprints list": ("llmctl blueprints list",),
    "blueprints show": ("llmctl blueprints show llama2-inf2",),
    "blueprints validate": ("llmctl blueprints validate ./my-blueprint.yaml",),
    "blueprints schema": ("llmctl blueprints schema --out blueprint.schema.json",),
    "size": ("llmctl size llama-2-7b --accelerator inferentia2 --context 4096",),
    "cost": (
        "llmctl cost -b llama2-inf2 -t 130 -t 90",
        "llmctl cost -b llama2-inf2 -t 130,90 --pricing spot",
    ),
    "plan": (
        "llmctl plan --offline -b tiny-cpu,llama2-inf2",
        "llmctl plan --offline -b llama2-inf2 --json > plan.json",
    ),
    "plan diff": ("llmctl plan diff base.json head.json --format markdown",),
    "render": ("llmctl render -b llama2-inf2 --out manifests/",),
    "validate": ("llmctl validate -b ./my-blueprint.yaml",),
    "catalog instances": ("llmctl catalog instances --accelerator inferentia2",),
    "catalog models": ("llmctl catalog models --json",),
    "catalog refresh": ("llmctl catalog refresh --region us-east-1 --instance-type inf2.xlarge",),
    "chat": ("llmctl chat -b tiny-cpu", "llmctl chat -b tiny-cpu --prompt 'Hello' --max-tokens 32"),
    "bench": (
        "llmctl bench -b tiny-cpu -c 1,4 -n 20",
        "llmctl bench -e http://localhost:8000/v1 --rate 1 --rate 2 --explain",
    ),
    "bench compare": ("llmctl bench compare bench-results/a bench-results/b",),
    "models tiny": ("llmctl models tiny ./tiny-model",),
    "images build": ("llmctl images build -b llama2-inf2 --push --region us-west-2",),
    "images list": ("llmctl images list --json",),
    "images pin": ("llmctl images pin -b llama2-inf2 --stack dev",),
}


def examples_epilog(path: str) -> str | None:
    """The Examples section of a command's help, one example a line."""
    lines = EXAMPLES.get(path)
    if not lines:
        return None
    return keep_lines("Examples:", [f"  {line}" for line in lines])
