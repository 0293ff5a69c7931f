"""`llmctl down` over time, through the CLI, the stand-in engine and moto: delete-unreachable only when
eks:DescribeCluster says the cluster is gone or the user asked with --force, a refusal when the cluster
exists but cannot be reached, a failed `up` then `down`, `down` twice, `down` then `up` again, the
stuck-finalizer fallback and the exit code while leftovers remain."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from lifecycle_scenario import CLUSTER, an_image
from lifecycle_support import eks_cluster
from standin_support import StandinEngine
from typer.testing import CliRunner

from llmctl.cli.app import app

PLATFORM = "llmctl-platform"
WL = "llmctl-tiny-cpu"
runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def up(*extra: str) -> tuple[int, str, str]:
    return run("up", "--blueprint", "tiny-cpu", "--yes", "--no-wait", "--progress", "plain", *extra)


def destroys(engine: StandinEngine) -> list[dict[str, Any]]:
    return [c for c in engine.calls() if c["command"] == "destroy"]


def kube_objects(engine: StandinEngine, type_suffix: str) -> list[dict[str, Any]]:
    return [r for r in engine.resources(PLATFORM, "dev").values() if r["type"].endswith(type_suffix)]


def test_up_failing_midway_then_down_destroys_everything_it_made(engine: StandinEngine, aws: str) -> None:
    eks_cluster(aws)  # EKS was created before the failure
    engine.control(fail={"nodepools-default-nodepool": "creating NodePool default: webhook unavailable"})
    code, _out, err = up()
    assert code == 5 and "webhook unavailable" in err, err
    made = engine.resources(PLATFORM, "dev")
    assert any(r["type"].startswith("eks:index:Cluster") for r in made.values())
    assert any(r["type"].startswith("kubernetes:") for r in made.values())
    assert engine.checkpoint(WL, "dev") is None  # the workload never started
    engine.control(fail={})
    code, out, err = run("down", "--yes", "--progress", "plain")
    assert code == 0, err
    assert f"destroyed: {PLATFORM}/dev" in out
    assert engine.checkpoint(PLATFORM, "dev") is None
    [run_] = [r for r in engine.deletes() if r["kind"] == "destroy"]
    assert {u for wave in run_["waves"] for u in wave} == set(made)  # everything created went
    # no kubeconfig was saved by the failed up: nothing may be dropped, and down says so
    assert [c["delete_unreachable"] for c in destroys(engine)] == [None]
    assert "without dropping anything from state" in out
    code, out, _ = run("stacks", "list", "--json")
    assert code == 0 and json.loads(out) == []


def test_a_failed_up_says_what_still_runs_its_cost_per_hour_and_the_exact_down(
    engine: StandinEngine, aws: str
) -> None:
    # issue 25, item 6: after a failure once nodes exist, the bill is not silent
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.blueprints.hardware import hardware
    from llmctl.blueprints.pricing import blueprint_cost

    cost = blueprint_cost(load_blueprint("tiny-cpu"), hardware())
    down = f"`llmctl down --stack dev --region {aws}`"
    eks_cluster(aws)
    engine.control(fail={"nodepools-default-nodepool": "creating NodePool default: webhook unavailable"})
    code, _out, err = up()
    assert code == 5 and "webhook unavailable" in err, err
    hint = err[err.index("hint:") :]
    assert f"still running: cluster {CLUSTER} (control plane, NAT, core nodes), about " in hint
    assert f"${cost.platform_hourly_usd:.2f}/h until removed; stop it with {down}" in hint
    assert "serving nodes" not in hint  # the workload never started
    engine.control(fail={"tiny-cpu/tiny-cpu": "creating RayService: admission webhook denied"})
    code, _out, err = up()
    assert code == 5 and "admission webhook denied" in err, err
    hint = err[err.index("hint:") :]
    serving = f"up to {cost.nodes_max} x {cost.instance_type} serving nodes"
    total = cost.platform_hourly_usd + cost.serving_hourly_max_usd
    assert f"(control plane, NAT, core nodes) and {serving}, about ${total:.2f}/h" in hint, hint
    assert down in hint


def test_down_refuses_when_the_cluster_exists_but_cannot_be_reached_then_force_drops_with_explanation(
    engine: StandinEngine, aws: str
) -> None:
    eks_cluster(aws)
    assert up()[0] == 0
    before = {p: engine.resources(p, "dev") for p in (PLATFORM, WL)}
    engine.control(kube_unreachable=True)  # e.g. an expired token, or the API endpoint unreachable
    code, out, err = run("down", "--yes", "--progress", "plain")
    assert code == 3, err
    message = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(message) == 1 and "Kubernetes API is unreachable" in message[0]
    assert "nothing was changed" in message[0] and "Unable to connect to the server" in message[0]
    hint = err[err.index("hint:") :]
    assert f"aws eks update-kubeconfig --name {CLUSTER} --region {aws}" in hint
    assert "llmctl down --force" in hint and "NodePool" in hint and "EC2NodeClass" in hint
    assert destroys(engine) == []  # state untouched
    assert {p: engine.resources(p, "dev") for p in (PLATFORM, WL)} == before

    # --force explains and asks first: without --yes and no terminal, nothing happens
    code, _out, err = run("down", "--force", "--progress", "plain")
    assert code == 2 and "--yes" in err  # bad input: it needs --yes without a terminal
    assert destroys(engine) == []

    code, out, err = run("down", "--force", "--yes", "--progress", "plain")
    assert code == 0, err
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert "PULUMI_K8S_DELETE_UNREACHABLE=true (asked for)" in notes[0]
    counts: dict[str, int] = {}
    for res in [*before[PLATFORM].values(), *before[WL].values()]:
        if res["type"].startswith("kubernetes:"):
            kind = res["type"].split(":")[2]
            counts[kind] = counts.get(kind, 0) + 1
    # one line per kind, with how many and what dropping them leaves
    assert len(notes) == 1 + len(counts)
    assert f"note: drops {counts['NodePool']} NodePool (karpenter.sh/v1) from state: Karpenter keeps" in out
    assert f"note: drops {counts['EC2NodeClass']} EC2NodeClass (karpenter.k8s.aws/v1) from state" in out
    assert {c["delete_unreachable"] for c in destroys(engine)} == {"true"}
    dropped = [json.loads(line) for line in (engine.root / "dropped.jsonl").read_text().splitlines()]
    assert len(dropped) == sum(counts.values())
    assert engine.checkpoint(PLATFORM, "dev") is None and engine.checkpoint(WL, "dev") is None


def test_down_drops_unreachable_objects_only_after_describe_cluster_says_gone(
    engine: StandinEngine, aws: str
) -> None:
    assert up()[0] == 0  # moto has no such cluster: it was deleted out of band
    engine.control(kube_unreachable=True)
    code, out, err = run("down", "--yes", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["ok"] is True and data["destroyed"] == [f"{WL}/dev", f"{PLATFORM}/dev"]
    [why] = data["notes"]
    assert why.startswith(
        f"cluster {CLUSTER} is gone (eks:DescribeCluster in {aws}: ResourceNotFoundException)"
    )
    assert "PULUMI_K8S_DELETE_UNREACHABLE=true" in why
    assert {c["delete_unreachable"] for c in destroys(engine)} == {"true"}
    assert (engine.root / "dropped.jsonl").exists()


def interruption_queue(engine: StandinEngine) -> str:
    """The interruption queue's real name (as the provider made it from the prefix), checked to be the
    one Karpenter's Helm values carry."""
    [queue] = [r for r in engine.resources(PLATFORM, "dev").values() if r["type"] == "aws:sqs/queue:Queue"]
    [release] = [r for r in kube_objects(engine, ":Release") if r["urn"].endswith("::karpenter-release")]
    name = str(queue["outputs"]["name"])
    assert "name" not in queue["inputs"] and name.startswith(queue["inputs"]["namePrefix"])
    assert release["inputs"]["values"]["settings"]["interruptionQueue"] == name
    return name


