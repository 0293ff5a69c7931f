"""The Neuron chart values llmctl sets, against a chart newer than the 1.0.0 reference files
(issue 25, item 8): the key names of chart 1.9.0 (tests/conformance/data/neuron_chart_keys.yaml,
with their source) and which Deployment reads each placement key. versions.yaml records the
comparison and what stays unconfirmed for the pinned 1.10.0."""

from __future__ import annotations

import pytest
from conformance_objects import ALL_POOLS, helm_values
from test_helm_values import FREE_FORM, unknown_keys
from upstream_files import DATA, load_yaml, upstream

from llmctl.blueprints.pools import NEURON_SCHEDULER
from llmctl.blueprints.versions import versions
from llmctl.infra.platform.charts import CORE_NODE_SELECTOR

KEYS = load_yaml(DATA / "neuron_chart_keys.yaml")


def paths(values: object, prefix: str = "") -> set[str]:
    """Every key path of a values map (lists, scalars and free-form maps such as nodeSelector are
    leaves)."""
    if not isinstance(values, dict) or prefix.rsplit(".", 1)[-1] in FREE_FORM:
        return {prefix}
    return {p for key, value in values.items() for p in paths(value, f"{prefix}.{key}" if prefix else key)}


def test_every_neuron_key_llmctl_sets_is_in_the_newer_chart() -> None:
    ours = helm_values(ALL_POOLS)["neuron-helm-chart"]
    assert unknown_keys(ours, KEYS["keys"]) == []
    assert paths(ours) == {
        "devicePlugin.enabled",
        "devicePlugin.tolerations",
        "scheduler.enabled",
        "scheduler.nodeSelector",
        "scheduler.customScheduler.enabled",
        "scheduler.customScheduler.nodeSelector",
        "scheduler.customScheduler.image.tag",
        "npd.enabled",
    }
    # the key the 1.0.0 files lack is in 1.9.0's
    assert "devicePlugin.enabled" in paths(KEYS["keys"])
    assert "enabled" not in load_yaml(upstream("neuron-helm-chart/values.yaml"))["devicePlugin"]


def test_both_neuron_schedulers_land_on_the_core_nodes_by_the_keys_each_deployment_reads() -> None:
    scheduler = helm_values(ALL_POOLS)["neuron-helm-chart"]["scheduler"]
    readers = KEYS["readers"]
    assert readers["scheduler.customScheduler.nodeSelector"]["deployment"] == NEURON_SCHEDULER
    assert readers["scheduler.nodeSelector"]["deployment"] == "k8s-neuron-scheduler"
    assert scheduler["customScheduler"]["enabled"] is True  # the mode the readers are recorded for
    assert scheduler["nodeSelector"] == scheduler["customScheduler"]["nodeSelector"] == CORE_NODE_SELECTOR


def test_versions_records_the_comparison_and_what_is_unconfirmed_for_the_pin() -> None:
    pinned = versions().charts["neuron"].version
    entry = versions().upstream_files["neuron"]
    assert entry.newer_files is not None
    newer = entry.newer_files
    assert newer.files_version == KEYS["source"]["chart_version"] == "1.9.0" != pinned == "1.10.0"
    assert KEYS["source"]["commit"] in newer.repository
    for key in paths(helm_values(ALL_POOLS)["neuron-helm-chart"]):
        assert key in newer.result, key
    assert pinned in newer.unconfirmed_for_pin and "make neuron-chart" in newer.unconfirmed_for_pin


def test_the_make_target_check_names_what_a_pulled_chart_lacks(capsys: pytest.CaptureFixture[str]) -> None:
    # `make neuron-chart` runs this on the pulled 1.10.0; here on the 1.0.0 reference files
    from neuron_chart_check import main

    assert main(upstream("neuron-helm-chart/values.yaml").parent) == 1
    out = capsys.readouterr().out
    assert (
        out.strip() == "neuron-helm-chart 1.0.0: devicePlugin.enabled: not a key of the chart's values.yaml"
    )
