"""`--tokenizer`: prompts are sized with the model's own tokenizer, and a bad path is a clean error."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from llmctl.errors import LlmctlError
from llmctl.serving.client.bench.prompts import PromptFactory
from llmctl.serving.client.bench.tokens import APPROX_NAME, HFTokenizer, load_tokenizer
from llmctl.serving.client.tiny import build_tokenizer

# its module-scoped fixture is built once: every test of this file on the same xdist worker
pytestmark = pytest.mark.xdist_group("test_bench_tokenizer")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tokenizer")
    build_tokenizer().save_pretrained(str(path))
    return path


def test_prompts_hit_the_requested_length_in_real_tokens(tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(str(tokenizer_dir))
    assert isinstance(tokenizer, HFTokenizer) and tokenizer.exact
    factory = PromptFactory(tokenizer, mean_input_tokens=128, stddev_input_tokens=0, mean_output_tokens=16)
    specs = [factory.make(i) for i in range(20)]
    # What the factory reports is what the tokenizer counts in the text it sends.
    counted = [tokenizer.count(s.text) for s in specs]
    assert all(abs(c - s.input_tokens) <= 2 for c, s in zip(counted, specs, strict=True)), (counted, specs)
    assert abs(statistics.mean(counted) - 128) <= 4
    # The per-run nonce makes every prompt distinct (no prefix-cache hits).
    assert len({s.text for s in specs}) == len(specs) and all(
        s.text.startswith(factory.prefix(s.index)) for s in specs
    )


def test_without_a_tokenizer_the_approximation_is_named() -> None:
    assert load_tokenizer(None).name == APPROX_NAME


def test_a_bad_tokenizer_path_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(LlmctlError, match="cannot load tokenizer"):
        load_tokenizer(str(tmp_path / "missing"))


def test_sizing_prompts_prints_no_sequence_length_warning(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # a model whose context is shorter than the corpus, which is encoded whole to cut prompts from
    tokenizer = build_tokenizer()
    tokenizer.model_max_length = 64
    tokenizer.save_pretrained(str(tmp_path))
    factory = PromptFactory(load_tokenizer(str(tmp_path)), mean_input_tokens=32, mean_output_tokens=4)
    assert factory.make(0).input_tokens > 0
    out, err = capfd.readouterr()
    assert "sequence length" not in out + err + caplog.text
