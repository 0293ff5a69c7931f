"""The compile-cache lock (serving/compile_lock.py) on its own, against moto's S3: who gets the lock,
at exactly which age a lock counts as stale, what counts as S3 refusing a conditional write, and
that a release never deletes someone else's lock."""

from __future__ import annotations

import json
from typing import Any

import boto3
import botocore.exceptions
import pytest

from llmctl.serving.compile_lock import S3Lock, _precondition_failed

BUCKET = "llmctl-lock-test"
KEY = "neuron-cache/model/key.lock"


@pytest.fixture
def s3(aws: dict[str, str]) -> Any:
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    return client


def lock(s3: Any, owner: str, now: float, stale_s: float = 3600.0) -> S3Lock:
    return S3Lock(s3, botocore.exceptions, BUCKET, KEY, owner, stale_s=stale_s, clock=lambda: now)


def stored(s3: Any) -> dict[str, Any] | None:
    try:
        return dict(json.loads(s3.get_object(Bucket=BUCKET, Key=KEY)["Body"].read()))
    except s3.exceptions.NoSuchKey:
        return None


def test_the_first_caller_gets_the_lock_and_the_next_does_not(s3: Any) -> None:
    first, second = lock(s3, "a", 100.0), lock(s3, "b", 101.0)
    assert not first.held
    assert first.acquire() and first.held
    assert stored(s3) == {"owner": "a", "since": 100.0}
    assert not second.acquire() and not second.held
    holder = second.holder()
    assert holder is not None and (holder.owner, holder.since) == ("a", 100.0)


def test_a_lock_is_stale_from_exactly_stale_s_on(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=json.dumps({"owner": "old", "since": 1000.0}))
    assert not lock(s3, "early", 1000.0 + 3599.9).acquire()
    assert stored(s3) == {"owner": "old", "since": 1000.0}
    taker = lock(s3, "late", 1000.0 + 3600.0)
    assert taker.acquire() and taker.held
    assert stored(s3) == {"owner": "late", "since": 4600.0}


def test_the_default_stale_age_is_an_hour(s3: Any) -> None:
    """Longer than Ray Serve LLM lets an engine start (RAYLLM_ENGINE_START_TIMEOUT_S, 3600 s)."""
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=json.dumps({"owner": "old", "since": 1000.0}))

    def at(now: float) -> S3Lock:
        return S3Lock(s3, botocore.exceptions, BUCKET, KEY, "new", clock=lambda: now)

    assert not at(1000.0 + 3599.5).acquire()
    assert at(1000.0 + 3600.0).acquire()


def racing_clock(now: float, when_read: Any) -> Any:
    """A clock that runs ``when_read`` on its second call: inside acquire(), after the stale lock was
    read and before the takeover is written (the first call stamps the create attempt's body)."""
    calls = [0]

    def clock() -> float:
        calls[0] += 1
        if calls[0] == 2:
            when_read()
        return now

    return clock


def test_of_two_callers_taking_over_the_same_stale_lock_the_slower_one_backs_off(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=json.dumps({"owner": "dead", "since": 0.0}))
    faster = lock(s3, "faster", 5000.0)
    clock = racing_clock(5000.0, lambda: faster.acquire())
    slower = S3Lock(s3, botocore.exceptions, BUCKET, KEY, "slower", clock=clock)
    assert not slower.acquire() and not slower.held  # its takeover named the old ETag: refused
    assert faster.held and stored(s3) == {"owner": "faster", "since": 5000.0}


def test_a_stale_lock_deleted_before_the_takeover_is_not_taken(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=json.dumps({"owner": "dead", "since": 0.0}))
    clock = racing_clock(5000.0, lambda: s3.delete_object(Bucket=BUCKET, Key=KEY))
    late = S3Lock(s3, botocore.exceptions, BUCKET, KEY, "late", clock=clock)
    assert not late.acquire() and not late.held


def test_an_unreadable_lock_is_taken_over_at_once(s3: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=b"not json")
    holder = lock(s3, "x", 5.0).holder()
    assert holder is not None and (holder.owner, holder.since) == ("unreadable lock", 0.0)
    assert lock(s3, "x", 3600.0).acquire()
    assert stored(s3) == {"owner": "x", "since": 3600.0}


def test_no_lock_means_no_holder_and_a_retry_creates_it_once(s3: Any) -> None:
    first = lock(s3, "a", 1.0)
    assert first.holder() is None
    assert first.acquire_once() and first.held
    again = lock(s3, "b", 2.0)
    assert not again.acquire_once() and not again.held


def test_release_deletes_only_the_callers_own_lock(s3: Any) -> None:
    mine = lock(s3, "a", 1.0)
    mine.release()  # never held: nothing happens
    assert stored(s3) is None
    assert mine.acquire()
    other = lock(s3, "b", 2.0)
    other.release()  # not the holder
    assert stored(s3) == {"owner": "a", "since": 1.0}
    # a stalled holder whose lock was taken over leaves the new holder's lock alone
    taker = lock(s3, "c", 1.0 + 3600.0)
    assert taker.acquire()
    mine.release()
    assert stored(s3) == {"owner": "c", "since": 3601.0} and not mine.held
    taker.release()
    assert stored(s3) is None and not taker.held


def test_errors_other_than_a_refused_condition_are_raised(s3: Any) -> None:
    missing = S3Lock(s3, botocore.exceptions, "no-such-bucket-here", KEY, "a")
    with pytest.raises(botocore.exceptions.ClientError, match="NoSuchBucket"):
        missing.acquire()
    with pytest.raises(botocore.exceptions.ClientError, match="NoSuchBucket"):
        missing.holder()
    with pytest.raises(botocore.exceptions.ClientError, match="NoSuchBucket"):
        missing.acquire_once()


class _Refusal(Exception):
    """An exception shaped like botocore's ClientError (its ``response`` dict)."""

    def __init__(self, code: str, status: int | None) -> None:
        super().__init__(code)
        meta = {"HTTPStatusCode": status} if status is not None else {}
        self.response = {"Error": {"Code": code}, "ResponseMetadata": meta}


@pytest.mark.parametrize(
    ("code", "status", "refused"),
    [
        ("PreconditionFailed", 412, True),
        ("PreconditionFailed", None, True),
        ("ConditionalRequestConflict", None, True),
        ("", 409, True),
        ("", 412, True),
        ("", 408, False),
        ("", 410, False),
        ("", 411, False),
        ("", 413, False),
        ("AccessDenied", 403, False),
        ("NoSuchKey", 404, False),
    ],
)
def test_what_counts_as_s3_refusing_a_conditional_write(code: str, status: int | None, refused: bool) -> None:
    assert _precondition_failed(_Refusal(code, status)) is refused
    assert _precondition_failed(ValueError("no response")) is False
