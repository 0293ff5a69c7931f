"""Properties of the Neuron compile cache (`serving/compile_cache.py`), for any configuration.

The rules, from the module's docstring: `<key>` names everything that changes the compiled graphs,
so two configurations never share one (any field differs: the name differs), and it is one S3 key
segment; saved artifacts count only once the marker is written last, so a save cut short is
redone; `compile_or_load` loads what a complete local copy holds before `to_neuron()` and compiles
(then saves) only when nothing was loaded. The S3 side (fetch, publish under the lock) runs against
moto in test_compile_cache.py; here the decisions without a bucket.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from dataclasses import replace
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from llmctl.serving.compile_cache import CompileKey, compile_or_load, has_compiled, save_compiled

ids = st.sampled_from(("org-a/model", "org/a-model", "Org/Model", "org/model", "x/y.z", "x/y_z", "m"))
key_st = st.builds(
    CompileKey,
    model_id=ids,
    revision=st.sampled_from(("main", "Main", "v1.0", "v1-0", "abc123")),
    tp_degree=st.sampled_from((1, 2, 12, 24)),
    amp=st.sampled_from(("bf16", "f16", "f32")),
    batch_size=st.sampled_from((1, 4, 14)),
    n_positions=st.sampled_from((128, 1024, 4096)),
    context_length_estimate=st.lists(st.sampled_from((1, 2, 12, 23, 128)), max_size=3).map(tuple),
    neuron_sdk=st.sampled_from((None, "2.25.0", "unknown")),
)


@given(key_st, key_st)
@example(  # one readable name for two models: they would have loaded each other's graphs
    CompileKey("org-a/model", "main", 2, "bf16", 1, 128, (), "2.25.0"),
    CompileKey("org/a-model", "main", 2, "bf16", 1, 128, (), "2.25.0"),
)
@example(  # an SDK left unknown read as the SDK called "unknown"
    CompileKey("m", "main", 2, "bf16", 1, 128, (), None),
    CompileKey("m", "main", 2, "bf16", 1, 128, (), "unknown"),
)
def test_two_configurations_never_share_a_name_and_a_name_is_one_key_segment(
    one: CompileKey, other: CompileKey
) -> None:
    assert (one.name == other.name) is (one == other)
    assert re.fullmatch(r"[a-z0-9._@-]+", one.name)
    assert replace(one).name == one.name


class Model:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def load(self, folder: str) -> None:
        self.calls.append("load")

    def to_neuron(self) -> None:
        self.calls.append("to_neuron")

    def save(self, folder: str) -> None:
        self.calls.append("save")
        (Path(folder) / "graph.neff").write_text("x")


@given(key_st, st.sampled_from(("none", "complete", "cut short")))
def test_a_complete_copy_is_loaded_before_to_neuron_and_only_nothing_compiles(
    key: CompileKey, local: str
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        artifacts = Path(folder) / key.name
        if local != "none":
            artifacts.mkdir()
            (artifacts / "graph.neff").write_text("x")
        if local == "complete":
            save_compiled(artifacts, lambda _folder: None)
        model = Model()
        source = compile_or_load(model, artifacts, key, None)
        if local == "complete":
            assert (source, model.calls) == ("local", ["load", "to_neuron"])
        else:
            assert (source, model.calls) == ("compiled", ["to_neuron", "save"])
        assert has_compiled(artifacts)


@given(st.integers(0, 3), st.booleans())
def test_only_a_save_that_finished_counts(files: int, interrupted: bool) -> None:
    def save(folder: str) -> None:
        for n in range(files):
            (Path(folder) / f"part{n}").write_text("x")
        if interrupted:
            raise KeyboardInterrupt

    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "k"
        with contextlib.suppress(KeyboardInterrupt):
            save_compiled(target, save)
        assert has_compiled(target) is not interrupted
