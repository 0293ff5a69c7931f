"""Issue 53, finding 4: ``model.id`` and ``model.revision`` flow into S3 keys and IAM ARNs, so they are
held to the Hugging Face Hub's grammar before anything is built from them.

The attack: ``id: "*"`` and ``revision: "*"`` passed `validate` and `plan` and gave the mirror role
Put/Delete on ``models/*/*/*`` (every model's mirror) once the Hub could not be asked
(``HF_HUB_OFFLINE=1``, a 5xx). Now `validate`, `plan` and `up` refuse the file (exit 2, the field path
and a fix), and the IAM builder refuses any prefix IAM would read as a pattern.

The grammar of a Hub id is held to huggingface_hub's own check (the installed 2.4.0's
``huggingface_hub.utils.validate_repo_id``) over generated strings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner
from workload_helpers import config_for

from llmctl.blueprints._data import data_file
from llmctl.blueprints.catalog import catalog_names, load_blueprint
from llmctl.blueprints.hub_names import SAFE_CHARS, hub_id_problem, model_id_problem, revision_problem
from llmctl.cli.app import app
from llmctl.errors import BadInput, BlueprintError
from llmctl.infra.workload.access.bucket_grants import Grants, mirror_grants, s3_statements, serving_grants
from llmctl.infra.workload.builders.cache import model_prefix
from llmctl.infra.workload.config import WorkloadConfig

#: characters that make an id interesting: the Hub's own, IAM's wildcards and variables, path and
#: shell ones, a non-ASCII word character (``\w`` would take it without re.ASCII)
_ALPHABET = "aZ09_-./*?${}~ é"


def _hub_accepts(model_id: str) -> bool:
    try:
        validate_repo_id(model_id)
    except HFValidationError:
        return False
    return True


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=_ALPHABET, min_size=1, max_size=12))
@example("*")
@example("a/b/c")
@example("a--b")
@example("a..b")
@example("foo.git")
@example(".repo")
@example("x" * 96)
@example("x" * 97)
@example("café")
@example("_a_/_b_")
def test_a_hub_id_is_what_huggingface_hub_accepts(model_id: str) -> None:
    assert (hub_id_problem(model_id) is None) == _hub_accepts(model_id)


@settings(max_examples=2000, deadline=None)
@given(
    st.text(alphabet=_ALPHABET, min_size=1, max_size=12),
    st.text(alphabet=_ALPHABET + "@^:[\\", min_size=1, max_size=12),
)
def test_nothing_accepted_can_reach_an_arn_as_a_pattern(model_id: str, revision: str) -> None:
    """Whatever id and revision pass, the mirror prefix is made of characters IAM reads literally,
    with no empty, '.' or '..' segment."""
    if model_id_problem(model_id) is None and revision_problem(revision, model_id) is None:
        prefix = f"models/{model_id}/{revision}"
        assert set(prefix) <= SAFE_CHARS
        assert not {"*", "?", "$"} & set(prefix)


@pytest.mark.parametrize(
    "revision",
    [
        "main",
        "v1.0",
        "refs/pr/1",
        "0123456789abcdef0123456789abcdef01234567",
        "release_2024-01",
    ],
)
def test_branches_tags_and_commits_are_accepted(revision: str) -> None:
    assert revision_problem(revision, "meta-llama/Llama-2-7b-chat-hf") is None


@pytest.mark.parametrize(
    "revision",
    [
        "*",
        "ma?n",
        "${aws:username}",
        "a..b",
        "../x",
        "/main",
        "main/",
        "a//b",
        "x.lock",
        "main.",
        ".hidden",
        "-x",
        "a b",
        "@{1}",
        "a:b",
        "",
        "x" * 256,
    ],
)
def test_revisions_git_or_iam_would_misread_are_refused(revision: str) -> None:
    assert revision_problem(revision, "meta-llama/Llama-2-7b-chat-hf") is not None


def test_a_revision_with_a_slash_needs_a_namespaced_id() -> None:
    # `gpt2` at `a/b` and `gpt2/a` at `b` would both mirror into models/gpt2/a/b
    assert revision_problem("a/b", "gpt2") is not None
    assert revision_problem("b", "gpt2/a") is None


@pytest.mark.parametrize("model_id", ["/opt/models/llama", "./models/llama"])
def test_a_path_inside_the_image_is_still_accepted(model_id: str) -> None:
    assert model_id_problem(model_id) is None


@pytest.mark.parametrize("model_id", ["/", "/opt/../etc", "/opt//x", "~/x", "/opt/*", "./", "/a b"])
def test_paths_with_traversal_or_patterns_are_refused(model_id: str) -> None:
    assert model_id_problem(model_id) is not None


def _starred(tmp_path: Path, **model: str) -> Path:
    data: dict[str, Any] = yaml.safe_load(data_file("catalog", "llama2-inf2.yaml").read_text())  # mirror on
    # the catalog key, so the model-fit rules do not stop an unknown id first (the reproduction)
    data["model"].update({"architecture": "llama-2-13b", **model})
    path = tmp_path / "starred.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("field", "model"), [("model.id", {"id": "*"}), ("model.revision", {"revision": "*"})]
)
def test_a_wildcard_id_or_revision_is_refused_at_load_with_its_field(
    tmp_path: Path, field: str, model: dict[str, str]
) -> None:
    with pytest.raises(BlueprintError) as info:
        load_blueprint(str(_starred(tmp_path, **model)))
    [(where, message)] = info.value.problems
    assert where == field and "'*'" in message


@pytest.mark.parametrize(
    "command",
    [
        ["blueprints", "validate"],
        ["validate", "-b"],
        ["plan", "-b"],
        ["up", "--yes", "-b"],
        ["up", "--yes", "--target", "kubeconfig", "-b"],
    ],
)
def test_validate_plan_and_up_refuse_a_wildcard_model_before_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the case where only the Hub's refusal used to stop `up`
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path / "state"))
    path = _starred(tmp_path, id="*", revision="*")
    result = CliRunner().invoke(app, [*command, str(path), "--json"])
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)
    if "results" in error:  # `blueprints validate` reports each file it was given
        [error] = error["results"]
    else:
        assert error["error"] == "BlueprintError"
    assert {p["path"] for p in error["problems"]} == {"model.id", "model.revision"}
    assert all("'*'" in p["message"] and "(e.g." in p["message"] for p in error["problems"])  # the fix
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("*.json"))


def _starred_config() -> WorkloadConfig:
    """llama2-inf2 (mirror on) with id and revision '*', past the schema as the old code let them."""
    config = config_for("llama2-inf2")
    bp = config.blueprint
    model = bp.model.model_copy(update={"id": "*", "revision": "*"})
    return config.model_copy(update={"blueprint": bp.model_copy(update={"model": model})})


def test_the_iam_builder_refuses_a_wildcard_prefix_even_past_the_schema() -> None:
    config = _starred_config()
    assert model_prefix(config) == "models/*/*"
    for grants in (mirror_grants(config), serving_grants(config)):
        assert grants is not None
        with pytest.raises(BadInput, match="IAM would not read it literally"):
            s3_statements("aws", "bucket", grants)
    for prefix in ("models/a/${aws:username}", "models/a/b?", "models/../x", "models//x"):
        with pytest.raises(BadInput):
            s3_statements("aws", "bucket", Grants(write=(prefix,)))


@pytest.mark.parametrize("name", catalog_names())
def test_catalog_grants_have_a_wildcard_only_as_the_trailing_key_pattern(name: str) -> None:
    config = config_for(name)
    every = [g for g in (mirror_grants(config), serving_grants(config)) if g is not None]
    for grants in every:
        for statement in s3_statements("aws", "bucket", grants):
            resources = statement["Resource"]
            assert isinstance(resources, list)
            for arn in resources:
                assert "*" not in arn.removesuffix("/*") and "?" not in arn and "$" not in arn


def test_the_mirror_of_a_path_inside_the_image_is_refused_at_validation(tmp_path: Path) -> None:
    # a path has no Hub repository to mirror, and its prefix (models//opt/...) an empty segment
    with pytest.raises(BlueprintError) as info:
        load_blueprint(str(_starred(tmp_path, id="/opt/models/llama")))
    assert [where for where, _ in info.value.problems] == ["caches.model_mirror"]
