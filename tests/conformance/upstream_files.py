"""Where the upstream reference files are, and small loaders for them.

The files live outside the repository, in `shared/upstream/` beside the project root (the README
there names each file's repository and commit). A missing folder is a failure with a clear message,
never a skip: the conformance checks are part of the default suite.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
ENV_VAR = "LLMCTL_UPSTREAM_DIR"


class UpstreamFilesMissing(AssertionError):
    """The upstream reference files are not where the tests look for them."""


def candidates() -> list[Path]:
    """Where to look: `$LLMCTL_UPSTREAM_DIR` alone when set; else `shared/upstream` beside the project
    root, as this file's path gives it (unresolved and with symlinks resolved) and beside the
    working directory."""
    override = os.environ.get(ENV_VAR)
    if override:
        return [Path(override)]
    roots = [Path(__file__).absolute().parents[2], PROJECT_ROOT, Path.cwd()]
    found: list[Path] = []
    for root in roots:
        where = root.parent / "shared" / "upstream"
        if where not in found:
            found.append(where)
    return found


def upstream_dir() -> Path:
    """The first candidate folder holding the upstream files' README."""
    tried = candidates()
    for where in tried:
        if (where / "README.md").is_file():
            return where
    raise UpstreamFilesMissing(
        f"upstream reference files not found (looked in {', '.join(map(str, tried))}): put shared/upstream/ "
        f"beside the project root {PROJECT_ROOT} or name the folder in ${ENV_VAR}; the conformance "
        "tests need them and do not skip"
    )


def upstream(relative: str) -> Path:
    """One upstream file; a clear failure when it is missing."""
    path = upstream_dir() / relative
    if not path.is_file():
        raise UpstreamFilesMissing(f"upstream reference file {path} is missing")
    return path


@functools.cache
def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@functools.cache
def load_all_yaml(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


class _CloudFormationLoader(yaml.SafeLoader):
    """Reads CloudFormation's short-form tags (`!Sub`, `!GetAtt`, `!Ref`) as their plain value."""


def _tag_value(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)  # type: ignore[arg-type]


_CloudFormationLoader.add_multi_constructor("!", _tag_value)


@functools.cache
def cloudformation(path: Path) -> dict[str, Any]:
    """A CloudFormation template with its intrinsic-function tags read as plain values."""
    loaded: dict[str, Any] = yaml.load(path.read_text(), Loader=_CloudFormationLoader)
    return loaded


def substitute(template: str, values: dict[str, str]) -> str:
    """CloudFormation `!Sub`: replace every `${Name}`; an unknown name is an error."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"no value for ${{{name}}}")
        return values[name]

    return re.sub(r"\$\{([^}]+)\}", one, template)
