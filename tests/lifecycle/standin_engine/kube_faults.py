"""What the Kubernetes provider does when it deletes an object, as far as the tests need it:

- control.json `kube_unreachable: true`: the API server does not answer. Without
  PULUMI_K8S_DELETE_UNREACHABLE=true the delete fails with the provider's message; with it the object
  is dropped from state (recorded in dropped.jsonl), as the real provider does.
- an object the stand-in kubectl serves with finalizers: the delete marks it deleting
  (deletionTimestamp) and times out while a finalizer remains, as a stuck finalizer makes Pulumi do.
"""

from __future__ import annotations

import os
from typing import Any

from .control import append, control, root

UNREACHABLE = (
    "configured Kubernetes cluster is unreachable: unable to load schema information from the API server: "
    'Get "https://llmctl-dev.gr7.us-west-2.eks.amazonaws.com/openapi/v2": dial tcp 10.0.1.5:443: i/o timeout'
)


def delete_blocker(res: dict[str, Any]) -> str | None:
    """Why deleting this resource fails now (None: it is deleted, or dropped)."""
    if not str(res.get("type", "")).startswith("kubernetes:"):
        return None
    if control().get("kube_unreachable"):
        if os.environ.get("PULUMI_K8S_DELETE_UNREACHABLE") == "true":
            append("dropped.jsonl", {"urn": res["urn"], "type": res["type"]})
            return None
        return UNREACHABLE
    from . import kubectl

    inputs = res.get("inputs") or {}
    meta = inputs.get("metadata") or {}
    if not inputs.get("kind") or not meta.get("name"):
        return None
    kind = str(inputs["kind"])
    namespace = "" if kind in kubectl.CLUSTER_SCOPED else str(meta.get("namespace") or "default")
    live = kubectl.objects(root()).get((kind, namespace, str(meta["name"])))
    finalizers = ((live or {}).get("metadata") or {}).get("finalizers")
    if not finalizers:
        return None
    assert live is not None
    kubectl.write_overlay(
        root(), {**live, "metadata": {**live["metadata"], "deletionTimestamp": "2026-11-26T12:00:00Z"}}
    )
    return (
        f"timed out waiting for the deletion of {kind} {meta['name']}: it still has finalizers "
        f"{finalizers} (the object is marked for deletion)"
    )
