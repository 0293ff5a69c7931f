"""The leftover sweep and the final check, against a local moto server."""

from __future__ import annotations

import pytest
from lifecycle_scenario import CLUSTER, build, existing

from llmctl.infra.sweep import KINDS, leftovers, sweep


def test_sweep_deletes_only_what_is_tagged_for_the_cluster(aws: str) -> None:
    sc = build(aws)
    before = leftovers(CLUSTER, aws)
    assert {item.kind for item in before} == set(KINDS)

    report = sweep(CLUSTER, aws, timeout_s=30)

    assert not report.failed, report.failed
    found = {(item.kind, item.id) for item in report.found}
    expected = {(kind, id_) for kind, ids in sc.ours.items() for id_ in ids}
    assert found == expected
    assert {(item.kind, item.id) for item in report.deleted} == expected
    now = existing(aws)
    for kind, ids in sc.ours.items():
        assert not ids & now[kind], f"{kind} still there"
    for kind, ids in sc.others.items():
        assert ids <= now[kind], f"an untagged or foreign {kind} was deleted: {ids - now[kind]}"
    assert leftovers(CLUSTER, aws) == []


def test_dry_run_deletes_nothing(aws: str) -> None:
    sc = build(aws)
    snapshot = existing(aws)
    report = sweep(CLUSTER, aws, dry_run=True)
    assert report.dry_run and report.deleted == [] and report.failed == []
    assert {(i.kind, i.id) for i in report.found} == {(k, i) for k, ids in sc.ours.items() for i in ids}
    assert existing(aws) == snapshot


def test_sweep_twice_is_safe_and_the_second_finds_nothing(aws: str) -> None:
    build(aws)
    sweep(CLUSTER, aws, timeout_s=30)
    again = sweep(CLUSTER, aws, timeout_s=30)
    assert again.found == [] and again.deleted == [] and again.failed == []


def test_report_json_has_stable_keys(aws: str) -> None:
    build(aws)
    data = sweep(CLUSTER, aws, dry_run=True).to_dict()
    assert list(data) == ["cluster", "region", "dry_run", "found", "deleted", "failed"]
    assert set(data["found"][0]) == {"kind", "id", "name", "region", "reason", "arn"}


def test_no_credentials_is_a_cloud_error_with_a_hint(no_aws: None) -> None:
    from llmctl.errors import CloudError

    with pytest.raises(CloudError) as info:
        leftovers(CLUSTER, "us-west-2")
    assert info.value.hint and "credentials" in info.value.hint
