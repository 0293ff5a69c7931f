"""Final or waited on, for every shape Karpenter gives (data/karpenter/launch_signals.yaml, each with
its upstream file and commit): every InstanceTypeFilterError sentence, every reason the provider
puts on a NodeClaim's Launched condition that llmctl reads, every fleet error code."""

from __future__ import annotations

import karpenter_shapes as shapes
import pytest

from llmctl.infra.lifecycle.launches import findings

POOL, TYPE = "gpu-nvidia", "g5.2xlarge"


def _found(claims: list, events: list, pod: dict | None = None):  # type: ignore[type-arg]
    return findings(
        claims,
        events,
        [pod or shapes.pending(TYPE, "20Gi", "6", pool=POOL)],
        region="us-west-2",
        instance_type=TYPE,
    )


@pytest.mark.parametrize("sentence", list(shapes.signals()["pod_event"]["errors"]))
def test_each_scheduler_sentence_is_final_unless_only_the_offering_is_missing(sentence: str) -> None:
    said = shapes.pod_event(
        "serve-0", sentence, shapes.requirements(POOL, TYPE), '{"cpu":"6","memory":"20Gi"}'
    )
    after_refusal = [
        shapes.capacity_event(
            f"{POOL}-a1", shapes.fleet_error("ice", instance_type=TYPE, zone="us-west-2a", others="")
        ),
        said,
    ]
    final = sentence in shapes.signals()["pod_event"]["final"]
    assert (
        sentence
        in shapes.signals()["pod_event"]["final"] + shapes.signals()["pod_event"]["waits_on_offering"]
    )
    # right after EC2 refused the type: a missing offering is Karpenter's 3-minute skip
    assert [f.final for f in _found([], after_refusal) if f.kind != "capacity"] == [final]
    # with no refusal before it, a missing offering is one the pool never has: final as well
    alone = _found([], [said])
    assert len(alone) == 1 and alone[0].final
    assert alone[0].kind in (("resources", "requirements") if final else ("offering",))


def test_a_reserved_only_pool_without_a_free_reserved_instance_names_the_reservation() -> None:
    said = shapes.pod_event("serve-0", "offering", shapes.requirements(POOL, TYPE, "reserved"), "{}")
    (found,) = _found([], [said])
    assert found.final and "capacity reservation of serve-0's pool has no free g5.2xlarge" in found.text
    assert "'capacity reservations' line" in found.hint


@pytest.mark.parametrize(
    ("condition", "final", "kind"),
    [
        ("unauthorized", True, "permission"),
        ("unauthorized_scp", True, "permission"),
        ("ami_authorization", True, "permission"),
        ("spot_role", True, "permission"),
        ("vcpu_quota", True, "quota"),
        ("spot_quota", True, "quota"),
        ("throttled", False, "launch"),
        ("generic", False, "launch"),
    ],
)
def test_each_launched_unknown_reason(condition: str, final: bool, kind: str) -> None:
    (found,) = _found([shapes.launched_unknown(f"{POOL}-x1", condition)], [])
    assert (found.final, found.kind) == (final, kind)


def test_a_launched_condition_not_reconciled_yet_says_nothing() -> None:
    claim = shapes.launched_unknown(f"{POOL}-x1", "generic")
    claim["status"]["conditions"][0].update(reason="", message="")
    assert _found([claim], []) == []


@pytest.mark.parametrize(
    ("fleet", "final", "kind"),
    [
        (["ice"], False, "capacity"),
        (["vcpu_quota"], True, "quota"),
        (["spot_quota"], True, "quota"),
        (["spot_role"], True, "permission"),
        # the quota in one zone and a capacity error in another: the quota decides
        (["vcpu_quota", "ice"], True, "quota"),
    ],
)
def test_each_fleet_error_code(fleet: list[str], final: bool, kind: str) -> None:
    values = {"instance_type": TYPE, "zone": "us-west-2a", "others": "us-west-2b", "limit": "8"}
    event = shapes.capacity_event(f"{POOL}-x1", *(shapes.fleet_error(name, **values) for name in fleet))
    (found,) = _found([], [event])
    assert (found.final, found.kind) == (final, kind)


def test_a_quota_code_cut_off_at_300_characters_shows_in_a_later_retry() -> None:
    """combineFleetErrors joins the codes in a set's (random) order and launch.go cuts the message at
    300 characters: an ICE text first hides the quota code behind it. Karpenter retries after the
    3-minute skip and the next event may name the quota first; every event read counts."""
    values = {"instance_type": TYPE, "others": "us-west-2c", "limit": "8"}
    ice_first = shapes.capacity_event(
        f"{POOL}-x1",
        shapes.fleet_error("ice", zone="us-west-2a", **values),
        shapes.fleet_error("vcpu_quota", **values),
    )
    assert ice_first["message"].endswith("...") and "VcpuLimitExceeded" not in ice_first["message"]
    assert [f.kind for f in _found([], [ice_first])] == ["capacity"]
    retry = shapes.capacity_event(
        f"{POOL}-x2",
        shapes.fleet_error("vcpu_quota", **values),
        shapes.fleet_error("ice", zone="us-west-2a", **values),
        at="2026-11-26T20:03:10Z",
    )
    found = _found([], [ice_first, retry])
    assert [f.kind for f in found] == ["capacity", "quota"] and found[1].final
    assert found[1].text == "the EC2 vCPU quota refuses g5.2xlarge (limit 8 vCPUs): quota L-DB2E81BA"