def test_down_then_up_again_right_away(engine: StandinEngine, aws: str) -> None:
    eks_cluster(aws)
    assert up()[0] == 0
    first_queue = interruption_queue(engine)
    code, out, err = run("down", "--yes", "--progress", "plain")
    assert code == 0, err
    assert engine.checkpoint(PLATFORM, "dev") is None
    code, out, err = up()
    assert code == 0, err
    assert len(engine.resources(PLATFORM, "dev")) > 50 and engine.resources(WL, "dev")
    # SQS refuses a deleted queue's name for 60 s (QueueDeletedRecently): the re-created queue has a
    # new name, and the controller is told that one
    second_queue = interruption_queue(engine)
    assert second_queue != first_queue and second_queue.startswith(f"{CLUSTER}-karpenter-")
    # the cluster was there and answered: the destroys ran without delete-unreachable
    assert [c["delete_unreachable"] for c in destroys(engine)] == [None, None]
    code, out, err = run("down", "--yes", "--json")
    assert code == 0 and json.loads(out)["destroyed"] == [f"{WL}/dev", f"{PLATFORM}/dev"]


def test_down_twice_the_second_is_a_clean_no_op(engine: StandinEngine, aws: str) -> None:
    eks_cluster(aws)
    assert up()[0] == 0
    assert run("down", "--yes")[0] == 0
    calls = len(engine.calls())
    code, out, err = run("down", "--yes")
    assert code == 0, err
    assert "nothing to destroy: no llmctl stacks in environment dev" in out
    assert f"sweep: nothing tagged for {CLUSTER} in {aws}" in out
    assert not [c for c in engine.calls()[calls:] if c["command"] == "destroy"]
    code, out, err = run("down", "--yes", "--json")
    assert code == 0 and json.loads(out)["destroyed"] == [] and json.loads(out)["notes"] == []


