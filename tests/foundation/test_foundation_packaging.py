"""Packaging and layering: the folder mapping, import rules, and a fast `llmctl --help`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {
    "core": "llmctl",
    "cli": "llmctl.cli",
    "infra": "llmctl.infra",
    "blueprints": "llmctl.blueprints",
    "serving": "llmctl.serving",
}
# (pydantic is not listed: Typer itself imports it to convert parameters.)
HEAVY = (
    "pulumi",
    "pulumi_aws",
    "pulumi_kubernetes",
    "boto3",
    "botocore",
    "ray",
    "torch",
    "transformers",
    "huggingface_hub",
    "kubernetes",
    "httpx",
    "openai",
    "numpy",
    "yaml",
)
CLI_MODULES = sorted(p.stem for p in (ROOT / "cli").glob("*.py") if p.stem != "__init__")


def makefile_variable(name: str) -> str:
    """A `NAME := value` of the Makefile, as `make` reads it."""
    [value] = re.findall(rf"^{name} := (.*)$", (ROOT / "Makefile").read_text(), re.M)
    return value.strip()


def test_make_install_sets_the_filter_on_its_editable_install() -> None:
    recipe = (ROOT / "Makefile").read_text().split("$(STAMP): ", 1)[1].split("\n\n", 1)[0]
    assert 'PYTHONWARNINGS="$(EDITABLE_NOTICE)" ' in recipe and " -e " in recipe


def test_the_layer_folders_are_the_ones_pyproject_maps() -> None:
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    assert {folder: package for package, folder in mapping.items()} == LAYERS
    # nothing at the root is named like the import package: it would shadow the installed one
    assert not (ROOT / "llmctl").exists()


def test_every_package_and_data_folder_goes_into_the_wheel_with_no_list_to_keep(
    built_packages: set[str],
) -> None:
    """Every folder that holds a file of the package (code, or data such as the catalog and the
    locks) is a package setuptools is given: a data folder left out makes setuptools print a
    "Package would be ignored" warning box per folder at every install, and its files are dropped
    from the wheel in a later setuptools release."""
    found = set()
    for folder, package in LAYERS.items():
        for file in (ROOT / folder).rglob("*"):
            if not file.is_file() or "__pycache__" in file.parts:
                continue
            relative = file.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *relative.parts]) if relative.parts else package)
    assert {"llmctl.blueprints.catalog", "llmctl.serving.locks.constraints"} <= found
    assert found == built_packages
    assert "packages" not in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def every_module() -> list[str]:
    """Every module of the import package, by its import name, from the mapped folders (entry points
    that run a program when imported, `__main__`, aside)."""
    names = []
    for folder, package in LAYERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__main__":
                continue
            names.append(".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)]))
    return sorted(names)


# Imports every module from the working directory; a module may fail only for lack of a third-party
# package this environment does not have at all (vllm: ray_vllm.hooks is imported by Ray inside the
# replica), never for a module of llmctl.
IMPORT_ALL = """
import importlib, importlib.util, json, sys
import llmctl
failed = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as missing:
        top = (missing.name or "").split(".")[0]
        if top == "llmctl" or importlib.util.find_spec(top) is not None:
            failed[name] = repr(missing)
    except Exception as error:
        failed[name] = repr(error)
print(json.dumps({"file": llmctl.__file__, "failed": failed}))
"""


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
        env={**os.environ, "LLMCTL_STATE_DIR": "/tmp"},
    ).stdout
    return {line.split(".")[0] for line in out.splitlines()}


def test_every_cli_module_is_registered() -> None:
    """A command module app.py does not import would escape the import check below."""
    app_source = (ROOT / "cli" / "app.py").read_text()
    for module in CLI_MODULES:
        if module in ("app", "output", "views", "options", "examples", "help_format"):  # shared helpers
            continue
        assert f"from llmctl.cli import {module} as {module}_cmd" in app_source, module


def test_help_imports_no_heavy_package() -> None:
    """Every CLI module, `llmctl --help` and the --help of every command and command group."""
    code = "\n".join(f"import llmctl.cli.{m}" for m in CLI_MODULES)
    code += """
from llmctl.cli.app import app
names = [c.name or c.callback.__name__ for c in app.registered_commands]
names += [g.name for g in app.registered_groups]
assert len(names) > 15, names
for argv in [["--help"], *[[name, "--help"] for name in names]]:
    try:
        app(argv, prog_name="llmctl")
    except SystemExit as done:
        assert done.code == 0, (argv, done.code)
    else:
        raise AssertionError(argv)
