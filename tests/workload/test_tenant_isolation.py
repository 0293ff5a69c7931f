"""The tenant rule of the cache bucket held by a real IAM evaluation: moto's server with its access
control on (it checks the caller's identity policies on every S3 call) and each workload's role
carrying exactly the policy the workload program gives it (docs/security.md).

Workload A (llama2-inf2: wheel delivery, model mirror, compile cache) runs three kinds of pod, each on
its own service account and role. Its serving pods (the Ray workers) may read the delivered code and
its model's mirror and write only its own compile cache; its Ray head may only read the delivered
code; its mirror Job may only read the model-mirror lock's wheelhouse and write its model's mirror. A
write to workload B's compile cache (llama3-vllm-inf2 and a second, named llama2-inf2 workload), to
any wheel or wheelhouse, or to another model's mirror is denied to all of them. moto ignores `StringLike` conditions (moto/iam/policy_conditions.py, 5.x: only StringEquals is
evaluated), so ListBucket's prefix condition is checked on the statements, not here.
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from workload_helpers import config_for

from llmctl.infra.workload.access.bucket_grants import (
    Grants,
    head_grants,
    mirror_grants,
    s3_statements,
    serving_grants,
)
from llmctl.infra.workload.builders.cache import cache_env, compile_cache_prefix, mirror_lock, model_prefix
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import planned_delivery, wheel_key
from llmctl.infra.workload.delivery.wheelhouse import WHEELHOUSE_PREFIX, wheelhouse_key

BUCKET = "llmctl-dev-us-west-2-cache"
REGION = "us-west-2"


def _post(url: str, body: bytes = b"") -> None:
    headers = {"Content-Type": "text/plain"}  # not a form: moto reads the raw body
    urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers, method="POST")).read()


def _wheel_config(name: str, **changes: Any) -> WorkloadConfig:
    config = config_for(name, **changes)
    return config.model_copy(update={"delivery": planned_delivery(config)})


@pytest.fixture
def tenant(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A factory: an S3 client holding the credentials of a role with the policy the program makes for
    `grants` (one service account's), made while access control is off; access control goes on for
    the test body."""
    _post(f"{moto_url}/moto-api/reset")
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    admin = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    endpoint = {"endpoint_url": moto_url, "region_name": REGION}
    s3 = boto3.client("s3", **endpoint, **admin)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    iam = boto3.client("iam", **endpoint, **admin)
    sts = boto3.client("sts", **endpoint, **admin)

    def role_client(grants: Grants | None, name: str) -> Any:
        assert grants is not None
        arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        policy = {"Version": "2012-10-17", "Statement": s3_statements("aws", BUCKET, grants)}
        iam.put_role_policy(RoleName=name, PolicyName="s3", PolicyDocument=json.dumps(policy))
        creds = sts.assume_role(RoleArn=arn, RoleSessionName="pod")["Credentials"]
        return boto3.client(
            "s3",
            **endpoint,
            aws_access_key_id=creds["AccessKeyId"],
            aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds["SessionToken"],
        )

    def seed(key: str) -> None:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"the CLI's")

    yield role_client, seed, lambda: _post(f"{moto_url}/moto-api/reset-auth", b"0")
    _post(f"{moto_url}/moto-api/reset-auth", b"inf")


def _denied(call: Any) -> bool:
    try:
        call()
    except ClientError as error:
        return error.response["Error"]["Code"] == "AccessDenied"
    return False


def test_a_workload_writes_only_its_own_caches_and_reads_the_code(tenant: Any) -> None:
    role_client, seed, enforce = tenant
    a = _wheel_config("llama2-inf2")
    b = _wheel_config("llama3-vllm-inf2")
    a_named = _wheel_config("llama2-inf2", namespace="llama2-inf2-pr42")
    wheel = wheel_key("0" * 64)
    wheelhouse = f"{WHEELHOUSE_PREFIX}/{'1' * 64}/requirements.txt"
    ui_wheelhouse = f"{WHEELHOUSE_PREFIX}/{'2' * 64}/gradio-5.0-py3-none-any.whl"
    own_mirror = f"{model_prefix(a)}/model.safetensors"
    own_cache = f"{compile_cache_prefix(a)}/key/graph.neff"
    for key in (wheel, wheelhouse, ui_wheelhouse, own_mirror, own_cache):
        seed(key)
    pod = role_client(serving_grants(a), "a-serving")
    enforce()

    # reading its own: the code the CLI uploaded, its own mirror and compile cache
    for key in (wheel, wheelhouse, ui_wheelhouse, own_mirror, own_cache):
        assert pod.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"the CLI's"
    # writing its own compile cache (the replica that compiled, its lock)
    pod.put_object(Bucket=BUCKET, Key=f"{compile_cache_prefix(a)}/key.lock", Body=b"me")
    pod.delete_object(Bucket=BUCKET, Key=f"{compile_cache_prefix(a)}/key.lock")

    denied_writes = [
        wheel,  # the code every wheel-delivered pod installs
        f"{wheel.rsplit('/', 2)[0]}/{'f' * 64}/llmctl_eks-9.9.9-py3-none-any.whl",  # one planted in advance
        wheelhouse,
        ui_wheelhouse,
        f"{compile_cache_prefix(b)}/key/graph.neff",  # B's compile cache
        f"{compile_cache_prefix(a_named)}/key/graph.neff",  # the same blueprint's other workload
        f"{model_prefix(b)}/model.safetensors",  # another model's mirror
        own_mirror,  # its own model's mirror: only the mirror Job writes it
        "anything-else.txt",
    ]
    for key in denied_writes:
        assert _denied(lambda key=key: pod.put_object(Bucket=BUCKET, Key=key, Body=b"evil")), key
        assert _denied(lambda key=key: pod.delete_object(Bucket=BUCKET, Key=key)), key
    assert _denied(lambda: pod.get_object(Bucket=BUCKET, Key=f"{compile_cache_prefix(b)}/key/graph.neff"))


