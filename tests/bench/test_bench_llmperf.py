"""Our result files read the way llmperf's own tools read theirs.

llmperf's analysis notebook (analyze-token-benchmark-results.ipynb) loads
``<stem>_individual_responses.json`` with ``pandas.read_json``, filters on ``error_code`` and uses
``number_input_tokens``, ``number_output_tokens``, ``ttft_s``, ``end_to_end_latency_s`` and
``request_output_throughput_token_per_s``; dashboards read the flat ``results_*`` keys of
``<stem>_summary.json``. The file stem follows token_benchmark_ray.py's rule for the model name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from llmctl.serving.client.bench.report import llmperf_stem, write_level


@pytest.mark.parametrize(
    ("model", "stem"),
    [
        # the stem of a results file published in llmperf's own repository
        ("01-ai/Yi-1.5-34B-Chat", "01-ai-Yi-1-5-34B-Chat_550_150"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama-Meta-Llama-3-8B-Instruct_550_150"),
        ("org//odd name..v2", "org-odd-name-v2_550_150"),
        ("Qwen2.5-0.5B", "Qwen2-5-0-5B_550_150"),
    ],
)
def test_file_names_follow_llmperfs_rule(model: str, stem: str) -> None:
    assert llmperf_stem(model, 550, 150) == stem


def test_llmperfs_notebook_reads_our_individual_responses(
    tmp_path: Path, recorded_run: Any, recorded_summary: Any
) -> None:
    summary, rows = recorded_summary
    write_level(tmp_path, summary, rows, recorded_run)
    path = tmp_path / "org-Model-1-5_8_3_individual_responses.json"
    # the notebook's cells, as written there
    df = pd.read_json(path)
    valid_df = df[(df["error_code"] != "")]
    final_df = pd.DataFrame()
    final_df["number_input_tokens"] = valid_df["number_input_tokens"]
    final_df["number_output_tokens"] = valid_df["number_output_tokens"]
    final_df["ttft_s"] = valid_df["ttft_s"]
    final_df["end_to_end_latency_s"] = valid_df["end_to_end_latency_s"]
    final_df["generation_throughput"] = valid_df["request_output_throughput_token_per_s"]
    mean_tokens_in = final_df["number_input_tokens"].mean()
    mean_tokens_out = valid_df["number_output_tokens"].mean()
    all_token_latencies = valid_df["end_to_end_latency_s"].apply(pd.Series).stack()
    # what it computes is what we measured (the failed request counts 0 output tokens, and pandas
    # skips its null latencies)
    assert mean_tokens_in == 8.0
    assert mean_tokens_out == pytest.approx(7 / 3, rel=1e-12)
    assert sorted(all_token_latencies.dropna().tolist()) == [0.5625, 0.75]
    assert final_df["ttft_s"].dropna().tolist() == [0.25, 0.25]
    assert final_df["generation_throughput"].dropna().tolist() == [3 / 0.5625, 4 / 0.75]
    # a filter on completed requests, as llmperf's summary applies it
    completed = df[df["error_code"].isna()]
    assert len(completed) == 2 and df["error_code"].dropna().tolist() == [503]
    assert (df["number_total_tokens"] == df["number_input_tokens"] + df["number_output_tokens"]).all()


def test_llmperfs_summary_keys_in_the_llmperf_named_summary(
    tmp_path: Path, recorded_run: Any, recorded_summary: Any
) -> None:
    summary, rows = recorded_summary
    write_level(tmp_path, summary, rows, recorded_run)
    data = json.loads((tmp_path / "org-Model-1-5_8_3_summary.json").read_text())
    per_request = json.loads((tmp_path / "org-Model-1-5_8_3_individual_responses.json").read_text())
    done = [row for row in per_request if row["error_code"] is None]
    itl = sorted(row["inter_token_latency_s"] for row in done)
    assert data["results_inter_token_latency_s_quantiles_p50"] == pd.Series(itl).quantile(0.5)
    assert (
        data["results_end_to_end_latency_s_mean"]
        == pd.Series([row["end_to_end_latency_s"] for row in done]).mean()
    )
    assert data["results_num_completed_requests"] == 2
    assert data["mean_input_tokens"] == 8 and data["mean_output_tokens"] == 3
