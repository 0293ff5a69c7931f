"""Issue 45: every rendered object of every catalog blueprint passes checkov's Kubernetes checks.

One checkov run per session over `llmctl render`'s files of all catalog blueprints (the objects as
the stack applies them, secrets redacted). checkov reads the pod templates of Deployments and Jobs
but not of KubeRay's RayService, so each RayService's head and worker templates are also written as
Pods carrying the RayService's metadata (its namespace and its `checkov.io/skipN` annotations).
A check may be skipped only by such an annotation, with its reason (`infra/workload/builders/security.py`).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from workload_helpers import CATALOG, manifests_for

from llmctl.infra.workload.render import render_yaml
from llmctl.infra.workload.scheduling.pods import pod_templates

ROOT = Path(__file__).resolve().parents[2]
SCAN = Path(__file__).with_name("checkov_scan.py")
#: checkov's interpreter (`make checkov`); LLMCTL_CHECKOV_PYTHON points elsewhere
CHECKOV_PYTHON = Path(os.environ.get("LLMCTL_CHECKOV_PYTHON", ROOT / ".venv-checkov" / "bin" / "python"))

Obj = dict[str, Any]


def template_pods(obj: Obj) -> list[Obj]:
    """A RayService's pod templates as Pods with its metadata (checkov reads no RayService)."""
    if obj["kind"] != "RayService":
        return []
    pods = []
    for template in pod_templates(obj):
        suffix = "head" if template.where == "head group" else template.where.removeprefix("worker group ")
        meta = {**obj["metadata"], "name": f"{obj['metadata']['name']}-{suffix}"}
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.spec})
    return pods


def run_checkov(folder: Path) -> dict[str, Any]:
    """checkov's Kubernetes checks over the folder, in checkov's own interpreter (`checkov_scan.py`)."""
    if not CHECKOV_PYTHON.exists():
        pytest.fail(f"checkov is not installed at {CHECKOV_PYTHON}: run `make checkov`")
    result = subprocess.run(
        [str(CHECKOV_PYTHON), str(SCAN), str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("rendered")
    for name in CATALOG:
        objects = manifests_for(name)
        render_yaml([*objects, *(pod for obj in objects for pod in template_pods(obj))], folder / name)
    return run_checkov(folder)


def test_checkov_finds_no_failed_check(scan: dict[str, Any]) -> None:
    assert not scan["parsing_errors"]
    failed = [f"{check} {name}: {resource}" for check, name, resource, _ in scan["failed"]]
    assert not failed, "\n".join(failed)


def test_checkov_read_every_blueprint_and_every_pod(scan: dict[str, Any]) -> None:
    """The scan saw what it should: every blueprint's namespace, its NetworkPolicies and every pod."""
    resources = {resource.rsplit(":", 1)[-1] for resource in scan["resources"]}  # `<file>:<Kind.ns.name>`
    for name in CATALOG:
        objects = manifests_for(name)
        expected = {f"Namespace.default.{name}"} | {
            f"{o['kind']}.{name}.{o['metadata']['name']}"
            for o in [*objects, *(p for obj in objects for p in template_pods(obj))]
            if o["kind"] in ("Deployment", "Job", "Pod", "NetworkPolicy", "Service")
        }
        assert expected <= resources, sorted(expected - resources)
    checks = {check for check, _ in scan["passed"]}
    # the checks issue 45 named: security context, capabilities, root, seccomp, token, NetworkPolicy
    assert {
        "CKV_K8S_20",
        "CKV_K8S_28",
        "CKV_K8S_29",
        "CKV_K8S_30",
        "CKV_K8S_31",
        "CKV_K8S_37",
        "CKV_K8S_38",
    } <= checks
    assert "CKV2_K8S_6" in checks  # every pod has a NetworkPolicy


def test_every_skip_is_an_annotation_with_its_reason(scan: dict[str, Any]) -> None:
    from llmctl.infra.workload.builders.security import SKIPS

    assert scan["skipped"]
    for check, resource, reason in scan["skipped"]:
        assert reason == SKIPS[check], (check, resource, reason)


def test_the_scan_can_fail(tmp_path: Path) -> None:
    """The same runner on a pod without the hardening reports the checks (the scan is not vacuous)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare", "namespace": "n"},
        "spec": {"containers": [{"name": "c", "image": "rayproject/ray:2.58.0-py312-cpu"}]},
    }
    render_yaml([pod], tmp_path)
    failed = {check for check, *_ in run_checkov(tmp_path)["failed"]}
    assert {"CKV_K8S_20", "CKV_K8S_28", "CKV_K8S_37", "CKV_K8S_38", "CKV2_K8S_6"} <= failed, sorted(failed)
