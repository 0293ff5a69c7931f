"""Views of blueprints for the CLI: list rows, a detailed description and the field reference."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from llmctl.blueprints import fast_path, request_router
from llmctl.blueprints.catalog import catalog_names, load_blueprint
from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.inter_node import inter_node
from llmctl.blueprints.pricing import blueprint_cost, node_plan
from llmctl.blueprints.rules import engine_of, is_gated
from llmctl.blueprints.schema import Blueprint
from llmctl.errors import BadInput


def summaries() -> list[dict[str, Any]]:
    """One row per catalog blueprint."""
    catalog = hardware()
    rows = []
    for name in catalog_names():
        bp = load_blueprint(name, catalog)
        cost = blueprint_cost(bp, catalog)
        rows.append(
            {
                "name": bp.name,
                "description": bp.description,
                "runtime": bp.runtime,
                "accelerator": bp.compute.accelerator,
                "instance_type": bp.compute.instance_type,
                "tensor_parallel": bp.compute.tensor_parallel,
                "replicas": bp.scaling.replicas,
                "min_replicas": bp.scaling.min_replicas,
                "max_replicas": bp.scaling.max_replicas,
                "model": bp.model.id,
                "hourly_usd": round(cost.serving_hourly_usd, 4),
            }
        )
    return rows


def describe(ref: str) -> dict[str, Any]:
    """A blueprint as data plus what follows from it."""
    catalog = hardware()
    bp = load_blueprint(ref, catalog)
    plan = node_plan(bp, catalog)
    cost = blueprint_cost(bp, catalog)
    network = inter_node(bp)
    return {
        "blueprint": bp.model_dump(mode="json"),
        "derived": {
            "engine": engine_of(bp),
            "gated_model": is_gated(bp),
            "replicas_per_node": plan.replicas_per_node,
            **({"nodes_per_replica": plan.nodes_per_replica} if plan.nodes_per_replica > 1 else {}),
            **({"inter_node_transport": network.line()} if network else {}),
            "nodes": plan.nodes,
            "nodes_max": plan.nodes_max,
            "serving_hourly_usd": round(cost.serving_hourly_usd, 4),
            "platform_hourly_usd": round(cost.platform_hourly_usd, 4),
            **fast_path.describe(bp),
            **request_router.describe(bp),
        },
    }


def json_schema() -> dict[str, Any]:
    """The JSON schema of a blueprint file (for editors and CI)."""
    return Blueprint.model_json_schema()


def write_json_schema(path: Path) -> Path:
    """Write the JSON schema to a file; BadInput (not a traceback) when it cannot be written."""
    try:
        path.write_text(json.dumps(json_schema(), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise BadInput(
            f"cannot write the schema to {path}: "
            + ("it is a directory" if path.is_dir() else str(exc.strerror or exc)),
            "pass --out with a file path in a folder you can write to",
        ) from None
    return path


def _walk(model: type[BaseModel], prefix: str) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows.append(
                {"field": path, "type": "object", "default": "", "description": info.description or ""}
            )
            rows.extend(_walk(annotation, f"{path}."))
            continue
        default = "" if info.is_required() else repr(info.get_default(call_default_factory=True))
        type_name = _type_name(annotation)
        rows.append(
            {"field": path, "type": type_name, "default": default, "description": info.description or ""}
        )
    return rows


def _type_name(annotation: Any) -> str:
    """`str | None`, `'bf16' | 'fp16'`, `list[str]` rather than Python's reprs."""
    origin = get_origin(annotation)
    if origin is Literal:
        return " | ".join(repr(arg) for arg in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(arg) for arg in get_args(annotation))
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in get_args(annotation))}]"
    if annotation is type(None):
        return "None"
    return str(getattr(annotation, "__name__", annotation))


def field_reference() -> list[dict[str, str]]:
    """Every field of the schema, depth first, with type, default and description."""
    return _walk(Blueprint, "")
