"""kubectl that hangs: an API server that accepts the connection and never answers must give the
command's one-line refusal, not a TimeoutExpired traceback (the teardown's reachability check reads
it as "cannot be reached")."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from llmctl.errors import ServingError
from llmctl.infra.lifecycle import kube, teardown


@pytest.fixture
def hanging_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    exe = tmp_path / "bin" / "kubectl"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\nexec sleep 30\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    return exe


def test_a_kubectl_that_does_not_answer_is_a_serving_error_naming_the_wait(hanging_kubectl: Path) -> None:
    with pytest.raises(ServingError) as caught:
        kube.kubectl_json(None, "get", "namespaces", timeout=0.3)
    assert caught.value.message == "`kubectl get namespaces -o json` did not answer within 0.3 s"
    assert "API server is unreachable" in (caught.value.hint or "")


def test_the_teardown_reads_a_hanging_api_server_as_unreachable(
    hanging_kubectl: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = kube.kubectl_json
    monkeypatch.setattr(
        teardown, "kubectl_json", lambda config, *args, timeout=30: real(config, *args, timeout=0.3)
    )
    assert teardown.kube_problem(tmp_path / "kubeconfig") == (
        "`kubectl get namespaces -o json` did not answer within 0.3 s"
    )
