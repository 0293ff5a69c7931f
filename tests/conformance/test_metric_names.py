"""Every vLLM metric name llmctl relies on is one a real vLLM server exports.

The names are read from the product's own files (code, catalog data, docs), not listed here, so a
name added anywhere is checked; the exported names come from ``/metrics`` of a real ``vllm serve``
0.26.0 on an H200 (tests/conformance/data/vllm-0.26.0-metrics.txt, how it was recorded in that
folder's README). A name a real server does not export is a defect: a query on it sees nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from llmctl.infra.aws.images import source_root

RECORDED = Path(__file__).parent / "data" / "vllm-0.26.0-metrics.txt"
# a vLLM metric as code, data and docs name it: the family, or one of its samples
_NAME = re.compile(r"\bvllm:[a-z_]+[a-z]")
_SOURCES = ("cli", "core", "infra", "serving", "blueprints", "docs", "README.md")
_SUFFIXES = ("_bucket", "_count", "_sum", "_created", "_total")


def exported() -> set[str]:
    """Every family and sample name in the recorded scrape."""
    names: set[str] = set()
    for family in text_string_to_metric_families(RECORDED.read_text()):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def named_by_llmctl() -> dict[str, list[str]]:
    """vLLM metric name -> the product files that name it."""
    root = source_root()
    found: dict[str, list[str]] = {}
    for source in _SOURCES:
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


def test_the_recording_is_a_real_vllm_scrape_under_load() -> None:
    names = exported()
    # the engine's queue and latency families, and counters that moved during the c64 load
    assert {
        "vllm:num_requests_waiting",
        "vllm:num_requests_running",
        "vllm:time_to_first_token_seconds",
    } <= names
    text = RECORDED.read_text()
    generated = re.search(r"^vllm:generation_tokens_total\{[^}]*\} ([0-9.e+]+)$", text, re.M)
    assert generated and float(generated.group(1)) > 100_000


def test_every_vllm_metric_llmctl_names_is_exported() -> None:
    names = exported()
    relied = named_by_llmctl()
    assert relied, "no vLLM metric named anywhere: the scan of the product's files found nothing"
    missing = {
        name: files
        for name, files in relied.items()
        if name not in names and not any(name.removesuffix(s) in names for s in _SUFFIXES)
    }
    assert not missing, f"named by llmctl but not exported by vLLM 0.26.0: {missing}"


def test_a_misspelled_name_would_be_caught() -> None:
    """The check itself: a name vLLM does not export is not found in the recording."""
    names = exported()
    assert "vllm:num_requests_queued" not in names
    assert "vllm:num_requests_waiting" in names
