"""Pins of upstream behaviour the manifests depend on (KubeRay, Ray, Triton's vLLM backend).

Each test names the upstream fact it guards; see docs/workload.md.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from workload_helpers import find, manifests_for, worker

from llmctl.blueprints.catalog import load_blueprint
from llmctl.infra.workload.builders import triton_vllm


def _kuberay_start_cmd(group: dict[str, object], program: str) -> str:
    """What KubeRay puts in KUBERAY_GEN_RAY_START_CMD: `--<key>=<value>` per rayStartParams entry."""
    params = group["rayStartParams"]
    assert isinstance(params, dict)
    flags = " ".join(f"--{key}={value}" for key, value in params.items())
    return f"{program} {flags}"


def _run_start(tmp_path: Path, group: dict[str, object], pip_exit: int) -> subprocess.CompletedProcess[str]:
    container = group["template"]["spec"]["containers"][0]  # type: ignore[index]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # the container installs with `python3 -m pip` (the lock from the wheelhouse, then the wheel): a
    # stand-in python3 answers those with pip_exit and runs everything else with this interpreter
    python3 = bindir / "python3"
    # (the sha256 check of the fetched files passes here: it is run on real files in test_wheelhouse.py)
    python3.write_text(
        f'#!/bin/sh\nif [ "$1" = "-m" ] && [ "$2" = "pip" ]; then exit {pip_exit}; fi\n'
        'case "$2" in *hashlib*) exit 0;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    python3.chmod(python3.stat().st_mode | stat.S_IEXEC)
    show_args = f"{sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"
    # the container's own env (HOME, PYTHONUSERBASE and TMPDIR on its volumes: builders/writable.py)
    env = {
        **{e["name"]: e["value"] for e in container["env"] if "value" in e},
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "KUBERAY_GEN_RAY_START_CMD": _kuberay_start_cmd(group, show_args),
    }
    # `-l` is dropped here only because a login shell resets PATH (and the stand-in pip with it)
    command = [arg for arg in container["command"] if arg != "-lc"]
    assert command == ["/bin/bash", "--"]
    return subprocess.run(
        ["/bin/bash", "-c", *container["args"]], env=env, capture_output=True, text=True, timeout=30
    )


def test_base_image_start_keeps_the_quoted_neuron_resources(tmp_path: Path) -> None:
    """KubeRay's generated command carries shell quoting (`--resources="{\\"neuron_cores\\": 24}"`).

    A bare `$KUBERAY_GEN_RAY_START_CMD` would pass the quotes and backslashes on literally (and split
    the JSON at its space), so `ray start` would get unparseable resources.
    """
    group = worker(manifests_for("llama2-inf2"))
    result = _run_start(tmp_path, group, pip_exit=0)
    assert result.returncode == 0, result.stderr
    argv = json.loads(result.stdout)
    resources = [a for a in argv if a.startswith("--resources=")]
    assert resources == ['--resources={"neuron_cores": 24}']
    assert json.loads(resources[0].split("=", 1)[1]) == {"neuron_cores": 24}


def test_base_image_start_does_not_start_ray_when_the_install_fails(tmp_path: Path) -> None:
    result = _run_start(tmp_path, worker(manifests_for("llama2-inf2")), pip_exit=3)
    assert result.returncode == 3
    assert result.stdout == ""


def test_ray_worker_pods_leave_neuron_visible_cores_to_ray() -> None:
    """Ray 2.5x reads NEURON_RT_VISIBLE_CORES as a comma list and refuses to start a raylet with
    more neuron_cores than listed ids, so a pod-level `0-1` / `0-23` range breaks every tp > 1 worker."""
    for name in ("llama2-inf2", "llama3-vllm-inf2"):
        container = worker(manifests_for(name))["template"]["spec"]["containers"][0]
        names = {e["name"] for e in container["env"]}
        assert "NEURON_RT_VISIBLE_CORES" not in names
        assert "NEURON_RT_NUM_CORES" in names


def test_triton_keeps_auto_complete_config() -> None:
    """The vLLM backend declares text_input/text_output (and the decoupled policy) in its
    auto_complete_config; with --disable-auto-complete-config the model has no inputs or outputs and
    fails to initialise."""
    assert not any(
        "auto-complete" in arg for arg in triton_vllm.server_args(load_blueprint("llama2-triton-vllm-gpu"))
    )
    deployment = find(manifests_for("llama2-triton-vllm-gpu"), "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--disable-auto-complete-config" not in args