def test_the_ray_head_only_reads_the_delivered_code(tenant: Any) -> None:
    """No replica runs on the head (num-cpus 0): it installs the wheel, and reaches nothing else."""
    role_client, seed, enforce = tenant
    a = _wheel_config("llama2-inf2")
    wheel, wheelhouse = wheel_key("0" * 64), f"{WHEELHOUSE_PREFIX}/{'1' * 64}/requirements.txt"
    own_mirror = f"{model_prefix(a)}/model.safetensors"
    own_cache = f"{compile_cache_prefix(a)}/key/graph.neff"
    for key in (wheel, wheelhouse, own_mirror, own_cache):
        seed(key)
    head = role_client(head_grants(a), "a-head")
    enforce()

    for key in (wheel, wheelhouse):
        assert head.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"the CLI's"
    for key in (own_mirror, own_cache):
        assert _denied(lambda key=key: head.get_object(Bucket=BUCKET, Key=key)), key
    for key in (wheel, wheelhouse, own_mirror, own_cache, f"{compile_cache_prefix(a)}/key.lock"):
        assert _denied(lambda key=key: head.put_object(Bucket=BUCKET, Key=key, Body=b"evil")), key


def test_the_mirror_job_writes_only_its_models_mirror(tenant: Any) -> None:
    """The Job holding the HF token: its own lock's wheelhouse to read, its model's mirror to write."""
    role_client, seed, enforce = tenant
    a, b = _wheel_config("llama2-inf2"), _wheel_config("llama3-vllm-inf2")
    packages = f"{wheelhouse_key(mirror_lock())}/requirements.txt"
    wheel, runtime_wheelhouse = wheel_key("0" * 64), f"{WHEELHOUSE_PREFIX}/{'1' * 64}/requirements.txt"
    own_cache = f"{compile_cache_prefix(a)}/key/graph.neff"
    for key in (packages, wheel, runtime_wheelhouse, own_cache):
        seed(key)
    job = role_client(mirror_grants(a), "a-mirror")
    enforce()

    assert job.get_object(Bucket=BUCKET, Key=packages)["Body"].read() == b"the CLI's"
    marker = f"{model_prefix(a)}/.llmctl-complete"
    job.put_object(Bucket=BUCKET, Key=f"{model_prefix(a)}/model.safetensors", Body=b"weights")
    job.put_object(Bucket=BUCKET, Key=marker, Body=b"ok")
    assert job.list_objects_v2(Bucket=BUCKET, Prefix=marker)["KeyCount"] == 1  # its "already mirrored" check
    assert job.head_object(Bucket=BUCKET, Key=f"{model_prefix(a)}/model.safetensors")["ContentLength"] == 7

    denied_writes = [
        packages,  # the packages it installs itself
        wheel,
        runtime_wheelhouse,
        own_cache,  # its workload's compile cache: the serving pods run what is there
        f"{model_prefix(b)}/model.safetensors",  # another model's mirror
        "anything-else.txt",
    ]
    for key in denied_writes:
        assert _denied(lambda key=key: job.put_object(Bucket=BUCKET, Key=key, Body=b"evil")), key
    for key in (wheel, runtime_wheelhouse, own_cache):
        assert _denied(lambda key=key: job.get_object(Bucket=BUCKET, Key=key)), key


def test_each_workload_has_its_own_compile_cache_prefix() -> None:
    """Two workloads of one blueprint (the default and a named one) never share a compile cache: the
    prefix is the namespace's, and the pods' LLMCTL_COMPILE_CACHE_URL points there."""
    default, named = config_for("llama2-inf2"), config_for("llama2-inf2", namespace="llama2-inf2-pr42")
    assert compile_cache_prefix(default) == "neuron-cache/llama2-inf2"
    assert compile_cache_prefix(named) == "neuron-cache/llama2-inf2-pr42"
    env = {item["name"]: item["value"] for item in cache_env(named)}
    assert env["LLMCTL_COMPILE_CACHE_URL"] == f"s3://{BUCKET}/neuron-cache/llama2-inf2-pr42"


def test_listing_is_limited_to_the_granted_prefixes() -> None:
    config = _wheel_config("llama2-inf2")
    grants = serving_grants(config)
    assert grants is not None
    [listing] = [s for s in s3_statements("aws", BUCKET, grants) if s["Action"] == ["s3:ListBucket"]]
    patterns = listing["Condition"]["StringLike"]["s3:prefix"]  # type: ignore[index]
    assert sorted(patterns) == sorted(
        p
        for prefix in (
            "llmctl/wheels",
            "llmctl/wheelhouse",
            model_prefix(config),
            compile_cache_prefix(config),
        )
        for p in (prefix, f"{prefix}/*")
    )
    mirror = mirror_grants(config)
    assert mirror is not None
    [listing] = [s for s in s3_statements("aws", BUCKET, mirror) if s["Action"] == ["s3:ListBucket"]]
    patterns = listing["Condition"]["StringLike"]["s3:prefix"]  # type: ignore[index]
    own = (wheelhouse_key(mirror_lock()), model_prefix(config))
    assert sorted(patterns) == sorted(p for prefix in own for p in (prefix, f"{prefix}/*"))
