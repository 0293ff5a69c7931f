"""Container entry point: ``python3 -m llmctl.serving.triton_vllm.start [tritonserver flags]``.

Reads the blueprint from ``LLMCTL_BLUEPRINT``, syncs the S3 model mirror when ``LLMCTL_MODEL_URI``
is set (``model.json`` then points vLLM at that local copy), writes the model repository to
``$MODEL_REPOSITORY`` (default /opt/model_repository) and execs ``tritonserver`` with the
repository, the restriction of its admin APIs and every flag it was given (the ports). Before that it
starts the server of vLLM's queue gauge (:mod:`llmctl.serving.triton_vllm.queue_metrics`, the
autoscaler's signal) on an empty ``PROMETHEUS_MULTIPROC_DIR`` that Triton's processes inherit.

Triton's admin APIs (logging, trace settings, shared-memory registration, statistics, the model
repository and model configuration) sit on the serving port next to inference, open to any pod the
`allow-serving` NetworkPolicy admits (issue 53, finding 3). Triton restricts a group of them to
requests carrying a header with a given value (``--http-restricted-api`` and
``--grpc-restricted-protocol``, ``<api>,<api>,...:<header>=<value>``: triton-inference-server/server
``docs/customization_guide/inference_protocols.md`` "Limit Endpoint Access" at r26.06, the release
the image pins; the names from ``src/restricted_features.h``, parsed by ``ParseRestrictedFeatureOption``
in ``src/command_line_parser.cc``). Nothing llmctl runs calls them (the probes use ``/v2/health``,
the clients ``generate``), so the value is random per start and lives only in the server's argv: not
in the pod spec, not in any Secret. Health, metadata and inference stay open.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from llmctl.serving.blueprint_env import blueprint_from_env
from llmctl.serving.model_mirror import mirror_uri, sync_model
from llmctl.serving.triton_vllm import queue_metrics
from llmctl.serving.triton_vllm.repository import render_model_repository

REPOSITORY_ENV = "MODEL_REPOSITORY"
DEFAULT_REPOSITORY = "/opt/model_repository"
#: the admin APIs (Triton's names) only a request with the header below may call
ADMIN_APIS = ("logging", "trace", "shared-memory", "statistics", "model-repository", "model-config")
ADMIN_HEADER = "llmctl-triton-admin"  # gRPC: Triton checks `triton-grpc-protocol-llmctl-triton-admin`


def restricted_flags(value: str) -> list[str]:
    """The flags that put ``ADMIN_APIS`` behind the header ``ADMIN_HEADER: value``, on HTTP and gRPC."""
    group = f"{','.join(ADMIN_APIS)}:{ADMIN_HEADER}={value}"
    return [f"--http-restricted-api={group}", f"--grpc-restricted-protocol={group}"]


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
    admin = restricted_flags(secrets.token_urlsafe(32))  # no one holds it: the admin APIs stay shut
    os.execvp("tritonserver", ["tritonserver", f"--model-repository={root}", *admin, *sys.argv[1:]])


if __name__ == "__main__":
    main()
