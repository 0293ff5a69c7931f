"""Run a Pulumi program in-process under Pulumi's mocks: no CLI, no credentials, no cloud.

This powers `llmctl plan --offline` (what a program would register, before anyone has
credentials) and the program-level tests. A recording monitor keeps, for every registered
resource, its type, name, parent, dependencies (explicit and, per input property, implicit),
provider, `deleted_with`, inputs (camelCase keys, secrets unwrapped and flagged) and whether it is
a component: the graph :mod:`llmctl.infra.lifecycle.engine_order` derives the create and delete
order from. Invokes such as ``aws:index/getAvailabilityZones`` are answered with plausible fixed
values.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.output import Unknown
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.sync_await import _sync_await

ACCOUNT_ID = "123456789012"
UNKNOWN = "<unknown>"


# Outputs a provider computes when it creates a resource (known after create, unknown in a preview).
COMPUTED: dict[str, dict[str, Any]] = {
    "aws:kms/key:Key": {"keyId": "{name}-key-id"},
    "aws:ec2/launchTemplate:LaunchTemplate": {"latestVersion": 1, "defaultVersion": 1},
    "aws:cloudwatch/eventRule:EventRule": {"name": "{name}"},
}


_UNIQUE = itertools.count(1)


def unique_name(prefix: str) -> str:
    """A name the way the AWS provider makes one from a `name_prefix`: the prefix, a UTC timestamp to
    the 10,000th of a second and a hex counter (26 characters), so every creation gets a new name."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d%H%M%S%f")[:18]
    return f"{prefix}{stamp}{next(_UNIQUE):08x}"


def _urn_name(urn: str) -> str:
    """A URN's last part: the resource's logical name."""
    return urn.rsplit("::", 1)[-1]


