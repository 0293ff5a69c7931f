"""Options several commands share, each declared once with one help text.

A flag whose default differs by meaning has one variant per meaning (e.g. `--region` resolved from
the AWS profile for commands that call AWS, a fixed default for the offline ones)."""

from __future__ import annotations

from pathlib import Path

import typer

from llmctl.errors import BadInput
from llmctl.infra.names import DEFAULT_TARGET, target_help


def flat_list(values: list[str] | None) -> list[str]:
    """One list style for every list flag: repeat the flag, or give a comma list, or both
    (`-c 1 -c 4,16` is 1, 4, 16); no value is dropped."""
    return [item.strip() for value in values or [] for item in value.split(",") if item.strip()]


def joined_list(values: list[str] | None) -> str | None:
    """A repeatable list flag as the comma list the layer below reads (None when not given)."""
    items = flat_list(values)
    return ",".join(items) if values else None


def number_list(values: list[str] | None, flag: str, low: float, high: float) -> list[float]:
    """A list flag of numbers in the same style, each checked: one clear error names the bad value."""
    numbers = []
    for item in flat_list(values):
        try:
            number = float(item)
        except ValueError:
            raise BadInput(f"{flag} {item!r} is not a number", f"e.g. {flag} 100,250") from None
        if not low <= number <= high:
            raise BadInput(f"{flag} {item} is out of range", f"give a value from {low:g} to {high:g}")
        numbers.append(number)
    return numbers


LIST_HELP = "Repeat the flag or give a comma list."
JSON_FLAG = "--json"
JSON: bool = typer.Option(False, JSON_FLAG, help="Print JSON with stable keys.")
YES: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")
DRY_RUN: bool = typer.Option(False, "--dry-run", help="List what would be deleted; delete nothing.")

STACK: str = typer.Option("dev", "--stack", help="Environment (stack) name.")
SOME_STACK: str | None = typer.Option(None, "--stack", help="Environment (stack) name.")
WORKLOAD: str | None = typer.Option(
    None,
    "--workload",
    help="A named workload in the environment (e.g. pr-42): its own workload stack <stack>.<name> and "
    "namespace <blueprint>-<name> on the shared platform (default: the blueprint's one workload).",
)
RESELECT_AZS: bool = typer.Option(
    False,
    "--reselect-azs",
    help="Choose the platform's AZs again instead of keeping those of the first up; subnets in an AZ "
    "that changes are replaced (asks first).",
)
ACCEPT_MOVED_TAGS: bool = typer.Option(
    False,
    "--accept-moved-tags",
    help="Move the workload stack onto the images its moved tags name now: record their new digests "
    "(without it a tag that moved since the stack pinned it is refused, and nothing changes).",
)
_TARGET_HELP = (
    f"Where it runs: {target_help()} down and status find it by themselves: where the stack's "
    "blueprints were deployed (local servers included)."
)
TARGET: str = typer.Option(DEFAULT_TARGET, "--target", help=_TARGET_HELP)
FOUND_TARGET: str | None = typer.Option(None, "--target", help=_TARGET_HELP)
REGION: str | None = typer.Option(
    None, "--region", help="AWS region (default: AWS_REGION or the profile's region)."
)
PLATFORM_REGION: str = typer.Option("us-west-2", "--region", help="AWS region of the platform.")
BACKEND: str | None = typer.Option(
    None, "--backend", help="Pulumi backend URL, e.g. s3://bucket/prefix (default: a local file backend)."
)
PROGRESS: str = typer.Option("rich", "--progress", help="rich (a live view) or plain (log lines, for CI).")

# A blueprint to read, required or not, one or several; or a deployed blueprint, by name.
_BLUEPRINT_HELP = "Catalog name or path to a blueprint YAML file."
BLUEPRINT: str = typer.Option(..., "--blueprint", "-b", help=_BLUEPRINT_HELP)
SOME_BLUEPRINT: str | None = typer.Option(None, "--blueprint", "-b", help=_BLUEPRINT_HELP)
BLUEPRINTS: list[str] = typer.Option([], "--blueprint", "-b", help=f"{_BLUEPRINT_HELP} {LIST_HELP}")
_DEPLOYED_HELP = "Name of a deployed blueprint."
DEPLOYED: str = typer.Option(..., "--blueprint", "-b", help=_DEPLOYED_HELP)
SOME_DEPLOYED: str | None = typer.Option(None, "--blueprint", "-b", help=_DEPLOYED_HELP)

POOLS: Path | None = typer.Option(
    None,
    "--pools",
    help="YAML file naming an existing cluster's node pools, instead of llmctl's (docs/workload.md).",
)
HF_TOKEN_FILE: Path | None = typer.Option(
    None, "--hf-token-file", help="File holding the Hugging Face token for gated models (default: $HF_TOKEN)."
)
MODEL_NAME: str | None = typer.Option(
    None, "--model", "-m", help="Model name (default: the endpoint's first model)."
)
API_KEY: str | None = typer.Option(
    None,
    "--api-key",
    envvar="OPENAI_API_KEY",
    help="API key (or OPENAI_API_KEY; --api-key-file keeps it out of the process list).",
)
API_KEY_FILE: Path | None = typer.Option(
    None, "--api-key-file", help="File holding the API key (wins over --api-key and OPENAI_API_KEY)."
)

# The metavars `--help` shows (cli/app.py: never a Python type such as <str>).
# Flags whose value is one of a few words the command checks itself: the words are the metavar
# (--target's three, each with what it means, are in its help text: a shorter column leaves the
# descriptions room at 80 columns).
CHOICES = {
    "--target": "TARGET",
    "--progress": "MODE",
    "--format": "FORMAT",
}
# Short words for common string values; any other string flag shows TEXT.
WORDS = {
    "--blueprint": "NAME",
    "--stack": "NAME",
    "--workload": "NAME",
    "--cluster": "NAME",
    "--model": "MODEL",
    "--region": "REGION",
    "--backend": "URL",
    "--endpoint": "URL",
    "--api-key": "KEY",
}
