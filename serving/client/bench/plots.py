"""PNG plots of a run (best effort: skipped, with a note, when matplotlib is missing).

One level: the TTFT distribution and the per-request output tokens/s distribution. A sweep: the
p50/p90/p99 of TTFT, TPOT and end-to-end latency, and the output throughput, against the load
(concurrency or request rate).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_DATA = list[tuple[dict[str, Any], Path]]


def sweep_title(levels: _DATA) -> str:
    """What a sweep's figures are of: the model and when it ran (UTC)."""
    first = levels[0][0]
    when = str(first.get("started_at") or "").replace("T", " ").replace("+00:00", " UTC")
    return f"{first['model']}" + (f", {when}" if when else "")


def plain_ticks(ax: Any, xs: list[float]) -> None:
    """A log-2 load axis labelled with the levels that ran (1, 2, 4), not 2^0, 2^1, 2^2."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{x:g}" for x in xs])
    ax.minorticks_off()


def plot_all(out_dir: Path, levels: _DATA) -> tuple[list[str], str | None]:
    """Write the plots; returns the files written and a note when plots were skipped."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return (
            [],
            "plots skipped: matplotlib is not installed (from the llmctl checkout: pip install '.[bench]')",
        )
    written: list[str] = []
    for summary, folder in levels:
        rows = json.loads((folder / "requests.json").read_text())
        done = [r for r in rows if r["status"] == "ok"]
        for key, title, scale, name in (
            ("ttft_s", "TTFT (ms)", 1000.0, "ttft_hist.png"),
            ("request_output_throughput_tok_s", "output tokens/s per request", 1.0, "tokens_per_s_hist.png"),
        ):
            values = [r[key] * scale for r in done if r[key] is not None]
            fig, ax = plt.subplots(figsize=(6, 4))
            ax.hist(values, bins=min(40, max(5, len(values) // 2)) if values else 5, color="#4c72b0")
            ax.set_xlabel(title)
            ax.set_ylabel("requests")
            ax.set_title(f"{summary['model']} {summary.get('label', '')}: {title}")
            fig.tight_layout()
            path = folder / name
            fig.savefig(path, dpi=100)
            plt.close(fig)
            written.append(str(path))
        if summary.get("replicas"):
            written.append(plot_scaling(plt, summary, done, folder))
    if len(levels) > 1:
        closed = levels[0][0]["load"]["mode"] == "closed"
        axis_key = "concurrency" if closed else "requested_rate_rps"
        xs = [float(s["load"][axis_key]) for s, _ in levels]
        xlabel = "concurrency" if closed else "requested rate (req/s)"
        fig, axes = plt.subplots(1, 3, figsize=(15, 4))
        for ax, (key, title) in zip(
            axes, (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "end-to-end")), strict=True
        ):
            for q in ("p50", "p90", "p99"):
                ys = [s["metrics"][key][q] for s, _ in levels]
                ax.plot(xs, [y * 1000 if y is not None else float("nan") for y in ys], marker="o", label=q)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(f"{title} (ms)")
            ax.set_title(title)
            ax.legend()
            if closed:
                plain_ticks(ax, xs)
        fig.suptitle(sweep_title(levels))
        fig.tight_layout()
        path = out_dir / "latency_vs_load.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(str(path))
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(
            xs, [s["throughput"]["output_throughput_tok_s"] for s, _ in levels], marker="o", label="output"
        )
        ax.plot(xs, [s["throughput"]["total_throughput_tok_s"] for s, _ in levels], marker="s", label="total")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("tokens/s")
        ax.set_title(f"throughput: {sweep_title(levels)}")
        ax.legend()
        if closed:
            plain_ticks(ax, xs)
        fig.tight_layout()
        path = out_dir / "throughput_vs_load.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(str(path))
    return written, None


def plot_scaling(plt: Any, summary: dict[str, Any], done: list[dict[str, Any]], folder: Path) -> str:
    """`scaling.png`: the replicas sampled during the level under its output throughput (tokens of
    the requests finished in each second) and each request's TTFT, on one time axis."""
    fig, (ttft, rate, replicas) = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    timed = [r for r in done if r["ttft_s"] is not None]
    ttft.scatter([r["start_s"] for r in timed], [r["ttft_s"] * 1000 for r in timed], s=8)
    ttft.set_ylabel("TTFT (ms)")
    per_second: dict[int, int] = {}
    for r in done:
        second = int(r["start_s"] + r["e2e_s"])
        per_second[second] = per_second.get(second, 0) + int(r["output_tokens"])
    seconds = sorted(per_second)
    rate.bar(seconds, [per_second[t] for t in seconds], width=1.0, align="edge", color="#4c72b0")
    rate.set_ylabel("output tokens/s")
    samples = summary["replicas"]
    times = [p["t_s"] for p in samples]
    replicas.step(times, [p["running"] for p in samples], where="post", label="running")
    replicas.step(times, [p["desired"] for p in samples], where="post", linestyle="--", label="desired")
    replicas.set_ylabel("replicas")
    replicas.set_xlabel("seconds since the level started")
    replicas.legend()
    fig.suptitle(f"{summary['model']} {summary.get('label', '')}: scaling under load")
    fig.tight_layout()
    path = folder / "scaling.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)
