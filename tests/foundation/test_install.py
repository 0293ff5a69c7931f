"""What `make install` and `make test` do to a machine and a clone, read from the Makefile itself
(`make -n -B` prints every command a target would run, runs none of them).

- The torch `make install` asks for is the CPU build, by name: `+cpu` (PyTorch's CPU wheels carry
  that local version; PyPI's wheel of the same version is the CUDA build, with several GB of CUDA
  libraries). Every torch command pins it, the fallback source is PyTorch's CPU index, and the
  install stops when what came is a CUDA build.
- `make test` writes its run report outside the tracked tree (a clone stays clean); asked for,
  the report goes where it is told.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def dry_run(*args: str) -> list[str]:
    """The commands `make` would run for `args`, in a venv path that does not exist (so every
    recipe is printed), none of them run."""
    # a make that runs this suite passes its own variables down (MAKEFLAGS, and a variable set on its
    # command line is exported to the recipes): `make test SUITE_REPORT=...` would answer for the dry
    # run's defaults
    passed_down = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "SUITE_REPORT")
    env = {k: v for k, v in os.environ.items() if k not in passed_down}
    done = subprocess.run(
        ["make", "-n", "-B", "--no-print-directory", "VENV=/nonexistent/venv", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return [line for line in done.stdout.splitlines() if line.strip()]


def test_make_install_pins_the_cpu_build_of_torch_from_either_source() -> None:
    lines = dry_run("install")
    torch_lines = [line for line in lines if "pip install" in line and "torch==" in line]
    assert torch_lines, lines
    pins = {re.search(r"torch==[^\s\"']+", line)[0] for line in torch_lines}  # type: ignore[index]
    [pin] = pins  # one pin for every source
    assert pin.endswith("+cpu"), pin  # the local version only PyTorch's CPU wheels have
    # first the sources pip is configured with, then PyTorch's CPU index (never PyPI's CUDA build)
    [tried_first] = [line for line in torch_lines if "--extra-index-url" not in line]
    assert "--index-url" not in tried_first
    assert any(f'--extra-index-url "{CPU_INDEX}"' in line for line in torch_lines), torch_lines
    # and the install refuses what is not a CPU build
    assert any("torch.version.cuda is None" in line for line in lines), lines


def test_the_package_extras_do_not_ask_for_another_torch() -> None:
    """`pip install -e .[serving,...]` after the CPU build must not replace it: the serving extra
    asks for a range the pinned version is inside."""
    import tomllib
    from packaging.requirements import Requirement

    pin = next(line for line in dry_run("install") if "torch==" in line)
    version = re.search(r"torch==([^\s\"']+)", pin)[1]  # type: ignore[index]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for name, requirements in extras.items():
        for text in requirements:
            requirement = Requirement(text)
            if requirement.name == "torch":
                assert requirement.specifier.contains(version, prereleases=True), (name, text)


@pytest.mark.skipif(
    Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(), reason="runs in the venv `make install` built"
)
def test_the_venv_make_install_built_has_the_cpu_build() -> None:
    version = importlib.metadata.version("torch")
    assert version.endswith("+cpu"), f"torch {version} in {sys.prefix} is not the CPU build"
    # no CUDA runtime came with it (the CUDA build depends on nvidia-* packages)
    cuda = [
        d.metadata["Name"]
        for d in importlib.metadata.distributions()
        if d.metadata["Name"].startswith("nvidia-")
    ]
    assert cuda == []


def _report_path(lines: list[str]) -> str:
    [pytest_line] = [line for line in lines if "-m pytest" in line]
    [path] = re.findall(r"--suite-report=(\S+)", pytest_line)
    return path


def test_make_test_writes_its_report_outside_the_tracked_tree() -> None:
    path = _report_path(dry_run("test"))
    ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, check=False)
    assert ignored.returncode == 0, f"make test writes {path}, which git does not ignore"
    tracked = subprocess.run(["git", "ls-files", path], cwd=ROOT, capture_output=True, text=True, check=True)
    assert tracked.stdout == ""
    # the recorded result stays where `make test SUITE_REPORT=...` is told to write it
    assert _report_path(dry_run("test", "SUITE_REPORT=benchmarks/results/suite.json")) == (
        "benchmarks/results/suite.json"
    )


def test_building_the_package_prints_no_ignored_package_warning(tmp_path: Path) -> None:
    """What `pip install` builds (setuptools' build_py) places every data folder with no
    "Package would be ignored" box (five of them, about 200 lines, before the data folders were
    declared as packages)."""
    done = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "-d", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "would be ignored" not in done.stdout + done.stderr
    assert "absent from the `packages` configuration" not in done.stdout + done.stderr
    assert (tmp_path / "llmctl" / "blueprints" / "catalog" / "tiny-cpu.yaml").is_file()
    assert (tmp_path / "llmctl" / "serving" / "locks" / "locks.yaml").is_file()
