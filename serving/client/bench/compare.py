"""``llmctl bench compare A B``: two result folders side by side.

A folder is either one level (its ``summary.json`` has ``metrics``) or a sweep (``kind: sweep``);
sweeps are matched level by level (same label, e.g. ``c8``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmctl.errors import BadInput
from llmctl.serving.client.bench.report import SUMMARY, sweep_entry

# (key in a sweep entry, label, scale, higher is better)
ROWS: list[tuple[str, str, float, bool]] = [
    ("ttft_s_p50", "TTFT p50 (ms)", 1000.0, False),
    ("ttft_s_p99", "TTFT p99 (ms)", 1000.0, False),
    ("tpot_s_p50", "TPOT p50 (ms)", 1000.0, False),
    ("tpot_s_p99", "TPOT p99 (ms)", 1000.0, False),
    ("itl_s_p50", "ITL p50 (ms)", 1000.0, False),
    ("itl_s_p99", "ITL p99 (ms)", 1000.0, False),
    ("e2e_s_p50", "E2E p50 (ms)", 1000.0, False),
    ("e2e_s_p99", "E2E p99 (ms)", 1000.0, False),
    ("output_throughput_tok_s", "output tok/s", 1.0, True),
    ("total_throughput_tok_s", "total tok/s", 1.0, True),
    ("requests_per_minute", "requests/min", 1.0, True),
    ("goodput_rps", "goodput req/s", 1.0, True),
    ("error_rate", "error rate", 1.0, False),
]


def load_levels(folder: Path) -> dict[str, dict[str, Any]]:
    """The levels of a result folder, by label; BadInput when it holds no results."""
    path = folder / SUMMARY
    if not folder.is_dir():
        raise BadInput(f"{folder} is not a folder", "pass two folders written by `llmctl bench --out`")
    if not path.exists():
        raise BadInput(f"{folder} holds no {SUMMARY}", "pass a folder written by `llmctl bench --out`")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise BadInput(f"{path} is not valid JSON: {error}", "re-run the benchmark") from None
    not_ours = BadInput(f"{path} is not an llmctl bench summary", "pass a folder written by `llmctl bench`")
    if not isinstance(data, dict):
        raise not_ours
    try:
        if data.get("kind") == "sweep":
            levels = {str(entry["label"]): entry for entry in data.get("levels", [])}
        elif "metrics" in data:
            levels = {str(data.get("label") or "run"): sweep_entry(data)}
        else:
            raise not_ours
    except (KeyError, TypeError, AttributeError):
        raise not_ours from None
    numeric = (int, float, type(None))
    if not all(isinstance(entry.get(key), numeric) for entry in levels.values() for key, *_ in ROWS):
        raise not_ours
    if not levels:
        raise BadInput(f"{folder} has no measured levels", "re-run the benchmark")
    return levels


def compare(a: Path, b: Path) -> dict[str, Any]:
    """Rows of (metric, A, B, change) per level present in both; single runs compare directly."""
    levels_a, levels_b = load_levels(a), load_levels(b)
    pairs: list[tuple[str, dict[str, Any], dict[str, Any]]]
    if len(levels_a) == 1 and len(levels_b) == 1:
        (label_a, left), (label_b, right) = next(iter(levels_a.items())), next(iter(levels_b.items()))
        pairs = [(f"{label_a} vs {label_b}", left, right)]
    else:
        common = [label for label in levels_a if label in levels_b]
        if not common:
            raise BadInput(
                "the two sweeps share no load level",
                f"A has {', '.join(levels_a)}; B has {', '.join(levels_b)}",
            )
        pairs = [(label, levels_a[label], levels_b[label]) for label in common]
    result: dict[str, Any] = {"a": str(a), "b": str(b), "levels": []}
    for label, left, right in pairs:
        rows: list[dict[str, Any]] = []
        for key, name, scale, higher_better in ROWS:
            va, vb = left.get(key), right.get(key)
            change = None
            if va is not None and vb is not None and va != 0:
                change = (vb - va) / abs(va)
            better = None
            if change is not None and change != 0:
                better = "b" if (change > 0) == higher_better else "a"
            rows.append(
                {
                    "metric": key,
                    "label": name,
                    "a": None if va is None else va * scale,
                    "b": None if vb is None else vb * scale,
                    "change": change,
                    "better": better,
                }
            )
        result["levels"].append({"level": label, "rows": rows})
    return result
