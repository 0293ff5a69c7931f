"""Sessions made by llmctl share botocore's data loader (service models read once per process) but
each reads its own credentials and endpoint from the environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llmctl.infra.aws.session import new_session


def test_sessions_share_the_loader_without_growing_its_search_path() -> None:
    first, second = new_session("us-west-2"), new_session("eu-west-1")
    loader = first._session.get_component("data_loader")
    assert second._session.get_component("data_loader") is loader
    before = list(loader.search_paths)
    for _ in range(3):
        new_session()
    assert loader.search_paths == before and len(set(before)) == len(before)
    assert (first.region_name, second.region_name) == ("us-west-2", "eu-west-1")


def test_each_session_reads_its_own_credentials_and_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "first")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    one = new_session("us-west-2")
    assert one.get_credentials().access_key == "first"
    assert one.client("ec2").meta.endpoint_url == "http://127.0.0.1:1"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "second")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:2")
    two = new_session("us-west-2")
    assert two.get_credentials().access_key == "second"
    assert two.client("ec2").meta.endpoint_url == "http://127.0.0.1:2"


def test_sessions_reuse_a_client_only_while_everything_it_depends_on_is_the_same(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "config"
    config.write_text("[default]\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "first")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    ec2 = new_session("us-west-2").client("ec2")
    # another session, the same service, region, credentials and environment: the same client
    assert new_session("us-west-2").client("ec2") is ec2
    assert new_session().client("ec2", region_name="us-west-2") is ec2
    # anything else it depends on: a new client
    assert new_session("eu-west-1").client("ec2") is not ec2
    assert new_session("us-west-2").client("sqs") is not ec2
    assert new_session("us-west-2").client("ec2", endpoint_url="http://127.0.0.1:3") is not ec2
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s2")
    other_secret = new_session("us-west-2").client("ec2")
    assert other_secret is not ec2 and other_secret._request_signer._credentials.secret_key == "s2"
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert new_session("us-west-2").client("ec2") is not other_secret
    proxied = new_session("us-west-2").client("ec2")
    config.write_text("[default]\nretry_mode = adaptive\n")
    assert new_session("us-west-2").client("ec2") is not proxied


def test_a_session_has_exactly_botocores_built_in_handlers_and_its_own_copy_of_them() -> None:
    import boto3.session
    import botocore.handlers

    plain = boto3.session.Session(region_name="us-west-2")._session._original_handler
    ours = new_session("us-west-2")._session._original_handler
    events = {spec[0] for spec in botocore.handlers.BUILTIN_HANDLERS}
    events |= {"creating-client-class.s3", "before-parameter-build.s3.PutObject", "needs-retry.ec2"}

    def names(emitter: Any, event: str) -> list[str]:
        # boto3 registers its own handlers per session as new closures: compared by what they are
        found = emitter._handlers.prefix_search(event)
        return [
            f"{getattr(h, '__module__', '')}.{getattr(h, '__qualname__', type(h).__name__)}" for h in found
        ]

    for event in sorted(events):
        assert names(ours, event) == names(plain, event), event
    assert sum(len(names(ours, event)) for event in events) > 100

    # a handler one session registers is not seen by another
    def mine(**kwargs: Any) -> None:
        pass

    other = new_session("us-west-2")._session
    other.register("before-call.ec2.DescribeVpcs", mine)
    fresh = new_session("us-west-2")._session._original_handler
    assert mine not in list(fresh._handlers.prefix_search("before-call.ec2.DescribeVpcs"))
    assert mine in list(other._original_handler._handlers.prefix_search("before-call.ec2.DescribeVpcs"))


def test_a_handler_added_to_botocores_list_later_reaches_the_next_session() -> None:
    """moto's in-process stubber appends itself to botocore's built-in handlers when moto is imported;
    a session made after that has it too, as a plain boto3 session does (in a process of its own:
    this worker may have imported moto already)."""
    import subprocess
    import sys

    script = (
        "from llmctl.infra.aws.session import new_session\n"
        "new_session('us-west-2')\n"
        "import boto3.session, moto.core.botocore_stubber\n"
        "def names(s):\n"
        "    found = s._session._original_handler._handlers.prefix_search('before-send')\n"
        "    return [getattr(h, '__qualname__', type(h).__name__) for h in found]\n"
        "plain, ours = names(boto3.session.Session(region_name='us-west-2')), names(new_session('us-west-2'))\n"
        "assert ours == plain and 'BotocoreStubber' in ours, (ours, plain)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
