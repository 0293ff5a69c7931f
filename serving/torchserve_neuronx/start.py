"""Container entry point: ``python -m llmctl.serving.torchserve_neuronx.start``.

Reads the blueprint from ``LLMCTL_BLUEPRINT``, writes ``model-config.yaml`` and
``config.properties`` (:mod:`.config`) to ``$LLMCTL_TS_WORKDIR``, archives the llmctl handler
(no-archive format) into ``$LLMCTL_TS_MODEL_STORE`` and execs TorchServe in the foreground. The
handler loads the weights from the S3 mirror when ``LLMCTL_MODEL_URI`` is set.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from llmctl.serving.blueprint_env import blueprint_from_env
from llmctl.serving.torchserve_neuronx.config import MODEL_STORE, archive_name, render_model_config

WORKDIR_ENV = "LLMCTL_TS_WORKDIR"
MODEL_STORE_ENV = "LLMCTL_TS_MODEL_STORE"
DEFAULT_WORKDIR = "/home/model-server/llmctl"


def main() -> None:
    """Write the config, run torch-model-archiver, start TorchServe in the foreground."""
    blueprint = blueprint_from_env()
    work = Path(os.environ.get(WORKDIR_ENV, DEFAULT_WORKDIR))
    store = Path(os.environ.get(MODEL_STORE_ENV, MODEL_STORE))
    work.mkdir(parents=True, exist_ok=True)
    for name, content in render_model_config(blueprint).items():
        (work / name).write_text(content)
    store.mkdir(parents=True, exist_ok=True)
    archive = archive_name(blueprint)
    subprocess.run(
        [
            "torch-model-archiver",
            "--model-name",
            archive,
            "--version",
            "1.0",
            "--handler",
            str(Path(__file__).with_name("handler.py")),
            "--config-file",
            str(work / "model-config.yaml"),
            "--archive-format",
            "no-archive",
            "--export-path",
            str(store),
            "--force",
        ],
        check=True,
    )
    os.execvp(
        "torchserve",
        [
            "torchserve",
            "--start",
            "--foreground",
            "--ncs",
            "--ts-config",
            str(work / "config.properties"),
            "--model-store",
            str(store),
            "--models",
            archive,
        ],
    )


if __name__ == "__main__":
    main()
