"""The upstream files are found beside the project root, or where $LLMCTL_UPSTREAM_DIR says; when
they are missing the tests fail with a message naming where they looked (never a skip)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from upstream_files import ENV_VAR, PROJECT_ROOT, UpstreamFilesMissing, candidates, upstream, upstream_dir


def test_default_lookup_is_beside_the_project_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert candidates()[0] == Path(__file__).absolute().parents[2].parent / "shared" / "upstream"
    assert upstream_dir() in candidates() and PROJECT_ROOT.is_dir()
    assert upstream("karpenter/cloudformation.yaml").is_file()


def test_missing_files_fail_clearly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(UpstreamFilesMissing, match=re.escape(str(tmp_path))) as missing:
        upstream_dir()
    assert isinstance(missing.value, AssertionError)  # a failure, not a skip
    (tmp_path / "README.md").write_text("copies\n")
    assert upstream_dir() == tmp_path
    with pytest.raises(UpstreamFilesMissing, match=r"kuberay/values\.yaml"):
        upstream("kuberay/values.yaml")
