"""Prerequisites found before anything starts: the pulumi CLI, AWS credentials and region, kubectl.

Each `require_*` raises :class:`PrerequisiteError` (or :class:`CloudError` when AWS answers with
an error) carrying an install or fix hint; each `probe_*` returns the same finding as data for
`llmctl doctor`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from llmctl.blueprints import catalog  # catalog.load_blueprint is read at call time (tests swap it)
from llmctl.errors import BadInput, BlueprintError, CloudError, PrerequisiteError
from llmctl.infra.aws.pin_checks import pin_checks
from llmctl.infra.aws.quota import check_quota, platform_az_ids
from llmctl.infra.aws.reservations import check_reservations
from llmctl.infra.aws.session import new_session
from llmctl.infra.platform.config import validate_config

# The oldest pulumi CLI llmctl works with: `destroy`/`refresh` of an inline program need 3.181
# (`--client`; the Automation API raises InvalidVersionError below it), though it accepts >= 3.1.
MIN_PULUMI = (3, 181, 0)
PULUMI_INSTALL = (
    "install it with `curl -fsSL https://get.pulumi.com | sh` (version {min} or newer), then open a new shell"
)
KUBECTL_INSTALL = (
    "install kubectl (https://kubernetes.io/docs/tasks/tools/), e.g. `sudo snap install kubectl --classic`"
)
_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def min_pulumi() -> str:
    """'3.181.0'."""
    return ".".join(str(part) for part in MIN_PULUMI)


@dataclass(frozen=True)
class Probe:
    """One finding: what was found (or not), and the fix."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None


def _run(argv: list[str], timeout: float = 20) -> str:
    env = {**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"}
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=True, env=env
    ).stdout.strip()


def probe_pulumi() -> Probe:
    """Is the pulumi CLI on PATH, and recent enough?"""
    hint = PULUMI_INSTALL.format(min=min_pulumi())
    path = shutil.which("pulumi")
    if path is None:
        return Probe("pulumi CLI", False, "the pulumi CLI is not installed (not on PATH)", hint)
    try:
        out = _run([path, "version"])
    except (OSError, subprocess.SubprocessError) as exc:
        return Probe("pulumi CLI", False, f"`pulumi version` failed: {exc}", hint)
    match = _VERSION.search(out)
    if not match:
        return Probe("pulumi CLI", False, f"cannot read the pulumi version from {out!r}", hint)
    found = tuple(int(part) for part in match.groups())
    version = ".".join(match.groups())
    if found < MIN_PULUMI:
        return Probe(
            "pulumi CLI", False, f"pulumi {version} is older than {min_pulumi()}", f"upgrade: {hint}"
        )
    return Probe("pulumi CLI", True, f"pulumi {version} ({path})")


def probe_kubectl() -> Probe:
    """Is kubectl on PATH?"""
    path = shutil.which("kubectl")
    if path is None:
        return Probe("kubectl", False, "kubectl is not installed (not on PATH)", KUBECTL_INSTALL)
    try:
        out = _run([path, "version", "--client", "-o", "json"])
        import json

        version = json.loads(out).get("clientVersion", {}).get("gitVersion", "unknown version")
    except (OSError, subprocess.SubprocessError, ValueError):
        version = "unknown version"
    return Probe("kubectl", True, f"kubectl {version} ({path})")


AWS_CLI_INSTALL = (
    "install the AWS CLI v2 (https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html): "
    "the cluster's kubeconfig runs `aws eks get-token` for kubectl"
)


def probe_aws_cli() -> Probe:
    """Is the AWS CLI on PATH? The EKS kubeconfig authenticates through `aws eks get-token`."""
    path = shutil.which("aws")
    if path is None:
        return Probe("AWS CLI", False, "the AWS CLI is not installed (not on PATH)", AWS_CLI_INSTALL)
    try:
        version = _run([path, "--version"]).strip() or "unknown version"
    except (OSError, subprocess.SubprocessError):
        version = "unknown version"
    return Probe("AWS CLI", True, f"{version} ({path})")


def _raise(probe: Probe) -> str:
    if not probe.ok:
        raise PrerequisiteError(probe.detail, probe.fix)
    return probe.detail


