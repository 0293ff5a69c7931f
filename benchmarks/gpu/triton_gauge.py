"""The ``triton-gauge`` step: Triton's vLLM queue gauge, read the way KEDA reads it, under a burst.

The processes are the pod's (docs/autoscaling.md), Triton's server alone replaced:

- ``launch`` plays the kubelet: the catalog blueprint ``llama2-triton-vllm-gpu`` in
  ``LLMCTL_BLUEPRINT`` (``blueprint_env_value``, as the builder sets it), ``LLMCTL_MODEL_URI`` naming
  an S3 mirror whose local copy is already complete (the tiny model: nothing is downloaded), then
  ``exec python3 -m llmctl.serving.triton_vllm.start`` with the container's tritonserver flags.
- start.py runs unchanged: it renders the model repository, sets ``PROMETHEUS_MULTIPROC_DIR`` to
  its default, empties it, spawns queue_metrics.py's port-8003 server and execs ``tritonserver``.
- ``server`` is that ``tritonserver`` (the same PID, so queue_metrics.py's parent check holds): it
  starts the model's stub as Triton's Python backend does, a child process forked and exec'd with
  the server's environment (triton-inference-server/python_backend src/stub_launcher.cc,
  ``StubLauncher::Launch``: ``fork()`` then ``execv()`` of triton_python_backend_stub, lines 450-525
  at f9088ff), and waits for it.
- ``stub`` is the vLLM backend's model.py in that stub (triton-inference-server/vllm_backend
  src/model.py ``initialize``/``_init_engine``/``_run_llm_engine`` and
  src/utils/vllm_backend_utils.py ``build_async_engine_client_from_engine_args`` at 8de0c148):
  ``AsyncEngineArgs(**model.json)``, ``create_engine_config(usage_context=OPENAI_API_SERVER)`` and
  ``AsyncLLM.from_vllm_config`` on an event loop in a thread of its own, no custom stat loggers (the
  repository sets no ``REPORT_CUSTOM_METRICS``); requests go onto that loop with
  ``run_coroutine_threadsafe`` as ``execute()`` hands them over. Its load: a burst of requests, more
  than ``max_num_seqs``, after a few idle seconds; then idle again.
- The step itself plays KEDA: ``GET http://127.0.0.1:8003/metrics`` every 0.5 s through the whole
  run, each answer read by KEDA's metrics-api rules (tests/workload/keda_metrics_api.py: prometheus
  text format, the family named by ``valueLocation``, the first series the selector matches; the
  ``sum`` over endpoints is over this one pod). Each scrape's record keeps the queue family's lines
  raw, so collect.py re-reads them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
BLUEPRINT = "llama2-triton-vllm-gpu"
MIRROR_URI = "s3://llmctl-device/models/tiny/"  # a mirror URI whose local copy the step puts in place
PORT = 8003  # serving/triton_vllm/queue_metrics.py PORT
SCRAPE_EVERY_S = 0.5
IDLE_BEFORE_S = 4.0  # the stub waits this long with the engine ready before the burst
IDLE_AFTER_S = 12.0  # and this long after it (under one KEDA polling interval, 15 s)
BURST_WAVES = 6  # requests = waves x max_num_seqs: five waves wait while one runs
OUTPUT_TOKENS = 768
RUNNING = "vllm:num_requests_running"


def keda() -> ModuleType:
    """The KEDA metrics-api oracle: carried beside this file on the device, under tests/ here."""
    for path in (
        HERE / "keda_metrics_api.py",
        HERE.parents[1] / "tests" / "workload" / "keda_metrics_api.py",
    ):
        if path.exists():
            spec = importlib.util.spec_from_file_location("keda_metrics_api", path)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # its dataclasses look their module up
            spec.loader.exec_module(module)
            return module
    raise FileNotFoundError("keda_metrics_api.py: copy tests/workload/keda_metrics_api.py beside this file")


def family_lines(text: str, name: str) -> list[str]:
    """The lines of ``name``'s family in a scrape (its HELP, TYPE and samples), kept raw."""
    comment = ("# HELP ", "# TYPE ")
    return [
        line
        for line in text.splitlines()
        if (line.split()[2] == name if line.startswith(comment) else line.split("{")[0].split(" ")[0] == name)
    ]


# --- the step (the harness's process: kubelet's start, then KEDA's reads) ---------------------------


