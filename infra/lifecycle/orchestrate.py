"""Orchestration of `llmctl up`, `down` and `preview` across the platform and workload stacks.

up:   load + schedulability check (before any cloud call) -> preflight -> preview + cost -> confirm
      -> platform up (for every workload of the environment) -> workload up -> readiness -> endpoint.
down: safety check (teardown.py) -> workloads -> platform shrunk to what the others need, or (none
      left) destroyed (swept, stuck finalizers released and retried once if it fails: finalizers.py)
      -> sweep -> leftover check.
The environment (which workloads share the platform, what they need) is in environment.py.
Every step is idempotent: a second run after a failure resumes from Pulumi's saved state.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.hf_token import hf_token, require_hf_token
from llmctl.blueprints.pricing import blueprint_cost
from llmctl.errors import BlueprintError, Declined, EngineError, LlmctlError
from llmctl.infra.aws.images import delete_workload_repository
from llmctl.infra.aws.sweep import leftovers, sweep
from llmctl.infra.lifecycle.bill import running_bill
from llmctl.infra.lifecycle.cold_start import at_zero, record_start
from llmctl.infra.lifecycle.day_two import DayTwo
from llmctl.infra.lifecycle.drift_notes import DriftReader, drift_notes
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine, StackSpec, workload_project
from llmctl.infra.lifecycle.environment import (
    Environment,
    WorkloadRecord,
    adopt_pins,
    refuse_namespace_clash,
    workload_program,
)
from llmctl.infra.lifecycle.fabric_step import fabric_step
from llmctl.infra.lifecycle.finalizers import retry_platform_destroy
from llmctl.infra.lifecycle.inventory import ensure_cluster_parts
from llmctl.infra.lifecycle.kube import (
    kubeconfig_file,
    kubectl_json,
    launch_findings,
    save_kubeconfig,
    wait_ready,
)
from llmctl.infra.lifecycle.launches import LaunchWatch
from llmctl.infra.lifecycle.progress import Progress
from llmctl.infra.lifecycle.ray_upgrade import down_lines, pending_at_down, read_upgrades, wait_switched
from llmctl.infra.lifecycle.registrations import JoinWatch
from llmctl.infra.lifecycle.reports import DownResult, Plan, PreviewReport, UpResult
from llmctl.infra.lifecycle.shrink import shrink_for
from llmctl.infra.lifecycle.surge_stop import surge_stop
from llmctl.infra.lifecycle.teardown import decide
from llmctl.infra.lifecycle.timeline import start_timelines
from llmctl.infra.lifecycle.upgrade import (
    carry_bounds,
    deployed_change,
    planned_change,
    replace_clusters,
    replace_pending,
)
from llmctl.infra.names import ClusterTarget, namespace, workload_stack
from llmctl.infra.platform.program import build_platform
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.pins.model_revision import pin_model, recorded_model_pin
from llmctl.infra.workload.prepare.delivery import deliver, precheck
from llmctl.infra.workload.prepare.digests import pin_images, recorded_images
from llmctl.infra.workload.schedulability import validate_workload
from llmctl.infra.workload.scheduling.rollout import Strategy
from llmctl.state import Endpoint, load_endpoint, remove_endpoint, save_endpoint

# how often `up` asks Karpenter about the workload's nodes while the workload stack updates
LAUNCH_POLL_S = 20.0
# how often `up` reads the RayServices while KubeRay builds a second cluster and switches to it
SWITCH_POLL_S = 10.0


def _blueprint_problems(bp: Any, facts: Any) -> None:

    problems = validate_workload(bp, facts)
    if problems:
        raise BlueprintError(
            f"blueprint {bp.name!r} cannot be scheduled on this platform",
            "fix the blueprint (or the platform pools) and run again; no workload was deployed",
            source=bp.name,
            problems=[(p.path, f"{p.message}; fix: {p.hint}") for p in problems],
        )


def platform_program(config: Any) -> Callable[[], None]:
    def program() -> None:

        build_platform(config)

    return program


def platform_spec(stack: str, config: Any = None) -> StackSpec:
    if config is None:
        return StackSpec(PLATFORM_PROJECT, stack)
    return StackSpec(PLATFORM_PROJECT, stack, platform_program(config), config.to_pulumi_config())


def _environment_notes(
    stack: str, others: list[WorkloadRecord], config: Any, steps: list[dict[str, str]], reselect_azs: bool
) -> list[str]:
    """The plan's lines about the environment: who shares the platform, and the AZs."""
    notes = []
    if others:
        notes.append(
            f"environment {stack}: also serves {', '.join(r.label() for r in others)}; "
            f"pools {', '.join(config.pools)}"
        )
    if reselect_azs:
        moved = sorted(
            step["urn"].split("::")[-1]
            for step in steps
            if step["type"] == "aws:ec2/subnet:Subnet" and step["op"] not in ("same", "read")
        )
        notes.append(
            "--reselect-azs: the AZs are chosen again; "
            + (
                f"subnets replaced: {', '.join(moved)} (with the nodes in them)"
                if moved
                else "the same AZs come out: no subnet changes"
            )
        )
    return notes


