"""Finding, parsing and validating blueprint files.

A blueprint reference is a catalog name (`llama2-inf2`) or a path to a YAML file. Errors name the
file, the field path and, for typos, the closest valid name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from llmctl.blueprints._data import data_file
from llmctl.blueprints.hardware import HardwareCatalog, hardware
from llmctl.blueprints.rules import check
from llmctl.blueprints.schema import Blueprint
from llmctl.blueprints.yaml_model import parse_yaml_model
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


# The one hint of a blueprint with bad fields, whichever command read it.
FIELDS_HINT = "fix the fields listed; `llmctl blueprints schema` documents every field"


def parse_blueprint(text: str, source: str, catalog: HardwareCatalog | None = None) -> Blueprint:
    """Parse YAML text into a Blueprint and run every rule; raise BlueprintError with all problems,
    each with its line in the text where known."""
    try:
        blueprint = parse_yaml_model(text, source, Blueprint, what="blueprint", hint=FIELDS_HINT)
    except BlueprintError as exc:
        exc.lines = field_lines(text, [path for path, _ in exc.problems]) if exc.problems else {}
        raise
    problems = check(blueprint, catalog or hardware())
    if problems:
        raise BlueprintError(
            f"{source}: blueprint {blueprint.name!r}{_kept_name(blueprint.name, source)} cannot run "
            f"({len(problems)} problem{'s' if len(problems) > 1 else ''})",
            FIELDS_HINT,
            source=source,
            problems=problems,
            lines=field_lines(text, [path for path, _ in problems]),
        )
    return blueprint


def _kept_name(name: str, source: str) -> str:
    """For a file of one's own that kept a catalog blueprint's `name:` (a copy), words saying so:
    it is deployed, recorded and named in messages as that catalog blueprint."""
    if source == f"{CATALOG_DIR}/{name}.yaml" or name not in catalog_names():
        return ""
    return " (a copy that kept the catalog's name: give it its own `name:`)"


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
    lines: dict[str, int] = field(default_factory=dict)  # field path -> line in the file (1-based)


def field_lines(text: str, paths: list[str]) -> dict[str, int]:
    """The line of each dotted field path (`compute.tensor_parallel`) in a YAML text; a path not in
    the text (a missing field, a list index) gets the line of its nearest parent that is."""
    import yaml

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return {}
    found: dict[str, int] = {}
    for path in paths:
        node, line = root, None
        for key in path.split("."):
            if not isinstance(node, yaml.MappingNode):
                break
            match = next((pair for pair in node.value if getattr(pair[0], "value", None) == key), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]
        if line is not None:
            found[path] = line
    return found


def validate_ref(ref: str, catalog: HardwareCatalog | None = None) -> ValidationReport:
    """Validate without raising: for `llmctl blueprints validate` over many files; the message
    leaves out the file name (the report names it) and each problem has its line when known."""
    try:
        blueprint = load_blueprint(ref, catalog)
    except BlueprintError as exc:
        message = exc.message.removeprefix(f"{exc.source or ref}: ")
        return ValidationReport(ref, False, problems=exc.problems, message=message, lines=exc.lines)
    return ValidationReport(ref, True, name=blueprint.name)
