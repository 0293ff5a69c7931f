"""Issue 53, finding 3: Triton's admin APIs are not open on the serving port.

The command the Triton container execs (`serving/triton_vllm/start.py`, the start module every
triton-vllm pod runs) restricts logging, trace, shared memory, statistics, the model repository and
model configuration to a header whose value is random per start and held by no one. The flags are
read as Triton r26.06 reads them (``src/command_line_parser.cc`` ``ParseRestrictedFeatureOption``:
the APIs before the first ``:``, the header before the next ``=``, the value after it; each API one
of ``src/restricted_features.h``'s names, in one group only). No Triton runs here, so the attack
(``POST /v2/logging`` from another pod) is not tried against a server; the command is what is held.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmctl.blueprints.catalog import load_blueprint
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests
from llmctl.serving.triton_vllm import queue_metrics, start

#: Triton r26.06 src/restricted_features.h, the names RestrictedFeatures::ToCategory accepts
TRITON_CATEGORIES = {
    "health",
    "metadata",
    "inference",
    "shared-memory",
    "model-config",
    "model-repository",
    "statistics",
    "trace",
    "logging",
}
ADMIN = {"logging", "trace", "shared-memory", "statistics", "model-repository", "model-config"}


def _parse(flag: str) -> tuple[str, set[str], str, str]:
    """(option, APIs, header, value) as Triton's ParseGenericConfigOption(arg, ":", "=") splits it."""
    option, _, arg = flag.partition("=")
    features, colon, setting = arg.partition(":")
    header, equals, value = setting.partition("=")
    assert colon and equals, f"Triton refuses {flag!r}: no ':' or '='"
    apis = features.split(",")
    assert len(apis) == len(set(apis)), "an API in two groups is refused"
    return option, set(apis), header, value


def _started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The argv `start.main` execs (tritonserver replaced: none on this machine)."""
    monkeypatch.setenv(start.REPOSITORY_ENV, str(tmp_path / "repository"))
    monkeypatch.setenv(queue_metrics.DIRECTORY_ENV, str(tmp_path / "metrics"))
    monkeypatch.setattr(start, "write_repository", lambda root: [])
    monkeypatch.setattr(queue_metrics, "spawn", lambda *a: None)
    monkeypatch.setattr("sys.argv", ["start", "--http-port=8000", "--grpc-port=8001"])
    execs: list[list[str]] = []
    monkeypatch.setattr(os, "execvp", lambda file, args: execs.append(list(args)))
    start.main()
    [argv] = execs
    return argv


def test_triton_starts_with_its_admin_apis_behind_a_header_no_one_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = _started(tmp_path, monkeypatch)
    assert argv[0] == "tritonserver" and argv[-2:] == ["--http-port=8000", "--grpc-port=8001"]
    restricted = {
        option: rest
        for option, *rest in map(
            _parse, (a for a in argv if a.startswith(("--http-restricted", "--grpc-restricted")))
        )
    }
    assert set(restricted) == {"--http-restricted-api", "--grpc-restricted-protocol"}
    for apis, header, value in restricted.values():
        assert apis == ADMIN and apis <= TRITON_CATEGORIES
        assert not apis & {"health", "inference", "metadata"}  # probes and clients stay open
        assert header == start.ADMIN_HEADER and len(value) >= 40  # 32 random bytes, URL-safe base64
    # one value for both, new at each start
    assert len({value for _apis, _header, value in restricted.values()}) == 1
    again = _started(tmp_path, monkeypatch)
    assert [a for a in again if "restricted" in a] != [a for a in argv if "restricted" in a]


def test_the_value_is_in_no_pod_spec_and_every_triton_pod_runs_the_start_module() -> None:
    bp = load_blueprint("llama2-triton-vllm-gpu")
    manifests = build_manifests(
        WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp)), hf_token=None
    )
    [deployment] = [
        m for m in manifests if m["kind"] == "Deployment" and m["metadata"]["name"].endswith("-triton")
    ]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert start.__name__ in " ".join(container["command"])  # the module that adds the restriction
    rendered = str(deployment)
    assert "restricted" not in rendered and start.ADMIN_HEADER not in rendered
