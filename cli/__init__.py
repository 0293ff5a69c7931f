"""The command-line interface: commands and presentation only (Typer + Rich)."""