def test_a_finalizer_still_stuck_after_the_sweep_is_removed_and_said(
    engine: StandinEngine, aws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("llmctl.infra.lifecycle.finalizers.GRACE_S", 0.0)
    eks_cluster(aws)
    assert up()[0] == 0
    # one node class per node family (the default pool's and the Ray heads'): hold up the first
    nodeclass = sorted(kube_objects(engine, ":EC2NodeClass"), key=lambda o: str(o["urn"]))[0]
    name = nodeclass["inputs"]["metadata"]["name"]
    # the EC2NodeClass's finalizer cannot finish (no route to EC2/IAM), nor can a NodeClaim's
    engine.kube(
        {"kind": "EC2NodeClass", "metadata": {"name": name, "finalizers": ["karpenter.k8s.aws/termination"]}},
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": "default-x7k2p",
                "deletionTimestamp": "2026-11-26T12:00:00Z",
                "finalizers": ["karpenter.sh/termination"],
            },
        },
    )
    code, out, err = run("down", "--yes", "--progress", "plain")
    assert code == 0, err
    platform_destroys = [c for c in destroys(engine) if "llmctl-platform" in c["cwd"]]
    assert len(platform_destroys) == 2  # failed on the finalizer, then retried once
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert any(n.startswith("note: platform destroy failed") and "finalizers" in n for n in notes)
    assert (
        "note: removed finalizer karpenter.sh/termination from NodeClaim default-x7k2p (stuck after the sweep); "
        "it may leave its EC2 instance" in out
    )
    assert (
        f"note: removed finalizer karpenter.k8s.aws/termination from EC2NodeClass {name} (stuck after the sweep); "
        "it may leave its instance profile and launch templates" in out
    )
    assert "note: sweeping again after removing finalizers" in out
    patches = [c for c in engine.kubectl_calls() if "patch" in c]
    assert [c[c.index("patch") + 1 : c.index("patch") + 3] for c in patches] == [
        ["nodeclaims.karpenter.sh", "default-x7k2p"],
        ["ec2nodeclasses.karpenter.k8s.aws", name],
    ]
    assert engine.checkpoint(PLATFORM, "dev") is None
    assert {c["delete_unreachable"] for c in destroys(engine)} == {None}
    [first, second] = [r for r in engine.deletes() if r["project"] == PLATFORM]
    assert nodeclass["urn"] in {u for wave in second["waves"] for u in wave}
    assert nodeclass["urn"] not in {u for wave in first["waves"] for u in wave}


