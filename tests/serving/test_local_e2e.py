"""The local target end to end: Ray Serve + the CPU app + the real openai client."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest
from serving_support import LOCAL_STACK, LocalServer, metric_value

from llmctl.blueprints.catalog import load_blueprint
from llmctl.errors import BadInput, ServingError
from llmctl.serving.client.local import local_status, start_local
from llmctl.serving.client.local_procs import alive
from llmctl.state import list_endpoints

# Ray on one xdist worker: one local Ray cluster at a time, and the session's server started once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


def test_local_target_serves(local_server: LocalServer) -> None:
    # the session's shared server (tests/serving/conftest.py): its start is this test's subject, and
    # its stop (SIGTERM while streams run, then nothing left) is the last test of test_overload_local.py
    endpoint, key, auth = local_server.endpoint, local_server.api_key, local_server.headers
    pid = int(endpoint.extra["pid"])
    assert endpoint.target == "local" and endpoint.base_url.startswith("http://127.0.0.1:")
    assert endpoint.model == "tiny"
    assert [e.blueprint for e in list_endpoints(LOCAL_STACK)] == ["tiny-cpu"]
    assert any("ready" in line for line in local_server.progress)
    rows = local_status(LOCAL_STACK)
    assert rows[0]["healthy"] is True and rows[0]["pid"] == pid

    client = openai.OpenAI(base_url=endpoint.base_url, api_key=key, max_retries=0)
    assert [m.id for m in client.models.list().data] == ["tiny"]
    denied = httpx.get(f"{endpoint.base_url}/models", timeout=10)
    assert denied.status_code == 401 and denied.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=endpoint.base_url, api_key="wrong", max_retries=0).models.list()

    answer = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hello"}], max_tokens=6, temperature=0
    )
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage is not None and answer.usage.completion_tokens == 6
    assert answer.choices[0].message.content

    chunks = list(
        client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "hello"}],
            max_tokens=6,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == answer.choices[0].message.content  # greedy: same text streamed or not
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) >= 2

    root = endpoint.base_url.removesuffix("/v1")
    infer = httpx.get(
        f"{root}/infer", params={"sentence": "what is data parallelism"}, headers=auth, timeout=60
    )
    assert infer.status_code == 200 and infer.text

    def bad_requests() -> float:  # the server is shared: count this test's own 400s
        text = httpx.get(f"{root}/metrics", headers=auth, timeout=10).text
        return metric_value(
            text, "llmctl_requests_total", model="tiny", route="/v1/chat/completions", status="400"
        )

    before = bad_requests()
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "data " * 3000}])
    with pytest.raises(openai.BadRequestError, match="at least 1"):
        client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "x"}], max_tokens=-1
        )

    again = client.completions.create(model="tiny", prompt="hello", max_tokens=3, temperature=0)
    assert again.choices[0].finish_reason == "length"  # still serving after the errors

    assert httpx.get(f"{root}/healthz", timeout=10).status_code == 200  # open for probes
    assert bad_requests() - before == 2
    metrics = httpx.get(f"{root}/metrics", headers=auth, timeout=10).text
    assert "llmctl_time_to_first_token_seconds_count" in metrics

    # a second `up` finds the running server instead of starting another
    blueprint = load_blueprint("tiny-cpu")
    assert (
        start_local(blueprint, stack=LOCAL_STACK, model=str(local_server.model), timeout_s=30).base_url
        == endpoint.base_url
    )
    assert alive(pid)


def test_gpu_blueprint_is_refused_with_the_reason(state: Path) -> None:
    with pytest.raises(ServingError) as caught:
        start_local(load_blueprint("llama2-70b-vllm-gpu"), stack="e2e")
    assert "nvidia" in caught.value.message and "ray-cpu" in caught.value.message
    assert caught.value.hint is not None and "tiny-cpu" in caught.value.hint


def test_unreachable_hub_says_how_to_pass_a_directory(
    state: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, free_port: int
) -> None:
    from huggingface_hub import constants

    # huggingface_hub reads these once, at import: set the values it uses, not just the variables
    endpoint = f"http://127.0.0.1:{free_port}"  # nothing listens there
    for name, value in {
        "ENDPOINT": endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HF_HUB_ETAG_TIMEOUT": 2,
    }.items():
        monkeypatch.setenv(f"HF_{name}" if name == "ENDPOINT" else name, str(value))
        monkeypatch.setattr(constants, name, value)
    with pytest.raises(ServingError) as caught:
        start_local(load_blueprint("tiny-cpu"), stack="e2e", model="someone/some-model")
    assert "could not reach the Hugging Face hub" in caught.value.message
    assert (
        caught.value.hint is not None
        and "llmctl models tiny DIR" in caught.value.hint
        and "--model DIR" in caught.value.hint
    )
    assert local_status("e2e") == []


def test_missing_model_directory_is_a_clear_error(state: Path, tmp_path: Path) -> None:
    """Bad input, exit 2 (issue 54): a path that is not there is the user's, not the serving app's."""
    with pytest.raises(BadInput, match="does not exist") as caught:
        start_local(load_blueprint("tiny-cpu"), stack="e2e", model=str(tmp_path / "nowhere"))
    assert caught.value.exit_code == 2


def test_a_process_without_the_token_cannot_join_the_local_ray(local_server: LocalServer) -> None:
    """Issue 45: the local target's Ray runs with token auth and a token of its own run. Its GCS
    listens on every interface (Ray has no option to bind it to loopback), so with no token or a
    shared one, another process or host could join it and run code as this user."""
    import json
    import socket
    import subprocess
    import sys

    from llmctl.serving.client.local import _record_path

    record = json.loads(_record_path(LOCAL_STACK, "tiny-cpu").read_text())
    [port_file] = Path(record["ray_dir"], "session_latest").glob("gcs_server_port_*")
    port = int(port_file.read_text().strip())
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass  # the GCS is there and reachable
    # a process of this user with Ray's default token (Ray >= 2.5x makes ~/.ray/auth_token for a local
    # `ray.init()` and uses it when no token is given): the runner's Ray must take a token of its own
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("RAY_")}
    default = Path.home() / ".ray" / "auth_token"
    token = default.read_text().strip() if default.exists() else "0" * 64  # none yet: a wrong one
    env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
    # the address Ray gives the GCS (the node's IP); the GCS client is what `ray.init` connects with
    # first (ray._raylet.GcsClient, Ray 2.60), asked here for the cluster's key-value keys: 0.4 s
    # either way, where a refused `ray.init` retries for 20 s
    probe = (
        "import ray.util\n"
        "from ray._raylet import GcsClient\n"
        "try:\n"
        f"    GcsClient(address=ray.util.get_node_ip_address() + ':{port}').internal_kv_keys(b'', None, timeout=10)\n"
        "    print('JOINED')\n"
        "except Exception as error:\n"
        "    print('REFUSED', type(error).__name__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert "REFUSED AuthenticationError" in result.stdout, (result.stdout, result.stderr[-1000:])
