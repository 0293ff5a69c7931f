"""The limits on a surge upgrade's extra nodes (llmctl.infra.aws.surge) against a local moto server:
the vCPU quota with the running instances of its family counted, the NodePool's limits with the
pool's own nodes counted (Karpenter v1.14.1 `Limits.ExceededBy`: capacity of the pool's nodes plus
the new one), and reservations with `fallback: none`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.schema import Blueprint
from llmctl.infra.aws.session import new_session
from llmctl.infra.aws.surge import check_surge, running_instances

INF_QUOTA, G_QUOTA = "L-1945791B", "L-DB2E81BA"


def launch(region: str, instance_type: str, pool: str | None = None, cluster: str = "llmctl-dev") -> None:
    ec2 = new_session(region).client("ec2")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    tags = [
        {"Key": "karpenter.sh/nodepool", "Value": pool},
        {"Key": "eks:eks-cluster-name", "Value": cluster},
    ]
    ec2.run_instances(
        ImageId=image,
        InstanceType=instance_type,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}] if pool else [],
    )


def surge(region: str, bp: Blueprint, extra: dict[str, int], limits: dict[str, float] | None = None) -> list:  # type: ignore[type-arg]
    return check_surge(
        new_session(region), region, bp, extra, cluster="llmctl-dev", pool="inferentia-inf2", limits=limits
    )


def test_the_quota_counts_every_running_instance_of_its_family_only(
    aws: str, ec2_quotas: Callable[[dict[str, float]], None]
) -> None:
    ec2_quotas({INF_QUOTA: 400, G_QUOTA: 8})
    launch(aws, "inf2.48xlarge", "inferentia-inf2")
    launch(aws, "inf2.xlarge")  # another Inf instance of the account: the quota counts it too
    launch(aws, "g5.2xlarge")  # another quota: not counted
    assert sorted(r.instance_type for r in running_instances(new_session(aws), aws)) == [
        "g5.2xlarge",
        "inf2.48xlarge",
        "inf2.xlarge",
    ]
    [quota] = surge(aws, load_blueprint("llama2-inf2"), {"inf2.48xlarge": 1})
    assert quota.ok is True, quota.detail
    assert "running 196 (2 instance(s)) + 1 x inf2.48xlarge (192) = 388 needed" in quota.detail
    ec2_quotas({INF_QUOTA: 384})
    [short] = surge(aws, load_blueprint("llama2-inf2"), {"inf2.48xlarge": 1})
    assert short.ok is False and "--desired-value 388" in (short.fix or "")


def test_the_nodepool_limits_count_the_pools_nodes_of_this_cluster(
    aws: str, ec2_quotas: Callable[[dict[str, float]], None]
) -> None:
    ec2_quotas({INF_QUOTA: 10_000})
    launch(aws, "inf2.48xlarge", "inferentia-inf2")
    launch(aws, "inf2.48xlarge", "inferentia-inf2", cluster="llmctl-other")  # another cluster's pool
    _, limits = surge(
        aws, load_blueprint("llama2-inf2"), {"inf2.48xlarge": 1}, {"aws.amazon.com/neuron": 24.0}
    )
    assert limits.ok is True and "1 node(s) of the pool running" in limits.detail
    _, over = surge(
        aws,
        load_blueprint("llama2-inf2"),
        {"inf2.48xlarge": 1},
        {"aws.amazon.com/neuron": 12.0, "cpu": 1152.0},
    )
    assert over.ok is False
    assert over.detail.endswith("aws.amazon.com/neuron 24 of 12, cpu 384 of 1152")
    assert "aws.amazon.com/neuron" in (over.fix or "") and "llmctl up --replace" in (over.fix or "")


class _Reserved:
    """A session on moto whose EC2 DescribeCapacityReservations (which moto lacks) answers from botocore's
    Stubber, checked against EC2's own API model; every other call goes to moto."""

    def __init__(self, region: str, available: int, calls: int) -> None:
        import datetime

        import boto3
        from botocore.stub import Stubber

        self.session = boto3.session.Session(region_name=region)
        self.stubbed = self.session.client("ec2", region_name=region)
        stubber = Stubber(self.stubbed)
        item = {
            "CapacityReservationId": RESERVED,
            "InstanceType": "inf2.48xlarge",
            "AvailabilityZone": f"{region}a",
            "State": "active",
            "TotalInstanceCount": 2,
            "AvailableInstanceCount": available,
            "EndDate": datetime.datetime(2026, 12, 1, 11, 30, tzinfo=datetime.timezone.utc),
        }
        for _ in range(calls):
            stubber.add_response(
                "describe_capacity_reservations",
                {"CapacityReservations": [item]},
                {"CapacityReservationIds": [RESERVED]},
            )
        stubber.activate()
        self.moto_ec2 = self.session.client("ec2", region_name=region)

    def client(self, name: str, region_name: str | None = None) -> Any:
        if name != "ec2":
            return self.session.client(name, region_name=region_name)
        outer = self

        class _EC2:
            def __getattr__(self, attr: str) -> Any:
                return getattr(
                    outer.stubbed if attr == "describe_capacity_reservations" else outer.moto_ec2, attr
                )

        return _EC2()


RESERVED = "cr-0123456789abcdef0"


def test_reservations_without_fallback_must_hold_the_extra_nodes(
    aws: str, ec2_quotas: Callable[[dict[str, float]], None]
) -> None:
    ec2_quotas({INF_QUOTA: 10_000})
    data = load_blueprint("llama2-inf2").model_dump(mode="json")
    data["capacity"] = {"reservations": [RESERVED], "fallback": "none"}
    bp = Blueprint.model_validate(data)

    def checks(extra: int, available: int) -> list[Any]:
        return check_surge(
            _Reserved(aws, available, 1),
            aws,
            bp,
            {"inf2.48xlarge": extra},
            cluster="llmctl-dev",
            pool=None,
            limits=None,
        )

    *_, fits = checks(1, 1)
    assert fits.ok is True and fits.detail.startswith("1 free inf2.48xlarge in the reservations")
    *_, short = checks(2, 1)
    assert short.ok is False and "reserve 1 more inf2.48xlarge" in (short.fix or "")
    data["capacity"]["fallback"] = "on-demand"  # the rest launch on-demand: the quota decides alone
    on_demand = check_surge(
        new_session(aws),
        aws,
        Blueprint.model_validate(data),
        {"inf2.48xlarge": 2},
        cluster="llmctl-dev",
        pool=None,
        limits=None,
    )
    assert [c.name for c in on_demand] == [f"vCPU quota {INF_QUOTA} (upgrade)"]


def test_nothing_extra_checks_nothing(aws: str) -> None:
    assert surge(aws, load_blueprint("llama2-inf2"), {}) == []
