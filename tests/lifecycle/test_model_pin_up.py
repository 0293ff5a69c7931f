"""`up` pins the blueprint's model revision to the Hub's commit at the stack's first run, deploys the
commit, keeps it in the backend, and keeps the branch with a note when the Hub cannot be reached;
through the stand-in engine (an existing cluster) and a local server answering as the Hub
(tests/hub_support.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hub_support import COMMIT, hub_server
from standin_support import StandinEngine, kube_objects
from test_existing_cluster import BP, WL, complete_cluster, files, lifecycle

from llmctl.blueprints.catalog import load_blueprint
from llmctl.infra.workload.scheduling.pods import pod_templates
from llmctl.state import load_pins, model_pin_key, pins_path

__all__ = ["files"]  # the existing cluster's kubeconfig and pools file (a fixture)


def _revisions(engine: StandinEngine, project: str) -> set[str]:
    found = set()
    for obj in kube_objects(engine.resources(project, "dev")):
        for template in pod_templates(obj):
            for container in template.spec.get("containers", []):
                for env in container.get("env", []):
                    if env["name"] == "LLMCTL_BLUEPRINT":
                        found.add(json.loads(env["value"])["model"]["revision"])
    return found


def _serve_config_revisions(engine: StandinEngine, project: str) -> set[str]:
    found = set()
    for obj in kube_objects(engine.resources(project, "dev")):
        if obj.get("kind") == "RayService":
            config = yaml.safe_load(obj["spec"]["serveConfigV2"])
            for application in config["applications"]:
                found.add(application["args"]["blueprint"]["model"]["revision"])
    return found


def test_the_first_up_deploys_the_commit_and_a_later_machine_takes_it_from_the_backend(
    engine: StandinEngine, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:

    kubeconfig, pools = files
    complete_cluster(engine)
    model = load_blueprint(BP).model
    assert model.revision == "main"
    key = model_pin_key(model.id, model.revision)
    with hub_server(monkeypatch) as hub:
        lifecycle().up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools)
        assert [path for path, _ in hub.requests] == [f"/api/models/{model.id}/revision/main?blobs=true"]
    assert load_pins("dev", BP).models[key].commit == COMMIT
    assert _serve_config_revisions(engine, WL) | _revisions(engine, WL) == {COMMIT}
    assert engine.outputs(WL, "dev")["llmctl_pins"]["models"][key]["commit"] == COMMIT  # in the backend

    pins_path("dev", BP).unlink()  # another machine, and the Hub out of reach: the backend's record
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    lifecycle().up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools)
    assert load_pins("dev", BP).models[key].commit == COMMIT
    assert _serve_config_revisions(engine, WL) | _revisions(engine, WL) == {COMMIT}


def test_an_unreachable_hub_deploys_the_branch_with_a_note(
    engine: StandinEngine, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig, pools = files
    complete_cluster(engine)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    notes: list[str] = []
    runner = lifecycle()
    monkeypatch.setattr(runner.progress, "note", notes.append)
    runner.up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools)
    assert any("not pinned: " in n and "could not reach the Hugging Face Hub" in n for n in notes)
    assert load_pins("dev", BP).models == {}
    assert _serve_config_revisions(engine, WL) | _revisions(engine, WL) == {"main"}
