"""Options several commands declare the same way (one definition, one help text)."""

from __future__ import annotations

from pathlib import Path

import typer

BLUEPRINT: str = typer.Option(..., "--blueprint", "-b", help="Catalog name or path to a blueprint YAML file.")
PLATFORM_STACK: str = typer.Option(
    "dev", "--stack", help="Environment (platform stack) the workload lands on."
)
PLATFORM_REGION: str = typer.Option("us-west-2", "--region", help="AWS region of the platform.")
POOLS: Path | None = typer.Option(
    None, "--pools", help="Cluster file naming an existing cluster's node pools (instead of llmctl's)."
)
JSON: bool = typer.Option(False, "--json", help="Print JSON with stable keys.")
