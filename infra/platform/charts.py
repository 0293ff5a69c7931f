"""Helm releases from the pinned chart versions in `blueprints/data/versions.yaml`."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi_kubernetes.helm.v3 import Release, RepositoryOptsArgs

from llmctl.blueprints.versions import versions

CORE_NODE_SELECTOR = {"llmctl.dev/role": "core"}


def release(
    resource_name: str,
    chart_key: str,
    *,
    namespace: str,
    values: dict[str, Any],
    opts: pulumi.ResourceOptions,
    release_name: str | None = None,
    create_namespace: bool = False,
    skip_crds: bool = False,
) -> Release:
    """A Helm release of a pinned chart (OCI charts by reference, others through their repository).

    `skip_crds`: leave out the chart's `crds/` directory (when a separate CRD chart manages them).
    """
    chart = versions().charts[chart_key]
    oci = chart.repository.startswith("oci://")
    return Release(
        resource_name,
        name=release_name or chart.chart,
        chart=f"{chart.repository.rstrip('/')}/{chart.chart}" if oci else chart.chart,
        version=chart.version,
        repository_opts=None if oci else RepositoryOptsArgs(repo=chart.repository),
        namespace=namespace,
        create_namespace=create_namespace,
        skip_crds=skip_crds or None,
        values=values,
        cleanup_on_fail=True,
        timeout=900,
        opts=opts,
    )
