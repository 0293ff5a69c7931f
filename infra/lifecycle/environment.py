"""Environments: one platform stack shared by any number of workload stacks.

An environment is the platform stack `llmctl-platform/<env>`. Each workload on it is a stack of
its blueprint's project: `llmctl-<blueprint>/<env>` (the default workload) or
`llmctl-<blueprint>/<env>.<workload>` (a named one, e.g. `ci.pr-42`, with its own namespace).
Every workload stack records what it needs from the platform (:class:`WorkloadRecord`: its
blueprint, pools and accelerator instance types, and the root volumes, capacity reservations and
queue scaling of :mod:`llmctl.infra.platform.needs`) as a stack output, saved in the backend so any
machine reads it without running the program, and in its stack config. The platform is built for
the union of the records (:meth:`Environment.platform_config`), so the order of `up`s does not
matter and a later `up` never removes a pool another workload uses. The AZ IDs the first `up`
chose are an output of the platform stack; later `up`s pin them (``pinned_az_ids`` in its config).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.pools import ALWAYS_POOLS, pools_for
from llmctl.blueprints.schema import CapacitySpec
from llmctl.errors import BadInput, LlmctlError, NotDeployed
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine, StackSpec, workload_project
from llmctl.infra.names import check_workload, namespace, split_stack, workload_stack
from llmctl.infra.platform.config import API_CIDRS_ENV, EndpointConfig, validate_config
from llmctl.infra.platform.needs import PlatformNeeds, blueprint_needs, merge_needs
from llmctl.infra.workload.program import build_workload
from llmctl.state import StackPins, load_pins, pins_from_json, pins_to_json, save_pins

RECORD_OUTPUT = "llmctl_workload"  # the workload stack's output holding its record
RECORD_CONFIG = "llmctl:workload"  # ... and the stack config key holding the same record
PINS_OUTPUT = "llmctl_pins"  # the workload stack's output: its image digests and outside wheels
AZ_OUTPUT = "az_ids"  # the platform stack's output: the AZ IDs its subnets are in
API_ACCESS_OUTPUT = "api_access"  # ... and who may reach its API endpoint (EndpointConfig)
_PREFIX = "llmctl-"


class WorkloadRecord(BaseModel):
    """What one workload stack needs from its environment's platform."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    blueprint: str = Field(description="Blueprint name (the workload stack's project is llmctl-<name>).")
    workload: str | None = Field(None, description="Workload name; None for the default workload.")
    pools: list[str] = Field(default_factory=list, description="Node pools the workload runs on.")
    instance_types: list[str] = Field(
        default_factory=list, description="Accelerator instance types the platform's AZs must offer."
    )
    namespace: str = Field(description="Kubernetes namespace of the workload.")
    # what else the platform needs from the workload (:mod:`llmctl.infra.platform.needs`); None: not
    # recorded (a record written before these fields), taken from the catalog blueprint when read
    root_volume_gib: dict[str, int] | None = Field(
        None,
        description="Root volume (GiB) per node pool where the workload's model does not fit the pool's "
        "default ({}: none); None when not recorded.",
    )
    capacity_reservations: dict[str, CapacitySpec] | None = Field(
        None,
        description="The workload's EC2 capacity reservations per node pool ({}: none); None when not recorded.",
    )
    queue_scaling: bool | None = Field(
        None,
        description="Whether the workload's Deployment scales on its queue, so the platform runs KEDA; None "
        "when not recorded.",
    )

    @classmethod
    def for_blueprint(cls, bp: Any, workload: str | None = None) -> WorkloadRecord:
        """The record of a blueprint deployed as `workload` (pools from :mod:`llmctl.blueprints.pools`,
        the other needs from :func:`llmctl.infra.platform.needs.blueprint_needs`)."""

        return cls(
            blueprint=bp.name,
            workload=workload,
            pools=[spec.name for spec in pools_for([bp], hardware())],
            instance_types=[bp.compute.instance_type] if bp.compute.accelerator != "cpu" else [],
            namespace=namespace(bp.name, workload) or bp.name,
            **blueprint_needs(bp).settings(),
        )

    def unrecorded(self) -> list[str]:
        """The platform needs this record does not hold (written before they were recorded)."""
        return [name for name in _NEEDS if getattr(self, name) is None]

    def needs(self) -> PlatformNeeds:
        """What the platform needs from this workload besides its pools (none where not recorded)."""
        return PlatformNeeds(
            root_volume_gib=self.root_volume_gib or {},
            capacity_reservations={
                name: spec.model_dump(mode="json")
                for name, spec in (self.capacity_reservations or {}).items()
            },
            queue_scaling=bool(self.queue_scaling),
        )

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.blueprint, self.workload)

    @property
    def project(self) -> str:
        return workload_project(self.blueprint)

    def stack(self, env: str) -> str:
        return workload_stack(env, self.workload)

    def label(self) -> str:
        """'llama2-inf2' or 'llama2-inf2 (workload pr-42)'."""
        return self.blueprint + (f" (workload {self.workload})" if self.workload else "")

    def to_config(self) -> dict[str, str]:
        """The workload stack's config entry holding this record."""
        return {RECORD_CONFIG: self.model_dump_json()}


