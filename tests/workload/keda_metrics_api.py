"""A test oracle: what KEDA's metrics-api scaler does with a ScaledObject trigger, written from its
source (kedacore/keda pkg/scalers/metrics_api_scaler.go at v2.20.2, commit 68a5b502), standard
library only (the GPU run's triton-gauge step carries it to the device and reads its scrapes with it).

- :func:`endpoint_urls` is ``getEndpointsUrlsFromServiceURL`` (lines 312-379): with
  ``aggregateFromKubeServiceEndpoints`` KEDA takes the Service name and namespace from the URL's
  first two host labels, the port from the URL (80 for http, 443 for https when it names none),
  lists that Service's EndpointSlices, and for every ready, not yet seen address builds
  ``<scheme>://<address><:port><path>``, where ``:port`` is the URL's port only if the slice's ports
  include it and is empty otherwise (so the scheme's default port, 80, is called). Query and
  fragment are dropped.
- The EndpointSlices are derived as Kubernetes' EndpointSlice controller makes them for a Service
  with a selector: one slice port per Service port, its number the Service port's ``targetPort``
  resolved against the pod's container ports (a named targetPort is looked up by name; a pod
  without that name gets no port), the addresses those of the ready pods the selector matches
  (kubernetes/kubernetes staging/src/k8s.io/endpointslice utils.go ``getEndpointPorts`` and
  ``findPort``; a pod counts ready when ``podutil.IsPodReady``).
- :func:`value_from_prometheus` is ``getValueFromPrometheusResponse`` (lines 157-231): the selector
  in ``valueLocation`` names the family (``__name__``) and label matchers; the body is parsed as
  Prometheus text format; the value is that of the FIRST series in the family whose labels carry
  every matcher's name and value (KEDA compares values for equality whatever the matcher's
  operator); untyped, counter or gauge; a family that is missing, or no matching series, is an
  error. So one pod answers one number; nothing is summed within a scrape. A family with HELP and
  TYPE lines but no sample is no family (prometheus/common expfmt text_parse.go
  ``TextToMetricFamilies``, "Get rid of empty metric families"): "not found" too.
- :func:`aggregate` is ``aggregateMetricsFromMultipleEndpoints`` (lines 401-473): the endpoints'
  values summed (``sum``; also the default branch), or their max, min or average; an endpoint that
  fails is left out, and only all endpoints failing is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


class KedaError(ValueError):
    """What KEDA reports as the scaler's error for this poll (no value for the HPA)."""


@dataclass(frozen=True)
class Pod:
    """A ready pod as the EndpointSlice controller sees it: labels, IP and named container ports."""

    labels: dict[str, str]
    ip: str
    ports: dict[str, int] = field(default_factory=dict)  # container port name -> number
    ready: bool = True


def slice_ports(service: dict[str, Any], pod: Pod) -> list[int]:
    """The port numbers of ``service``'s EndpointSlice for ``pod`` (targetPort resolved)."""
    numbers = []
    for port in service["spec"]["ports"]:
        target = port.get("targetPort", port["port"])
        if isinstance(target, str):
            if target not in pod.ports:
                continue  # FindPort fails: the pod is in no slice with this port
            target = pod.ports[target]
        numbers.append(int(target))
    return numbers


def _selects(service: dict[str, Any], pod: Pod) -> bool:
    selector = service["spec"].get("selector")
    return bool(selector) and all(pod.labels.get(k) == v for k, v in selector.items())


def endpoint_urls(url: str, services: list[dict[str, Any]], pods: list[Pod]) -> list[str]:
    """The URLs KEDA calls for ``url`` with ``aggregateFromKubeServiceEndpoints: "true"``."""
    parts = urlsplit(url)
    labels = (parts.hostname or "").split(".")
    if len(labels) < 2:
        raise KedaError(f"invalid hostname {parts.netloc}: expected at least 2 elements")
    name, namespace = labels[0], labels[1]
    port = str(parts.port) if parts.port is not None else ("443" if parts.scheme == "https" else "80")
    matching = [
        s
        for s in services
        if s["metadata"]["name"] == name and s["metadata"].get("namespace", "default") == namespace
    ]
    urls: list[str] = []
    seen: list[str] = []
    for service in matching:
        for pod in pods:
            if not _selects(service, pod) or not pod.ready or pod.ip in seen:
                continue
            seen.append(pod.ip)
            found = f":{port}" if port in [str(p) for p in slice_ports(service, pod)] else ""
            urls.append(f"{parts.scheme}://{pod.ip}{found}{parts.path}")
    return urls


# --- the prometheus format -------------------------------------------------------------------------

_SELECTOR = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*(?:\{(.*)\})?\s*$")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}


def parse_selector(value_location: str) -> tuple[str, list[tuple[str, str]]]:
    """(family name, [(label, value)]) of a series selector such as ``name{label="v"}``."""
    match = _SELECTOR.match(value_location)
    if not match:
        raise KedaError(f"valueLocation {value_location!r} is not a series selector")
    name, body = match.group(1) or "", match.group(2) or ""
    matchers = [(m.group(1), m.group(3)) for m in _MATCHER.finditer(body)]
    for label, value in matchers:
        if label == "__name__":
            name = value
    return name, [(label, value) for label, value in matchers if label != "__name__"]


def families(text: str) -> dict[str, list[tuple[dict[str, str], float | None]]]:
    """Each family's series in order: (labels, value; None for a histogram's or summary's)."""
    types: dict[str, str] = {}
    out: dict[str, list[tuple[dict[str, str], float | None]]] = {}
    value: float | None
    for line in text.replace("\r\n", "\n").splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            types[name] = kind.strip()
            continue
        if not line.strip() or line.startswith("#"):
            continue
        sample = _SAMPLE.match(line)
        if not sample:
            raise KedaError(f"prometheus format parsing error: {line!r}")
        name, body, raw = sample.groups()
        labels = {m.group(1): m.group(2) for m in _LABEL.finditer(body or "")}
        family, value = name, _number(raw)
        for kind, suffixes in _SUFFIXES.items():
            for suffix in suffixes:
                base = name[: -len(suffix)]
                if name.endswith(suffix) and types.get(base) == kind:
                    family, value = base, None  # part of a histogram/summary: no plain value
        out.setdefault(family, []).append((labels, value))
    return out


def _number(raw: str) -> float:
    try:
        return float({"+Inf": "inf", "-Inf": "-inf", "NaN": "nan"}.get(raw, raw))
    except ValueError as error:
        raise KedaError(f"prometheus format parsing error: value {raw!r}") from error


def value_from_prometheus(text: str, value_location: str) -> float:
    """One endpoint's value: the first series of the named family that every matcher matches."""
    name, matchers = parse_selector(value_location)
    found = families(text)
    if name not in found:
        raise KedaError(f"metric '{name}' not found")
    for labels, value in found[name]:
        if all(labels.get(label) == wanted for label, wanted in matchers) and value is not None:
            return value
    raise KedaError(f"value {value_location} not found")


def aggregate(values: list[float | None], aggregation: str = "average") -> float:
    """The endpoints' values (None: that endpoint failed) as KEDA aggregates them."""
    good = [v for v in values if v is not None]
    if values and not good:
        raise KedaError(f"could not get any metric successfully from the {len(values)} provided endpoints")
    if not values:
        raise KedaError("no endpoints URLs were given for the service name")
    if aggregation == "max":
        return max(good)
    if aggregation == "min":
        return min(good)
    if aggregation == "average":
        return sum(good) / len(good)
    return sum(good)
