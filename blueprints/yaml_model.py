"""YAML files validated by pydantic models, with errors that name the file, field path and fix.

Shared by blueprint files and cluster files (`--pools`): one place turns YAML syntax errors,
non-mapping documents and validation errors into a :class:`BlueprintError` whose problems carry
the dotted field path and, for typos in keys or choices, the closest valid name.
"""

from __future__ import annotations

from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from llmctl.errors import BlueprintError, did_you_mean

M = TypeVar("M", bound=BaseModel)


def _field_names(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The valid field names at a location (list indexes skipped), for did-you-mean on unknown keys."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        info = current.model_fields.get(str(part))
        if info is None:
            return []
        current = info.annotation
        for arg in getattr(current, "__args__", ()):  # list[Model], Model | None
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                current = arg
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def problems_of(exc: ValidationError, model: type[BaseModel]) -> list[tuple[str, str]]:
    """(dotted field path, message with a did-you-mean where one fits) for each validation error."""
    problems = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        path = ".".join(str(part) for part in loc) or "(root)"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            suggestion = did_you_mean(str(loc[-1]), _field_names(model, loc))
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


def parse_yaml_model(text: str, source: str, model: type[M], *, what: str, hint: str) -> M:
    """Parse YAML text into `model`; BlueprintError naming the source and every bad field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise BlueprintError(
            f"{source}: not valid YAML{where}", "fix the YAML syntax there", source=source
        ) from None
    if not isinstance(data, dict):
        raise BlueprintError(f"{source}: a {what} must be a YAML mapping", hint, source=source)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = problems_of(exc, model)
        raise BlueprintError(
            f"{source}: {len(problems)} invalid field(s) in the {what}",
            hint,
            source=source,
            problems=problems,
        ) from None