class Lifecycle:
    """Runs the lifecycle of one stack (environment) in one backend; `drift` reads the node drift
    that `up`, `preview` and `down --blueprint` say (none without it: drift_notes.py)."""

    def __init__(
        self, engine: Engine, progress: Progress, *, stack: str = "dev", drift: DriftReader | None = None
    ) -> None:
        self.engine = engine
        self.progress = progress
        self.stack = stack
        self.drift = drift

    # ---- up ------------------------------------------------------------------------------
    def up(
        self,
        blueprint: str,
        *,
        region: str,
        target: ClusterTarget = "eks",
        kubeconfig: Path | None = None,
        pools: Path | None = None,
        hf_token_file: Path | None = None,
        confirm: Callable[[Plan], bool] | None = None,
        wait: bool = True,
        wait_timeout_s: float = 3600,
        workload: str | None = None,
        reselect_azs: bool = False,
        accept_moved_tags: bool = False,
        replace: bool = False,
    ) -> UpResult:

        bp = load_blueprint(blueprint)
        record = WorkloadRecord.for_blueprint(bp, workload)  # a bad --workload fails here
        w_stack = workload_stack(self.stack, workload)
        token = hf_token(hf_token_file)  # a bad token file fails before any cloud call
        require_hf_token(bp, token)
        if target == "eks":
            precheck()  # a bad LLMCTL_DELIVERY fails here, not after the platform was built
        if target == "kubeconfig":
            offline = PlatformFacts.for_existing_cluster(
                pools, kubeconfig=kubeconfig_file(kubeconfig), stack=self.stack, region=region
            )
        else:
            offline = PlatformFacts.for_blueprint(bp, stack=self.stack, region=region)
        _blueprint_problems(bp, offline)
        recorded = Environment(self.engine, self.stack, self.progress.note).records()
        refuse_namespace_clash(record, recorded)  # before anything is pinned or changed
        # each image tag by digest, before anything changes: a moved tag is refused here unless accepted
        adopt_pins(self.engine, StackSpec(workload_project(bp.name), w_stack), bp.name, self.progress.note)
        pins = pin_images(
            WorkloadConfig(blueprint=bp, stack=w_stack, platform=offline),
            accept_moved=accept_moved_tags,
            note=self.progress.note,
        )
        model_pin = pin_model(bp, w_stack, token, note=self.progress.note)  # the revision by its commit
        upgrade: Strategy | None = "replace" if replace else None
        # against a deployed workload: what the controllers will do, and a surge that cannot fit refused
        day_two = deployed_change(
            self.engine,
            self.stack,
            WorkloadConfig(
                blueprint=bp,
                stack=w_stack,
                platform=offline,
                hf_token_present=bool(token),
                namespace=namespace(bp.name, workload),
                image_pins=pins.images,
                model_pin=model_pin,
                upgrade=upgrade,
            ),
            target,
            region,
        )
        if day_two is not None and day_two.refused:
            raise day_two.refusal()
        cost = blueprint_cost(bp, hardware())
        changes: dict[str, dict[str, int]] = {}
        notes: list[str] = []
        others: list[WorkloadRecord] = []
        if target == "eks":
            with self.progress.phase("plan"):
                p_config, others = self._platform_for(record, region, reselect_azs, recorded)
                drift = drift_notes(self.drift, self.engine, self.stack, p_config)  # before preview inits it
                preview = self.engine.preview(platform_spec(self.stack, p_config))
                changes["platform"] = preview.changes
            notes = _environment_notes(self.stack, others, p_config, preview.steps, reselect_azs) + drift
        if target == "kubeconfig":
            with self.progress.phase("cluster check"):  # reported, not assumed: before any Pulumi call
                ensure_cluster_parts(
                    WorkloadConfig(blueprint=bp, stack=self.stack, platform=offline), kubeconfig
                )
        plan = Plan(
            bp.name,
            self.stack,
            region,
            target,
            offline.cluster_name,
            changes,
            cost,
            notes,
            at_zero(bp, cost, target),
            day_two,
        )
        if confirm is not None and not confirm(plan):
            raise Declined("nothing was changed", None)
        stage = {"serving": False}  # whether the workload step (and so its serving nodes) began
        try:
            if target == "eks":
                total = sum(n for op, n in changes.get("platform", {}).items() if op != "same")
                with self.progress.phase("platform", total=total):
                    outputs = self.engine.up(
                        platform_spec(self.stack, p_config), on_event=self.progress.on_event
                    )
                facts = PlatformFacts.from_outputs(outputs)
                _blueprint_problems(bp, facts)
            else:
                facts = offline
            w_config = WorkloadConfig(
                blueprint=bp,  # the config derives the pinned revision
                stack=w_stack,
                platform=facts,
                hf_token_present=bool(token),
                namespace=namespace(bp.name, workload),
                image_pins=pins.images,
                model_pin=model_pin,
                upgrade=upgrade,
            )
            w_config = deliver(w_config, note=self.progress.note)  # ECR image if pushed, else a wheel in S3
            spec = StackSpec(
                workload_project(bp.name),
                w_stack,
                workload_program(w_config, token, record),
                {"aws:region": region, **record.to_config()},
            )
            stage["serving"] = True
            kube = self._kubeconfig(facts, kubeconfig)
            # one record of the workload's NodeClaims for both waits: a node that never joins is
            # counted across the workload update and the readiness wait (registrations.py)
            # (the node role's name is llmctl's only on the platform it builds)
            joins = JoinWatch(cluster=offline.cluster_name if target == "eks" else "", region=region)
            # a surge under way: a final launch finding is said for what it is (surge_stop.py)
            stop = surge_stop(
                day_two, w_config.ns, workload, functools.partial(read_upgrades, kube, w_config.ns)
            )
            explain = stop.error if stop is not None else None
            update = functools.partial(
                self._workload_up, spec, kube, w_config.ns, region, bp, cost, workload, joins, explain=explain
            )
            fabric = fabric_step(w_config, kube)  # a replica over several nodes: its preflight judged
            with self.progress.phase(f"workload {record.label()}"):
                w_out, verdict = fabric.run(update, self.progress.note) if fabric else (update(), None)
            if day_two is not None and day_two.replaces_cluster and kube is not None:
                replace_clusters(
                    self.progress, kube, w_config.ns, day_two, wait=wait, timeout_s=wait_timeout_s
                )
            if replace and kube is not None:  # a surge an earlier `up` left waiting: its cluster replaced
                replace_pending(
                    self.progress, kube, w_config.ns, day_two, wait=wait, timeout_s=wait_timeout_s
                )
            if day_two is not None and kube is not None:  # the bounds KubeRay leaves out of its hash
                carry_bounds(self.progress, kube, w_config.ns, day_two)
            if wait and kube is not None and day_two is not None and day_two.builds_cluster:
                with self.progress.phase("upgrade"):  # until KubeRay switched and the old cluster went
                    launches = LaunchWatch(
                        _launch_poll(kube, w_config.ns, region, bp, joins),
                        w_config.ns,
                        self.progress.wait,
                        _stop_hint(self.stack, cost, workload),
                        _wait_note(cost, f"up to {int(wait_timeout_s) // 60} min"),
                        explain,
                    )
                    wait_switched(
                        kube,
                        w_config.ns,
                        timeout_s=wait_timeout_s,
                        on_wait=self.progress.wait,
                        poll_s=SWITCH_POLL_S,
                        watch=launches,
                    )
            if wait and kube is not None:
                ns = str(w_out.get("namespace") or w_config.ns)
                with self.progress.phase("readiness"):
                    wait_ready(
                        kube,
                        ns,
                        timeout_s=wait_timeout_s,
                        on_wait=self.progress.wait,
                        watch=_launch_poll(kube, ns, region, bp, joins),
                        stop_hint=_stop_hint(self.stack, cost, workload),
                        wait_note=_wait_note(cost, f"up to {int(wait_timeout_s) // 60} min"),
                        explain=explain,
                    )
                starts = self._starts(kube, ns)
                record_start(starts, blueprint=bp.name, target=target, stack=self.stack, workload=workload)
            else:
                starts = []
        except LlmctlError as exc:
            if target == "eks":
                self._say_the_bill(
                    exc, bp.name, cost, offline.cluster_name, region, workload, others, stage["serving"]
                )
            raise
        endpoint = self._endpoint(bp, target, w_out, facts, kube, workload)

        save_endpoint(endpoint)
        return UpResult(
            endpoint, plan, self.progress.timeline, starts, fabric=verdict.as_dict() if verdict else None
        )

    def day_two(
        self, bp: Any, *, region: str, workload: str | None = None, replace: bool = False
    ) -> DayTwo | None:
        """`plan` against the deployed stack (:func:`~llmctl.infra.lifecycle.upgrade.planned_change`)."""
        return planned_change(self.engine, self.stack, bp, region=region, workload=workload, replace=replace)

    def _say_the_bill(
        self,
        exc: LlmctlError,
        blueprint: str,
        cost: Any,
        cluster: str,
        region: str,
        workload: str | None,
        others: list[WorkloadRecord],
        serving_started: bool,
    ) -> None:
        """After a failure once nodes existed: what still runs, its cost per hour, and the exact
        `llmctl down` (in the error's hint, and as a note)."""

        backend = getattr(self.engine, "backend", None)
        bill = running_bill(
            cost,
            cluster=cluster,
            blueprint=blueprint,
            stack=self.stack,
            region=region,
            workload=workload,
            shared=bool(others),
            serving_started=serving_started,
            backend=None if backend is None or backend.is_local else backend.url,
        )
        self.progress.note(bill.text())
        exc.hint = f"{exc.hint}; {bill.text()}" if exc.hint else bill.text()

    def _platform_for(
        self,
        record: WorkloadRecord,
        region: str,
        reselect_azs: bool,
        recorded: list[WorkloadRecord] | None = None,
    ) -> tuple[Any, list[WorkloadRecord]]:
        """The platform for this workload and every other one recorded in the environment (read now
        unless given); a workload whose namespace another one has is refused."""
        env = Environment(self.engine, self.stack, self.progress.note)
        recorded = env.records() if recorded is None else recorded
        refuse_namespace_clash(record, recorded)
        others = [r for r in recorded if r.key != record.key]
        return env.platform_config([*others, record], region=region, reselect_azs=reselect_azs), others

    def _starts(self, kube: Path, namespace: str) -> list[Any]:
        """Each serving pod's start timeline (node, image, weights, compile, engine, healthy)."""

        try:
            return list(start_timelines(kube, namespace))
        except LlmctlError as exc:
            self.progress.note(f"no start timeline: {exc.message}")
            return []

    def _workload_up(
        self,
        spec: StackSpec,
        kube: Path | None,
        ns: str,
        region: str,
        bp: Any,
        cost: Any,
        workload: str | None,
        joins: JoinWatch | None = None,
        *,
        explain: Callable[[Any], Any] | None = None,
    ) -> dict[str, Any]:
        """The workload stack's update, while Karpenter is watched: Pulumi awaits the serving objects
        (for hours on a first Neuron compile), and a launch that can never succeed stops the update
        within a poll instead of at Pulumi's timeout."""
        if kube is None:
            return self.engine.up(spec, on_event=self.progress.on_event)

        watch = LaunchWatch(
            _launch_poll(kube, ns, region, bp, joins),
            ns,
            self.progress.wait,
            _stop_hint(self.stack, cost, workload),
            _wait_note(cost, "until the serving objects' own timeout"),
            explain,
        )
        try:
            with watch.in_background(self.engine.stop, poll_s=LAUNCH_POLL_S):
                return self.engine.up(spec, on_event=self.progress.on_event)
        except LlmctlError:
            if watch.final is not None:
                raise watch.error() from None
            raise

    def _kubeconfig(self, facts: Any, given: Path | None) -> Path | None:
        if given is not None:
            return given
        if not facts.kubeconfig:
            return None

        return save_kubeconfig(self.stack, facts.kubeconfig)

    def _endpoint(
        self, bp: Any, target: str, out: dict[str, Any], facts: Any, kube: Path | None, workload: str | None
    ) -> Endpoint:
        """Port-forward exposure: localhost (via `llmctl connect`); load balancers: their hostname."""
        port = int(out.get("port") or bp.serving.port)
        namespace = str(out.get("namespace") or bp.name)
        base = f"http://localhost:{port}"
        if bp.exposure.mode != "port-forward" and out.get("service") and kube is not None:
            try:
                svc = kubectl_json(kube, "get", "service", "-n", namespace, str(out["service"]))
                ingress = svc.get("status", {}).get("loadBalancer", {}).get("ingress") or [{}]
                host = ingress[0].get("hostname") or ingress[0].get("ip")
                if host:
                    scheme = "https" if bp.exposure.tls_certificate_arn else "http"
                    base = f"{scheme}://{host}:{port}"
            except LlmctlError as exc:
                self.progress.note(
                    f"could not read the load balancer address ({exc.message}); using localhost"
                )
        extra = {
            k: str(out[k]) for k in ("namespace", "service", "dashboard_service", "ui_service") if out.get(k)
        }
        extra.update({"cluster": facts.cluster_name, "region": facts.region, "port": str(port)})
        extra["max_new_tokens"] = str(bp.serving.max_new_tokens)
        if out.get("ui_port"):
            extra["ui_port"] = str(out["ui_port"])
        path = str(out.get("path") or "")
        # Ray apps serve the OpenAI API under the route prefix; Triton and TorchServe have their own APIs.
        base_url = f"{base}{path}" + ("/v1" if out.get("openai", True) else "")
        if out.get("endpoint"):
            extra["cluster_url"] = str(out["endpoint"])
        if kube is not None:
            extra["kubeconfig"] = str(kube)
        return Endpoint(
            stack=self.stack,
            blueprint=bp.name,
            target=target,
            base_url=base_url,
            model=bp.model.id,
            dashboard_url="http://localhost:8265" if out.get("dashboard_service") else None,
            ui_url="http://localhost:7860" if out.get("ui_service") else None,
            extra=extra,
            workload=workload,
        )

    # ---- down ----------------------------------------------------------------------------
    def workloads(self) -> list[str]:
        """Blueprints with a workload stack in this environment."""
        return sorted({r.blueprint for r in Environment(self.engine, self.stack).records()})

    def down(
        self,
        *,
        region: str,
        blueprint: str | None = None,
        workload: str | None = None,
        keep_platform: bool = False,
        force: bool = False,
        confirm: Callable[[list[str]], bool] | None = None,
        sweep_timeout_s: float = 600,
    ) -> DownResult:

        env = Environment(self.engine, self.stack, self.progress.note)
        records = env.records()
        targets = env.select(records, blueprint, workload)  # an unknown one: an error, nothing changed
        remaining = [r for r in records if r not in targets]
        # `down` alone removes the environment; with --blueprint/--workload the platform stays, shrunk.
        whole = blueprint is None and workload is None
        drop_platform = not keep_platform and whole
        found = self.engine.outputs(platform_spec(self.stack))
        outputs = found or {}
        cluster = str(outputs.get("cluster_name") or f"llmctl-{self.stack}")
        region = str(outputs.get("region") or region)
        listing = [f"workload stack {r.project}/{r.stack(self.stack)}" for r in targets]
        # kept: updated when removing the targets changes pools, root volumes, KEDA or reservations
        shrink = None
        if outputs and not whole and not keep_platform:
            shrink = shrink_for(env, records, remaining, outputs, region=region, reader=self.drift)
        listing += shrink.listing(self.stack, remaining) if shrink else []
        if drop_platform:
            listing += [
                f"platform stack {PLATFORM_PROJECT}/{self.stack} (cluster {cluster} in {region})",
                f"anything left tagged for {cluster}",
            ]
        # Delete-unreachable only when DescribeCluster says the cluster is gone, or with --force.
        specs = [StackSpec(r.project, r.stack(self.stack)) for r in targets]
        specs += [platform_spec(self.stack)] if drop_platform else []
        safety = decide(
            self.engine, specs, stack=self.stack, outputs=found, cluster=cluster, region=region, force=force
        )
        # a pending second RayCluster (a zero-downtime upgrade under way): said, and its nodes counted
        kube = safety.kubeconfig or (None if found else self._recorded_kubeconfig(targets))
        upgrading = (
            pending_at_down(kube, [r.namespace for r in targets])
            if kube and not safety.drops  # --force: the API may not answer; not asked
            else []
        )
        said = down_lines(upgrading)
        listing += said
        if confirm is not None and not confirm(listing + safety.confirm_lines):
            raise Declined("nothing was deleted", None)
        result = DownResult(stack=self.stack, timeline=self.progress.timeline, notes=list(safety.notes))
        result.pending_clusters = [found.to_dict() for found in upgrading]
        told = [*said, *(shrink.drift if shrink else [])]  # node drift: in the notes, with --yes too
        for line in [*safety.notes, *told]:
            self.progress.note(line)
        result.notes += told
        for record in targets:
            spec = StackSpec(record.project, record.stack(self.stack), env=safety.env)
            with self.progress.phase(f"destroy workload {record.label()}"), safety.guard():
                if self.engine.destroy(spec, on_event=self.progress.on_event, remove=True):
                    result.destroyed.append(spec.label)
            remove_endpoint(self.stack, record.blueprint, record.workload)
            if found:  # eks: the workload's image repository lives in the platform's account/region
                self._drop_repository(result, region, record)
        if shrink is not None:
            with self.progress.phase("shrink platform"), safety.guard():
                self.engine.up(platform_spec(self.stack, shrink.config), on_event=self.progress.on_event)
            result.updated.append(f"{PLATFORM_PROJECT}/{self.stack}")
            result.platform_changes = shrink.changes
        if not drop_platform:
            return result
        spec = StackSpec(PLATFORM_PROJECT, self.stack, env=safety.env)
        with self.progress.phase("destroy platform"), safety.guard():
            try:
                existed = self.engine.destroy(spec, on_event=self.progress.on_event, remove=True)
            except EngineError as exc:
                # Usually a VPC or subnet blocked by objects controllers left, or a stuck finalizer.
                def note(text: str) -> None:
                    self.progress.note(text)
                    result.notes.append(text)

                existed = retry_platform_destroy(
                    self.engine,
                    spec,
                    exc,
                    cluster=cluster,
                    region=region,
                    kubeconfig=safety.kubeconfig,
                    note=note,
                    on_event=self.progress.on_event,
                    sweep_timeout_s=sweep_timeout_s,
                )
            if existed:
                result.destroyed.append(spec.label)
        with self.progress.phase("sweep"):
            result.sweep = sweep(
                cluster,
                region,
                timeout_s=sweep_timeout_s,
                on_deleted=lambda i: self.progress.note(f"    deleted {i.label()}"),
            )
        with self.progress.phase("leftover check"):
            kept = result.leftovers  # image repositories ECR refused to delete above
            result.leftovers = leftovers(cluster, region)
            seen = {(item.kind, item.id) for item in result.leftovers}
            result.leftovers += [item for item in kept if (item.kind, item.id) not in seen]
        return result

    def _recorded_kubeconfig(self, targets: list[WorkloadRecord]) -> Path | None:
        """An existing cluster's kubeconfig, as `up --target kubeconfig` recorded it with the endpoint."""
        for record in targets:
            try:
                given = load_endpoint(self.stack, record.blueprint, record.workload).extra.get("kubeconfig")
            except LlmctlError:
                continue
            if given and Path(given).is_file():
                return Path(given)
        return None

    def _drop_repository(self, result: DownResult, region: str, record: WorkloadRecord) -> None:
        """Delete a destroyed workload's own ECR repository; a refusal is a note and a leftover."""

        note, left = delete_workload_repository(region, record.stack(self.stack), record.blueprint)
        if note:
            self.progress.note(note)
            result.notes.append(note)
        if left is not None:
            result.leftovers.append(left)

    # ---- preview -------------------------------------------------------------------------
    def preview(
        self,
        blueprint: str,
        *,
        region: str,
        hf_token_file: Path | None = None,
        workload: str | None = None,
        reselect_azs: bool = False,
    ) -> PreviewReport:

        bp = load_blueprint(blueprint)
        record = WorkloadRecord.for_blueprint(bp, workload)
        w_stack = workload_stack(self.stack, workload)
        token = hf_token(hf_token_file)
        _blueprint_problems(bp, PlatformFacts.for_blueprint(bp, stack=self.stack, region=region))
        p_config, _others = self._platform_for(record, region, reselect_azs)
        drift = drift_notes(self.drift, self.engine, self.stack, p_config)  # before the preview inits it
        platform = self.engine.preview(platform_spec(self.stack, p_config))
        outputs = self.engine.outputs(platform_spec(self.stack))
        # The deployed platform's facts only while the preview changes nothing on it; otherwise
        # the workload lands on the platform this blueprint's up would build (e.g. its new pools).
        unchanged = bool(outputs) and not platform.count("create", "update", "replace", "delete")
        facts = (
            PlatformFacts.from_outputs(outputs)
            if outputs and unchanged
            else PlatformFacts.for_blueprint(bp, stack=self.stack, region=region)
        )
        model_pin = recorded_model_pin(bp, w_stack)
        w_config = WorkloadConfig(
            blueprint=bp,  # the config derives the pinned revision
            stack=w_stack,
            platform=facts,
            hf_token_present=bool(token),
            namespace=namespace(bp.name, workload),
            image_pins=recorded_images(w_stack, bp.name),  # the digests `up` pinned (none checked here)
            model_pin=model_pin,
        )
        if outputs and unchanged:  # the delivery `up` would choose on this platform, nothing uploaded
            w_config = deliver(w_config, note=self.progress.note, upload=False)
        spec = StackSpec(
            workload_project(bp.name),
            w_stack,
            workload_program(w_config, token, record),
            {"aws:region": region, **record.to_config()},
        )
        planned = self.engine.preview(spec)
        return PreviewReport(
            bp.name,
            self.stack,
            {PLATFORM_PROJECT: platform, spec.project: planned},
            blueprint_cost(bp, hardware()),
            w_stack,
            drift,
        )