"""
    loaded = _modules_after(code)
    assert "llmctl" in loaded
    assert not loaded & set(HEAVY), f"llmctl --help imported {sorted(loaded & set(HEAVY))}"


def test_top_level_help_stays_off_the_slow_imports() -> None:
    """`llmctl --help`'s start-up budget (250 ms, benchmarks/bench_cli.py) in a form that cannot be
    flaky: the modules it loads. Rich (help is Click's plain text, consoles are made on first use),
    importlib.metadata (the version is read on demand), pydantic, YAML and the target registry cost
    tens of milliseconds each and are for the commands that use them."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom llmctl.cli.app import main\nsys.argv=['llmctl','--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\nprint('\\n'.join(sys.modules), file=sys.stderr)",
        ],
        capture_output=True,
        text=True,
        cwd="/",
        env={**os.environ, "LLMCTL_STATE_DIR": "/tmp"},
    )
    assert "Deploy and operate:" in out.stdout and "Exit codes" in out.stdout, out.stdout
    loaded = set(out.stderr.split())
    slow = {"rich", "importlib.metadata", "pydantic", "yaml", "llmctl.infra.targets.registry", "llmctl.state"}
    assert not loaded & slow, sorted(loaded & slow)
    assert {"typer", "llmctl.cli.app", "llmctl.cli.lifecycle"} <= loaded  # the probe saw the real start-up


def test_blueprints_layer_imports_no_cloud_sdk() -> None:
    modules = [p.stem for p in (ROOT / "blueprints").glob("*.py") if p.stem != "__init__"]
    code = "\n".join(f"import llmctl.blueprints.{m}" for m in modules)
    code += "\nfrom llmctl.blueprints.catalog import load_blueprint\nfor n in ['llama2-inf2','tiny-cpu']: load_blueprint(n)"
    loaded = _modules_after(code)
    assert not loaded & {"pulumi", "boto3", "botocore", "kubernetes", "pulumi_aws", "ray", "torch"}


def test_python_dash_m_runs_the_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "llmctl", "--version"], capture_output=True, text=True, cwd="/"
    )
    assert result.returncode == 0 and result.stdout.startswith("llmctl ")


@pytest.mark.slow
@pytest.mark.parametrize("editable", [False, True], ids=["wheel", "editable"])
def test_install_into_a_fresh_venv(tmp_path: Path, editable: bool) -> None:
    """`pip install .` and `pip install -e .` both give a working package with its data files.

    The fresh venv borrows third-party packages from this environment through a .pth file, so
    the test checks our packaging without downloading the dependency tree again.
    """
    venv = tmp_path / "venv"
    # No pip or setuptools of its own: this environment's pip installs into it, and the build
    # backend comes from this environment too (the .pth below).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    source = tmp_path / "src"
    # A copy of the tree as git sees it (tracked and untracked-but-not-ignored files).
    files = (
        subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        target = source / name
        if (ROOT / name).is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((ROOT / name).read_bytes())
    args = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
    ]
    (Path(site) / "zz_deps.pth").write_text(deps + "\n")
    # with the warning filter `make install` sets (issue 54 item 9: the editable install printed
    # setuptools' "Editable installation ... may take precedence" box, which the README said it did not)
    env = {**os.environ, "PYTHONWARNINGS": makefile_variable("EDITABLE_NOTICE")}
    installed = subprocess.run(
        args + (["-e", str(source)] if editable else [str(source)]),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout + installed.stderr == ""  # --quiet, and no notice or warning box
    check = (
        "import llmctl, llmctl.cli.app, llmctl.blueprints.pools, llmctl.serving\n"
        "from llmctl.blueprints.catalog import catalog_names, load_blueprint\n"
        "names = catalog_names(); assert 'llama2-inf2' in names, names\n"
        "[load_blueprint(n) for n in names]\n"
        "from llmctl.blueprints.versions import versions; versions()\n"
        "print(llmctl.__file__)"
    )
    result = subprocess.run([str(python), "-c", check], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    location = result.stdout.strip()
    assert (str(source) in location) is editable
    # from the project's root (its folders first on sys.path), every module is the installed one's
    modules = every_module()
    done = subprocess.run(
        [str(python), "-c", IMPORT_ALL, json.dumps(modules)], capture_output=True, text=True, cwd=source
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["failed"] == {}
    assert (str(source) in report["file"]) is editable and len(modules) > 200
    cli = subprocess.run(
        [str(venv / "bin" / "llmctl"), "blueprints", "list", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert cli.returncode == 0 and "tiny-cpu" in cli.stdout
