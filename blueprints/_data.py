"""Reading the YAML data files shipped inside the package."""

from __future__ import annotations

from importlib import resources
from importlib.abc import Traversable
from typing import Any

import yaml


def data_file(*parts: str) -> Traversable:
    """A file under ``llmctl/blueprints`` (e.g. ``data_file("data", "instances.yaml")``)."""
    node: Traversable = resources.files("llmctl.blueprints")
    for part in parts:
        node = node / part
    return node


# libyaml's parser when PyYAML has it: the same documents, several times faster on the catalogs
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(*parts: str) -> Any:
    """Parse one packaged YAML file."""
    return yaml.load(data_file(*parts).read_text(encoding="utf-8"), Loader=_LOADER)
