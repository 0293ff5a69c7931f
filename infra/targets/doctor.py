"""`llmctl doctor`: the account and region checks (infra/aws/doctor.py) together with exactly the
checks `llmctl up`'s preflight runs on the target (its needs: the tools with their versions, the
credentials, a gated model's Hugging Face token), so a machine `doctor` passes is one `up` accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmctl.blueprints import catalog
from llmctl.infra.aws.checks import Check
from llmctl.infra.aws.doctor import DoctorReport, account_checks
from llmctl.infra.names import DEFAULT_TARGET
from llmctl.infra.targets.needs import NeedContext, NeedResult, probe_needs
from llmctl.infra.targets.registry import get_target


def need_check(result: NeedResult) -> Check:
    """One preflight check as a doctor line: what was found, or what is missing with its fix."""
    if result.problem is None:
        return Check(result.name, True, result.found or "ok")
    fixes = getattr(result.problem, "fixes", None) or []
    detail = "; ".join(message for message, _ in fixes) if fixes else result.problem.message
    fix = "; ".join(f for _, f in fixes if f) if fixes else result.problem.hint
    return Check(result.name, False, detail, fix or None)


def run_doctor(
    blueprint: str | None = None,
    *,
    region: str | None = None,
    stack: str = "dev",
    target: str = DEFAULT_TARGET,
    hf_token_file: Path | None = None,
    session: Any = None,
    chart_client: Any = None,
) -> DoctorReport:
    """Every check of the account and region, then the checks `up` runs on `target` before anything
    is built (the account's own identity check stands for the credentials need)."""
    report = account_checks(blueprint, region=region, stack=stack, session=session, chart_client=chart_client)
    needs = set(get_target(target).needs_for("up")) - {"aws"}
    if blueprint is None:
        needs.discard("hf-token")
    ctx = NeedContext(region=region, blueprint=blueprint, hf_token_file=hf_token_file)
    report.checks.extend(need_check(result) for result in probe_needs(needs, ctx))
    credentials = all(c.ok is not False for c in report.checks if c.name == "AWS credentials")
    if blueprint is not None and report.region is not None and target == "eks" and credentials:
        from llmctl.infra.lifecycle.upgrade import doctor_upgrade  # lazy: the engine, only for a blueprint

        upgrade = doctor_upgrade(catalog.load_blueprint(blueprint), stack=stack, region=report.region)
        if upgrade is not None:
            report.checks.append(upgrade)
    return report
