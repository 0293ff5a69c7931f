"""Every Helm release's values against its chart's values.yaml: each key path llmctl sets exists in
the chart's defaults (except under documented free-form keys), so a misspelt key fails here instead
of being ignored by the chart. Keys the upstream files lack because they are older than our pin
must be noted in blueprints/data/versions.yaml (`upstream_files.<chart>.keys_not_in_files`)."""

from __future__ import annotations

from typing import Any

import pytest
from conformance_objects import ALL_POOLS, PLATFORMS, helm_values
from upstream_files import DATA, load_yaml, upstream

from llmctl.blueprints.versions import versions
from llmctl.infra.platform.addons import ADDONS

FREE_FORM = load_yaml(DATA / "helm_free_form.yaml")
# From the add-on registry: chart name -> its upstream Chart.yaml, and -> its upstream values.yaml
# (None: the chart has no values llmctl sets)
CHARTS = [row for row in ADDONS if row.kind == "chart"]
CHART_FILES = {row.chart_name(): row.upstream_chart for row in CHARTS if row.upstream_chart}
CHART_VALUES = {row.chart_name(): row.upstream_values for row in CHARTS}


def _noted(chart: str) -> dict[str, str]:
    key = next((k for k, c in versions().charts.items() if c.chart == chart), None)
    entry = versions().upstream_files.get(key or "")
    return dict(entry.keys_not_in_files) if entry else {}


def condition_keys(chart: str) -> set[str]:
    """Value paths the chart's Chart.yaml reads as subchart conditions (`condition: nfd.enabled,...`);
    they are valid keys even where values.yaml does not set them."""
    meta = load_yaml(upstream(CHART_FILES[chart]))
    return {
        path.strip()
        for dependency in meta.get("dependencies") or []
        for path in str(dependency.get("condition", "")).split(",")
        if path.strip()
    }


def unknown_keys(ours: Any, defaults: Any, path: str = "") -> list[str]:
    """Key paths in `ours` that the chart's defaults do not have."""
    problems: list[str] = []
    if not isinstance(ours, dict):
        return problems
    if not isinstance(defaults, dict):
        return [f"{path or '<root>'}: the chart's default is not a map ({defaults!r})"]
    for key, value in ours.items():
        where = f"{path}.{key}" if path else key
        if key not in defaults:
            problems.append(f"{where}: not a key of the chart's values.yaml")
        elif key in FREE_FORM:
            continue
        elif isinstance(value, dict):
            default = defaults[key]
            if not default:
                problems.append(f"{where}: the chart's default is empty, so keys below it cannot be checked")
            else:
                problems.extend(unknown_keys(value, default, where))
        elif isinstance(defaults[key], dict) and defaults[key]:
            problems.append(f"{where}: the chart expects a map here, not {value!r}")
    return problems


@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_release_sets_only_keys_its_chart_has(platform: str) -> None:
    releases = helm_values(platform)
    assert set(releases) <= set(CHART_VALUES), (
        f"no upstream values.yaml known for {set(releases) - set(CHART_VALUES)}"
    )
    for chart, values in releases.items():
        if CHART_VALUES[chart] is None:
            assert values == {}, f"{chart}: values set, but no upstream values.yaml to check them against"
            continue
        defaults = load_yaml(upstream(CHART_VALUES[chart]))
        allowed = {*_noted(chart), *condition_keys(chart)}
        problems = [p for p in unknown_keys(values, defaults) if p.split(":")[0] not in allowed]
        assert not problems, f"{chart}: " + "; ".join(problems)


def test_all_pools_install_every_chart() -> None:
    assert set(helm_values(ALL_POOLS)) == set(CHART_VALUES)


def test_a_misspelt_key_fails() -> None:
    values = helm_values(ALL_POOLS)["neuron-helm-chart"]
    defaults = load_yaml(upstream("neuron-helm-chart/values.yaml"))
    misspelt = {"scheduler": {**values["scheduler"], "custmScheduler": {"enabled": True}}}
    assert unknown_keys(misspelt, defaults) == [
        "scheduler.custmScheduler: not a key of the chart's values.yaml"
    ]
    assert "nfd.enabled" in condition_keys("nvidia-device-plugin")
    karpenter = load_yaml(upstream("karpenter/values.yaml"))
    assert unknown_keys({"settings": {"interruptionQueueName": "q"}}, karpenter) == [
        "settings.interruptionQueueName: not a key of the chart's values.yaml"
    ]
    # free-form keys are not looked into; a map where the chart has a scalar is not a free pass
    assert unknown_keys({"nodeSelector": {"any/label": "x"}}, karpenter) == []
    assert unknown_keys({"settings": "x"}, karpenter) == ["settings: the chart expects a map here, not 'x'"]


def test_noted_keys_are_real_gaps() -> None:
    """A key noted as missing from an older upstream file must really be missing there."""
    noted_somewhere = False
    for key, entry in versions().upstream_files.items():
        if not entry.keys_not_in_files:
            continue
        noted_somewhere = True
        chart = versions().charts[entry.chart].chart
        path = CHART_VALUES.get(chart)
        assert path, f"{key}: no upstream values.yaml for chart {chart}"
        defaults = load_yaml(upstream(path))
        for noted in entry.keys_not_in_files:
            node: Any = defaults
            for part in noted.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            assert node is None, f"{key}: {noted} is in the upstream values.yaml; remove the note"
    assert noted_somewhere  # the Neuron 1.0.0 files lack devicePlugin.enabled
