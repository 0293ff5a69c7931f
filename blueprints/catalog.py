"""Finding, parsing and validating blueprint files.

A blueprint reference is a catalog name (`llama2-inf2`) or a path to a YAML file. Errors name the
file, the field path and, for typos, the closest valid name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from llmctl.blueprints._data import data_file
from llmctl.blueprints.hardware import HardwareCatalog, hardware
from llmctl.blueprints.rules import check
from llmctl.blueprints.schema import Blueprint
from llmctl.errors import BlueprintError, did_you_mean

CATALOG_DIR = "catalog"


def catalog_names() -> list[str]:
    """Names of the blueprints shipped with llmctl."""
    folder = data_file(CATALOG_DIR)
    return sorted(entry.name[: -len(".yaml")] for entry in folder.iterdir() if entry.name.endswith(".yaml"))


def _read(ref: str) -> tuple[str, str]:
    """(source label, text) for a name or a path."""
    path = Path(ref).expanduser()
    looks_like_path = ref.endswith((".yaml", ".yml")) or "/" in ref or path.is_file()
    if looks_like_path:
        if path.is_dir():
            raise BlueprintError(
                f"blueprint file {ref} is a directory",
                "pass the path of one YAML file in it, or a catalog name (`llmctl blueprints list`)",
            )
        if not path.is_file():
            raise BlueprintError(
                f"blueprint file {ref} does not exist",
                "check the path, or use a catalog name (`llmctl blueprints list`)",
            )
        try:
            return str(path), path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BlueprintError(
                f"cannot read blueprint file {ref}: {exc}", "check the file's permissions and encoding"
            ) from None
    names = catalog_names()
    if ref not in names:
        suggestion = did_you_mean(ref, names)
        raise BlueprintError(
            f"unknown blueprint {ref!r}" + (f"; {suggestion}" if suggestion else ""),
            "run `llmctl blueprints list` for the catalog, or pass a path to your own YAML file",
        )
    return f"{CATALOG_DIR}/{ref}.yaml", data_file(CATALOG_DIR, f"{ref}.yaml").read_text(encoding="utf-8")


def _field_names(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The valid field names at a location, for did-you-mean on unknown keys."""
    current: Any = model
    for part in loc[:-1]:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        info = current.model_fields.get(str(part))
        if info is None:
            return []
        current = info.annotation
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    problems = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        path = ".".join(str(part) for part in loc) or "(root)"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            suggestion = did_you_mean(str(loc[-1]), _field_names(Blueprint, loc))
            message = "unknown field" + (f"; {suggestion}" if suggestion else "")
        elif error["type"] == "literal_error":
            expected = error.get("ctx", {}).get("expected", "")
            choices = [
                c.strip().strip("'") for c in str(expected).replace(" or ", ",").split(",") if c.strip()
            ]
            suggestion = did_you_mean(str(error.get("input")), choices)
            message = f"{error.get('input')!r} is not one of {expected}" + (
                f"; {suggestion}" if suggestion else ""
            )
        problems.append((path, message))
    return problems


def parse_blueprint(text: str, source: str, catalog: HardwareCatalog | None = None) -> Blueprint:
    """Parse YAML text into a Blueprint and run every rule; raise BlueprintError with all problems."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise BlueprintError(
            f"{source}: not valid YAML{where}", "fix the YAML syntax", source=source
        ) from None
    if not isinstance(data, dict):
        raise BlueprintError(
            f"{source}: a blueprint must be a YAML mapping",
            "start from `llmctl blueprints show tiny-cpu`",
            source=source,
        )
    try:
        blueprint = Blueprint.model_validate(data)
    except ValidationError as exc:
        problems = _problems(exc)
        raise BlueprintError(
            f"{source}: {len(problems)} invalid field(s)",
            "fix the fields listed; `llmctl blueprints schema` prints every field with its description",
            source=source,
            problems=problems,
        ) from None
    problems = check(blueprint, catalog or hardware())
    if problems:
        raise BlueprintError(
            f"{source}: blueprint {blueprint.name!r} cannot run ({len(problems)} problem(s))",
            "fix the fields listed before deploying",
            source=source,
            problems=problems,
        )
    return blueprint


def load_blueprint(ref: str, catalog: HardwareCatalog | None = None) -> Blueprint:
    """Load and validate a blueprint by catalog name or file path."""
    source, text = _read(ref)
    return parse_blueprint(text, source, catalog)


@dataclass
class ValidationReport:
    """The outcome of validating one blueprint reference."""

    ref: str
    ok: bool
    name: str | None = None
    problems: list[tuple[str, str]] = field(default_factory=list)
    message: str | None = None


def validate_ref(ref: str, catalog: HardwareCatalog | None = None) -> ValidationReport:
    """Validate without raising: for `llmctl blueprints validate` over many files."""
    try:
        blueprint = load_blueprint(ref, catalog)
    except BlueprintError as exc:
        return ValidationReport(ref, False, problems=exc.problems, message=exc.message)
    return ValidationReport(ref, True, name=blueprint.name)