def attached_volume(region: str, cluster: str) -> str:
    """A volume tagged for the cluster and still attached to an instance: the sweep leaves it, the
    leftover check counts it."""
    ec2 = boto3.client("ec2", region_name=region)
    image = an_image(ec2)
    instance = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)["Instances"][0]
    zone = instance["Placement"]["AvailabilityZone"]
    volume = ec2.create_volume(
        Size=8,
        AvailabilityZone=zone,
        TagSpecifications=[
            {
                "ResourceType": "volume",
                "Tags": [{"Key": f"kubernetes.io/cluster/{cluster}", "Value": "owned"}],
            }
        ],
    )["VolumeId"]
    ec2.attach_volume(VolumeId=volume, InstanceId=instance["InstanceId"], Device="/dev/sdf")
    return str(volume)


def test_down_exits_non_zero_while_the_leftover_check_finds_anything(engine: StandinEngine, aws: str) -> None:
    eks_cluster(aws)
    assert up()[0] == 0
    volume = attached_volume(aws, CLUSTER)
    code, out, err = run("down", "--yes", "--json")
    assert code == 4, err
    data = json.loads(out)  # one JSON document, with the verdict
    assert data["ok"] is False and data["error"]["error"] == "CloudError"
    assert [item["id"] for item in data["leftovers"]] == [volume]
    assert "still there" in err
    code, out, err = run("down", "--yes")
    assert code == 4 and volume in err


