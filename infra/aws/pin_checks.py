"""Checks of the pins that only the user's account and the chart repositories can confirm.

- The AMI alias (`al2023@vYYYYMMDD`) resolves for the cluster's Kubernetes version in each AL2023
  variant the blueprint's nodes need: Karpenter resolves an alias by reading one SSM parameter per
  architecture and variant (`standard`, `neuron`, `nvidia`),
  `/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<variant>/amazon-eks-node-al2023-<arch>-<variant>-<k8s>-<version>/image_id`
  (karpenter-provider-aws pkg/providers/amifamily/al2023.go); a missing parameter means nodes of
  that kind never launch.
- Each pinned image tag exists for linux/amd64 and names the digest versions.yaml records
  (`image_checks.py`, the OCI distribution manifest API).
- Each pinned chart version exists in its repository: the OCI distribution tags list
  (`GET /v2/<name>/tags/list`, with the registry's anonymous bearer token when it asks for one)
  for `oci://` repositories, `index.yaml` for HTTP Helm repositories.

A check that cannot run (offline, no permission, a registry error) is reported as `ok=None` with
a "could not check" detail: never as a pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urljoin

from llmctl.blueprints.pools import pool
from llmctl.infra.aws.checks import Check
from llmctl.infra.aws.image_checks import check_images, image_pins
from llmctl.infra.aws.registry_http import RegistryError, base_url, bearer_token, registry_client
from llmctl.infra.platform.config import PlatformConfig

ARCH = "x86_64"  # every llmctl pool launches x86_64 instances
VARIANT_BY_ACCELERATOR = {
    "cpu": "standard",
    "inferentia2": "neuron",
    "trainium": "neuron",
    "trainium2": "neuron",
    "nvidia": "nvidia",
}
MAX_TAG_PAGES = 50


def ami_parameter(kubernetes_version: str, alias: str, variant: str, arch: str = ARCH) -> str:
    """The SSM parameter Karpenter reads to resolve an AL2023 alias for one variant."""
    family, _, version = alias.partition("@")
    if family != "al2023" or not version:
        raise ValueError(f"{alias!r} is not an al2023@<version> alias")
    name = f"amazon-eks-node-al2023-{arch}-{variant}-{kubernetes_version}-{version}"
    return f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/{arch}/{variant}/{name}/image_id"


def ami_variants(accelerators: Iterable[str]) -> list[str]:
    """AL2023 variants the pools need: `standard` (the default pool) plus one per accelerator kind."""
    wanted = {"standard", *(VARIANT_BY_ACCELERATOR[a] for a in accelerators)}
    return [v for v in ("standard", "neuron", "nvidia") if v in wanted]


def _client_error(exc: Exception) -> tuple[str, str]:
    error = (getattr(exc, "response", None) or {}).get("Error", {})
    return str(error.get("Code", type(exc).__name__)), str(error.get("Message", exc))


def check_ami_alias(session: Any, region: str, kubernetes_version: str, alias: str, variant: str) -> Check:
    """Does the alias resolve for this Kubernetes version and variant in the region?"""
    from botocore.exceptions import BotoCoreError, ClientError

    name = f"AMI {alias} ({variant}, k8s {kubernetes_version})"
    parameter = ami_parameter(kubernetes_version, alias, variant)
    try:
        reply = session.client("ssm", region_name=region).get_parameter(Name=parameter)
    except ClientError as exc:
        code, message = _client_error(exc)
        if code == "ParameterNotFound":
            return Check(
                name,
                False,
                f"{alias} does not resolve in {region}: no SSM parameter {parameter}",
                f"pin an AL2023 release that exists for Kubernetes {kubernetes_version} (ami.al2023_alias in "
                "blueprints/data/versions.yaml), or use a Kubernetes version that release was built for",
            )
        return Check(name, None, f"could not check: {code}: {message} (reading {parameter})", _SSM_FIX)
    except BotoCoreError as exc:
        return Check(name, None, f"could not check: {exc}", None)
    return Check(name, True, f"resolves to {reply['Parameter']['Value']}")


_SSM_FIX = "allow ssm:GetParameter on arn:aws:ssm:<region>::parameter/aws/service/* for this identity"


# --- chart repositories ------------------------------------------------------------------------


def oci_tags(client: Any, repository_url: str, chart: str) -> set[str]:
    """Every tag of `<repository>/<chart>` in an OCI registry."""
    host, _, prefix = repository_url.removeprefix("oci://").partition("/")
    repository = f"{prefix.strip('/')}/{chart}".strip("/")
    url: str | None = f"{base_url(host)}/v2/{repository}/tags/list"
    headers: dict[str, str] = {}
    tags: set[str] = set()
    for _ in range(MAX_TAG_PAGES):
        if url is None:
            return tags
        reply = client.get(url, headers=headers)
        if reply.status_code == 401 and not headers:
            token = bearer_token(client, reply.headers.get("www-authenticate", ""), repository)
            headers = {"Authorization": f"Bearer {token}"}
            continue
        if reply.status_code == 404:
            raise RegistryError(f"{repository} is not in {host}", missing=True)
        if reply.status_code != 200:
            raise RegistryError(f"{host} answered HTTP {reply.status_code}")
        tags.update(reply.json().get("tags") or [])
        link = re.search(r"<([^>]+)>;\s*rel=\"?next\"?", reply.headers.get("link", ""))
        url = urljoin(url, link.group(1)) if link else None
    return tags


def index_versions(client: Any, repository_url: str, chart: str) -> set[str]:
    """Every version of a chart listed in an HTTP Helm repository's index.yaml."""
    import yaml

    reply = client.get(f"{repository_url.rstrip('/')}/index.yaml")
    if reply.status_code == 404:
        raise RegistryError(f"no index.yaml at {repository_url}", missing=True)
    if reply.status_code != 200:
        raise RegistryError(f"{repository_url} answered HTTP {reply.status_code}")
    try:
        index = yaml.safe_load(reply.text) or {}
    except yaml.YAMLError as exc:
        raise RegistryError(f"index.yaml of {repository_url} is not YAML: {exc}") from None
    entries = (index.get("entries") or {}).get(chart)
    if not entries:
        raise RegistryError(f"{chart} is not in {repository_url}/index.yaml", missing=True)
    return {str(entry.get("version")) for entry in entries}