@dataclass
class Registered:
    """One resource the program registered: the one record for offline runs, the policy rules and
    `llmctl plan` (whose view keeps only key inputs, see :func:`llmctl.infra.plan.plan_view`)."""

    urn: str
    type: str
    name: str
    parent: str | None
    inputs: dict[str, Any]
    dependencies: list[str] = field(default_factory=list)
    custom: bool = True
    secret_inputs: set[str] = field(default_factory=set)
    # Per input property, the URNs its Output values came from (the SDK also merges them into
    # `dependencies`, which therefore holds explicit and implicit dependencies alike).
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    provider: str | None = None  # the provider resource's URN (a custom resource's provider reference)
    deleted_with: str | None = None
    remote: bool = False  # a remote (multi-language) component such as eks:index:Cluster

    @property
    def short_parent(self) -> str | None:
        """The parent's logical name."""
        return _urn_name(self.parent) if self.parent else None

    @property
    def parent_name(self) -> str | None:
        """The parent's logical name, or None when the parent is the stack itself."""
        if self.parent is None or self.parent.split("::")[2].split("$")[-1] == "pulumi:pulumi:Stack":
            return None
        return self.short_parent

    @property
    def component(self) -> bool:
        """A component resource (a node of the tree), not a cloud object."""
        return not self.custom

    @property
    def depends_on(self) -> list[str]:
        """The explicit dependencies' logical names, sorted."""
        return sorted({_urn_name(urn) for urn in self.dependencies})

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON shape (`llmctl plan --json`): names instead of URNs."""
        return {
            "type": self.type,
            "name": self.name,
            "parent": self.parent_name,
            "component": self.component,
            "inputs": self.inputs,
            "depends_on": self.depends_on,
        }


def partition_of(region: str) -> str:
    """The ARN partition of a region: GovCloud's and China's have their own."""
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws-cn" if region.startswith("cn-") else "aws"


class OfflineMocks(pulumi_mocks.Mocks):
    """Answers resource registrations and invokes with plausible, fixed values."""

    def __init__(
        self,
        region: str = "us-west-2",
        azs: tuple[tuple[str, str], ...] | None = None,
        offerings: dict[str, list[str]] | None = None,
        *,
        computed: bool = True,
        subnet_tags: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.region = region
        self.offerings = offerings
        self.subnet_tags = subnet_tags or {}  # existing subnets' tags (getSubnet); none by default
        self.computed = computed  # False: as in a preview, values the provider computes stay unknown
        prefix = {"us-west-2": "usw2", "us-east-1": "use1", "us-east-2": "use2"}.get(region, "xx")
        self.azs = azs or tuple(
            (f"{region}{letter}", f"{prefix}-az{n}") for n, letter in enumerate("abcd", start=1)
        )

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        state = dict(args.inputs)
        rid = f"{args.name}-id"
        service = args.typ.split(":")[1].split("/")[0] if args.typ.count(":") >= 2 else ""
        if args.typ.startswith("aws:"):
            state.setdefault("arn", f"arn:aws:{service}:{self.region}:{ACCOUNT_ID}:{args.name}")
            if args.typ == "aws:iam/role:Role":
                state["arn"] = f"arn:aws:iam::{ACCOUNT_ID}:role/{state.get('name', args.name)}"
                state.setdefault("name", args.name)
            if args.typ == "aws:sqs/queue:Queue":
                name = state.get("name")
                if not name and state.get("namePrefix"):
                    # the provider appends a unique suffix at create time (unknown in a preview)
                    name = unique_name(state["namePrefix"]) if self.computed else None
                elif not name:
                    name = args.name
                if name:
                    state["name"] = name
                    state["url"] = f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT_ID}/{name}"
                    state["arn"] = f"arn:aws:sqs:{self.region}:{ACCOUNT_ID}:{name}"
            if args.typ == "aws:s3/bucket:Bucket" or args.typ.startswith("aws:s3/bucketV2"):
                state.setdefault("bucket", state.get("bucket") or args.name)
            if args.typ == "aws:eks/cluster:Cluster":
                state.setdefault("name", args.name)
                state["endpoint"] = f"https://{args.name}.gr7.{self.region}.eks.amazonaws.com"
                state["certificateAuthority"] = {"data": "Y2VydA=="}
                state["identities"] = [
                    {"oidcs": [{"issuer": f"https://oidc.eks.{self.region}.amazonaws.com/id/MOCK"}]}
                ]
            if self.computed:  # outputs the provider computes at create time that our programs read back
                for key, value in COMPUTED.get(args.typ, {}).items():
                    state.setdefault(key, value.format(name=args.name) if isinstance(value, str) else value)
            state.setdefault("id", rid)
        if args.typ == "eks:index:Cluster":  # remote component: its provider would compute these outputs
            name = state.get("name") or args.name
            issuer = f"oidc.eks.{self.region}.amazonaws.com/id/MOCK"
            state.setdefault(
                "kubeconfigJson",
                json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "Config",
                        "clusters": [
                            {
                                "name": name,
                                "cluster": {"server": f"https://{name}.gr7.{self.region}.eks.amazonaws.com"},
                            }
                        ],
                    }
                ),
            )
            state.setdefault("oidcIssuer", issuer)
            state.setdefault("oidcProviderArn", f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{issuer}")
            state.setdefault("clusterSecurityGroupId", f"sg-{name}-cluster")
        return rid, state

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        token = args.token
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {
                "names": [name for name, _ in self.azs],
                "zoneIds": [zid for _, zid in self.azs],
                "id": self.region,
            }, []
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                "accountId": ACCOUNT_ID,
                "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/llmctl",
                "userId": "AIDAMOCK",
                "id": ACCOUNT_ID,
            }, []
        if token in ("aws:index/getRegion:getRegion", "aws:index/region:getRegion"):
            return {"name": self.region, "region": self.region, "id": self.region}, []
        if token == "aws:index/getPartition:getPartition":
            partition = partition_of(self.region)
            return {"partition": partition, "dnsSuffix": "amazonaws.com", "id": partition}, []
        if token == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings":
            return self._offerings(args.args), []
        if token == "aws:ec2/getSubnet:getSubnet":
            subnet = str(args.args.get("id", ""))
            return {"id": subnet, "tags": dict(self.subnet_tags.get(subnet, {}))}, []
        if token == "aws:iam/getPolicyDocument:getPolicyDocument":
            return {
                "json": json.dumps({"Version": "2012-10-17", "Statement": args.args.get("statements", [])})
            }, []
        return {}, []

    def _offerings(self, args: dict[str, Any]) -> dict[str, Any]:
        """Like EC2: one row per (requested type, zone offering it), so empty when no zone offers any.

        Every zone offers every type unless `offerings` (type -> zone names) says otherwise.
        """
        wanted = [
            value
            for flt in args.get("filters") or []
            if flt.get("name") == "instance-type"
            for value in flt.get("values") or []
        ]
        zones = [name for name, _ in self.azs]
        table = self.offerings or {}
        rows = [(kind, zone) for kind in wanted for zone in table.get(kind, zones)]
        return {
            "instanceTypes": [kind for kind, _ in rows],
            "locations": [zone for _, zone in rows],
            "locationTypes": ["availability-zone"] * len(rows),
            "id": self.region,
        }


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """A mock monitor that also records parents, dependencies and secrets."""

    def __init__(self, mocks: pulumi_mocks.Mocks) -> None:
        super().__init__(mocks)
        self.recorded: list[Registered] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != "pulumi:pulumi:Stack":
            raw = rpc.deserialize_properties(request.object, keep_unknowns=True)
            secrets: set[str] = set()
            inputs = {key: _unwrap(value, key, secrets) for key, value in raw.items()}
            self.recorded.append(
                Registered(
                    urn=response.urn,
                    type=request.type,
                    name=request.name,
                    parent=request.parent or None,
                    inputs=inputs,
                    dependencies=list(request.dependencies),
                    custom=bool(request.custom),
                    secret_inputs=secrets,
                    property_dependencies={
                        key: sorted(deps.urns)
                        for key, deps in request.propertyDependencies.items()
                        if deps.urns
                    },
                    provider=request.provider.rsplit("::", 1)[0] if request.provider else None,
                    deleted_with=request.deletedWith or None,
                    remote=bool(request.remote),
                )
            )
        return response


def _unwrap(value: Any, path: str, secrets: set[str]) -> Any:
    """Secrets become their value (path noted), unknowns become UNKNOWN."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            secrets.add(path)
            return _unwrap(value.get("value"), path, secrets)
        return {k: _unwrap(v, f"{path}.{k}", secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v, f"{path}[{i}]", secrets) for i, v in enumerate(value)]
    if isinstance(value, Unknown) or (isinstance(value, str) and value == rpc.UNKNOWN):
        return UNKNOWN
    return value


