"""Doctor's and up's checks of the pinned AMI alias (SSM parameters in moto) and chart versions (a
chart index and an OCI registry served on 127.0.0.1)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from lifecycle_support import seed_ami_parameters

from llmctl.blueprints import versions as versions_module
from llmctl.errors import PrerequisiteError
from llmctl.infra.aws.pin_checks import ami_parameter, ami_variants, check_ami_alias, check_chart
from llmctl.infra.targets.doctor import run_doctor

# its module-scoped fixture is built once: every test of this file on the same xdist worker
pytestmark = pytest.mark.xdist_group("test_pin_checks")

INDEX = """apiVersion: v1
entries:
  kuberay-operator:
  - {name: kuberay-operator, version: 1.7.0}
  - {name: kuberay-operator, version: 1.6.1}
  aws-load-balancer-controller:
  - {name: aws-load-balancer-controller, version: 3.5.0}
  nvidia-device-plugin:
  - {name: nvidia-device-plugin, version: 0.20.0}
"""
# OCI repository -> tags, served two per page behind an anonymous bearer token
TAGS = {
    "karpenter/karpenter": ["1.14.1", "1.15.0", "1.13.0"],
    "karpenter/karpenter-crd": ["1.15.0"],
    "neuron/neuron-helm-chart": ["1.9.0", "1.10.0"],
}
TOKEN = "anonymous-pull-token"


class _Registry(BaseHTTPRequestHandler):
    deny_tokens = False

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
        data = body.encode()
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        host = f"http://{self.headers['Host']}"
        if path == "/charts/index.yaml":
            return self._send(200, INDEX)
        if path == "/token":
            if self.deny_tokens:
                return self._send(403, "denied")
            return self._send(200, json.dumps({"token": TOKEN}))
        if path.startswith("/v2/") and path.endswith("/tags/list"):
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                challenge = f'Bearer realm="{host}/token",service="test-registry"'
                return self._send(401, "{}", {"WWW-Authenticate": challenge})
            repo = path[len("/v2/") : -len("/tags/list")]
            if repo not in TAGS:
                return self._send(404, json.dumps({"errors": [{"code": "NAME_UNKNOWN"}]}))
            tags = TAGS[repo]
            start = int(query.split("last=")[1]) if "last=" in query else 0
            page = {"name": repo, "tags": tags[start : start + 2]}
            headers = {}
            if start + 2 < len(tags):
                headers["Link"] = f'</v2/{repo}/tags/list?n=2&last={start + 2}>; rel="next"'
            return self._send(200, json.dumps(page), headers)
        return self._send(404, "not found")


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5, trust_env=False) as c:
        yield c


def test_oci_version_found_through_token_and_pages(registry: str, client: httpx.Client) -> None:
    check = check_chart(client, f"oci://{registry}/karpenter", "karpenter", "1.13.0")  # on page 2
    assert check.ok is True and "published" in check.detail


def test_oci_version_missing_fails_with_the_fix(registry: str, client: httpx.Client) -> None:
    check = check_chart(client, f"oci://{registry}/karpenter", "karpenter", "1.16.0")
    assert check.ok is False and "1.16.0 is not published" in check.detail and "1.15.0" in check.detail
    assert check.fix and "versions.yaml" in check.fix
    missing = check_chart(client, f"oci://{registry}/karpenter", "karpentr", "1.15.0")
    assert missing.ok is False and "karpenter/karpentr is not in" in missing.detail


def test_http_index(registry: str, client: httpx.Client) -> None:
    repo = f"http://{registry}/charts"
    assert check_chart(client, repo, "kuberay-operator", "1.7.0").ok is True
    assert check_chart(client, repo, "kuberay-operator", "1.7.1").ok is False
    assert check_chart(client, repo, "open-webui", "14.1.0").ok is False
    assert check_chart(client, f"http://{registry}/nothing", "kuberay-operator", "1.7.0").ok is False


def test_unreachable_or_refused_registry_could_not_check(registry: str, client: httpx.Client) -> None:
    closed = check_chart(client, "http://127.0.0.1:9/charts", "kuberay-operator", "1.7.0")
    assert closed.ok is None and closed.detail.startswith("could not check: cannot read")
    _Registry.deny_tokens = True
    try:
        denied = check_chart(client, f"oci://{registry}/karpenter", "karpenter", "1.15.0")
    finally:
        _Registry.deny_tokens = False
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
def local_repositories(registry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned charts, with their repositories moved to the local server."""
    real = versions_module.versions()
    moved = {
        key: chart.model_copy(
            update={
                "repository": f"oci://{registry}/{chart.repository.rsplit('/', 1)[-1]}"
                if chart.repository.startswith("oci://")
                else f"http://{registry}/charts"
            }
        )
        for key, chart in real.charts.items()
    }
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
        "chart kuberay-operator 1.7.0": True,
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
