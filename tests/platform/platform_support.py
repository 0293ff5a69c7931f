"""Helpers of the platform tests: platform graphs under Pulumi mocks, built once per config."""

from __future__ import annotations

import functools

from llmctl.infra.plan.offline import Registered, run_offline
from llmctl.infra.platform.config import PlatformConfig


@functools.lru_cache(maxsize=32)
def _graph(config_json: str) -> tuple[Registered, ...]:
    from llmctl.infra.platform.program import build_platform

    config = PlatformConfig.model_validate_json(config_json)
    return tuple(run_offline(lambda: build_platform(config)))


def graph_for(config: PlatformConfig) -> list[Registered]:
    """The registered resources of the platform program for `config` (cached)."""
    return list(_graph(config.model_dump_json()))


class Graph:
    """Lookup helpers over a registered graph."""

    def __init__(self, resources: list[Registered]) -> None:
        self.resources = resources
        self.by_urn = {r.urn: r for r in resources}

    def of(self, type_: str) -> list[Registered]:
        return [r for r in self.resources if r.type == type_]

    def named(self, name: str) -> Registered:
        matches = [r for r in self.resources if r.name == name]
        assert len(matches) == 1, f"{name}: {len(matches)} matches"
        return matches[0]

    def depends(self, res: Registered, other: Registered) -> bool:
        return other.urn in res.dependencies

    def types(self) -> set[str]:
        return {r.type for r in self.resources}


# Free-form maps (any key is valid) among the inputs of AWS/EKS resources; `_STRUCTURED_MAPS` have
# free-form keys whose values are input types again.
_FREE_FORM = frozenset({"tags", "labels", "clusterTags"})
_STRUCTURED_MAPS = frozenset({"accessEntries", "accessPolicies"})


@functools.lru_cache(maxsize=64)
def sdk_input_names(token: str) -> frozenset[str]:
    """Every property name (as sent to the engine) of every input type in the installed SDK module
    of a resource type token: the keys a nested input dict may use."""
    import importlib
    import inspect
    import warnings

    from pulumi import _types

    package, module, _ = token.split(":")
    sdks = {"aws": ["pulumi_aws"], "eks": ["pulumi_eks", "pulumi_aws"]}[package]
    module = "eks" if package == "eks" else module.split("/")[0]
    names: set[str] = set()
    with warnings.catch_warnings():  # the SDKs warn about their deprecated types
        warnings.simplefilter("ignore", DeprecationWarning)
        for sdk in sdks:
            for candidate in (f"{sdk}._inputs", f"{sdk}.{module}._inputs"):
                try:
                    loaded = importlib.import_module(candidate)
                except ImportError:
                    continue
                for _, cls in inspect.getmembers(loaded, inspect.isclass):
                    if _types.is_input_type(cls):
                        names.update(_types.input_type_py_to_pulumi_names(cls).values())
    return frozenset(names)


def unknown_nested_keys(res: Registered) -> list[str]:
    """Paths of nested input keys the resource's SDK does not know (a misspelt or snake_case key in
    an `*Args` dict passes through Pulumi untranslated and only fails at `pulumi up`)."""
    known = sdk_input_names(res.type)
    found: list[str] = []

    def walk(value: object, path: str, check_keys: bool) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if check_keys and key not in known:
                    found.append(f"{path}.{key}")
                if key not in _FREE_FORM:
                    walk(item, f"{path}.{key}", key not in _STRUCTURED_MAPS)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}[{index}]", True)

    for key, value in res.inputs.items():
        if key not in _FREE_FORM:
            walk(value, key, key not in _STRUCTURED_MAPS)
    return found
