"""Issue 54: the README as the front door, the documentation site and its generated CLI reference.

- The README's first block is the repository's two commands (install and run, then `make test`),
  it is at most 150 lines, no line is wider than 100 characters (that block aside: the contract's
  command is one line), and it holds no figure that goes stale: its table of blueprints is made
  from the catalog (`readme_table.py`), and counts and times live in benchmarks/results.
- Every relative link of the README and of docs/ names a file that exists.
- The CLI reference (`docs/_hooks/cli_reference.py`, run by `make docs`) covers every command, every
  option `--help` lists, every example and every exit code, from the app itself.
- `pip install '.[serving]'` is never shown without the CPU torch before it (item 8).
- docs/ pages each have one subject and at most 500 lines (two named exceptions, below).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
import typer
from readme_table import HEADER, rows

from llmctl.cli.app import app
from llmctl.cli.examples import EXAMPLES
from llmctl.errors import EXIT_CODES

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = sorted((ROOT / "docs").glob("*.md"))
TWO_COMMANDS = """\
# Install, then run the main job on this machine: serve the tiny-cpu blueprint locally (no cloud, no network needed)
make install && .venv/bin/llmctl models tiny ./tiny-model && .venv/bin/llmctl up --blueprint tiny-cpu --target local --model ./tiny-model --yes

# Run the tests
make test
"""


def _blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S)


def test_the_readme_starts_with_the_two_commands() -> None:
    before = README.split("```", 1)[0]
    assert before.startswith("# llmctl\n") and len(before.splitlines()) <= 10  # the first screen
    assert _blocks(README)[0] == TWO_COMMANDS
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("make test")


def test_the_readme_is_short_and_narrow() -> None:
    lines = README.splitlines()
    assert len(lines) <= 150
    contract = set(TWO_COMMANDS.splitlines())
    wide = [(n, len(line)) for n, line in enumerate(lines, 1) if len(line) > 100 and line not in contract]
    assert wide == []


def test_the_readme_table_of_blueprints_is_the_catalog() -> None:
    lines = README.splitlines()
    start = lines.index(HEADER[0])
    assert lines[start : start + 2] == HEADER
    table = lines[start + 2 : start + 2 + len(rows()) + 1]
    assert table[:-1] == rows() and table[-1] == ""  # every catalog blueprint, and no other


def test_the_readme_holds_no_figure_that_goes_stale() -> None:
    """Counts and times of the suite or the benchmarks are recorded in benchmarks/results, never
    written into the README (it said "2,010 tests" when the suite had 2,121)."""
    prose = re.sub(r"^```.*?^```", "", README, flags=re.M | re.S)
    assert not re.search(r"\b\d[\d,]* tests\b", prose)
    assert not re.search(r"\b\d+(\.\d+)? ?(ms|s|seconds?|minutes?|hours?)\b", prose)
    assert not re.search(r"\b\d+(\.\d+)? ?(MB|GB|GiB|MiB)\b", prose)
    assert "benchmarks/results/suite.json" in README


def test_the_exit_code_table_of_the_readme_is_the_code_s() -> None:
    for code, meaning in EXIT_CODES.items():
        assert f"| {code} | {meaning} |" in README, code


GENERATED = "cli.md"  # made at build time by docs/_hooks/cli_reference.py (on the site only)
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


@pytest.mark.parametrize("page", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_relative_links_name_files_that_exist(page: Path) -> None:
    """The strict site build checks docs/ links and anchors; this checks the README's too (GitHub
    shows it outside the site) and says which link is broken without building anything."""
    for target, _anchor in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or (page.parent.name == "docs" and target == GENERATED):
            continue
        assert (page.parent / target).exists(), f"{page.name}: {target}"


def _cli_reference() -> ModuleType:
    path = ROOT / "docs" / "_hooks" / "cli_reference.py"
    spec = importlib.util.spec_from_file_location("cli_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands(command: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    found = []
    for name, sub in (getattr(command, "commands", None) or {}).items():
        found += [((*path, name), sub), *_commands(sub, (*path, name))]
    return found


def test_the_cli_reference_covers_every_command_option_example_and_exit_code() -> None:
    page = _cli_reference().render()
    commands = _commands(typer.main.get_command(app))
    assert len(commands) > 30
    for path, command in commands:
        name = " ".join(("llmctl", *path))
        section = page.split(f"## `{name}` {{#")[1].split("\n## ")[0]
        for param in getattr(command, "params", []):
            if getattr(param, "param_type_name", "") == "option" and not param.hidden:
                assert f"`{param.opts[0]}`" in section, (name, param.opts)
        for example in EXAMPLES.get(" ".join(path), ()):
            assert example in section, example
    for code, meaning in EXIT_CODES.items():
        assert f"| {code} | {meaning} |" in page, code
    # the defaults are the code's: one example read back
    up = page.split("## `llmctl up` {#")[1].split("\n## ")[0]
    assert "| `--stack` | `NAME` | `dev` |" in up and "| `--wait-timeout` | `N` | `3600` |" in up


def test_the_cli_reference_follows_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated, not copied: a new exit code shows in the page with no edit of the page."""
    monkeypatch.setitem(EXIT_CODES, 99, "a code added to llmctl.errors")
    assert "| 99 | a code added to llmctl.errors |" in _cli_reference().render()


def _makefile_value(name: str) -> str:
    [value] = re.findall(rf"^{name} \?= (.*)$", (ROOT / "Makefile").read_text(), re.M)
    return value.strip()


@pytest.mark.parametrize("page", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_the_serving_extra_is_shown_with_the_cpu_torch_first(page: Path) -> None:
    """Issue 54 item 8: plain `pip install '.[serving]'` resolves PyPI's CUDA torch (torch 2.14.1
    and 19 nvidia/cuda/triton packages, about 2.75 GiB, by `pip install --dry-run --report` on
    2026-11-28). Wherever that command is shown, the CPU build `make install` pins comes first."""
    cpu = f"pip install '{_makefile_value('TORCH_CPU')}' --extra-index-url {_makefile_value('TORCH_INDEX')}"
    text = page.read_text(encoding="utf-8")
    for found in re.finditer(r"pip install '\.\[serving", text):
        shown = cpu in text[: found.start()]  # the command itself, before it
        linked = "getting-started.md#without-make-plain-pip" in text[found.end() : found.end() + 120]
        assert shown or linked, (page.name, text[found.start() - 80 : found.end() + 20])
    if page.name == "getting-started.md":
        assert f"{cpu}\npip install '.[serving]'" in text


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_a_docs_page_is_at_most_500_lines(page: Path) -> None:
    lines = len(page.read_text(encoding="utf-8").splitlines())
    assert lines <= 500, f"{page.name}: {lines} lines"


def test_every_docs_page_is_in_the_site_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert [page.name for page in DOCS if f": {page.name}" not in nav] == []
    assert ": cli.md" in nav  # the generated page


def test_a_missing_serving_package_names_make_install_and_the_cpu_torch() -> None:
    """Item 8 in the hints: a missing serving package said "install it with `pip install
    '.[serving]'`", which takes PyPI's CUDA torch; now `make install` first, and the CPU torch
    before plain pip."""
    from llmctl.errors import ServingError
    from llmctl.serving.common.deps import require

    with pytest.raises(ServingError) as info:
        require("llmctl_no_such_package")
    hint = info.value.hint or ""
    assert hint.startswith("run `make install` in the llmctl checkout") and "CPU build of torch" in hint
    assert hint.index("torch first") < hint.index("pip install '.[serving]'")
