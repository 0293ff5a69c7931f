"""Doctor's and up's checks of the pinned AMI alias (SSM parameters in moto) and chart versions.

The chart repositories' answers are real or recorded, never composed:

- OCI repositories: the CNCF distribution registry (registry_support.py) holding the pinned chart
  versions as `helm push` stores them, read through a second server on the same storage that asks
  for a bearer token (`auth: token`, a signed JWT from registry_support.TokenIssuer), as
  public.ecr.aws does: the 401 challenge, the tags list and the 404 `NAME_UNKNOWN` are the server's.
  Debian's registry (2.8) lists all tags at once; the pages of a registry that pages are its `Link`
  header as distribution v3 writes it (registry/handlers/tags.go and catalog.go `createLinkEntry` at
  03f35e2b533129eb6c453ef9c76908b99c996352: `<path?last=..&n=..>; rel="next"`).
- HTTP Helm repositories: index.yaml files recorded from the repositories' gh-pages branches
  (tests/lifecycle/data/charts/README.md names each commit), served as static files.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest
from lifecycle_support import seed_ami_parameters
from local_http import serve_http
from registry_support import TokenRegistry, push_chart, token_registry

from llmctl.blueprints import versions as versions_module
from llmctl.errors import PrerequisiteError
from llmctl.infra.aws.pin_checks import ami_parameter, ami_variants, check_ami_alias, check_chart, oci_tags
from llmctl.infra.targets.doctor import run_doctor

__all__ = ["token_registry"]  # the module's registry servers (a fixture of registry_support.py)

# its module-scoped fixtures are built once: every test of this file on the same xdist worker
pytestmark = pytest.mark.xdist_group("test_pin_checks")

CHARTS = Path(__file__).parent / "data" / "charts"  # <repository>.index.yaml, recorded (README.md there)
# the pinned OCI charts (versions.yaml) and two more versions of Karpenter, pushed once per module
PUSHED = {
    "karpenter/karpenter": ["1.13.0", "1.14.1", "1.15.0"],
    "karpenter/karpenter-crd": ["1.15.0"],
    "neuron/neuron-helm-chart": ["1.9.0", "1.10.0"],
}


@pytest.fixture(scope="module")
def registry(token_registry: TokenRegistry) -> str:
    """host:port of the token-protected registry holding PUSHED."""
    for repo, tags in PUSHED.items():
        for tag in tags:
            push_chart(token_registry.push, repo, tag)
    return token_registry.host


@pytest.fixture(scope="module")
def chart_repos() -> Iterator[str]:
    """http://host:port of a static server of the recorded index files (`/<repository>/index.yaml`)."""
    root = Path(__file__).parent / "data" / "charts"
    with serve_http(functools.partial(_Static, directory=str(root))) as url:  # type: ignore[arg-type]
        yield url


class _Static(SimpleHTTPRequestHandler):
    """`/<repository>/index.yaml` from `<repository>.index.yaml` (a GitHub Pages chart repository)."""

    def translate_path(self, path: str) -> str:
        repository, _, rest = path.lstrip("/").partition("/")
        return super().translate_path(f"/{repository}.index.yaml" if rest == "index.yaml" else "/missing")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5, trust_env=False) as c:
        yield c


def test_oci_version_found_through_the_registry_s_token(
    registry: str, token_registry: TokenRegistry, client: httpx.Client
) -> None:
    asked = len(token_registry.issuer.asked)
    check = check_chart(client, f"oci://{registry}/karpenter", "karpenter", "1.13.0")
    assert check.ok is True and "published" in check.detail
    [query] = token_registry.issuer.asked[asked:]  # the challenge's service and the pull scope
    assert query == {"scope": ["repository:karpenter/karpenter:pull"], "service": ["llmctl-test-registry"]}


def test_oci_version_missing_fails_with_the_fix(registry: str, client: httpx.Client) -> None:
    check = check_chart(client, f"oci://{registry}/karpenter", "karpenter", "1.16.0")
    assert check.ok is False and "1.16.0 is not published" in check.detail and "1.15.0" in check.detail
    assert check.fix and "versions.yaml" in check.fix
    missing = check_chart(client, f"oci://{registry}/karpenter", "karpentr", "1.15.0")
    assert missing.ok is False and "karpenter/karpentr is not in" in missing.detail