def step(
    record: Callable[..., None],
    export: Callable[[], None],
    *,
    root: Path,
    model: Path,
    environ: dict[str, str],
    limit: float,
) -> None:
    """Start the pod's processes, scrape port 8003 until the stub is done, record every reading."""
    logs, res = root / "logs", root / "res"
    logs.mkdir(parents=True, exist_ok=True)
    state = res / "triton-gauge"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "tritonserver"
    fake.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "triton_gauge.py"} server "$@"\n')
    fake.chmod(0o755)
    environ = dict(environ)
    environ["PATH"] = f"{bin_dir}:{environ.get('PATH', '')}"
    environ["LLMCTL_GAUGE_STATE"] = str(state)
    environ["LLMCTL_MODEL_CACHE"] = str(root / "mirror")
    environ["MODEL_REPOSITORY"] = str(root / "model_repository")  # start.py's REPOSITORY_ENV
    environ.pop("PROMETHEUS_MULTIPROC_DIR", None)  # start.py sets its own default
    argv = [sys.executable, str(HERE / "triton_gauge.py"), "launch", "--model", str(model)]
    log = (logs / "triton-gauge.log").open("w")
    started = time.time()
    process = subprocess.Popen(
        argv, env=environ, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    metric = keda_metric(environ)
    oracle = keda()
    scrapes: list[dict[str, Any]] = []
    saved: dict[str, str] = {}
    done_at: float | None = None
    deadline = started + limit
    try:
        while time.time() < deadline:
            at = time.time()
            text, error = scrape(f"http://127.0.0.1:{PORT}/metrics")
            row: dict[str, Any] = {"t": round(at - started, 2)}
            if error:
                row["error"] = error
            else:
                lines = family_lines(text, metric)
                row["lines"] = lines
                row["bytes"] = len(text)
                try:
                    row["keda_value"] = oracle.value_from_prometheus(text, metric)
                except ValueError as failed:
                    row["keda_error"] = str(failed)
                with contextlib.suppress(ValueError):  # context: the requests vLLM runs meanwhile
                    row["running"] = oracle.value_from_prometheus(text, RUNNING)
                value = row.get("keda_value")
                if "first" not in saved:
                    saved["first"] = text
                if value is not None and value >= max(
                    (s.get("keda_value") or 0.0 for s in scrapes), default=0.0
                ):
                    saved["peak"] = text
                saved["last"] = text
            scrapes.append(row)
            if done_at is None and (state / "stub.json").exists():
                done_at = time.time()
            if done_at is not None and time.time() - done_at > 2 * SCRAPE_EVERY_S:
                break  # the stub wrote its result after its idle tail: two more scrapes, then stop
            if process.poll() is not None and done_at is None:
                break  # the pod's processes ended before the stub finished: the log says why
            time.sleep(max(0.0, SCRAPE_EVERY_S - (time.time() - at)))
    finally:
        stop_group(process)
        for name, text in saved.items():
            (logs / f"triton-gauge-scrape-{name}.txt").write_text(text)
        stub = next(
            (
                json.loads(path.read_text())
                for path in (state / "stub.json", state / "stub-progress.json")
                if path.exists()
            ),
            None,
        )
        repository = (
            json.loads((state / "repository.json").read_text())
            if (state / "repository.json").exists()
            else None
        )
        record(
            "triton_gauge",
            metric=metric,
            started=round(started, 2),
            stub=stub,
            repository=repository,
            launched=_launched(state),
            scrapes=scrapes,
            pod_rc=process.poll(),
        )
        export()


def keda_metric(environ: dict[str, str]) -> str:
    """The trigger's ``valueLocation``: the runtime's ``queue_metric`` (blueprints/data/runtimes.yaml),
    read through the carried llmctl in a child process (this one has only the standard library)."""
    code = (
        "from llmctl.blueprints.catalog import load_blueprint; from llmctl.blueprints.runtimes import runtime; "
        f"print(runtime(load_blueprint({BLUEPRINT!r}).runtime).queue_metric)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ)
    if done.returncode:
        raise RuntimeError(done.stderr[-800:])
    return done.stdout.strip()


def _launched(state: Path) -> dict[str, Any]:
    path = state / "launch.json"
    return json.loads(path.read_text()) if path.exists() else {}


def scrape(url: str) -> tuple[str, str | None]:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.read().decode(), None
    except OSError as error:
        return "", repr(error)[:200]


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """End the pod's processes (start's session: the server, its stub, vLLM's engine core, the 8003
    server)."""
    import signal

    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


# --- launch: the kubelet's part -------------------------------------------------------------------


def launch(args: argparse.Namespace) -> None:
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.infra.workload.builders.triton_vllm import server_args
    from llmctl.serving.blueprint_env import BLUEPRINT_ENV, blueprint_env_value
    from llmctl.serving.model_mirror import COMPLETE_MARKER, MODEL_URI_ENV, split_s3_uri

    blueprint = load_blueprint(BLUEPRINT)
    bucket, prefix = split_s3_uri(MIRROR_URI)
    copy = Path(os.environ["LLMCTL_MODEL_CACHE"]) / bucket / prefix
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(args.model, copy)
    (copy / COMPLETE_MARKER).write_text("")  # the mirror Job's marker: the copy is complete
    os.environ[BLUEPRINT_ENV] = blueprint_env_value(blueprint)
    os.environ[MODEL_URI_ENV] = MIRROR_URI
    flags = server_args(blueprint)
    state = Path(os.environ["LLMCTL_GAUGE_STATE"])
    (state / "launch.json").write_text(
        json.dumps({"flags": flags, "mirror_copy": str(copy), "t": time.time()})
    )
    module = "llmctl.serving.triton_vllm.start"
    os.execv(sys.executable, [sys.executable, "-m", module, *flags])


# --- server: tritonserver's part ------------------------------------------------------------------


def server(argv: list[str]) -> None:
    root = Path(next(a.split("=", 1)[1] for a in argv if a.startswith("--model-repository=")))
    state = Path(os.environ["LLMCTL_GAUGE_STATE"])
    [model_json] = sorted(root.glob("*/1/model.json"))
    files = {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}
    (state / "repository.json").write_text(
        json.dumps(
            {
                "flags": argv,
                "files": files,
                "server_pid": os.getpid(),
                "PROMETHEUS_MULTIPROC_DIR": os.environ.get("PROMETHEUS_MULTIPROC_DIR"),
            }
        )
    )
    stub = subprocess.Popen(
        [sys.executable, str(HERE / "triton_gauge.py"), "stub", str(model_json.parent.parent)]
    )
    sys.exit(stub.wait())


# --- stub: the vLLM backend's model.py ------------------------------------------------------------


def stub(model_dir: Path) -> None:
    state = Path(os.environ["LLMCTL_GAUGE_STATE"])
    result: dict[str, Any] = {"pid": os.getpid(), "server_pid": os.getppid()}
    try:
        run_stub(model_dir, result)
    except Exception as error:  # the failure is the result
        result["error"] = repr(error)[-3000:]
    (state / "stub.json").write_text(json.dumps(result))
    os._exit(0)  # the engine's threads and its core process go with the pod's session


def progress(result: dict[str, Any]) -> None:
    """The stub's result so far (the step records it should its limit come first)."""
    state = Path(os.environ["LLMCTL_GAUGE_STATE"])
    (state / "stub-progress.json").write_text(json.dumps(result))


def run_stub(model_dir: Path, result: dict[str, Any]) -> None:
    import vllm
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.engine.async_llm import AsyncLLM

    config = json.loads((model_dir / "1" / "model.json").read_text())
    result.update(vllm=vllm.__version__, model_json=config)
    engine_args = AsyncEngineArgs(**config)
    holder: dict[str, Any] = {}
    ready = threading.Event()
    shutdown: list[asyncio.Event] = []

    async def run_engine() -> None:
        usage = UsageContext.OPENAI_API_SERVER
        vllm_config = engine_args.create_engine_config(usage_context=usage)
        engine = AsyncLLM.from_vllm_config(
            vllm_config=vllm_config,
            usage_context=usage,
            stat_loggers=[],
            enable_log_requests=engine_args.enable_log_requests,
            aggregate_engine_logging=engine_args.aggregate_engine_logging,
            disable_log_stats=engine_args.disable_log_stats,
        )
        holder.update(engine=engine, loop=asyncio.get_running_loop())
        shutdown.append(asyncio.Event())
        ready.set()
        try:
            await shutdown[0].wait()
        finally:
            engine.shutdown()

    engine_done = threading.Event()

    def engine_thread() -> None:
        try:
            asyncio.run(run_engine())
        except Exception as error:
            holder["error"] = repr(error)[-3000:]
            ready.set()
        finally:
            engine_done.set()

    began = time.time()
    threading.Thread(target=engine_thread, daemon=True).start()
    ready.wait()
    if "error" in holder:
        raise RuntimeError(holder["error"])
    engine, loop = holder["engine"], holder["loop"]
    result["engine_start_s"] = round(time.time() - began, 1)
    result["ready_at"] = round(time.time(), 2)
    progress(result)

    async def infer(tokens: int) -> int:
        params = SamplingParams(max_tokens=tokens, min_tokens=tokens, ignore_eos=True)
        count = 0
        async for output in engine.generate("hello from triton", params, str(uuid.uuid4())):
            count = len(output.outputs[0].token_ids)
        return count

    result["first_request_tokens"] = asyncio.run_coroutine_threadsafe(infer(16), loop).result()
    time.sleep(IDLE_BEFORE_S)
    requests = BURST_WAVES * int(config["max_num_seqs"])
    result["burst_started_at"] = round(time.time(), 2)
    progress(result)
    futures = [asyncio.run_coroutine_threadsafe(infer(OUTPUT_TOKENS), loop) for _ in range(requests)]
    counts = [future.result() for future in futures]
    result["burst_done_at"] = round(time.time(), 2)
    result["burst"] = {"requests": requests, "output_tokens_each": OUTPUT_TOKENS, "tokens": sum(counts)}
    progress(result)
    time.sleep(IDLE_AFTER_S)
    loop.call_soon_threadsafe(shutdown[0].set)
    engine_done.wait(timeout=30)


def main() -> None:
    role = sys.argv[1]
    if role == "server":
        server(sys.argv[2:])
    elif role == "stub":
        stub(Path(sys.argv[2]))
    elif role == "launch":
        parser = argparse.ArgumentParser()
        parser.add_argument("--model", type=Path, required=True)
        launch(parser.parse_args(sys.argv[2:]))
    else:
        raise SystemExit(f"unknown role {role}: server, stub or launch (the step runs from device.py)")


if __name__ == "__main__":
    main()
