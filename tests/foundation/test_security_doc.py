"""Issue 53: the threat model (docs/security-threats.md) states what a tenant, a PR author and a
compromised pod can and cannot reach, each line naming the test that holds it; every test the security
pages name must exist, or the claim it backs is held by nothing."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "docs" / "security.md", ROOT / "docs" / "security-threats.md"]
REACH = "## What a tenant, a PR author and a compromised pod can and cannot reach"
#: `tests/<path>.py::test_name`, or `::test_name` of the file named last before it
REFERENCE = re.compile(r"(tests/[\w/]+\.py)?::(test_\w+)|(tests/[\w/]+\.py)")


@functools.cache
def _tests_in(path: str) -> frozenset[str]:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return frozenset(
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
    )


def references(text: str) -> list[tuple[str, str | None]]:
    """(file, test or None) for every test reference in the text; `::name` takes the file named last."""
    found: list[tuple[str, str | None]] = []
    last: str | None = None
    for match in REFERENCE.finditer(text):
        named, test, bare = match.groups()
        if bare:
            last = bare
            found.append((bare, None))
            continue
        last = named or last
        assert last is not None, f"::{test} follows no file"
        found.append((last, test))
    return found


def test_every_test_the_security_pages_name_exists() -> None:
    """Fails on the old code: docs/security-threats.md did not exist."""
    missing = []
    count = 0
    for page in PAGES:
        for path, test in references(page.read_text(encoding="utf-8")):
            count += 1
            if not (ROOT / path).is_file():
                missing.append(f"{page.name}: {path}")
            elif test is not None and test not in _tests_in(path):
                missing.append(f"{page.name}: {path}::{test}")
    assert count > 30
    assert not missing, "\n".join(missing)


def test_each_can_and_cannot_line_names_its_test() -> None:
    text = (ROOT / "docs" / "security-threats.md").read_text(encoding="utf-8")
    section = text.split(REACH, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith(("| can |", "| cannot |"))]
    for who in ("**A PR author**", "**A tenant**", "**A compromised pod**"):
        assert who in section
    assert len(rows) >= 20
    assert {row.split("|")[1].strip() for row in rows} == {"can", "cannot"}
    for row in rows:
        assert any(test for _path, test in references(row)), row


def test_a_wrong_reference_is_caught() -> None:
    """The check is not vacuous: a test that does not exist, or `::name` after another file, is found."""
    assert references(
        "`tests/workload/test_hub_names.py::test_a_hub_id_is_what_huggingface_hub_accepts`, `::test_nope`"
    ) == [
        ("tests/workload/test_hub_names.py", "test_a_hub_id_is_what_huggingface_hub_accepts"),
        ("tests/workload/test_hub_names.py", "test_nope"),
    ]
    assert "test_nope" not in _tests_in("tests/workload/test_hub_names.py")
