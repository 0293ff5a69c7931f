"""The add-on registry (infra/platform/addons.py) walked row by row: each row is whole (its pin, its
component, its upstream files, what it comes after), and every consumer agrees with it: the
platform program registers exactly the rows whose condition holds, in the row's namespace,
`chart_keys()` (the pin checks of `doctor` and `up`) and the `versions` output list them, and the
order invariants hold one invariant per `after` (checked against the engine's order for every
catalog blueprint in tests/lifecycle/test_engine_order.py)."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest
import yaml
from platform_support import graph_for

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.versions import versions
from llmctl.infra.lifecycle.order_invariants import load_invariants
from llmctl.infra.plan.offline import Registered
from llmctl.infra.platform.addons import ADDONS, Addon, addon
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.program import installed_versions

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "tests" / "conformance" / "upstream_manifest.yaml"
# Charts pinned in versions.yaml that the platform does not install (so they are no registry rows).
NOT_PLATFORM_CHARTS = {
    "metrics_server": "the install hint for existing clusters; the platform uses the EKS add-on",
    "open_webui": "the pin of a blueprint UI (the workload), not of the platform",
}


def matches(row: Addon, resource: Registered) -> bool:
    """Whether a registered resource is this row's (its order-invariant selector, applied)."""
    type_, where = row.selector()
    return resource.type == type_ and all(
        fnmatch.fnmatchcase(str(resource.inputs.get(path, "")), glob) for path, glob in where.items()
    )


def test_every_pinned_chart_is_a_row_or_named_as_no_platform_add_on() -> None:
    charts = {row.key for row in ADDONS if row.kind == "chart"}
    assert charts <= set(versions().charts), "a chart row without a pin in versions.yaml"
    assert set(versions().charts) - charts == set(NOT_PLATFORM_CHARTS)


@pytest.mark.parametrize("row", ADDONS, ids=lambda row: row.key)
def test_a_row_is_whole(row: Addon) -> None:
    assert [r.key for r in ADDONS].count(row.key) == 1
    component = ROOT / "infra" / "platform" / f"{row.component}.py"
    assert component.is_file(), f"{row.key}: no component {component}"
    assert f'"{row.key}"' in component.read_text(encoding="utf-8"), (
        f"{row.key} is not installed by {component}"
    )
    assert (row.kind == "chart") == (row.version_source == "versions.yaml")
    for key in row.after:
        assert addon(key).key != row.key
    files = {entry["file"] for entry in yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))["files"]}
    for upstream in (row.upstream_values, row.upstream_chart):
        assert upstream is None or upstream in files, f"{row.key}: {upstream} is not in {MANIFEST.name}"
    if row.kind == "eks-addon":
        assert row.upstream_values is None and row.upstream_chart is None


def test_after_has_no_cycle() -> None:
    done: set[str] = set()

    def visit(key: str, path: tuple[str, ...]) -> None:
        assert key not in path, f"add-on order cycle: {' -> '.join((*path, key))}"
        if key not in done:
            for before in addon(key).after:
                visit(before, (*path, key))
            done.add(key)

    for row in ADDONS:
        visit(row.key, ())


CONFIGS = {
    "cpu only": lambda: PlatformConfig.for_blueprints([load_blueprint("tiny-cpu")], stack="ci"),
    "neuron": lambda: PlatformConfig.for_blueprints([load_blueprint("llama2-inf2")], stack="ci"),
    "all pools": lambda: PlatformConfig.for_blueprints([], all_pools=True),
    "no observability": lambda: PlatformConfig.for_blueprints(
        [load_blueprint("llama2-70b-vllm-gpu")],
        stack="ci",
        observability={"cloudwatch": False, "metrics_server": False},
    ),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_the_program_and_its_outputs_install_exactly_the_rows_whose_condition_holds(name: str) -> None:
    config = CONFIGS[name]()
    graph = graph_for(config)
    installed = config.addons()
    for row in ADDONS:
        found = [resource for resource in graph if matches(row, resource)]
        if row in installed:
            assert len(found) == 1, f"{name}: {row.key} registered {len(found)} times"
            if row.kind == "chart":
                assert found[0].inputs["namespace"] == row.namespace, row.key
        else:
            assert not found, f"{name}: {row.key} is installed although its condition ({row.condition}) fails"
    out = installed_versions(config)
    assert list(out["charts"]) == config.chart_keys() == [r.key for r in installed if r.kind == "chart"]
    assert out["eks_addons"] == [r.key for r in installed if r.kind == "eks-addon"]


def test_the_conditions_differ_between_platforms() -> None:
    """The walk above is not vacuous: some rows are left out somewhere, every row is in somewhere."""
    per_config = {name: {row.key for row in make().addons()} for name, make in CONFIGS.items()}
    assert set().union(*per_config.values()) == {row.key for row in ADDONS}
    assert "neuron" not in per_config["cpu only"] and "nvidia_device_plugin" not in per_config["neuron"]
    assert "metrics-server" not in per_config["no observability"]


def test_every_after_is_an_order_invariant() -> None:
    ids = {invariant.id for invariant in load_invariants().invariants}
    expected = {f"addon-{row.key}-after-{key}" for row in ADDONS for key in row.after}
    assert expected and expected <= ids
