"""A stand-in `kubectl` paired with the stand-in engine: answers `get` for objects keyed by kind,
namespace and name. The objects are the Kubernetes resources the engine's stacks hold (from their
saved inputs) overlaid with what tests add to $STANDIN_PULUMI_DIR/kube.json (pods, status, events)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

KINDS = {
    "pod": "Pod",
    "pods": "Pod",
    "po": "Pod",
    "service": "Service",
    "services": "Service",
    "svc": "Service",
    "event": "Event",
    "events": "Event",
    "ev": "Event",
    "node": "Node",
    "nodes": "Node",
    "no": "Node",
    "deployment": "Deployment",
    "deployments": "Deployment",
    "deploy": "Deployment",
    "daemonset": "DaemonSet",
    "daemonsets": "DaemonSet",
    "ds": "DaemonSet",
    "namespace": "Namespace",
    "namespaces": "Namespace",
    "ns": "Namespace",
    "nodepools.karpenter.sh": "NodePool",
    "nodepool": "NodePool",
    "nodepools": "NodePool",
    "crd": "CustomResourceDefinition",
    "crds": "CustomResourceDefinition",
    "customresourcedefinitions": "CustomResourceDefinition",
    "rayservice": "RayService",
    "rayservices": "RayService",
    "rayservices.ray.io": "RayService",
    "ec2nodeclasses.karpenter.k8s.aws": "EC2NodeClass",
    "ec2nodeclass": "EC2NodeClass",
    "ec2nodeclasses": "EC2NodeClass",
    "nodeclaims.karpenter.sh": "NodeClaim",
    "nodeclaim": "NodeClaim",
    "nodeclaims": "NodeClaim",
    "hpa": "HorizontalPodAutoscaler",
    "horizontalpodautoscaler": "HorizontalPodAutoscaler",
    "horizontalpodautoscalers": "HorizontalPodAutoscaler",
    "raycluster": "RayCluster",
    "rayclusters": "RayCluster",
    "rayclusters.ray.io": "RayCluster",
    "scaledobject": "ScaledObject",
    "scaledobjects": "ScaledObject",
    "scaledobjects.keda.sh": "ScaledObject",
}
CLUSTER_SCOPED = {"Node", "Namespace", "NodePool", "CustomResourceDefinition", "EC2NodeClass", "NodeClaim"}
# control.json `kube_unreachable: true`: the API server does not answer (as with an expired token or
# a deleted cluster); `get` and `patch` fail the way kubectl does.
UNREACHABLE = "Unable to connect to the server: dial tcp 10.0.1.5:443: i/o timeout"


def _fail(message: str, code: int = 1) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name"))


def objects(root: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    backend = Path(os.environ.get("STANDIN_BACKEND", "/nonexistent")) / ".pulumi" / "stacks"
    for path in sorted(backend.glob("*/*.json")):
        for res in json.loads(path.read_text())["resources"]:
            inputs = res.get("inputs") or {}
            if res["type"].startswith("kubernetes:") and inputs.get("kind") and inputs.get("metadata"):
                obj = {
                    "apiVersion": inputs.get("apiVersion"),
                    "kind": inputs["kind"],
                    "metadata": dict(inputs["metadata"]),
                }
                if inputs["kind"] not in CLUSTER_SCOPED:
                    obj["metadata"].setdefault("namespace", "default")
                obj["spec"] = inputs.get("spec", {})
                found[_key(obj)] = obj
    extra = root / "kube.json"
    for obj in [*(json.loads(extra.read_text()) if extra.exists() else []), *sequence_step(root)]:
        key = _key(obj)
        found[key] = {**found.get(key, {}), **obj}
    return {key: obj for key, obj in found.items() if not (obj.get("metadata") or {}).get("deleted")}


# A recorded sequence the stand-in replays (kube-sequence.json: {"advance_on": KIND, "steps": [[object
# overlays], ...]}): every `get` of the `advance_on` kind moves to the next step (the last one stays),
# and every `get` sees the current step's overlays on top of kube.json, as a cluster's objects change
# between two polls.
SEQUENCE = "kube-sequence.json"
SEQUENCE_POS = "kube-sequence.pos"


def sequence_step(root: Path) -> list[dict[str, Any]]:
    path = root / SEQUENCE
    if not path.exists():
        return []
    steps = json.loads(path.read_text())["steps"]
    pos = root / SEQUENCE_POS
    calls = int(pos.read_text()) if pos.exists() else 0
    return list(steps[max(0, min(calls - 1, len(steps) - 1))])


def advance_sequence(root: Path, kind: str) -> None:
    path = root / SEQUENCE
    if path.exists() and json.loads(path.read_text())["advance_on"] == kind:
        pos = root / SEQUENCE_POS
        pos.write_text(str((int(pos.read_text()) if pos.exists() else 0) + 1))


def _labelled(obj: dict[str, Any], selector: str | None) -> bool:
    """`-l k=v[,k=v]`: equality selectors only."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    pairs = [part.split("=", 1) for part in selector.split(",")] if selector else []
    return all(labels.get(key) == value for key, value in pairs)


