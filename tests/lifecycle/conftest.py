"""Fixtures for the lifecycle tests: a local moto server, an isolated state dir, the stand-in engine."""

from __future__ import annotations

import hashlib
import os
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lifecycle_support import make_wheel, seed_ami_parameters, seed_cache_bucket
from standin_support import STANDIN_BUCKET, ForkServer, StandinEngine, build_client, install

HERE = Path(__file__).parent
REGION = "us-west-2"


@pytest.fixture
def aws(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Dummy credentials pointed at a freshly reset moto server; yields the region."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST")).read()
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("LLMCTL_API_CIDRS", "203.0.113.0/24")  # who reaches the EKS API (docs/security.md)
    # Chart repositories are on the internet: send any request there to a closed loopback port (the
    # chart checks then report "could not check"); loopback (moto, local servers) goes direct.
    for key in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(key, "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    seed_ami_parameters()
    yield REGION


@pytest.fixture(autouse=True)
def serving_code_account(request: pytest.FixtureRequest) -> None:
    """`up` decides how the serving code reaches the pods against AWS (ECR DescribeImages, the wheel
    upload to the cache bucket): every test that runs the stand-in engine gets the moto account,
    holding the bucket the stand-in's platform exports."""
    if "engine" not in request.fixturenames or "no_aws" in request.fixturenames:
        return
    region = request.getfixturevalue("aws")
    seed_cache_bucket(STANDIN_BUCKET, region)


@pytest.fixture(autouse=True)
def cpu_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PyTorch's CPU index is out of reach here: the download of what a lock leaves out (ray-cpu's CPU
    torch, at a first `up` on EKS) gives one small wheel of that name instead. The real download, with
    pip against a local index directory, and the pods' install from it: test_outside_wheels.py."""

    def download(spec: Any, out_dir: Path, args: list[str] | None = None) -> dict[str, str]:
        wheel = make_wheel(out_dir, "torch", "2.13.0+cpu")
        return {wheel.name: hashlib.sha256(wheel.read_bytes()).hexdigest()}

    monkeypatch.setattr("llmctl.infra.workload.delivery.outside_wheels.download", download)


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS credentials anywhere (and no network endpoint that could find some)."""
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", REGION)


@pytest.fixture(autouse=True)
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every test gets its own llmctl state dir and no inherited Pulumi (or delivery) settings."""
    root = tmp_path / "state"
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(root))
    for key in (
        "PULUMI_BACKEND_URL",
        "PULUMI_CONFIG_PASSPHRASE",
        "PULUMI_CONFIG_PASSPHRASE_FILE",
        "PULUMI_HOME",
        "LLMCTL_DELIVERY",  # `up` decides the serving-code delivery itself unless a test forces one
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "pulumi-home"))
    return root


@pytest.fixture
def no_pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH without any `pulumi`."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    keep = [
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not (Path(p) / "pulumi").exists()
    ]
    monkeypatch.setenv("PATH", os.pathsep.join([str(empty), *keep]))


@pytest.fixture(scope="session")
def fork_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One warm parent per test process for the stand-in's commands (standin_engine/forkserver.py)
    and its compiled client (standin_engine/client.c). STANDIN_FORKSERVER=0, or no C compiler, runs
    each command in a fresh Python process instead."""
    folder = tmp_path_factory.mktemp("forkserver")
    if os.environ.get("STANDIN_FORKSERVER") == "0" or build_client(folder) is None:
        yield ""
        return
    server = ForkServer(folder)
    yield server.path
    server.close()


@pytest.fixture
def engine(tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch, fork_server: str) -> StandinEngine:
    """The stand-in engine as `pulumi` first on PATH (tests/lifecycle/standin_engine): it runs the
    inline programs through the Automation API and keeps state in llmctl's local file backend."""
    bin_dir = tmp_path / "standin-bin"
    install(bin_dir, "pulumi", "cli", fork_server)
    install(bin_dir, "kubectl", "kubectl", fork_server)
    install(bin_dir, "aws", "aws_cli", fork_server)  # `up`'s preflight asks for its version
    data = tmp_path / "standin"
    data.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("STANDIN_PULUMI_DIR", str(data))
    monkeypatch.setenv("STANDIN_BACKEND", str(state / "pulumi"))
    # The SDK sends every debug line (three per resource) to the engine as its own gRPC call; the
    # stand-in drops debug diagnostics unread (standin_engine/deploy.py `_Engine.Log`), as the
    # Pulumi CLI does without --debug (pulumi/pulumi pkg/backend/display/progress.go,
    # `renderProgressDiagEvent`: a Debug diagnostic renders as "" unless the Debug display option is
    # set). Dropping them in the program instead saves those round trips
    # (about a tenth of a scenario's CPU); info, warnings and errors still reach the stand-in.
    import pulumi.log
    import pulumi.runtime.resource

    monkeypatch.setattr(pulumi.log, "debug", _no_debug)
    # The SDK also sends each resource's source position and stack trace (`_get_stack_trace`: a
    # `traceback.extract_stack` that reads every frame's source line, and a file URI per frame), which
    # the Pulumi CLI shows in some diagnostics and the stand-in never reads: about 6 % of the test
    # process's CPU in a scenario. The registrations carry an empty trace instead, as the SDK sends
    # when it finds no user frame.
    monkeypatch.setattr(pulumi.runtime.resource, "_get_stack_trace", _no_stack_trace)
    return StandinEngine(data, state / "pulumi")


def _no_debug(*args: object, **kwargs: object) -> None:
    """`pulumi.log.debug` while the stand-in engine runs the programs."""


def _no_stack_trace() -> object:
    """`pulumi.runtime.resource._get_stack_trace` while the stand-in engine runs the programs."""
    from pulumi.runtime.proto import source_pb2

    return source_pb2.StackTrace()


@pytest.fixture
def ec2_quotas(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[dict[str, float]], None]]:
    """EC2 vCPU quotas in the running moto server (moto models Service Quotas for `vpc` only)."""
    from moto.servicequotas.models import ServiceQuotasBackend

    values: dict[str, float] = {}
    original = ServiceQuotasBackend.get_service_quota

    def get_service_quota(self: Any, service_code: str, quota_code: str) -> dict[str, Any]:
        if service_code == "ec2" and quota_code in values:
            return {
                "ServiceCode": "ec2",
                "QuotaCode": quota_code,
                "QuotaName": quota_code,
                "Value": values[quota_code],
            }
        return original(self, service_code, quota_code)

    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_service_quota)
    yield values.update