#: the record's platform needs beyond pools, and how a note names them
_NEEDS = {
    "root_volume_gib": "root volume",
    "capacity_reservations": "capacity reservations",
    "queue_scaling": "queue scaling",
}


def union(records: Iterable[WorkloadRecord]) -> tuple[list[str], list[str]]:
    """(pools, instance types) every record together needs; sorted, so order-independent."""
    chosen = list(records)
    pools = sorted({*ALWAYS_POOLS, *(name for r in chosen for name in r.pools)})
    types = sorted({kind for r in chosen for kind in r.instance_types})
    return pools, types


def refuse_namespace_clash(record: WorkloadRecord, recorded: Iterable[WorkloadRecord]) -> None:
    """Refuse a workload whose namespace another recorded workload of the environment already has.

    `<blueprint>-<workload>` is not injective: `tiny-cpu` + `pr-42` and `tiny-cpu-pr` + `42` both make
    `tiny-cpu-pr-42` (as does the default workload of a blueprint named like another's named one), and
    the namespace keys the compile-cache prefix, the Pod Identity trust and every object of the
    workload (issue 53, finding 6). Renaming the namespaces of workloads already deployed would
    replace them, so the mapping stays and the second `up` is refused, naming both workloads.
    """
    for other in recorded:
        if other.key != record.key and other.namespace == record.namespace:
            raise BadInput(
                f"{record.label()} would use namespace {record.namespace!r}, which {other.label()} "
                "already uses in this environment",
                "pick another --workload name (or remove the other workload with `llmctl down`); two "
                "workloads never share a namespace",
            )


def record_by_name(project: str, stack: str) -> WorkloadRecord:
    """The record a workload stack's names alone give (`llmctl-<blueprint>` / `<env>[.<workload>]`): its
    namespace, no pools (those need the stack's record or the blueprint)."""
    blueprint, workload = project[len(_PREFIX) :], split_stack(stack)[1]
    return WorkloadRecord(
        blueprint=blueprint, workload=workload, namespace=namespace(blueprint, workload) or blueprint
    )