def run_offline(
    program: Callable[[], None],
    *,
    project: str = "llmctl",
    stack: str = "offline",
    config: dict[str, str] | None = None,
    mocks: pulumi_mocks.Mocks | None = None,
    preview: bool = False,
) -> list[Registered]:
    """Run `program` under mocks and return every resource it registered, in order."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    executor, thread_loops = _executor_with_closable_loops()
    loop.set_default_executor(executor)
    try:
        mocks = mocks or OfflineMocks()
        monitor = RecordingMonitor(mocks)
        pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview, monitor=monitor)
        pulumi.runtime.set_all_config(
            {f"{k}" if ":" in k else f"{project}:{k}": v for k, v in (config or {}).items()}
        )

        def body() -> None:
            program()

        _sync_await(pulumi.runtime.stack.run_pulumi_func(body))
        return list(monitor.recorded)
    finally:
        pulumi.runtime.set_all_config({})
        asyncio.set_event_loop(None)
        executor.shutdown(wait=True)
        for thread_loop in thread_loops:
            thread_loop.close()
        loop.close()


def _executor_with_closable_loops() -> tuple[ThreadPoolExecutor, list[asyncio.AbstractEventLoop]]:
    """The threads Pulumi calls the mock monitor from, each with an event loop we close afterwards.

    Pulumi runs every monitor call in the loop's default executor (``run_in_executor(None, ...)``,
    pulumi/runtime/resource.py of the pulumi 3.272.0 wheel), and its mocks wait there with
    ``_sync_await``, whose ``_ensure_event_loop`` (pulumi/runtime/sync_await.py) gives each thread a
    new event loop that nothing closes: each held a
    selector and a socket pair until the garbage collector found it (346 loops in one run of the
    suite). Here each thread starts with a loop of its own, which Pulumi then finds and uses, and
    ``run_offline`` closes them once the executor is done.
    """
    loops: list[asyncio.AbstractEventLoop] = []

    def own_loop() -> None:
        thread_loop = asyncio.new_event_loop()
        asyncio.set_event_loop(thread_loop)
        loops.append(thread_loop)

    return ThreadPoolExecutor(thread_name_prefix="llmctl-offline", initializer=own_loop), loops
