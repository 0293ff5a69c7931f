"""Day two through the stand-in engine (issue 51): llama2-inf2 up on EKS, then each change a running
platform sees (the code, a moved image tag taken with --accept-moved-tags, a new model revision,
replicas up and down, an engine argument, a platform add-on's version), each followed by `plan` (the
day-two plan) and `up`. After each, the RayService the workload stack now holds goes through the KubeRay
model (kuberay_model.py, from KubeRay v1.7.0's source) and what `predict` said is held to what the
model does; no step leaves two RayClusters of the RayService once KubeRay has settled."""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from day_two_support import Did, Ledger, observe, predicted, the_rayservice
from lifecycle_support import eks_cluster, lifecycle
from registry_support import registry
from standin_support import StandinEngine, kube_objects
from test_image_digests import push, registry_route

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.versions import versions
from llmctl.infra.workload.prepare import delivery as deploy_delivery

__all__ = ["registry", "registry_route"]

BP = "llama2-inf2"
WL = f"llmctl-{BP}"
NEW_COMMIT = "5f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6"  # a commit id of the model's repository (any 40 hex)


def _objects(engine: StandinEngine) -> list[dict[str, Any]]:
    return kube_objects(engine.resources(WL, "dev"))


class Blueprint:
    """The blueprint as a file the user edits between two `up`s."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / f"{BP}.yaml"
        self.data: dict[str, Any] = yaml.safe_load(load_blueprint(BP).model_dump_json())
        self.save()

    def save(self) -> None:
        self.path.write_text(yaml.safe_dump(self.data))

    def edit(self, section: str, **values: Any) -> Callable[[], None]:
        def run() -> None:
            self.data[section] = {**(self.data.get(section) or {}), **values}
            self.save()

        return run


def _code_change(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """A change to llmctl's code: the wheel `up` builds carries one more module (a new content digest)."""

    def run() -> None:
        real = deploy_delivery.build_wheel

        def changed(out_dir: Path) -> Path:
            wheel = real(out_dir)  # (the kept build of unchanged sources: changed once)
            with zipfile.ZipFile(wheel, "a") as archive:
                if "llmctl/_day_two_change.py" not in archive.namelist():
                    member = zipfile.ZipInfo("llmctl/_day_two_change.py", (2020, 1, 1, 0, 0, 0))
                    archive.writestr(member, "CHANGED = True\n")  # the same bytes at each build
            return wheel

        monkeypatch.setattr(deploy_delivery, "build_wheel", changed)

    return run


def _moved_tag(registry_host: str, image: str) -> Callable[[], None]:
    return lambda: push(registry_host, image, ("amd64", "arm64"))  # the same tag, another image


@pytest.fixture
def kuberay_chart() -> Iterator[Callable[[str], None]]:
    """Moves the KubeRay operator chart's pin in versions.yaml (as a newer llmctl would); the pins are
    read once and cached, so the cache is emptied when the pin moves and again after the test."""
    from llmctl.blueprints import versions as module

    real = module.load_yaml

    def move(version: str) -> None:
        def moved(*parts: str) -> Any:
            data = real(*parts)
            if parts == ("data", "versions.yaml"):
                data["charts"]["kuberay_operator"]["version"] = version
            return data

        module.load_yaml = moved
        versions.cache_clear()

    yield move
    module.load_yaml = real
    versions.cache_clear()


def _addon_version(move: Callable[[str], None], ledger: Ledger) -> Callable[[], None]:
    """The KubeRay operator chart moves to 1.7.1 (the platform stack updates its release); KubeRay
    1.7.1's operator then stamps its own version on the RayClusters it finds (shouldUpdateCluster)."""

    def run() -> None:
        move("1.7.1")
        assert versions().charts["kuberay_operator"].version == "1.7.1"
        ledger.operator.version = "v1.7.1"

    return run


def test_day_two_sequence_predictions_match_kuberay_and_never_leave_two_clusters(
    engine: StandinEngine,
    aws: str,
    registry: str,
    registry_route: Callable[[], httpx.Client],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kuberay_chart: Callable[[str], None],
) -> None:
    eks_cluster(aws)
    bp = Blueprint(tmp_path)
    base = load_blueprint(BP).image.base
    push(registry, base)
    push(registry, versions().images["python_slim"].image)  # its UI
    lifecycle().up(str(bp.path), region=aws, wait=False)
    ledger = Ledger()
    ledger.first(_objects(engine))
    strategy = load_blueprint(str(bp.path)).upgrade.strategy
    steps: list[tuple[str, Callable[[], None], dict[str, Any]]] = [
        ("code change", _code_change(monkeypatch), {}),
        ("image tag moved", _moved_tag(registry, base), {"accept_moved_tags": True}),
        ("model revision", bp.edit("model", revision=NEW_COMMIT), {}),
        ("replicas up", bp.edit("scaling", replicas=2, max_replicas=2), {}),
        ("replicas down", bp.edit("scaling", replicas=1, max_replicas=1), {}),
        ("engine argument", bp.edit("serving", max_concurrent_requests=16), {}),
        ("platform add-on version", _addon_version(kuberay_chart, ledger), {}),
    ]
    seen: dict[str, tuple[Did, Did]] = {}
    for name, change, flags in steps:
        old = _objects(engine)
        change()
        # `llmctl plan` against the deployed stack (the day-two plan `up` also shows before it asks)
        plan = lifecycle().day_two(load_blueprint(str(bp.path)), region=aws)
        assert plan is not None
        lifecycle().up(str(bp.path), region=aws, wait=False, **flags)
        new = _objects(engine)
        said, did, _ = observe(ledger, old, new, strategy)
        planned = predicted(plan.rollouts, the_rayservice(old), the_rayservice(new))
        seen[name] = (said, did)
        if name == "platform add-on version":  # KubeRay's version stamp: the active cluster updated in
            assert did == Did(in_place=True) and said == planned == Did(), name  # place (no pod restarts)
            continue
        assert said == did, name
        # the plan said it before `up`; it renders with the digests the stack recorded, so a moved tag
        # shows in it only once `up --accept-moved-tags` has taken it
        if name == "image tag moved":
            assert not (planned.new_cluster or planned.in_place or planned.serve_config), name
        else:
            assert planned == did, name
    assert {name: said for name, (said, _) in seen.items()} == {
        "code change": Did(new_cluster=True),
        "image tag moved": Did(new_cluster=True),
        "model revision": Did(new_cluster=True),
        # 1 -> 2 replicas turns Ray's autoscaler on (enableInTreeAutoscaling, its sidecar, the head's token):
        # a cluster change, not only worker replicas (which KubeRay's hash leaves out); 2 -> 1 turns it off
        "replicas up": Did(new_cluster=True),
        "replicas down": Did(new_cluster=True),
        "engine argument": Did(serve_config=True),
        "platform add-on version": Did(),
    }
    # KubeRay settled after each `up`: one RayCluster, the one serving the latest spec
    service = ledger.service
    assert service is not None and len(service.clusters) == 1 and service.pending is None
    assert max(ledger.peak) == 2  # while a second cluster was built, both ran