def _launch_poll(
    kube: Path, ns: str, region: str, bp: Any, joins: JoinWatch | None = None
) -> Callable[[], list[Any]]:
    """One read of what Karpenter says about the workload's pods (:func:`launch_findings`); `joins`
    keeps what earlier reads saw of its NodeClaims."""
    return functools.partial(
        launch_findings,
        kube,
        ns,
        region=region,
        instance_type=bp.compute.instance_type,
        blueprint=bp.name,
        joins=joins,
        nodes_per_replica=bp.nodes_per_replica,
    )


def _wait_note(cost: Any, how_long: str) -> str:
    """What `up` does about a shortage Karpenter retries, and what bills while it waits."""
    return (
        f"`up` waits for the node ({how_long}; Ctrl-C stops waiting); meanwhile the platform bills about "
        f"${cost.platform_hourly_usd:.2f}/h and no serving node bills until one launches "
        f"(then about ${cost.serving_hourly_usd:.2f}/h)"
    )


def _stop_hint(stack: str, cost: Any, workload: str | None) -> str:
    """What a stopped wait leaves running, and the command that removes it."""
    named = f" --workload {workload}" if workload else ""
    hourly = cost.platform_hourly_usd + cost.serving_hourly_usd
    return (
        f"the platform and any nodes it launched bill about ${hourly:.2f}/h while they stay up; remove them with "
        f"`llmctl down --stack {stack}{named} --yes`, or fix the cause and run `llmctl up` again"
    )
