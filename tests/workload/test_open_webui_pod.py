"""Issue 53, finding 8: Open WebUI runs as llmctl's non-root user on a read-only root filesystem.

The pinned release (open-webui v0.9.1) was run the way the pod runs it, non-root in a read-only view of
the image's layout with an empty folder at each of the render's volume mounts
(`benchmarks/verify_open_webui.py`, `make verify-open-webui`); its record,
benchmarks/results/open-webui-nonroot.json, is checked here against the render as it is now, so a change
to the pod that the run did not see fails.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from test_security_context import _restricted_problems
from workload_helpers import blueprint, config_for, find, manifests_for

from llmctl.blueprints.versions import versions
from llmctl.infra.workload.builders import ui
from llmctl.infra.workload.delivery.serving_code import NON_ROOT_USER
from llmctl.infra.workload.manifests import build_manifests

Obj = dict[str, Any]
RECORD = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "open-webui-nonroot.json"


def webui_pod(objects: list[Obj] | None = None) -> Obj:
    objects = objects if objects is not None else manifests_for("llama3-vllm-inf2")
    spec: Obj = find(objects, "Deployment", "llama3-vllm-inf2-open-webui")["spec"]["template"]["spec"]
    return spec


def test_open_webui_runs_as_non_root_on_a_read_only_root() -> None:
    """Fails on the old code (root, a writable root filesystem, only its data folder on a volume)."""
    pod = webui_pod()
    assert pod["securityContext"]["runAsUser"] == NON_ROOT_USER[0] >= 10000  # checkov's CKV_K8S_40
    assert pod["securityContext"]["runAsNonRoot"] is True
    [container] = pod["containers"]
    for each in [*pod["initContainers"], container]:
        assert each["securityContext"]["readOnlyRootFilesystem"] is True, each["name"]
        assert each["securityContext"]["runAsUser"] == NON_ROOT_USER[0], each["name"]
    assert all("emptyDir" in volume for volume in pod["volumes"])
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    # its data folder, its static folder (STATIC_DIR), HOME (the image's, /root, is root's alone) and /tmp
    assert {ui.OPEN_WEBUI_DATA, env["STATIC_DIR"], env["HOME"], "/tmp"} <= mounts
    assert env["STATIC_DIR"] == ui.OPEN_WEBUI_STATIC != ui.OPEN_WEBUI_IMAGE_STATIC
    [seed] = pod["initContainers"]
    assert seed["image"] == container["image"]
    assert [m["mountPath"] for m in seed["volumeMounts"]] == [ui.OPEN_WEBUI_STATIC]


def test_the_seed_copies_the_images_static_folder_but_its_fonts(tmp_path: Path) -> None:
    """The init container's script, run with sh on a folder shaped like the image's: every file and
    folder but fonts/ (FONTS_DIR reads those in the image) lands on the volume."""
    image, volume = tmp_path / "static", tmp_path / "volume"
    for path in ("favicon.png", "assets/pdf-style.css", "swagger-ui/swagger-ui.css", "fonts/NotoSans.ttf"):
        (image / path).parent.mkdir(parents=True, exist_ok=True)
        (image / path).write_text(path)
    volume.mkdir()
    [seed] = webui_pod()["initContainers"]
    script = seed["command"][-1].replace(ui.OPEN_WEBUI_IMAGE_STATIC, str(image))
    script = script.replace(ui.OPEN_WEBUI_STATIC, str(volume))
    subprocess.run([*seed["command"][:-1], script], check=True)
    copied = sorted(str(p.relative_to(volume)) for p in volume.rglob("*") if p.is_file())
    assert copied == ["assets/pdf-style.css", "favicon.png", "swagger-ui/swagger-ui.css"]


def test_a_cpu_workload_with_open_webui_enforces_restricted() -> None:
    """Fails on the old code (Open WebUI ran as root, so its namespace stayed `baseline`)."""
    bp = blueprint("tiny-cpu").model_copy(update={"ui": "open-webui"})
    config = config_for("tiny-cpu").model_copy(update={"blueprint": bp})
    objects = build_manifests(config, hf_token=None)
    pod = find(objects, "Deployment", "tiny-cpu-open-webui")["spec"]["template"]["spec"]
    assert not _restricted_problems(pod, [])
    assert objects[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_verification_ran_the_pinned_release_as_the_pod_is_rendered() -> None:
    """The record of `make verify-open-webui` is of the pinned version and of this render: the same user,
    the same variables, a volume at each mount; the UI answered (health, frontend, a signup that writes
    its database, an upload) with no write refused. Without its static volume the start's refill of the
    static folder is refused (a read-only error per file); without its data volume it does not start."""
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    assert versions().images["open_webui"].image.endswith(":v" + record["open_webui"])
    run = record["run"]
    pod = webui_pod()
    [container] = pod["containers"]
    assert run["user"] == [pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]]
    for item in container["env"]:
        if "value" in item:
            assert run["env"][item["name"]] == item["value"], item["name"]
    assert set(run["volumes"]) == {m["mountPath"] for m in container["volumeMounts"]}
    assert run["answers"]["health"] == {"status": 200, "body": {"status": True}}
    assert run["answers"]["frontend"] == {"status": 200, "title": "Open WebUI"}
    assert run["answers"]["signup"]["status"] == run["answers"]["upload"] == 200
    assert run["answers"]["/static/assets/pdf-style.css"] == 200  # from the seed, not the frontend build
    assert run["refused_writes"] == []
    assert "webui.db" in run["volumes"][ui.OPEN_WEBUI_DATA]["entries"]
    refused = record["without"]["static"]["refused_writes"]
    assert refused and all(ui.OPEN_WEBUI_IMAGE_STATIC in line for line in refused)
    assert record["without"]["data"]["seconds_to_health"] is None