def require_pulumi() -> str:
    """The pulumi version line, or PrerequisiteError with the install command."""
    return _raise(probe_pulumi())


def require_kubectl() -> str:
    """kubectl's path and version, or PrerequisiteError with an install hint."""
    return _raise(probe_kubectl())


def resolve_region(region: str | None) -> str:
    """--region, then AWS_REGION / AWS_DEFAULT_REGION, then the profile's region (checked)."""
    found = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not found:
        found = new_session().region_name
    if not found:
        raise PrerequisiteError(
            "no AWS region is set", "pass --region (e.g. --region us-west-2) or set AWS_REGION"
        )

    try:  # the platform's own region rule: a typo fails here, not at AWS
        validate_config({"region": found}, source="the AWS region")
    except BlueprintError as exc:
        detail = "; ".join(message for _, message in exc.problems) or exc.message
        raise BadInput(
            detail, "pass --region with a region code such as us-west-2 (or fix AWS_REGION / the profile)"
        ) from None
    return str(found)


CREDENTIALS_FIX = (
    "configure them with `aws configure` or `aws sso login --profile NAME` (then AWS_PROFILE=NAME), "
    "or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
)


def require_local_credentials() -> None:
    """Credentials are configured on this machine (found by boto's chain; no call to AWS)."""
    if new_session().get_credentials() is None:
        raise PrerequisiteError("no AWS credentials found", CREDENTIALS_FIX)


@dataclass(frozen=True)
class AwsIdentity:
    """Who the AWS credentials belong to."""

    account: str
    arn: str
    region: str


def require_aws(region: str | None = None) -> AwsIdentity:
    """STS GetCallerIdentity with the credentials in effect, or an error naming the fix."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    resolved = resolve_region(region)
    try:
        sts = new_session(resolved).client("sts", region_name=resolved)
        reply = sts.get_caller_identity()
    except NoCredentialsError:
        raise PrerequisiteError("no AWS credentials found", CREDENTIALS_FIX) from None
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        raise CloudError(
            f"AWS rejected the credentials ({code})",
            "refresh them (`aws sso login`, or new access keys) and check the clock of this machine",
        ) from None
    except BotoCoreError as exc:
        raise CloudError(
            f"cannot reach AWS STS in {resolved}: {exc}", "check the region and the network"
        ) from None
    return AwsIdentity(account=str(reply["Account"]), arn=str(reply["Arn"]), region=resolved)


def preflight_pins(blueprint: str, *, stack: str, region: str | None) -> list[str]:
    """`up`'s check of what only the account and the chart repositories know: the pinned AMI alias
    resolves for the cluster's Kubernetes version in every variant the blueprint's nodes need, and
    every pinned chart version is published. A definite failure raises; checks that could not run
    come back as warning lines (never as a pass)."""

    resolved = resolve_region(region)
    session = new_session(resolved)
    checks = pin_checks(catalog.load_blueprint(blueprint), stack=stack, region=resolved, session=session)
    failed = [check for check in checks if check.ok is False]
    if failed:
        raise PrerequisiteError(
            "pinned versions do not resolve: " + "; ".join(f"{c.name}: {c.detail}" for c in failed),
            "; ".join(sorted({c.fix for c in failed if c.fix})) or None,
        )
    return [f"{check.name}: {check.detail}" for check in checks if check.ok is None]


def preflight_capacity(
    blueprint: str, *, stack: str, region: str | None, session: object = None
) -> list[str]:
    """`up`'s check, before the platform is built, that the account can launch the serving nodes: the
    EC2 vCPU quota of the instance family against the blueprint's autoscaling maximum, and the
    capacity reservations it names (active, of its instance type, in the platform's AZs, room for the
    nodes it starts with). A definite failure raises with the fix (the quota increase command, the
    reservation to change); a check that could not run comes back as a warning line."""

    resolved = resolve_region(region)
    bp = catalog.load_blueprint(blueprint)
    session = session or new_session(resolved)
    checks = [
        check_quota(session, resolved, bp),
        *check_reservations(session, resolved, bp, platform_az_ids(bp, stack, resolved)),
    ]
    failed = [check for check in checks if check.ok is False]
    if failed:
        raise PrerequisiteError(
            "; ".join(f"{c.name}: {c.detail}" for c in failed),
            "; ".join(c.fix for c in failed if c.fix) or None,
        )
    return [f"{check.name}: {check.detail}" for check in checks if check.ok is None]


# --- the tools `up` on EKS calls, with versions (issue 25; a section of its own) -----------------
# The kubeconfig of an EKS cluster (pulumi_eks) authenticates with the exec plugin
# `aws eks get-token` and apiVersion client.authentication.k8s.io/v1beta1. The AWS CLI answers with
# that version (not v1alpha1, which kubectl 1.24+ refuses) from 1.24.0 (aws/aws-cli PR 6940, merged
# 2022-05-11; released in 1.24.0 per aws/containers-roadmap issue 1736). The v2 line took the same
# change in 2.7.0 (the v2 release of that week; the v2 changelog itself was not looked up).
MIN_AWS_CLI = {1: (1, 24, 0), 2: (2, 7, 0)}
_AWS_CLI_VERSION = re.compile(r"aws-cli/(\d+)\.(\d+)\.(\d+)")
# kubectl is supported within one minor version of the API server, older or newer
# (https://kubernetes.io/releases/version-skew-policy/#kubectl).
KUBECTL_SKEW = 1


def probe_aws_cli_version() -> Probe:
    """The AWS CLI is on PATH and new enough for the EKS kubeconfig's `aws eks get-token`."""
    found = probe_aws_cli()
    if not found.ok:
        return found
    match = _AWS_CLI_VERSION.search(found.detail)
    if not match:
        return Probe(
            "AWS CLI", False, f"cannot read the AWS CLI version from {found.detail!r}", AWS_CLI_INSTALL
        )
    version = tuple(int(part) for part in match.groups())
    minimum = MIN_AWS_CLI.get(version[0], MIN_AWS_CLI[2])
    if version < minimum:
        shown, needed = ".".join(match.groups()), ".".join(str(p) for p in minimum)
        return Probe(
            "AWS CLI",
            False,
            f"AWS CLI {shown} is older than {needed} (its `aws eks get-token` answers with an API "
            "version kubectl no longer accepts)",
            f"upgrade: {AWS_CLI_INSTALL}",
        )
    return found