def check_chart(client: Any, repository: str, chart: str, version: str) -> Check:
    """Is the pinned chart version published in its repository?"""
    import httpx

    name = f"chart {chart} {version}"
    oci = repository.startswith("oci://")
    try:
        found = oci_tags(client, repository, chart) if oci else index_versions(client, repository, chart)
    except RegistryError as exc:
        if exc.missing:
            return Check(name, False, str(exc), "check the repository and chart name in versions.yaml")
        return Check(name, None, f"could not check: {exc}", None)
    except (httpx.HTTPError, ValueError) as exc:
        return Check(
            name, None, f"could not check: cannot read {repository} ({type(exc).__name__}: {exc})", None
        )
    # Helm stores a chart version as an OCI tag with `+` replaced by `_`
    if version in found or (oci and version.replace("+", "_") in found):
        return Check(name, True, f"published in {repository}")
    newest = ", ".join(sorted(found, reverse=True)[:3]) or "none"
    return Check(
        name,
        False,
        f"{version} is not published in {repository} (found {len(found)} versions, e.g. {newest})",
        f"pin a published version of {chart} in blueprints/data/versions.yaml",
    )


def check_charts(charts: Iterable[tuple[str, str, str]], client: Any = None) -> list[Check]:
    """One check per (repository, chart, version)."""
    own = client is None
    client = client or registry_client()
    try:
        return [check_chart(client, repository, chart, version) for repository, chart, version in charts]
    finally:
        if own:
            client.close()


def platform_pins(
    blueprint: Any, *, stack: str, region: str
) -> tuple[str, list[str], list[tuple[str, str, str]]]:
    """For a blueprint (or None: the base platform): the Kubernetes version, the AMI variants its
    pools need, and (repository, chart, version) of every chart the platform installs."""
    from llmctl.blueprints.versions import versions  # lazy: read at call time: tests swap versions()

    config = PlatformConfig.for_blueprints(
        [blueprint] if blueprint is not None else [], stack=stack, region=region
    )
    pinned = versions().charts
    charts = [(pinned[k].repository, pinned[k].chart, pinned[k].version) for k in config.chart_keys()]
    variants = ami_variants(
        pool(name).accelerator for name in config.pools if pool(name).managed_by == "karpenter"
    )
    return config.kubernetes_version, variants, charts


def pin_checks(
    blueprint: Any, *, stack: str, region: str, session: Any | None, client: Any = None
) -> list[Check]:
    """AMI alias checks (when `session` can call AWS), chart version and image checks."""
    from llmctl.blueprints.versions import versions  # lazy: read at call time: tests swap versions()

    kubernetes_version, variants, charts = platform_pins(blueprint, stack=stack, region=region)
    alias = versions().ami["al2023_alias"].value
    checks = []
    if session is not None:
        checks = [check_ami_alias(session, region, kubernetes_version, alias, v) for v in variants]
    return [*checks, *check_charts(charts, client), *check_images(image_pins(blueprint), client)]
