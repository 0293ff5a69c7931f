"""Issue 26 (smaller items): a sweep's plots label the load as it ran (1, 2, 4, not 2^0, 2^1, 2^2)
and name the model and the date."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from llmctl.serving.client.bench.plots import plain_ticks, sweep_title


def test_a_log_load_axis_is_labelled_with_the_levels() -> None:
    fig, ax = plt.subplots()
    ax.plot([1, 2, 4, 16], [1, 2, 3, 4])
    plain_ticks(ax, [1.0, 2.0, 4.0, 16.0])
    fig.canvas.draw()
    assert [label.get_text() for label in ax.get_xticklabels()] == ["1", "2", "4", "16"]
    assert ax.get_xscale() == "log"
    plt.close(fig)


def test_the_sweep_title_names_the_model_and_the_date() -> None:
    summary = {"model": "tiny", "started_at": "2026-11-27T00:40:00+00:00"}
    assert (
        sweep_title([(summary, Path("a")), ({"model": "tiny"}, Path("b"))]) == "tiny, 2026-11-27 00:40:00 UTC"
    )
