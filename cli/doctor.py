"""`llmctl doctor`: is this machine and account ready for a blueprint?"""

from __future__ import annotations

from pathlib import Path

import typer

from llmctl.cli import options, output


def doctor(
    blueprint: str | None = options.SOME_BLUEPRINT,
    region: str | None = options.REGION,
    stack: str = options.STACK,
    hf_token_file: Path | None = options.HF_TOKEN_FILE,
    json_output: bool = options.JSON,
) -> None:
    """Credentials, region, instance offerings by AZ, vCPU quota, pinned versions, and the checks `up`
    runs before it builds anything: tool versions (kubectl within the cluster's skew), Hugging Face token."""
    output.start(json_output=json_output)
    from llmctl.errors import PrerequisiteError
    from llmctl.infra.targets.doctor import run_doctor

    report = run_doctor(blueprint, region=region, stack=stack, hf_token_file=hf_token_file)
    if json_output:
        output.emit_json(report.to_dict())
    else:
        for check in report.checks:
            mark = {True: "[green]ok[/]  ", False: "[red]FAIL[/]", None: "[yellow]warn[/]"}[check.ok]
            mark = "[yellow]skip[/]" if check.skipped else mark
            output.console.print(f"{mark} {check.name}: {check.detail}", soft_wrap=True)
            if check.fix and check.ok is not True:
                output.console.print(f"       fix: {check.fix}", soft_wrap=True, markup=False)
    if not report.ok and json_output:
        raise typer.Exit(PrerequisiteError.exit_code)
    if not report.ok:
        failed = [c.name for c in report.checks if c.ok is False]
        raise PrerequisiteError(
            f"{len(failed)} check(s) failed: {', '.join(failed)}",
            "apply the fixes listed above and run `llmctl doctor` again",
        )


def register(app: typer.Typer) -> None:
    """Add `llmctl doctor`."""
    app.command("doctor")(doctor)