class Environment:
    """The workloads recorded in one environment and the platform they need together."""

    def __init__(self, engine: Engine, stack: str, note: Callable[[str], None] | None = None) -> None:
        self.engine = engine
        self.stack = stack
        self.note = note or (lambda _text: None)

    def stacks(self) -> list[tuple[str, str]]:
        """(project, stack) of every workload stack of this environment."""
        found = []
        for info in self.engine.list_stacks():
            if info.project == PLATFORM_PROJECT or not info.project.startswith(_PREFIX):
                continue
            if split_stack(info.stack)[0] == self.stack:
                found.append((info.project, info.stack))
        return sorted(found)

    def records(self) -> list[WorkloadRecord]:
        """Each workload stack's record: its output, else its stack config (a first `up` that failed
        before the outputs were saved), else rebuilt from the catalog blueprint of its project."""
        found = [self._read(project, stack) for project, stack in self.stacks()]
        return sorted(found, key=lambda r: (r.blueprint, r.workload or ""))

    def _read(self, project: str, stack: str) -> WorkloadRecord:
        spec = StackSpec(project, stack)
        blueprint = project[len(_PREFIX) :]
        workload = split_stack(stack)[1]
        unreadable = False
        # the output, else the config (also when the output cannot be read: an older or damaged one)
        for _where, read in (
            ("output", lambda: (self.engine.outputs(spec) or {}).get(RECORD_OUTPUT)),
            ("config", lambda: self.engine.config(spec).get(RECORD_CONFIG)),
        ):
            raw: Any = read()
            if raw is None:
                continue
            try:
                data = json.loads(raw) if isinstance(raw, str) else raw
                record = WorkloadRecord.model_validate(data)
            except (ValueError, ValidationError):
                unreadable = True
                continue
            if unreadable:
                self.note(f"the output record of {project}/{stack} is unreadable; using its stack config's")
            return self._completed(record, f"{project}/{stack}")
        if unreadable:
            self.note(f"the record of {project}/{stack} is unreadable; using the catalog blueprint")

        catalog = _catalog_blueprint(blueprint)
        if catalog is None:
            self.note(f"{project}/{stack} has no record and no catalog blueprint: its pools are not kept")
            return record_by_name(project, stack)
        return WorkloadRecord.for_blueprint(catalog, workload)

    def _completed(self, record: WorkloadRecord, label: str) -> WorkloadRecord:
        """A record written before the platform needs were recorded, completed from the catalog
        blueprint of the same name (on the record's own pools only); without one, the needs it lacks
        stay unknown (none) and a note says so. A need recorded as none ({} / False) is kept."""
        missing = record.unrecorded()
        if not missing:
            return record
        catalog = _catalog_blueprint(record.blueprint)
        if catalog is None:
            said = ", ".join(_NEEDS[name] for name in missing)
            self.note(
                f"{label} does not record its {said} (an older llmctl wrote it) and has no catalog "
                "blueprint: the platform keeps none for it"
            )
            return record
        fresh = WorkloadRecord.for_blueprint(catalog, record.workload)
        update: dict[str, Any] = {}
        for name in missing:
            value = getattr(fresh, name)
            if isinstance(value, dict):  # a pool the record does not have is not the platform's to make
                value = {pool: need for pool, need in value.items() if pool in record.pools}
            update[name] = value
        return record.model_copy(update=update)

    def pinned_az_ids(self) -> list[str]:
        """The AZ IDs the platform's subnets are in (empty before the first `up`)."""
        outputs = self.engine.outputs(StackSpec(PLATFORM_PROJECT, self.stack)) or {}
        return [str(az) for az in outputs.get(AZ_OUTPUT) or []]

    def platform_config(
        self, records: Iterable[WorkloadRecord], *, region: str, reselect_azs: bool = False
    ) -> Any:
        """The platform every record needs together, in the AZs chosen before (unless reselecting)."""

        chosen = list(records)
        pools, instance_types = union(chosen)
        data: dict[str, Any] = {
            "stack": self.stack,
            "region": region,
            "pools": pools,
            "instance_types": instance_types,
            # root volumes, capacity reservations and KEDA: merged as `PlatformConfig.for_blueprints` does
            **merge_needs(r.needs() for r in chosen).settings(),
        }
        pinned = [] if reselect_azs else self.pinned_az_ids()
        if pinned:
            data["pinned_az_ids"] = pinned
        data["endpoint"] = self.api_access().model_dump()
        return validate_config(data, source="the environment's workloads")

    def api_access(self) -> EndpointConfig:
        """Who may reach the cluster's API: `LLMCTL_API_CIDRS` when set, else what the platform stack
        was made with. Never a default: an endpoint open to the internet is a choice, not an accident."""
        setting = os.environ.get(API_CIDRS_ENV, "").strip()
        if setting:
            return EndpointConfig.from_setting(setting)
        outputs = self.engine.outputs(StackSpec(PLATFORM_PROJECT, self.stack)) or {}
        kept = outputs.get(API_ACCESS_OUTPUT)
        if isinstance(kept, dict):
            return EndpointConfig.model_validate(kept)
        raise LlmctlError(
            f"who may reach the EKS API of environment {self.stack!r} is not set",
            f"set {API_CIDRS_ENV} to the ranges that run llmctl and kubectl (comma-separated CIDRs, e.g. "
            f"{API_CIDRS_ENV}=203.0.113.7/32 for your address), or {API_CIDRS_ENV}=private to keep the endpoint "
            "inside the VPC (llmctl must then run from there); later runs keep the choice",
        )

    def select(
        self, records: list[WorkloadRecord], blueprint: str | None, workload: str | None
    ) -> list[WorkloadRecord]:
        """The records `down` removes: those matching the blueprint and workload given (all when
        neither is); a filter matching none is an error naming what is there."""
        if workload:
            check_workload(workload)
        if blueprint is None and workload is None:
            return records
        chosen = [
            r
            for r in records
            if (blueprint is None or r.blueprint == blueprint)
            and (workload is None or r.workload == workload)
        ]
        if not chosen:
            wanted = " ".join(
                part
                for part in (blueprint and f"blueprint {blueprint}", workload and f"workload {workload}")
                if part
            )
            there = ", ".join(r.label() for r in records) or "none"
            raise NotDeployed(  # `down` with nothing to take down: exit 8 on every target
                f"no {wanted} in environment {self.stack!r}; deployed there: {there}",
                "pass one of those (or no --blueprint to remove the whole environment); nothing was changed",
            )
        return chosen


