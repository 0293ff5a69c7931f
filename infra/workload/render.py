"""`llmctl render`: the workload's objects as YAML, secrets redacted, otherwise as the stack applies them.

One file per object (`NN-<kind>-<name>.yaml`, numbered in apply order) for GitOps, or one
multi-document stream. Multi-line strings (serveConfigV2, scripts) are written as literal blocks.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llmctl.errors import BadInput

REDACTED = "<redacted>"
Obj = dict[str, Any]


class _Dumper(yaml.SafeDumper):
    """Block YAML without anchors; multi-line strings as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def redact(manifests: list[Obj]) -> list[Obj]:
    """Copies of the manifests with every Secret value replaced by `<redacted>`."""
    result = []
    for obj in manifests:
        obj = copy.deepcopy(obj)
        if obj.get("kind") == "Secret":
            for key in ("data", "stringData"):
                if key in obj:
                    obj[key] = dict.fromkeys(obj[key], REDACTED)
        result.append(obj)
    return result


def to_yaml(obj: Obj) -> str:
    """One object as a YAML document."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


def file_name(index: int, obj: Obj) -> str:
    """`03-secret-hf-token.yaml`."""
    return f"{index:02d}-{str(obj.get('kind', 'object')).lower()}-{obj.get('metadata', {}).get('name', 'unnamed')}.yaml"


@dataclass
class Rendered:
    """What render produced: the multi-document stream and, with an output folder, the files."""

    text: str
    files: list[Path] = field(default_factory=list)


def render_yaml(manifests: list[Obj], out_dir: Path | None = None) -> Rendered:
    """Redact and serialise the manifests; with `out_dir`, also write one file per object."""
    clean = redact(manifests)
    documents = [to_yaml(obj) for obj in clean]
    rendered = Rendered(text="---\n" + "---\n".join(documents))
    if out_dir is None:
        return rendered
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for index, (obj, text) in enumerate(zip(clean, documents, strict=True), start=1):
            path = out_dir / file_name(index, obj)
            path.write_text(text, encoding="utf-8")
            rendered.files.append(path)
    except OSError as exc:
        raise BadInput(
            f"cannot write manifests to {out_dir}: {exc.strerror or exc}", "choose a writable --out folder"
        ) from None
    return rendered