def test_oci_tags_follow_the_registry_s_next_page_links() -> None:
    pages = {  # distribution v3's pages of n=2: tags.go sets `Link: <createLinkEntry>` while more remain
        "/v2/karpenter/karpenter/tags/list": (
            ["1.13.0", "1.14.1"],
            "/v2/karpenter/karpenter/tags/list?last=1.14.1&n=2",
        ),
        "/v2/karpenter/karpenter/tags/list?last=1.14.1&n=2": (["1.15.0"], None),
    }

    def answer(request: httpx.Request) -> httpx.Response:
        tags, following = pages[request.url.raw_path.decode()]
        headers = {"Link": f'<{following}>; rel="next"'} if following else {}
        return httpx.Response(200, json={"name": "karpenter/karpenter", "tags": tags}, headers=headers)

    with httpx.Client(transport=httpx.MockTransport(answer)) as paged:
        assert oci_tags(paged, "oci://registry.example/karpenter", "karpenter") == {
            "1.13.0",
            "1.14.1",
            "1.15.0",
        }


def test_http_index(chart_repos: str, client: httpx.Client) -> None:
    repo = f"{chart_repos}/kuberay-helm"
    assert check_chart(client, repo, "kuberay-operator", "1.4.2").ok is True  # the newest recorded
    newer = check_chart(client, repo, "kuberay-operator", "1.7.1")
    assert newer.ok is False and newer.detail.startswith(
        f"1.7.1 is not published in {repo} (found 12 versions"
    )
    assert check_chart(client, repo, "open-webui", "14.1.0").ok is False
    assert (
        check_chart(client, f"{chart_repos}/eks-charts", "aws-load-balancer-controller", "3.5.0").ok is True
    )
    missing = check_chart(client, f"{chart_repos}/nothing", "kuberay-operator", "1.7.0")
    assert missing.ok is False and missing.detail == f"no index.yaml at {chart_repos}/nothing"


def test_unreachable_or_refused_registry_could_not_check(
    registry: str, token_registry: TokenRegistry, client: httpx.Client
) -> None:
    closed = check_chart(client, "http://127.0.0.1:9/charts", "kuberay-operator", "1.7.0")
    assert closed.ok is None and closed.detail.startswith("could not check: cannot read")
    token_registry.issuer.refuse = True
    try:
        denied = check_chart(client, f"oci://{registry}/karpenter", "karpenter", "1.15.0")
    finally:
        token_registry.issuer.refuse = False
    assert denied.ok is None and "could not check" in denied.detail and "403" in denied.detail


def test_ami_parameter_is_the_one_karpenter_reads() -> None:
    assert ami_parameter("1.35", "al2023@v20260818", "neuron") == (
        "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/neuron/"
        "amazon-eks-node-al2023-x86_64-neuron-1.35-v20260818/image_id"
    )
    assert ami_variants(["cpu", "inferentia2"]) == ["standard", "neuron"]
    assert ami_variants(["cpu", "nvidia"]) == ["standard", "nvidia"]


def test_ami_alias_resolves_or_fails_in_moto(aws: str) -> None:
    import boto3

    session = boto3.session.Session(region_name=aws)
    alias = versions_module.versions().ami["al2023_alias"].value
    ok = check_ami_alias(session, aws, "1.35", alias, "neuron")
    assert ok.ok is True and ok.detail.startswith("resolves to ami-")
    other_k8s = check_ami_alias(session, aws, "1.31", alias, "standard")
    assert other_k8s.ok is False and "1.31" in other_k8s.detail and other_k8s.fix


