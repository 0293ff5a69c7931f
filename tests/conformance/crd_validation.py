"""Validate a custom object the way the Kubernetes API server does on create, from the CRD itself.

1. Defaulting: `default` values of the structural schema are filled in where a field is missing
   (the API server defaults before it validates).
2. The `openAPIV3Schema`, checked by `jsonschema` with unknown fields rejected (the API server's
   strict field validation; without it they would be pruned silently). Structural-schema extensions
   are honoured as the API server reads them: `x-kubernetes-preserve-unknown-fields` keeps an object
   open, `x-kubernetes-int-or-string` accepts an integer or a string, `nullable` accepts null,
   `x-kubernetes-embedded-resource` allows apiVersion/kind/metadata. The root `metadata` is checked
   as ObjectMeta (name, namespace, labels, annotations), which the CRD schema leaves to the server.
3. The `x-kubernetes-validations` CEL rules, evaluated with `cel-python` (`celpy`) at every node
   where the object has a value, with `self` bound to that value. Rules that reference `oldSelf` are
   transition rules: the API server evaluates them only on update, so for a create they are counted
   as skipped, not passed. The Kubernetes CEL library functions the rules use beyond standard CEL
   (`string.find(regex)`, `string.split(separator)`) are provided with their Kubernetes meaning.
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import celpy
import jsonschema
from celpy import celtypes
from upstream_files import load_all_yaml

_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
ROOT_METADATA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": _DNS_SUBDOMAIN, "maxLength": 253},
        "namespace": {"type": "string", "pattern": _DNS_SUBDOMAIN, "maxLength": 63},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
    "required": ["name"],
    "additionalProperties": False,
}


@dataclass
class Result:
    """What validating one object found."""

    schema_errors: list[str] = field(default_factory=list)
    cel_failures: list[str] = field(default_factory=list)
    cel_evaluated: int = 0
    cel_skipped_transition: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.schema_errors and not self.cel_failures

    def report(self) -> str:
        return "\n".join([*self.schema_errors, *self.cel_failures])


@dataclass(frozen=True, eq=False)
class CrdVersion:
    """One served version of a CRD."""

    group: str
    kind: str
    version: str
    schema: dict[str, Any]
    source: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


def load_crds(*paths: Path) -> dict[tuple[str, str], CrdVersion]:
    """Every served version of every CRD in the files, by (apiVersion, kind)."""
    found: dict[tuple[str, str], CrdVersion] = {}
    for path in paths:
        for doc in load_all_yaml(path):
            if doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                if not version.get("served", False):
                    continue
                crd = CrdVersion(
                    spec["group"],
                    spec["names"]["kind"],
                    version["name"],
                    version["schema"]["openAPIV3Schema"],
                    str(path),
                )
                found[(crd.api_version, crd.kind)] = crd
    return found


# --- 1. defaulting ---------------------------------------------------------------------------


def apply_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """A copy of `value` with the schema's defaults filled in (structural defaulting)."""
    value = copy.deepcopy(value)
    _default(value, schema)
    return value


def _default(value: Any, schema: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                _default(value[name], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, item in value.items():
                if name not in schema.get("properties", {}):
                    _default(item, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(item, schema["items"])


# --- 2. OpenAPI schema -----------------------------------------------------------------------


def json_schema(schema: dict[str, Any], *, root: bool = True) -> dict[str, Any]:
    """The structural schema as a JSON schema that rejects unknown fields."""
    out: dict[str, Any] = {}
    for key, sub in schema.items():
        if key.startswith("x-kubernetes-") or key in ("nullable", "default", "description"):
            continue
        if key == "properties":
            out[key] = {name: json_schema(child, root=False) for name, child in sub.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(sub, dict):
            out[key] = json_schema(sub, root=False)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [json_schema(child, root=False) for child in sub]
        else:
            out[key] = sub
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if schema.get("x-kubernetes-embedded-resource"):
        out.setdefault("properties", {})
        for name in ("apiVersion", "kind"):
            out["properties"].setdefault(name, {"type": "string"})
        out["properties"].setdefault("metadata", {"type": "object"})
    is_object = schema.get("type") == "object"
    if (
        is_object
        and not schema.get("x-kubernetes-preserve-unknown-fields")
        and "additionalProperties" not in out
    ):
        out["additionalProperties"] = False
    if root:
        out.setdefault("properties", {})["metadata"] = ROOT_METADATA
        out["required"] = sorted({*out.get("required", []), "apiVersion", "kind", "metadata"})
    return out


@functools.cache
def _validator(crd: CrdVersion) -> jsonschema.protocols.Validator:
    schema = json_schema(crd.schema)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    cls.check_schema(schema)
    return cls(schema)


def schema_errors(obj: dict[str, Any], crd: CrdVersion) -> list[str]:
    errors = sorted(_validator(crd).iter_errors(obj), key=lambda e: list(e.absolute_path))
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors]


# --- 3. CEL rules ----------------------------------------------------------------------------


def _find(text: celtypes.StringType, pattern: celtypes.StringType) -> celtypes.StringType:
    """Kubernetes regex library: the first match of `pattern` in the string, or ''."""
    match = re.search(str(pattern), str(text))
    return celtypes.StringType(match.group(0) if match else "")


def _split(text: celtypes.StringType, separator: celtypes.StringType) -> celtypes.ListType:
    """Kubernetes strings library (cel-go ext): split on a separator."""
    return celtypes.ListType([celtypes.StringType(part) for part in str(text).split(str(separator))])


_FUNCTIONS = {"find": _find, "split": _split}
_ENV = celpy.Environment()


@functools.cache
def _program(rule: str) -> celpy.Runner:
    return _ENV.program(_ENV.compile(rule), functions=_FUNCTIONS)


def is_transition_rule(rule: str) -> bool:
    return re.search(r"\boldSelf\b", rule) is not None


def evaluate_rule(rule: str, value: Any) -> bool:
    """One CEL rule with `self` = value; an evaluation error counts as a failure (as on the server)."""
    result = _program(rule).evaluate({"self": celpy.json_to_cel(value)})
    return not isinstance(result, Exception) and bool(result) is True


def cel_check(value: Any, schema: dict[str, Any], path: str, result: Result) -> None:
    for validation in schema.get("x-kubernetes-validations", []):
        rule = validation["rule"]
        if is_transition_rule(rule):
            result.cel_skipped_transition.append(f"{path}: {rule}")
            continue
        result.cel_evaluated += 1
        if not evaluate_rule(rule, value):
            message = validation.get("message") or f"failed rule: {rule}"
            result.cel_failures.append(f"{path}: {message} (rule: {rule})")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name, sub in properties.items():
            if name in value:
                cel_check(value[name], sub, f"{path}.{name}", result)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, item in value.items():
                if name not in properties:
                    cel_check(item, extra, f"{path}.{name}", result)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            cel_check(item, schema["items"], f"{path}[{index}]", result)


def validate(obj: dict[str, Any], crds: dict[tuple[str, str], CrdVersion]) -> Result:
    """Validate one object against its CRD (found by apiVersion and kind)."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    if key not in crds:
        return Result(schema_errors=[f"no served CRD version for {key[0]} {key[1]}"])
    crd = crds[key]
    defaulted = apply_defaults(obj, crd.schema)
    result = Result(schema_errors=schema_errors(defaulted, crd))
    if not result.schema_errors:  # CEL runs on a schema-valid object, as on the server
        cel_check(defaulted, crd.schema, "self", result)
    return result