def _catalog_blueprint(name: str) -> Any:
    """The catalog blueprint of that name, else None."""
    try:
        return load_blueprint(name)
    except LlmctlError:
        return None


def workload_program(config: Any, hf_token: str | None, record: WorkloadRecord) -> Callable[[], None]:
    """The workload stack's program: the workload, and its record as an output."""

    def program() -> None:
        import pulumi

        build_workload(config, hf_token)
        pulumi.export(RECORD_OUTPUT, record.model_dump(mode="json"))
        # what the stack pinned (images by digest, wheels by sha256, the model revision by its commit),
        # saved in the backend as well
        recorded = load_pins(config.stack, config.blueprint.name)
        pulumi.export(
            PINS_OUTPUT, pins_to_json(dataclasses.replace(recorded, images=dict(config.image_pins)))
        )

    return program


def adopt_pins(engine: Engine, spec: StackSpec, blueprint: str, note: Callable[[str], None]) -> None:
    """Before a first `up` from this machine: the pins the stack's state in the backend holds (another
    machine's first `up`), so that this `up` compares with them instead of pinning anew."""
    if load_pins(spec.stack, blueprint) != StackPins():
        return
    raw = (engine.outputs(spec) or {}).get(PINS_OUTPUT)
    if not isinstance(raw, dict) or not (raw.get("images") or raw.get("wheels") or raw.get("models")):
        return
    try:
        pins = pins_from_json(raw)
    except (TypeError, AttributeError, ValueError):
        return  # an output this llmctl cannot read: pin anew
    save_pins(spec.stack, blueprint, pins)
    note(f"    pins of {spec.project}/{spec.stack} taken from its state in the backend (an earlier `up`)")
