"""Container entry point: ``python3 -m llmctl.serving.triton_vllm.start [tritonserver flags]``.

Reads the blueprint from ``LLMCTL_BLUEPRINT``, syncs the S3 model mirror when ``LLMCTL_MODEL_URI``
is set (``model.json`` then points vLLM at that local copy), writes the model repository to
``$MODEL_REPOSITORY`` (default /opt/model_repository) and execs ``tritonserver`` with the
repository and every flag it was given (the ports). Before that it starts the server of vLLM's
queue gauge (:mod:`llmctl.serving.triton_vllm.queue_metrics`, the autoscaler's signal) on an empty
``PROMETHEUS_MULTIPROC_DIR`` that Triton's processes inherit.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from llmctl.serving.blueprint_env import blueprint_from_env
from llmctl.serving.model_mirror import mirror_uri, sync_model
from llmctl.serving.triton_vllm import queue_metrics
from llmctl.serving.triton_vllm.repository import render_model_repository

REPOSITORY_ENV = "MODEL_REPOSITORY"
DEFAULT_REPOSITORY = "/opt/model_repository"


def write_repository(root: Path) -> list[Path]:
    """Write the rendered repository under ``root``; returns the files written."""
    uri = mirror_uri()
    files = render_model_repository(blueprint_from_env(), sync_model(uri) if uri else None)
    written = []
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        written.append(path)
    return written


def main() -> None:
    """Render, start the queue gauge's server, then exec Triton (ports and other flags come from
    the command line)."""
    root = Path(os.environ.get(REPOSITORY_ENV, DEFAULT_REPOSITORY))
    write_repository(root)
    metrics = Path(os.environ.setdefault(queue_metrics.DIRECTORY_ENV, queue_metrics.DEFAULT_DIRECTORY))
    queue_metrics.prepare(metrics)
    queue_metrics.spawn(queue_metrics.PORT, metrics)
    os.execvp("tritonserver", ["tritonserver", f"--model-repository={root}", *sys.argv[1:]])


if __name__ == "__main__":
    main()
