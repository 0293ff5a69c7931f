"""A local copy of the model checked once is not hashed again while it and the checksums are unchanged
(serving/verified_copy.py); any change, or a marker that cannot be read, checks every file again."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from serving_support import hub_checksums, ray_download

from llmctl.errors import ServingError
from llmctl.serving.model_files import FILES_ENV
from llmctl.serving.model_mirror import COMPLETE_MARKER
from llmctl.serving.ray_vllm import replica
from llmctl.serving.verified_copy import marker_path, verify_once

URI = "s3://llmctl-dev-us-west-2-cache/models/tiny/0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def copy(tiny_model: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_model, tmp_path / "copy"))


def _stats(folder: Path) -> dict[str, list[int]]:
    return {
        p.name: [p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ctime_ns]
        for p in folder.iterdir()
        if p.name != COMPLETE_MARKER
    }


def test_a_checked_copy_is_marked_and_not_hashed_again_while_unchanged(copy: Path, tiny_model: Path) -> None:
    import hashlib

    expected = hub_checksums(tiny_model)
    assert verify_once(copy, expected, URI) == len(expected) == 7
    digest = hashlib.sha256(json.dumps(expected, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert json.loads(marker_path(copy).read_text()) == {"checksums": digest, "files": _stats(copy)}
    assert marker_path(copy) == copy.parent / "copy.llmctl-verified"
    assert sorted(p.name for p in copy.parent.iterdir()) == [
        "copy",
        "copy.llmctl-verified",
    ]  # no temp file left
    assert verify_once(copy, expected, URI) is None
    assert verify_once(copy, expected, URI) is None


def _other_checksums(copy: Path, expected: dict[str, str]) -> dict[str, str]:
    return {**expected, "added.json": "git-blob:" + "0" * 40}


def _touched(copy: Path, expected: dict[str, str]) -> dict[str, str]:
    os.utime(copy / "tokenizer.json", ns=(1, 1_000_000_000))
    return expected


def _marker_removed(copy: Path, expected: dict[str, str]) -> dict[str, str]:
    marker_path(copy).unlink()
    return expected


def _marker_unreadable(copy: Path, expected: dict[str, str]) -> dict[str, str]:
    marker_path(copy).write_text('{"checksums": ')
    return expected


@pytest.mark.parametrize("change", [_other_checksums, _touched, _marker_removed, _marker_unreadable])
def test_another_checksum_list_a_touched_file_or_no_readable_marker_hash_every_file_again(
    copy: Path, tiny_model: Path, change: Callable[[Path, dict[str, str]], dict[str, str]]
) -> None:
    expected = hub_checksums(tiny_model)
    assert verify_once(copy, expected, URI) == 7
    changed = change(copy, expected)
    assert verify_once(copy, changed, URI) == 7  # every file hashed again, and marked anew
    assert verify_once(copy, changed, URI) is None


def test_a_missing_file_hashes_the_others_again(copy: Path, tiny_model: Path) -> None:
    expected = hub_checksums(tiny_model)
    assert verify_once(copy, expected, URI) == 7
    (copy / "generation_config.json").unlink()
    assert verify_once(copy, expected, URI) == 6


def test_a_file_rewritten_with_its_size_and_mtime_kept_is_refused_not_skipped(
    copy: Path, tiny_model: Path
) -> None:
    """The mtime can be set back (os.utime, touch -d); the ctime that changes with it cannot."""
    expected = hub_checksums(tiny_model)
    assert verify_once(copy, expected, URI) == 7
    weights = copy / "model.safetensors"
    before = weights.stat()
    weights.write_bytes(b"\0" * before.st_size)
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert weights.stat().st_size == before.st_size and weights.stat().st_mtime_ns == before.st_mtime_ns
    with pytest.raises(ServingError, match=r"model\.safetensors .* does not match the Hub's checksum"):
        verify_once(copy, expected, URI)


def test_an_added_file_is_refused_and_a_failed_check_writes_no_marker(copy: Path, tiny_model: Path) -> None:
    expected = hub_checksums(tiny_model)
    (copy / "extra.py").write_text("import os")
    with pytest.raises(
        ServingError, match=r"holds extra\.py, a file the pinned model revision does not have"
    ):
        verify_once(copy, expected, URI)
    assert not marker_path(copy).exists()
    (copy / "extra.py").unlink()
    assert verify_once(copy, expected, URI) == 7
    (copy / "extra.py").write_text("import os")
    with pytest.raises(ServingError, match=r"holds extra\.py"):
        verify_once(copy, expected, URI)


def test_a_marker_that_cannot_be_written_only_costs_the_next_start_a_check(
    copy: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = hub_checksums(tiny_model)
    marker_path(copy).mkdir()  # in the way: neither read nor replaced
    assert verify_once(copy, expected, URI) == 7
    assert f"could not write {marker_path(copy)}" in capsys.readouterr().err
    assert verify_once(copy, expected, URI) == 7
    assert sorted(p.name for p in copy.parent.iterdir()) == ["copy", "copy.llmctl-verified"]


def test_a_ray_vllm_replica_start_does_not_hash_an_unchanged_checked_copy_again(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(FILES_ENV, json.dumps(hub_checksums(tiny_model)))
    snapshot = ray_download(tiny_model, tmp_path / "hub")
    asyncio.run(replica.after_weights(URI, str(snapshot)))
    assert marker_path(snapshot).is_file() and "not hashed again" not in capsys.readouterr().err
    asyncio.run(replica.after_weights(URI, str(snapshot)))  # the next replica start on the node
    assert capsys.readouterr().err == (
        f"llmctl: the files of {URI} in {snapshot} are unchanged since they were checked against the "
        "same checksums: not hashed again\n"
    )
    (snapshot / "config.json").write_text("{}")  # changed since: checked, and refused
    with pytest.raises(ServingError, match=r"config\.json .* does not match the Hub's checksum"):
        asyncio.run(replica.after_weights(URI, str(snapshot)))
