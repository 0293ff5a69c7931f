"""The workload stack's Pulumi program: one blueprint on a platform.

`build_workload` refuses to run when the workload would not schedule (the same check as
`llmctl validate`), so a blueprint that would leave pods Pending can never be brought up.
"""

from __future__ import annotations

import secrets

import pulumi

from llmctl.blueprints.hf_token import require_hf_token
from llmctl.infra.workload.access.bucket_grants import (
    Grants,
    head_grants,
    mirror_grants,
    read_grants,
    serving_grants,
)
from llmctl.infra.workload.access.cache_access import CacheAccess
from llmctl.infra.workload.builders.cache import MIRROR_SERVICE_ACCOUNT
from llmctl.infra.workload.builders.common import SERVICE_ACCOUNT
from llmctl.infra.workload.builders.ray import HEAD_SERVICE_ACCOUNT
from llmctl.infra.workload.builders.ui import UI_PORT
from llmctl.infra.workload.component import Workload
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import delivery_of
from llmctl.infra.workload.delivery.ui_packages import UI_SERVICE_ACCOUNT, needs_ui_access
from llmctl.infra.workload.manifests import endpoint_info
from llmctl.infra.workload.schedulability import ensure_schedulable


def _bucket_access(config: WorkloadConfig) -> list[pulumi.Resource]:
    """On EKS, one Pod Identity role on the cache bucket per service account that needs it
    (`bucket_grants.py`): the serving pods' (read the delivered code and the mirror, write their own
    compile cache), the Ray head's (read the delivered code), the mirror Job's (read its lock's
    wheelhouse, write its model's mirror) and the Gradio UI's (read-only, its lock's wheelhouse)."""
    bucket = config.platform.cache_bucket
    if config.platform.target != "eks" or not bucket:
        return []
    ui_prefix = needs_ui_access(config)
    candidates: list[tuple[str, str, Grants | None]] = [
        ("cache-access", SERVICE_ACCOUNT, serving_grants(config)),
        ("head-access", HEAD_SERVICE_ACCOUNT, head_grants(config)),
        ("mirror-access", MIRROR_SERVICE_ACCOUNT, mirror_grants(config)),
        ("ui-access", UI_SERVICE_ACCOUNT, read_grants(ui_prefix) if ui_prefix else None),
    ]
    wanted = [(name, account, grants) for name, account, grants in candidates if grants is not None]
    return [
        CacheAccess(
            name,
            cluster_name=config.platform.cluster_name,
            stack=config.stack,
            namespace=config.ns,
            service_account=account,
            bucket=bucket,
            grants=grants,
        )
        for name, account, grants in wanted
    ]


def build_workload(config: WorkloadConfig, hf_token: str | None = None, api_key: str | None = None) -> None:
    """Register the workload's resources and export where its endpoint is."""
    bp = config.blueprint
    ensure_schedulable(bp, config.platform)
    require_hf_token(bp, hf_token)
    import pulumi_kubernetes as k8s

    opts = None
    if config.platform.kubeconfig:
        provider = k8s.Provider("k8s", kubeconfig=pulumi.Output.secret(config.platform.kubeconfig))
        opts = pulumi.ResourceOptions(providers=[provider])
    depends = _bucket_access(config)
    generated = bp.exposure.api_key and not api_key
    if generated:
        api_key = secrets.token_urlsafe(32)  # kept stable after creation (ignore_changes)
    workload = Workload(
        bp.name,
        config,
        hf_token=hf_token,
        api_key=api_key,
        api_key_generated=generated,
        # Open WebUI's session signing key: random, kept stable after creation (ignore_changes)
        webui_secret=secrets.token_urlsafe(32) if bp.ui == "open-webui" else None,
        depends_on=depends,
        opts=opts,
    )
    info = endpoint_info(config)
    pulumi.export("namespace", workload.namespace)
    pulumi.export("service", workload.service)
    pulumi.export("port", workload.port)
    pulumi.export("endpoint", workload.endpoint)
    pulumi.export("dashboard_service", info.dashboard_service)
    pulumi.export("ui_service", info.ui_service)
    pulumi.export("ui_port", UI_PORT if info.ui_service else None)
    pulumi.export("path", info.path)
    pulumi.export("openai", info.openai)
    pulumi.export("delivery", delivery_of(config).model_dump(mode="json"))  # how the serving code got there