def test_stacks_gc_follows_the_same_rule(engine: StandinEngine, aws: str) -> None:
    eks_cluster(aws, "llmctl-pr-9")
    assert up("--stack", "pr-9")[0] == 0
    engine.control(kube_unreachable=True)
    code, _out, err = run("stacks", "gc", "--older-than", "0m", "--yes")
    assert code == 3 and "Kubernetes API is unreachable" in err and "llmctl down --stack pr-9 --force" in err
    assert destroys(engine) == [] and engine.resources(PLATFORM, "pr-9")
    boto3.client("eks", region_name=aws).delete_cluster(name="llmctl-pr-9")
    code, out, err = run("stacks", "gc", "--older-than", "0m", "--yes", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["removed"] == [f"{WL}/pr-9", f"{PLATFORM}/pr-9"]
    assert "is gone (eks:DescribeCluster" in data["notes"][0]
    assert {c["delete_unreachable"] for c in destroys(engine)} == {"true"}
    # the platform went: its cluster was swept and checked, as `down` does
    assert [(r["cluster"], r["region"]) for r in data["sweeps"]] == [("llmctl-pr-9", aws)]
    assert data["ok"] is True and data["leftovers"] == []


def test_stacks_gc_of_a_platform_exits_non_zero_while_the_leftover_check_finds_anything(
    engine: StandinEngine, aws: str
) -> None:
    eks_cluster(aws, "llmctl-pr-8")
    assert up("--stack", "pr-8")[0] == 0
    volume = attached_volume(aws, "llmctl-pr-8")
    code, out, err = run("stacks", "gc", "--older-than", "0m", "--yes", "--json")
    assert code == 4, err
    data = json.loads(out)  # one JSON document, with the verdict
    assert data["removed"] == [f"{WL}/pr-8", f"{PLATFORM}/pr-8"] and data["ok"] is False
    assert [item["id"] for item in data["leftovers"]] == [volume]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "1 object(s) left for the cluster are still there" in errors[0]
    assert "llmctl sweep --cluster llmctl-pr-8" in err


def test_down_refuses_when_aws_cannot_say_whether_the_cluster_exists(
    engine: StandinEngine, aws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lifecycle_support import lifecycle

    from llmctl.errors import PrerequisiteError

    assert up()[0] == 0
    before = engine.resources(PLATFORM, "dev")
    monkeypatch.setenv("AWS_ENDPOINT_URL_EKS", "http://127.0.0.1:9")  # EKS does not answer
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(PrerequisiteError) as info:
        lifecycle().down(region=aws, confirm=lambda items: True)
    assert "AWS cannot say whether it still exists: eks:DescribeCluster failed" in info.value.message
    assert info.value.message.endswith("nothing was changed")
    assert "aws sso login" in (info.value.hint or "") and "--force" in (info.value.hint or "")
    assert destroys(engine) == [] and engine.resources(PLATFORM, "dev") == before


def test_a_destroy_that_finds_the_cluster_unreachable_becomes_the_refusal_without_a_sweep(
    engine: StandinEngine, aws: str
) -> None:
    eks_cluster(aws)
    engine.control(fail={"nodepools-default-nodepool": "creating NodePool default: webhook unavailable"})
    assert up()[0] == 5  # no kubeconfig saved: down cannot check the API before destroying
    engine.control(fail={}, kube_unreachable=True)
    code, _out, err = run("down", "--yes", "--progress", "plain")
    assert code == 3, err
    assert (
        "a destroy found its Kubernetes API unreachable (" in err and "configured Kubernetes cluster" in err
    )
    assert "nothing was dropped from state" in err and "--force" in err
    assert "sweeping" not in err  # an unreachable cluster is not swept under
    assert [c["delete_unreachable"] for c in destroys(engine)] == [None]
    left = {r["type"] for r in engine.resources(PLATFORM, "dev").values()}
    assert {"kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "kubernetes:helm.sh/v3:Release"} <= left
    assert not (engine.root / "dropped.jsonl").exists()


def test_a_finalizer_that_finishes_within_the_grace_is_left_alone(
    engine: StandinEngine, tmp_path: Any
) -> None:
    from llmctl.infra.lifecycle.finalizers import POLL_S, wait_stuck

    kube = tmp_path / "kubeconfig.json"
    kube.write_text(json.dumps({"clusters": [{"name": "c", "cluster": {"server": "https://c"}}]}))
    claim = {
        "kind": "NodeClaim",
        "metadata": {
            "name": "default-ab1cd",
            "deletionTimestamp": "2026-11-26T12:00:00Z",
            "finalizers": ["karpenter.sh/termination"],
        },
    }
    engine.kube(claim)
    now = [0.0]
    slept: list[float] = []

    def tick(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    def finishing(seconds: float) -> None:
        tick(seconds)
        if len(slept) == 2:  # Karpenter finishes the termination during the grace
            engine.kube({**claim, "metadata": {**claim["metadata"], "deleted": True}})

    assert wait_stuck(kube, grace_s=60, clock=lambda: now[0], sleep=finishing) == []
    assert slept == [POLL_S, POLL_S]
    engine.kube({**claim, "metadata": {**claim["metadata"], "name": "default-zz9yy"}})
    now[0], slept[:] = 0.0, []
    [still] = wait_stuck(kube, grace_s=25, clock=lambda: now[0], sleep=tick)
    assert still.label == "NodeClaim default-zz9yy" and still.finalizers == ("karpenter.sh/termination",)
    assert slept == [POLL_S, POLL_S, 5.0]  # polls until the grace is over, never past it
    assert not [c for c in engine.kubectl_calls() if "patch" in c]  # waiting never removes anything


def test_stacks_gc_releases_a_finalizer_still_stuck_after_the_sweep_as_down_does(
    engine: StandinEngine, aws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("llmctl.infra.lifecycle.finalizers.GRACE_S", 0.0)
    eks_cluster(aws, "llmctl-pr-6")
    assert up("--stack", "pr-6")[0] == 0
    nodeclass = sorted(
        (r for r in engine.resources(PLATFORM, "pr-6").values() if r["type"].endswith(":EC2NodeClass")),
        key=lambda o: str(o["urn"]),
    )[0]
    name = nodeclass["inputs"]["metadata"]["name"]
    engine.kube(
        {"kind": "EC2NodeClass", "metadata": {"name": name, "finalizers": ["karpenter.k8s.aws/termination"]}}
    )
    code, out, err = run("stacks", "gc", "--older-than", "0m", "--yes", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["removed"] == [f"{WL}/pr-6", f"{PLATFORM}/pr-6"] and data["ok"] is True
    assert any(n.startswith("platform destroy failed") and "finalizers" in n for n in data["notes"])
    assert any(
        n.startswith(f"removed finalizer karpenter.k8s.aws/termination from EC2NodeClass {name}")
        for n in data["notes"]
    )
    assert len([c for c in destroys(engine) if "llmctl-platform" in c["cwd"]]) == 2  # failed, retried
    assert engine.checkpoint(PLATFORM, "pr-6") is None
    assert {c["delete_unreachable"] for c in destroys(engine)} == {None}  # nothing dropped
