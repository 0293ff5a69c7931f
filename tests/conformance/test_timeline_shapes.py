"""The start timelines' recorded kubectl JSON (tests/lifecycle/data/timeline/*.json), held to the
systems that write those objects (tests/lifecycle/data/timeline/sources.yaml names each source and
commit):

- every Pod, Node and Event is a valid object of the Kubernetes API at the pinned EKS version (the
  k8s.io/api core/v1 schema, through kubernetes-validate, unknown fields refused); every NodeClaim
  is valid under the pinned Karpenter CRD (karpenter.sh_nodeclaims.yaml);
- every event is one its component writes: the reason, type and reporting component of a recorded
  source, and the message in that source's format (kubelet, scheduler, Karpenter, operatorpkg's
  condition transitions);
- what an event names exists in the same recording (the pod, the NodeClaim).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from crd_validation import json_schema, load_crds
from test_recorded_shapes import _schema_version
from upstream_files import upstream

TIMELINE = Path(__file__).parents[1] / "lifecycle" / "data" / "timeline"
RECORDINGS = sorted(TIMELINE.glob("*.json"))
SOURCES = yaml.safe_load((TIMELINE / "sources.yaml").read_text())


def _pattern(go_format: str) -> re.Pattern[str]:
    """A Go format string as a regular expression (%q a quoted string, %v and %s any text)."""
    parts = re.split(r"(%[qvs])", go_format)
    verbs = {"%q": r'"[^"]*"', "%v": r".+", "%s": r".+"}
    return re.compile("".join(verbs.get(part, re.escape(part)) for part in parts))


def _component(event: dict[str, Any]) -> str:
    return str(event.get("reportingComponent") or event.get("source", {}).get("component", ""))


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_every_object_is_valid_at_the_pinned_versions(path: Path) -> None:
    recorded = json.loads(path.read_text())
    for kind in ("pods", "nodes", "events"):
        for obj in recorded[kind]:
            kubernetes_validate.validate(obj, _schema_version(), strict=True)
    crd = load_crds(upstream("karpenter/karpenter.sh_nodeclaims.yaml"))[("karpenter.sh/v1", "NodeClaim")]
    for claim in recorded["nodeclaims"]:
        assert (claim["apiVersion"], claim["kind"]) == ("karpenter.sh/v1", "NodeClaim")
        for part in ("spec", "status"):  # metadata is the API server's ObjectMeta, not in the CRD
            jsonschema.validate(claim[part], json_schema(crd.schema["properties"][part], root=False))


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_every_event_is_one_its_component_writes_in_its_words(path: Path) -> None:
    recorded = json.loads(path.read_text())
    pods = {p["metadata"]["name"] for p in recorded["pods"]}
    claims = {c["metadata"]["name"] for c in recorded["nodeclaims"]}
    for event in recorded["events"]:
        matching = [
            source
            for source in SOURCES["events"]
            if (source["component"], source["reason"], source["type"])
            == (_component(event), event["reason"], event["type"])
            and _pattern(source["format"]).fullmatch(event["message"])
        ]
        assert matching, f"{path.name}: no recorded source writes {event['reason']}: {event['message']!r}"
        involved = event["involvedObject"]
        assert involved["name"] in (pods if involved["kind"] == "Pod" else claims), involved


def test_the_readiness_tests_feed_only_events_their_components_write() -> None:
    lifecycle = str(Path(__file__).parents[1] / "lifecycle")
    if lifecycle not in sys.path:
        sys.path.append(lifecycle)
    from test_readiness import EVENTS

    for component, reason, kind, message in EVENTS:
        assert any(
            (s["component"], s["reason"], s["type"]) == (component, reason, kind)
            and _pattern(s["format"]).fullmatch(message)
            for s in SOURCES["events"]
        ), (component, reason, message)


def test_a_message_outside_the_sources_is_refused() -> None:
    pulled = next(s for s in SOURCES["events"] if s["reason"] == "Pulled" and "Successfully" in s["format"])
    assert _pattern(pulled["format"]).fullmatch(
        'Successfully pulled image "r/i:1" in 1.5s (2s including waiting). Image size: 10 bytes.'
    )
    assert not _pattern(pulled["format"]).fullmatch('Successfully pulled image "r/i:1" in 1.5s')