def probe_kubectl_for(kubernetes_version: str) -> Probe:
    """kubectl is on PATH and within the supported skew of the cluster's Kubernetes version."""
    found = probe_kubectl()
    hint = f"{KUBECTL_INSTALL}, version {kubernetes_version} (or one minor version either side)"
    if not found.ok:
        return Probe(
            "kubectl",
            False,
            f"kubectl (within one minor version of the cluster's Kubernetes {kubernetes_version}) is not "
            "installed (not on PATH)",
            hint,
        )
    match = re.search(r"v(\d+)\.(\d+)\.", found.detail)
    cluster = re.fullmatch(r"(\d+)\.(\d+)", kubernetes_version)
    if not match or not cluster:
        return Probe("kubectl", False, f"cannot read the kubectl version ({found.detail})", hint)
    ours, theirs = (int(match[1]), int(match[2])), (int(cluster[1]), int(cluster[2]))
    if ours[0] != theirs[0] or abs(ours[1] - theirs[1]) > KUBECTL_SKEW:
        # it is installed: the fix is another version of it, not an install (issue 54 item 6)
        verb = "upgrade kubectl to" if ours < theirs else "install the older kubectl"
        return Probe(
            "kubectl",
            False,
            f"kubectl {match[1]}.{match[2]} is more than {KUBECTL_SKEW} minor version from the cluster's "
            f"Kubernetes {kubernetes_version}",
            f"{verb} {kubernetes_version} (or one minor version either side), e.g. `sudo snap refresh "
            f"kubectl --channel={kubernetes_version}/stable` (https://kubernetes.io/docs/tasks/tools/)",
        )
    return found


def require_aws_cli() -> str:
    """The AWS CLI's version line, or PrerequisiteError with the install hint."""
    return _raise(probe_aws_cli_version())


def require_kubectl_for(kubernetes_version: str) -> str:
    """kubectl's version (within the skew of `kubernetes_version`), or PrerequisiteError."""
    return _raise(probe_kubectl_for(kubernetes_version))
