"""The upstream reference files the conformance tests read, and small loaders for them.

Each file is a row of `upstream_manifest.yaml` (repository, ref, path, URL, sha256); the files are
never in the repository. `upstream(name)` returns the verified copy in the cache, placing it there
first when needed (`upstream_sources.py` says from where). A file that no source can supply is a
failure with one clear message, never a skip: the conformance checks are part of the default suite.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import yaml
from upstream_sources import ENV_DIR, PROJECT_ROOT, Fetcher, Manifest, UpstreamError, load_manifest

__all__ = ["DATA", "ENV_DIR", "PROJECT_ROOT", "UpstreamError", "upstream"]

DATA = Path(__file__).resolve().parent / "data"


@functools.cache
def _manifest() -> Manifest:
    return load_manifest()


@functools.cache
def _fetcher() -> Fetcher:
    return Fetcher()


@functools.cache
def upstream(name: str) -> Path:
    """The verified copy of one manifest file (its `file` name, e.g. `karpenter/values.yaml`)."""
    return _fetcher().ensure(_manifest().row(name))


# libyaml's safe loader when PyYAML has it (the KubeRay CRDs are 1 MB each: about 20x faster than the
# pure-Python loader, which took most of the suite's collection time); the same documents either way.
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def load_yaml(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=_SafeLoader)


@functools.cache
def load_all_yaml(path: Path) -> list[Any]:
    return [doc for doc in yaml.load_all(path.read_text(), Loader=_SafeLoader) if doc]


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