def test_ami_check_without_permission_or_network_could_not_check(
    aws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from moto.ssm.exceptions import AccessDeniedException
    from moto.ssm.models import SimpleSystemManagerBackend

    def denied(self: Any, name: str, with_decryption: bool = False) -> Any:
        raise AccessDeniedException(f"not authorized to perform ssm:GetParameter on {name}")

    session = boto3.session.Session(region_name=aws)
    alias = versions_module.versions().ami["al2023_alias"].value
    monkeypatch.setattr(SimpleSystemManagerBackend, "get_parameter", denied)
    check = check_ami_alias(session, aws, "1.35", alias, "standard")
    assert check.ok is None and check.detail.startswith("could not check: AccessDenied")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    offline = check_ami_alias(boto3.session.Session(region_name=aws), aws, "1.35", alias, "standard")
    assert offline.ok is None and offline.detail.startswith("could not check")


@pytest.fixture
def local_repositories(registry: str, chart_repos: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned charts, with their repositories moved to the local servers; an HTTP chart's version
    is the newest its recorded index holds (the recording may predate the pin)."""
    import yaml

    real = versions_module.versions()
    moved = {}
    for key, chart in real.charts.items():
        if chart.repository.startswith("oci://"):
            update = {"repository": f"oci://{registry}/{chart.repository.rsplit('/', 1)[-1]}"}
        else:
            name = chart.repository.rstrip("/").rsplit("/", 1)[-1]
            index = CHARTS / f"{name}.index.yaml"
            newest = (
                yaml.safe_load(index.read_text())["entries"][chart.chart][0]["version"]
                if index.exists()
                else chart.version
            )
            update = {"repository": f"{chart_repos}/{name}", "version": newest}
        moved[key] = chart.model_copy(update=update)
    monkeypatch.setattr(versions_module, "versions", lambda: real.model_copy(update={"charts": moved}))


def test_doctor_reports_ami_and_chart_checks(
    aws: str, local_repositories: None, client: httpx.Client
) -> None:
    report = run_doctor("llama3-vllm-inf2", region=aws, chart_client=client)
    by_name = {c.name: c for c in report.checks}
    amis = [c for c in report.checks if c.name.startswith("AMI ")]
    assert [c.name.split("(")[1].split(",")[0] for c in amis] == ["standard", "neuron"]
    assert all(c.ok is True for c in amis)
    charts = {n: c.ok for n, c in by_name.items() if n.startswith("chart ")}
    assert charts == {
        "chart karpenter 1.15.0": True,
        "chart karpenter-crd 1.15.0": True,
        "chart kuberay-operator 1.4.2": True,  # the newest of the recorded index
        "chart aws-load-balancer-controller 3.5.0": True,
        "chart neuron-helm-chart 1.10.0": True,
    }


def test_doctor_chart_checks_offline_are_never_a_pass(aws: str) -> None:
    report = run_doctor("tiny-cpu", region=aws)  # the `aws` fixture routes the internet to a closed port
    charts = [c for c in report.checks if c.name.startswith("chart ")]
    assert len(charts) == 4 and all(c.ok is None and "could not check" in c.detail for c in charts)


def test_up_preflight_refuses_a_missing_variant_and_warns_when_it_cannot_check(
    aws: str, local_repositories: None
) -> None:
    from moto.ssm.models import ssm_backends

    from llmctl.infra.aws.preflight import preflight_pins

    # images are on the internet here (closed port): their checks are warnings, never a pass
    warnings = preflight_pins("tiny-cpu", stack="dev", region=aws)
    assert [w for w in warnings if not (w.startswith("image ") and "could not check" in w)] == []
    ssm_backends["123456789012"][aws]._parameters.clear()
    seed_ami_parameters(("standard",))
    with pytest.raises(PrerequisiteError) as refused:
        preflight_pins("llama2-70b-vllm-gpu", stack="dev", region=aws)
    assert "nvidia" in refused.value.message and "al2023" in refused.value.message
    assert refused.value.hint and "versions.yaml" in refused.value.hint


def test_up_preflight_warns_when_charts_cannot_be_checked(aws: str) -> None:
    from llmctl.infra.aws.preflight import preflight_pins

    warnings = preflight_pins("tiny-cpu", stack="dev", region=aws)
    assert len(warnings) == 4 + 2 and all("could not check" in w for w in warnings)  # charts, images
