"""One update, preview, destroy or refresh: the monitor the program talks to, the diff against the
saved state, the steps and their events, and deletes in dependency order."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.proto import (
    engine_pb2,
    engine_pb2_grpc,
    language_pb2,
    language_pb2_grpc,
    provider_pb2,
    resource_pb2,
    resource_pb2_grpc,
)

from llmctl.infra.lifecycle.engine_order import OrderGraph, nodes_from_state
from llmctl.infra.plan.offline import OfflineMocks

from .control import append, control, root
from .events import EventLog
from .kube_faults import delete_blocker
from .store import CliError, Stack, load_yaml, now

STACK_TYPE = "pulumi:pulumi:Stack"
REPLACE_ON: dict[str, list[str]] = load_yaml((Path(__file__).parent / "replace_on.yaml").read_text())
SEVERITY = {
    engine_pb2.DEBUG: "debug",
    engine_pb2.INFO: "info",
    engine_pb2.WARNING: "warning",
    engine_pb2.ERROR: "error",
}


def to_struct(data: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    json_format.ParseDict(data, struct)
    return struct


def name_of(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def depends_on(res: dict[str, Any]) -> set[str]:
    """Every URN a resource names as a dependency: parent, explicit and property dependencies,
    provider, deletedWith (the engine-order module's reading of a state resource)."""
    return nodes_from_state([res])[0].direct()


def delete_waves(doomed: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The engine's delete waves over the doomed resources, from the same dependency data and rules
    as the order checks (llmctl.infra.lifecycle.engine_order): dependents and children first;
    whatever nothing left depends on goes together."""
    by_urn = {res["urn"]: res for res in doomed}
    return [[by_urn[urn] for urn in wave] for wave in OrderGraph(nodes_from_state(doomed)).delete_waves()]


def _meta(op: str, res: dict[str, Any], old: dict[str, Any] | None, keys: list[str]) -> dict[str, Any]:
    def state(r: dict[str, Any] | None) -> dict[str, Any] | None:
        if r is None:
            return None
        return {
            "type": r["type"],
            "urn": r["urn"],
            "id": r.get("id", ""),
            "parent": r.get("parent", ""),
            "provider": r.get("provider", ""),
            "custom": r.get("custom", False),
            "inputs": r.get("inputs", {}),
            "outputs": r.get("outputs", {}),
        }

    meta: dict[str, Any] = {
        "op": op,
        "urn": res["urn"],
        "type": res["type"],
        "provider": res.get("provider", ""),
        "old": state(old),
        "new": None if op == "delete" else state(res),
        "logical": True,
    }
    if keys:
        meta["keys"] = keys
        meta["diffs"] = keys
        meta["detailedDiff"] = {
            key: {"diffKind": "update-replace" if op == "replace" else "update", "inputDiff": True}
            for key in keys
        }
    return meta


class Interrupted(Exception):
    pass


class Deployment:
    """The engine side of one operation."""

    def __init__(self, stack: Stack, kind: str, preview: bool, events: EventLog) -> None:
        self.stack = stack
        self.kind = kind  # update | preview | destroy | refresh
        self.preview = preview
        self.events = events
        self.ctl = control()
        self.checkpoint = stack.load()
        self.old: dict[str, dict[str, Any]] = {r["urn"]: r for r in self.checkpoint["resources"]}
        self.new: dict[str, dict[str, Any]] = {}
        self.changes: Counter[str] = Counter()
        self.errors: list[str] = []
        self.outputs: dict[str, Any] = {}
        self.mutex = threading.Lock()
        self.canceled = threading.Event()
        self.region = "us-west-2"
        self.mocks = OfflineMocks()
        self.delegate = pulumi_mocks.MockMonitor(self.mocks)

    # ---- helpers -----------------------------------------------------------------------------
    def urn(self, parent: str, type_: str, name: str) -> str:
        qualified = type_
        if parent and parent in self.new and self.new[parent]["type"] != STACK_TYPE:
            qualified = parent.split("::")[2] + "$" + type_
        return f"urn:pulumi:{self.stack.name}::{self.stack.project}::{qualified}::{name}"

    def step(
        self, op: str, res: dict[str, Any], old: dict[str, Any] | None, keys: list[str] | None = None
    ) -> None:
        meta = _meta(op, res, old, keys or [])
        self.events.emit(resourcePreEvent={"metadata": meta, "planning": self.preview})
        if op == "replace":
            for sub in ("create-replacement", "delete-replaced"):
                self.events.emit(resourcePreEvent={"metadata": {**meta, "op": sub}, "planning": self.preview})
        self.events.emit(resOutputsEvent={"metadata": meta, "planning": self.preview})
        self.changes[op] += 1

    def fail(self, res: dict[str, Any], op: str, message: str) -> None:
        meta = _meta(op, res, self.old.get(res["urn"]), [])
        self.events.emit(resourcePreEvent={"metadata": meta, "planning": False})
        self.events.diagnostic(f"{message}", "error", res["urn"])
        self.events.emit(resOpFailedEvent={"metadata": meta, "status": 0, "steps": 1})
        self.errors.append(f"{res['type']} ({name_of(res['urn'])}):\n    error: {message}")

    def hang(self, where: str) -> None:
        """Wait for SIGINT (the marker file tells tests the handler is in place)."""
        (root() / "hanging").write_text(f"{os.getpid()} {where}")
        append(
            "faults.jsonl",
            {"fault": "hang", "at": where, "stack": self.stack.name, "project": self.stack.project},
        )
        self.canceled.wait(timeout=60)

    # ---- the program side (ResourceMonitor) ----------------------------------------------------
    def register(self, request: Any, context: Any) -> Any:
        if self.canceled.is_set():
            context.abort(grpc.StatusCode.UNAVAILABLE, "the update was canceled")
        inputs = json_format.MessageToDict(request.object)
        with self.mutex:
            urn = self.urn(request.parent, request.type, request.name)
        res: dict[str, Any] = {
            "urn": urn,
            "type": request.type,
            "custom": bool(request.custom),
            "remote": bool(request.remote),
            "parent": request.parent,
            "provider": request.provider,
            "inputs": inputs,
            "dependencies": sorted(set(request.dependencies)),
            "propertyDependencies": {
                k: sorted(v.urns) for k, v in request.propertyDependencies.items() if v.urns
            },
            **({"deletedWith": request.deletedWith} if request.deletedWith else {}),
            "outputs": {},
            "id": "",
        }
        old = self.old.get(urn)
        keys = (
            sorted(k for k in set(inputs) | set(old["inputs"]) if inputs.get(k) != old["inputs"].get(k))
            if old
            else []
        )
        if old is None or old["type"] != request.type:
            op = "create"
        elif not keys:
            op = "same"
        elif set(keys) & (set(REPLACE_ON.get(request.type, [])) | set(request.replaceOnChanges)):
            op = "replace"
        else:
            op = "update"
        name = request.name
        if not self.preview and op != "same":
            if self.ctl.get("hang_on") == name:
                self.hang(name)
                context.abort(grpc.StatusCode.UNAVAILABLE, "the update was canceled")
            if self.ctl.get("crash_on") == name:
                self.crash(res)
            message = (self.ctl.get("fail") or {}).get(name)
            if message:
                with self.mutex:
                    self.fail(res, op, message)
                context.abort(grpc.StatusCode.UNAVAILABLE, "resource monitor shut down after a failed step")
        reply: dict[str, Any] | None = None
        if request.type == STACK_TYPE or not (request.custom or request.remote):
            # a component's outputs come later (RegisterResourceOutputs); the engine answers none now
            res["outputs"], reply = (old or {}).get("outputs", {}), {}
        elif op == "same":
            res["outputs"], res["id"] = old["outputs"], old.get("id", "")  # type: ignore[index]
        elif self.preview:
            res["outputs"] = {**(old or {}).get("outputs", {}), **inputs}
            res["id"] = old.get("id", "") if old and op == "update" else ""
        else:
            rid, state = self.mocks.new_resource(
                pulumi_mocks.MockResourceArgs(
                    typ=request.type,
                    name=name,
                    inputs=inputs,
                    provider=request.provider,
                    custom=request.custom,
                )
            )
            res["outputs"], res["id"] = state, rid or ""
        with self.mutex:
            self.new[urn] = res
            self.step(op, res, old, keys if op in ("update", "replace") else [])
        return resource_pb2.RegisterResourceResponse(
            urn=urn,
            id=res["id"],
            object=to_struct(res["outputs"] if reply is None else reply),
            stable=op == "same",
        )

    def register_outputs(self, request: Any) -> Any:
        outputs = json_format.MessageToDict(request.outputs)
        with self.mutex:
            if request.urn in self.new:
                self.new[request.urn]["outputs"] = outputs
            if request.urn.split("::")[2] == STACK_TYPE:
                self.outputs = outputs
        return empty_pb2.Empty()

    def invoke(self, request: Any) -> Any:
        args = json_format.MessageToDict(request.args)
        ret, _ = self.mocks.call(
            pulumi_mocks.MockCallArgs(token=request.tok, args=args, provider=request.provider)
        )
        return resource_pb2.ResourceInvokeResponse(**{"return": to_struct(ret), "failures": []})

    def crash(self, res: dict[str, Any]) -> None:
        """Die mid-create, as a killed CLI does: a pending operation in the state, the lock left behind."""
        with self.mutex:
            resources = [*self.new.values(), *(r for u, r in self.old.items() if u not in self.new)]
            self.stack.save_checkpoint(
                {
                    **self.checkpoint,
                    "resources": resources,
                    "pending_operations": [
                        {"resource": {"urn": res["urn"], "type": res["type"]}, "type": "creating"}
                    ],
                }
            )
        append("faults.jsonl", {"fault": "crash", "at": name_of(res["urn"]), "stack": self.stack.name})
        os.kill(os.getpid(), signal.SIGKILL)

    # ---- running the program -----------------------------------------------------------------
    def run_program(self, client: str) -> str:
        """Serve the monitor, call LanguageRuntime.Run on the Automation API's server; '' or an error."""
        from concurrent import futures

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
        resource_pb2_grpc.add_ResourceMonitorServicer_to_server(_Monitor(self), server)
        engine_pb2_grpc.add_EngineServicer_to_server(_Engine(self), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        config, secret_keys = self.stack.config_values()
        self.region = config.get("aws:region", self.region)
        self.mocks = OfflineMocks(self.region, offerings=self.ctl.get("offerings"))
        request = language_pb2.RunRequest(
            project=self.stack.project,
            stack=self.stack.name,
            pwd=os.getcwd(),
            program=".",
            args=[f"127.0.0.1:{port}"],
            config=config,
            configSecretKeys=secret_keys,
            dryRun=self.preview,
            parallel=8,
            monitor_address=f"127.0.0.1:{port}",
            organization="organization",
        )
        result: dict[str, Any] = {}

        def call() -> None:
            try:
                with grpc.insecure_channel(client) as channel:
                    result["response"] = language_pb2_grpc.LanguageRuntimeStub(channel).Run(request)
            except grpc.RpcError as exc:  # the client went away
                result["error"] = f"could not run the program: {exc.details()}"

        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        while worker.is_alive():  # the main thread stays free for signal handlers
            worker.join(timeout=0.1)
        server.stop(0)
        if "error" in result:
            return str(result["error"])
        return str(result["response"].error)

    # ---- after the program -------------------------------------------------------------------
    def doomed(self) -> list[dict[str, Any]]:
        if self.kind == "destroy":
            return list(self.old.values())
        return [res for urn, res in self.old.items() if urn not in self.new]

    def delete(self, doomed: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run the deletes wave by wave; returns what is left (a failed delete stops further waves)."""
        waves = delete_waves(doomed)
        left = {res["urn"]: res for res in doomed}
        done: list[list[str]] = []
        fails = self.ctl.get("fail") or {}
        for wave in waves:
            failed = False
            for res in wave:
                blocked = None if self.preview else (fails.get(name_of(res["urn"])) or delete_blocker(res))
                if blocked:
                    self.fail(res, "delete", blocked)
                    failed = True
                    continue
                self.step("delete", res, res)
                del left[res["urn"]]
            done.append([res["urn"] for res in wave if res["urn"] not in left])
            if failed:
                break
        if not self.preview and done:
            append(
                "deletes.jsonl",
                {"project": self.stack.project, "stack": self.stack.name, "kind": self.kind, "waves": done},
            )
        return list(left.values())

    def finish(self, started: str, error: str) -> None:
        """Deletes (when the program succeeded), the summary event, the saved state and the history."""
        left_over: list[dict[str, Any]] = []
        if not error and not self.errors and not self.canceled.is_set():
            left_over = self.delete(self.doomed())
        else:
            left_over = self.doomed()  # a failed program deletes nothing
        if not self.ctl.get("no_summary"):
            self.events.emit(
                summaryEvent={
                    "maybeCorrupt": False,
                    "durationSeconds": 1,
                    "resourceChanges": dict(self.changes),
                    "PolicyPacks": {},
                }
            )
        if self.preview:
            return
        kept = [] if self.kind == "destroy" else list(self.new.values())
        order = [*kept, *(r for r in left_over if r["urn"] not in self.new)]
        outputs = (
            {}
            if self.kind == "destroy"
            else (self.outputs if not error else self.checkpoint.get("outputs", {}))
        )
        self.stack.save_checkpoint(
            {**self.checkpoint, "resources": order, "pending_operations": [], "outputs": outputs}
        )
        failed = bool(error or self.errors or self.canceled.is_set())
        self.stack.record(self.kind, "failed" if failed else "succeeded", started, dict(self.changes))


class _Monitor(resource_pb2_grpc.ResourceMonitorServicer):
    def __init__(self, dep: Deployment) -> None:
        self.dep = dep

    def GetDeploymentInfo(self, request: Any, context: Any) -> Any:
        return self.dep.delegate.GetDeploymentInfo(request)

    def SupportsFeature(self, request: Any, context: Any) -> Any:
        return resource_pb2.SupportsFeatureResponse(hasSupport=request.id != "outputValues")

    def RegisterResource(self, request: Any, context: Any) -> Any:
        return self.dep.register(request, context)

    def RegisterResourceOutputs(self, request: Any, context: Any) -> Any:
        return self.dep.register_outputs(request)

    def Invoke(self, request: Any, context: Any) -> Any:
        return self.dep.invoke(request)

    def Call(self, request: Any, context: Any) -> Any:
        return provider_pb2.CallResponse()

    def ReadResource(self, request: Any, context: Any) -> Any:
        props = json_format.MessageToDict(request.properties)
        urn = self.dep.urn(request.parent, request.type, request.name)
        _, state = self.dep.mocks.new_resource(
            pulumi_mocks.MockResourceArgs(
                typ=request.type, name=request.name, inputs=props, resource_id=request.id
            )
        )
        return resource_pb2.ReadResourceResponse(urn=urn, properties=to_struct(state))

    def RegisterStackTransform(self, request: Any, context: Any) -> Any:
        return self.dep.delegate.RegisterStackTransform(request)

    def RegisterStackInvokeTransform(self, request: Any, context: Any) -> Any:
        return self.dep.delegate.RegisterStackInvokeTransform(request)

    def RegisterResourceHook(self, request: Any, context: Any) -> Any:
        return empty_pb2.Empty()

    def RegisterErrorHook(self, request: Any, context: Any) -> Any:
        return empty_pb2.Empty()

    def RegisterPackage(self, request: Any, context: Any) -> Any:
        return resource_pb2.RegisterPackageResponse(ref=f"{request.name}-{request.version}")

    def SignalAndWaitForShutdown(self, request: Any, context: Any) -> Any:
        return empty_pb2.Empty()


class _Engine(engine_pb2_grpc.EngineServicer):
    def __init__(self, dep: Deployment) -> None:
        self.dep = dep
        self.root = ""

    def Log(self, request: Any, context: Any) -> Any:
        severity = SEVERITY.get(request.severity, "info")
        if severity != "debug":
            with self.dep.mutex:
                self.dep.events.diagnostic(request.message, severity, request.urn or None)
                if severity == "error":
                    self.dep.errors.append(request.message)
        return empty_pb2.Empty()

    def GetRootResource(self, request: Any, context: Any) -> Any:
        return engine_pb2.GetRootResourceResponse(urn=self.root)

    def SetRootResource(self, request: Any, context: Any) -> Any:
        self.root = request.urn
        return engine_pb2.SetRootResourceResponse()


__all__ = ["CliError", "Deployment", "Interrupted", "delete_waves", "now"]
