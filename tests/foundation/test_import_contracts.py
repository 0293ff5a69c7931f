"""The import contracts of pyproject.toml ([tool.importlinter]) hold, and they catch what they are for:
a cycle added on purpose, a layer pointing up, one runtime importing another, pod code importing a
user-machine tool of serving/client and the shared serving layers importing a runtime each make
`lint-imports` fail, naming the broken contract (issue 22)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("cli", "blueprints", "infra", "serving")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def package_tree(dest: Path) -> Path:
    """A copy of the import package shaped like the installed one (the layer folders under llmctl/),
    as `make imports` builds it: import-linter finds modules by walking the package's folder."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "core", dest / "llmctl", ignore=ignore)
    for layer in LAYERS:
        shutil.copytree(ROOT / layer, dest / "llmctl" / layer, ignore=ignore)
    return dest


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return package_tree(tmp_path_factory.mktemp("imports"))


def test_the_contracts_hold_on_the_code(tree: Path) -> None:
    result = lint_imports(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
    # every module was read: the layer folders are inside the package, not beside it
    analyzed = int(result.stdout.split("Analyzed ")[1].split(" files")[0])
    assert analyzed >= len(list(ROOT.glob("infra/**/*.py")))


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("module", "added", "contract"),
    [
        # doctor imports checks; checks importing doctor closes a cycle (at function level too)
        (
            "infra/aws/checks.py",
            "def _f() -> None:\n    from llmctl.infra.aws import doctor  # noqa: F401",
            "No import cycles",
        ),
        # the spec layer reaching up into infra
        ("blueprints/pools.py", "import llmctl.infra.platform.config", "Layers point down"),
        # one runtime importing another's module
        ("serving/ray_cpu/engine.py", "import llmctl.serving.ray_vllm.image", "runtimes do not import"),
        # the AWS calls reaching up into the lifecycle
        ("infra/aws/sweep.py", "import llmctl.infra.lifecycle.kube", "infra.aws"),
        # pod code importing a user-machine tool (directly, or through a module that does)
        ("serving/compile_cache.py", "import llmctl.serving.client.tiny", "Pod code"),
        ("serving/ray_cpu/engine.py", "import llmctl.infra.targets.local", "Pod code"),
        # the shared Serve-LLM layer reaching into a runtime
        ("serving/serve_llm/config.py", "import llmctl.serving.ray_vllm.image", "What the runtimes share"),
    ],
)
def test_a_deliberate_violation_breaks_its_contract(
    tmp_path: Path, module: str, added: str, contract: str
) -> None:
    tree = package_tree(tmp_path)
    _append(tree / "llmctl" / module, added)
    result = lint_imports(tree)
    assert result.returncode != 0, result.stdout
    broken = result.stdout.split("Broken contracts")[1]
    assert contract in broken, result.stdout


def _function_level_llmctl_imports(folder: Path) -> list[tuple[str, int, str]]:
    """(file, line, source) of every import of an llmctl module inside a function under `folder`."""
    import ast

    found = []
    for path in sorted(folder.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                names = (
                    [inner.module or ""]
                    if isinstance(inner, ast.ImportFrom)
                    else [alias.name for alias in inner.names]
                    if isinstance(inner, ast.Import)
                    else []
                )
                if any(name.startswith("llmctl") for name in names):
                    statement = lines[inner.lineno - 2 : inner.end_lineno or inner.lineno]
                    found.append((str(path.relative_to(ROOT)), inner.lineno, "\n".join(statement)))
    return sorted(set(found))


def test_function_level_imports_in_infra_are_few_and_each_says_why() -> None:
    """Issue 22: an import inside a function exists only to keep a heavy module off the CLI's
    start-up path (or to read a value at call time), and says so with a `# lazy:` comment on the
    statement or the line above; a light one belongs at the top of the module."""
    found = _function_level_llmctl_imports(ROOT / "infra")
    assert len(found) <= 60, len(found)
    unmarked = [f"{file}:{line}" for file, line, source in found if "# lazy" not in source]
    assert not unmarked, unmarked