def port_forward(root: Path, args: list[str]) -> None:
    """`port-forward -n NS svc/NAME LOCAL:REMOTE`: refuses a Service that does not exist, else holds
    until terminated (recording start and stop)."""
    import signal
    import time

    if len(args) != 4 or args[0] != "-n" or not args[2].startswith("svc/") or ":" not in args[3]:
        _fail(f"error: the stand-in kubectl answers only `port-forward -n NS svc/NAME L:R` (asked: {args})")
    namespace, name = args[1], args[2][len("svc/") :]
    if ("Service", namespace, name) not in objects(root):
        _fail(f'Error from server (NotFound): services "{name}" not found')
    local, remote = args[3].split(":")
    record = {"pid": os.getpid(), "namespace": namespace, "service": name, "local": local, "remote": remote}

    def stop(signum: int, frame: Any) -> None:
        with open(root / "port-forwards.jsonl", "a", encoding="utf-8") as log:
            log.write(json.dumps({**record, "event": "stopped"}) + "\n")
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    with open(root / "port-forwards.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps({**record, "event": "started"}) + "\n")
    print(f"Forwarding from 127.0.0.1:{local} -> {remote}", flush=True)
    while True:
        time.sleep(0.1)


def _merge(base: Any, change: Any) -> Any:
    """JSON merge patch (RFC 7386): null deletes a key."""
    if not isinstance(change, dict):
        return change
    out = dict(base) if isinstance(base, dict) else {}
    for key, value in change.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def _pointer(path: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def _json_patch(obj: Any, ops: list[dict[str, Any]]) -> Any:
    """A JSON patch (RFC 6902: test, add, replace, remove) as the API server applies one: all or
    nothing; a failed `test` or a missing path fails the whole patch."""
    import copy

    doc = copy.deepcopy(obj)
    for op in ops:
        *parents, last = _pointer(op["path"])
        node = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.get(part)
            if node is None:
                _fail(
                    f'The request is invalid: the server rejected our request due to an error in our request: "{op["path"]}" not found'
                )
        key: Any = int(last) if isinstance(node, list) and last != "-" else last
        if op["op"] == "test":
            if (node[key] if isinstance(node, list) else node.get(key)) != op["value"]:
                _fail(
                    f"The request is invalid: the server rejected our request: testing value {op['path']} failed"
                )
        elif op["op"] == "add":
            if isinstance(node, list):
                node.insert(len(node) if last == "-" else key, op["value"])
            else:
                node[key] = op["value"]
        elif op["op"] == "replace":
            if not isinstance(node, list) and key not in node:
                _fail(
                    f"The request is invalid: replace operation does not apply: doc is missing key: {op['path']}"
                )
            node[key] = op["value"]
        elif op["op"] == "remove":
            del node[key]
        else:
            _fail(f"error: the stand-in kubectl does not apply JSON patch op {op['op']!r}")
    return doc


def patch(root: Path, args: list[str]) -> None:
    """`patch <resource> <name> [-n NS] --type=merge|json -p JSON`: the patched object is kept as an
    overlay (each patch appended to kube-patches.jsonl: [kind, namespace, name, type, body]); one being
    deleted (deletionTimestamp) whose last finalizer goes is gone, as the API server does."""
    words, namespace, body, kind_of_patch = [], "default", None, None
    i = 0
    while i < len(args):
        if args[i] in ("-n", "--namespace"):
            namespace, i = args[i + 1], i + 2
            continue
        if args[i] == "-p":
            body, i = json.loads(args[i + 1]), i + 2
            continue
        if args[i].startswith("--type="):
            kind_of_patch = args[i].split("=", 1)[1]
        elif args[i].startswith("-"):
            _fail(f"error: unknown flag: {args[i]}")
        else:
            words.append(args[i])
        i += 1
    if kind_of_patch not in ("merge", "json") or body is None or len(words) != 2:
        _fail("error: the stand-in kubectl patches only `patch <resource> <name> --type=merge|json -p JSON`")
    kind = KINDS.get(words[0].lower())
    if kind is None:
        _fail(f'error: the server doesn\'t have a resource type "{words[0]}"')
    key = (kind, "" if kind in CLUSTER_SCOPED else namespace, words[1])
    current = objects(root).get(key)
    if current is None:
        _fail(f'Error from server (NotFound): {words[0]} "{words[1]}" not found')
    patched = _merge(current, body) if kind_of_patch == "merge" else _json_patch(current, body)
    meta = patched.get("metadata") or {}
    if meta.get("deletionTimestamp") and not meta.get("finalizers"):
        meta["deleted"] = True  # gone from the API server
    write_overlay(root, patched)
    with open(root / "kube-patches.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps([kind, key[1], words[1], kind_of_patch, body]) + "\n")
    print(f"{words[0]}/{words[1]} patched")


def _namespaced(args: list[str], verb: str, flag: str) -> tuple[str, list[str]]:
    """`-n NS` and the positional words of `verb`'s arguments; `flag` is the one flag it takes."""
    namespace, words = "default", []
    i = 0
    while i < len(args):
        if args[i] in ("-n", "--namespace"):
            namespace, i = args[i + 1], i + 2
            continue
        if args[i].startswith("-"):
            if args[i] != flag:
                _fail(f"error: the stand-in kubectl does not take {args[i]} with {verb}")
        else:
            words.append(args[i])
        i += 1
    return namespace, words


# A pod's log (`kubectl logs -n NS POD [--all-containers=true]`): the text tests put in kube-logs.json
# under "NS/POD" (StandinEngine.kube_log); a pod the stand-in does not know is NotFound, as kubectl says.
LOGS = "kube-logs.json"


def logs(root: Path, args: list[str]) -> None:
    namespace, words = _namespaced(args, "logs", "--all-containers=true")
    if len(words) != 1:
        _fail("error: the stand-in kubectl answers `logs -n NS POD` for one pod")
    if ("Pod", namespace, words[0]) not in objects(root):
        _fail(f'Error from server (NotFound): pods "{words[0]}" not found')
    path = root / LOGS
    print(json.loads(path.read_text()).get(f"{namespace}/{words[0]}", "") if path.exists() else "", end="")


def delete(root: Path, args: list[str]) -> None:
    """`delete <resource> <name> -n NS [--wait=false]`: the object is gone from the API server (an
    overlay marks it deleted); a name the stand-in does not know is NotFound, as kubectl says."""
    namespace, words = _namespaced(args, "delete", "--wait=false")
    kind = KINDS.get(words[0].lower()) if len(words) == 2 else None
    if kind is None:
        _fail(f"error: the stand-in kubectl deletes only `delete <resource> <name>` (asked: {args})")
    key = (kind, "" if kind in CLUSTER_SCOPED else namespace, words[1])
    current = objects(root).get(key)
    if current is None:
        _fail(f'Error from server (NotFound): {words[0]} "{words[1]}" not found')
    write_overlay(root, {**current, "metadata": {**current["metadata"], "deleted": True}})
    with open(root / "kube-deletes.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps([kind, key[1], words[1]]) + "\n")
    print(f'{words[0]} "{words[1]}" deleted')


def write_overlay(root: Path, obj: dict[str, Any]) -> None:
    """Replace the overlay of this object in kube.json (later entries win in `objects`)."""
    path = root / "kube.json"
    current = json.loads(path.read_text()) if path.exists() else []
    kept = [o for o in current if _key(o) != _key(obj)]
    path.write_text(json.dumps([*kept, obj]))


def main() -> None:
    root = Path(os.environ["STANDIN_PULUMI_DIR"])
    args = sys.argv[1:]
    with open(root / "kubectl-calls.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps(args) + "\n")
    if args[:2] == ["version", "--client"]:
        print(json.dumps({"clientVersion": {"gitVersion": "v1.35.0"}}))
        return
    kubeconfig = None
    if args[:1] == ["--kubeconfig"]:
        kubeconfig, args = args[1], args[2:]
    if kubeconfig is not None:
        path = Path(kubeconfig)
        if not path.exists():
            _fail(f"error: stat {kubeconfig}: no such file or directory")
        try:
            clusters = json.loads(path.read_text()).get("clusters")
        except ValueError:
            from .store import load_yaml

            clusters = (load_yaml(path.read_text()) or {}).get("clusters")
        if not clusters:
            _fail("error: invalid configuration: no configuration has been provided")
    from .control import control

    if control().get("kube_unreachable"):
        _fail(UNREACHABLE)
    if args[:1] == ["port-forward"]:
        port_forward(root, args[1:])
        return
    if args[:1] == ["patch"]:
        patch(root, args[1:])
        return
    if args[:1] == ["logs"]:
        logs(root, args[1:])
        return
    if args[:1] == ["delete"]:
        delete(root, args[1:])
        return
    if not args or args[0] != "get":
        _fail(f"error: the stand-in kubectl answers only `get` (asked: {' '.join(args)})")
    rest = args[1:]
    namespace, every, output, words, selector = "default", False, None, [], None
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg in ("-n", "--namespace"):
            namespace, i = rest[i + 1], i + 2
            continue
        if arg in ("-l", "--selector"):
            selector, i = rest[i + 1], i + 2
            continue
        if arg in ("-A", "--all-namespaces"):
            every = True
        elif arg == "-o":
            output, i = rest[i + 1], i + 2
            continue
        elif arg.startswith("-"):
            _fail(f"error: unknown flag: {arg}")
        else:
            words.append(arg)
        i += 1
    if output != "json" or not words:
        _fail("error: the stand-in kubectl answers only `get <resource> [name] -o json`")
    kind = KINDS.get(words[0].lower())
    if kind is None:
        _fail(f'error: the server doesn\'t have a resource type "{words[0]}"')
    advance_sequence(root, kind)
    everything = objects(root)
    scoped = kind in CLUSTER_SCOPED
    if len(words) > 1:
        obj = everything.get((kind, "" if scoped else namespace, words[1]))
        if obj is None:
            _fail(f'Error from server (NotFound): {words[0]} "{words[1]}" not found')
        print(json.dumps(obj))
        return
    items = [
        o
        for (k, ns, _), o in sorted(everything.items())
        if k == kind and (scoped or every or ns == namespace) and _labelled(o, selector)
    ]
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


if __name__ == "__main__":
    main()
