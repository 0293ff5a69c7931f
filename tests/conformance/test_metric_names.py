"""Every vLLM metric name llmctl relies on is one a real vLLM exports.

The names are read from the product's own files (code, catalog data, docs), not listed here, so a
name added anywhere is checked. The exported names come from real engines on an H200
(tests/conformance/data/README.md says how each was recorded):

- ``vllm-0.26.0-metrics.txt``: ``/metrics`` of ``vllm serve`` 0.26.0 (the ray-llm image's vLLM) after a
  c64 load; every product file is held to it.
- ``vllm-0.22.1-metrics.txt``: the registry of vLLM 0.22.1's engine (Triton 26.06's vLLM) started from
  the ``model.json`` our Triton repository writes, after a burst of three times ``max_num_seqs``; the
  Triton runtime's files (its queue exporter, its builder, the runtime catalog) are held to it as
  well, since a name the 0.26 server has but 0.22.1's engine does not would leave KEDA reading
  nothing.

A name a real engine does not export is a defect: a query on it sees nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmctl.infra.aws.images import source_root

DATA = Path(__file__).parent / "data"
# recording -> the product files held to it (folders and files under the source root)
RECORDINGS = {
    "vllm-0.26.0-metrics.txt": ("cli", "core", "infra", "serving", "blueprints", "docs", "README.md"),
    "vllm-0.22.1-metrics.txt": (
        "serving/triton_vllm",
        "infra/workload/builders/triton_vllm.py",
        "infra/workload/builders/autoscaling.py",
        "blueprints/data/runtimes.yaml",
    ),
}
# a vLLM metric as code, data and docs name it: the family, or one of its samples
_NAME = re.compile(r"\bvllm:[a-z_]+[a-z]")
_SUFFIXES = ("_bucket", "_count", "_sum", "_created", "_total")


def exported(recording: str) -> set[str]:
    """Every family and sample name in a recorded scrape."""
    names: set[str] = set()
    for family in text_string_to_metric_families((DATA / recording).read_text()):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def named_by_llmctl(sources: tuple[str, ...]) -> dict[str, list[str]]:
    """vLLM metric name -> the product files among ``sources`` that name it."""
    root = source_root()
    found: dict[str, list[str]] = {}
    for source in sources:
        path = root / source
        files = (
            [path]
            if path.is_file()
            else sorted(p for p in path.rglob("*") if p.suffix in {".py", ".yaml", ".md"})
        )
        for file in files:
            for name in set(_NAME.findall(file.read_text(errors="replace"))):
                found.setdefault(name, []).append(str(file.relative_to(root)))
    return found


def sample_value(recording: str, name: str) -> float:
    """The sum of one sample's values over its label sets."""
    text = (DATA / recording).read_text()
    values = re.findall(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? ([0-9.e+]+)$", text, re.M)
    return sum(float(value) for value in values)


@pytest.mark.parametrize(
    ("recording", "tokens_at_least"),
    [("vllm-0.26.0-metrics.txt", 100_000), ("vllm-0.22.1-metrics.txt", 24_576)],
)
def test_the_recording_is_a_real_vllm_scrape_under_load(recording: str, tokens_at_least: int) -> None:
    names = exported(recording)
    # the engine's queue and latency families, and counters that moved during the load
    assert {
        "vllm:num_requests_waiting",
        "vllm:num_requests_running",
        "vllm:time_to_first_token_seconds",
    } <= names
    assert sample_value(recording, "vllm:generation_tokens_total") >= tokens_at_least


@pytest.mark.parametrize("recording", sorted(RECORDINGS))
def test_every_vllm_metric_llmctl_names_is_exported(recording: str) -> None:
    names = exported(recording)
    relied = named_by_llmctl(RECORDINGS[recording])
    assert relied, f"no vLLM metric named in {RECORDINGS[recording]}: the scan found nothing"
    missing = {
        name: files
        for name, files in relied.items()
        if name not in names and not any(name.removesuffix(s) in names for s in _SUFFIXES)
    }
    assert not missing, f"named by llmctl but not exported by {recording}: {missing}"


def test_the_triton_runtime_names_its_queue_gauge() -> None:
    """The Triton runtime's scan is not empty by accident: its autoscaling signal is among the names."""
    relied = named_by_llmctl(RECORDINGS["vllm-0.22.1-metrics.txt"])
    assert "vllm:num_requests_waiting" in relied
    assert "serving/triton_vllm/queue_metrics.py" in relied["vllm:num_requests_waiting"]


@pytest.mark.parametrize("recording", sorted(RECORDINGS))
def test_a_misspelled_name_would_be_caught(recording: str) -> None:
    """The check itself: a name vLLM does not export is not found in the recording."""
    names = exported(recording)
    assert "vllm:num_requests_queued" not in names
    assert "vllm:num_requests_waiting" in names
