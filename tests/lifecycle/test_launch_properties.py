"""Properties of the launch classifier over Karpenter's shapes (karpenter_shapes.py): whatever mix
of fleet error codes, Launched reasons and scheduler sentences Karpenter gives, and in whatever
order its events come, waiting is chosen only where Karpenter retries into success by itself."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from karpenter_shapes import capacity_event, launched_unknown, pending, pod_event, requirements, signals

from llmctl.infra.lifecycle import karpenter_signals as ks
from llmctl.infra.lifecycle.launches import findings

POOL, TYPE = "gpu-nvidia", "g5.2xlarge"
CODES = sorted(ks.QUOTA_CODES.keys() | ks.PERMISSION_CODES | ks.CAPACITY_CODES)
# EC2's sentences vary; a short one keeps the message under Karpenter's 300-character cut
TEXT = st.text(alphabet=st.characters(whitelist_categories=("L", "N", "Zs")), max_size=20)
SETTINGS = settings()  # the profile of tests/conftest.py (a fixed budget in make test, longer by hand)


def _found(claims: list, events: list) -> list:  # type: ignore[type-arg]
    return findings(
        claims, events, [pending(TYPE, "20Gi", "6", pool=POOL)], region="us-west-2", instance_type=TYPE
    )


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(CODES), TEXT), min_size=1, max_size=4, unique_by=lambda e: e[0]))
def test_a_capacity_event_is_final_exactly_when_a_quota_or_permission_code_is_in_it(
    fleet: list[tuple[str, str]],
) -> None:
    codes = {code for code, _ in fleet}
    event = capacity_event(f"{POOL}-p1", *(f"{code}: {text}" for code, text in fleet))
    (found,) = _found([], [event])
    expected = (
        "quota"
        if codes & ks.QUOTA_CODES.keys()
        else "permission"
        if codes & ks.PERMISSION_CODES
        else "capacity"
    )
    assert found.kind == expected
    assert found.final == (expected != "capacity")


@SETTINGS
@given(
    st.sampled_from(sorted(signals()["launched_unknown"]["conditions"])),
    st.text(min_size=1, max_size=40),
)
def test_a_launched_unknown_condition_is_final_exactly_for_quota_and_permission_reasons(
    condition: str, other_message: str
) -> None:
    claim = launched_unknown(f"{POOL}-p1", condition)
    claim["status"]["conditions"][0]["message"] = other_message  # the reason decides, not the words
    (found,) = _found([claim], [])
    reason = claim["status"]["conditions"][0]["reason"]
    assert found.final == (reason in ks.QUOTA_REASONS or reason in ks.PERMISSION_REASONS)


REQUIREMENT_VALUE = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=12)


@SETTINGS
@given(
    st.sampled_from(sorted(signals()["pod_event"]["errors"])),
    st.lists(st.tuples(REQUIREMENT_VALUE, REQUIREMENT_VALUE), max_size=3),
    st.booleans(),
)
def test_a_scheduler_sentence_waits_only_on_an_offering_karpenter_just_refused(
    sentence: str, extra: list[tuple[str, str]], refused: bool
) -> None:
    reqs = ", ".join([requirements(POOL, TYPE), *(f"{k}/{v} In [{v}]" for k, v in extra)])
    events = [pod_event("serve-0", sentence, reqs, '{"cpu":"6"}')]
    if refused:
        events.insert(0, capacity_event(f"{POOL}-r1", f"InsufficientInstanceCapacity: none of {TYPE} free"))
    said = [f for f in _found([], events) if f.kind != "capacity"]
    waits = sentence in signals()["pod_event"]["waits_on_offering"] and refused
    assert [f.final for f in said] == [not waits]


@SETTINGS
@given(st.permutations(list(range(4))), st.integers(min_value=1, max_value=3))
def test_findings_do_not_depend_on_the_order_or_repetition_of_events(order: list[int], copies: int) -> None:
    events = [
        capacity_event(
            f"{POOL}-a",
            f"InsufficientInstanceCapacity: We currently do not have sufficient {TYPE} capacity in the Availability Zone you requested (us-west-2a).",
        ),
        capacity_event(
            f"{POOL}-b",
            "VcpuLimitExceeded: You have requested more vCPU capacity than your current vCPU limit of 8 allows",
        ),
        pod_event("serve-0", "offering", requirements(POOL, TYPE), "{}"),
        pod_event("someone-else", "resources", requirements(POOL, TYPE), "{}"),
    ]
    shuffled = [events[i] for i in order] * copies
    found = _found([], shuffled)
    assert len({f.key for f in found}) == len(found)  # each said once
    assert {f.key for f in found} == {f.key for f in _found([], events)}
