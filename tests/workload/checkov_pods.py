"""What the checkov test scans: every catalog blueprint's objects as its first `up` applies them, with every
container of every pod written as a pod of its own (issue 53, finding 8).

- **Digests recorded.** The manifests are built with a digest recorded for every image tag the pods run,
  as the stack's first `up` records them (`infra/workload/prepare/digests.py` `pin_images` records the registry's
  answer for each of `image_pins.tagged_images`; `manifests.build_manifests` renders `image@digest`), so
  checkov's digest and pull-policy checks (CKV_K8S_43, CKV_K8S_15) judge the images that run. The
  digest of each tag here is a fixed stand-in (the sha256 of its name): the checks read only its form.
- **One container per pod.** checkov reports a container check once per object, naming only the first
  container that fails (checkov 3.3.30 `kubernetes/checks/resource/base_container_check.py`,
  `_check_containers`), so a failure could not be told apart per container. Each container (init
  containers too) is written as a copy of its object, of the same kind, holding that container alone
  (an init container stays in `initContainers`, so the probe checks do not read it), with the pod's
  spec, labels and annotations, and with the container's own user lifted onto the copy's pod (in a pod
  of one container the two are the same; checkov's CKV_K8S_40 reads only the pod's and the regular
  containers' `runAsUser`). A RayService's head and worker templates (checkov reads no RayService) become
  Pods the same way. The union of the copies' results is the object's.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any

from workload_helpers import TOKEN, config_for

from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.pins.image_pins import tagged_images
from llmctl.infra.workload.scheduling.pods import pod_templates

Obj = dict[str, Any]
#: the fields of a container's securityContext that mean the same on the pod of a one-container pod
USER_FIELDS = ("runAsUser", "runAsGroup", "runAsNonRoot")


@dataclass(frozen=True)
class Origin:
    """Where a scanned copy came from: the rendered object and the one container it holds."""

    kind: str
    name: str
    container: str


def recorded_pins(name: str) -> dict[str, str]:
    """A digest for every image tag the blueprint's pods run, as its first `up` records them."""
    images = tagged_images(build_manifests(config_for(name), hf_token=None))
    return {image: "sha256:" + hashlib.sha256(image.encode()).hexdigest() for image in images}


def applied_objects(name: str) -> list[Obj]:
    """The blueprint's objects as `up` applies them once its image digests are recorded."""
    config = config_for(name).model_copy(update={"image_pins": recorded_pins(name)})
    return build_manifests(config, hf_token=TOKEN)


def _one_container_spec(spec: Obj, field: str, container: Obj) -> Obj:
    copied = {k: copy.deepcopy(v) for k, v in spec.items() if k not in ("containers", "initContainers")}
    copied["containers"] = [copy.deepcopy(container)] if field == "containers" else []
    if field == "initContainers":
        copied["initContainers"] = [copy.deepcopy(container)]
    own = {k: v for k, v in (container.get("securityContext") or {}).items() if k in USER_FIELDS}
    copied["securityContext"] = {**(spec.get("securityContext") or {}), **own}
    return copied


def _copy_name(obj_name: str, where: str | None, container: str) -> str:
    return "--".join(part for part in (obj_name, where, container) if part)


def scanned_objects(objects: list[Obj]) -> tuple[list[Obj], dict[tuple[str, str], Origin]]:
    """The objects checkov scans for one render, and the origin of each copy by (kind, name)."""
    scanned: list[Obj] = []
    origins: dict[tuple[str, str], Origin] = {}
    for obj in objects:
        templates = list(pod_templates(obj))
        if not templates:
            scanned.append(obj)
            continue
        if obj["kind"] not in ("RayService", "RayCluster"):
            meta = obj["metadata"]
            template = obj["spec"]["template"]
            for field in ("initContainers", "containers"):
                for container in template["spec"].get(field, []):
                    name = _copy_name(meta["name"], None, container["name"])
                    spec = _one_container_spec(template["spec"], field, container)
                    scanned.append(
                        {
                            **obj,
                            "metadata": {**meta, "name": name},
                            "spec": {**obj["spec"], "template": {**template, "spec": spec}},
                        }
                    )
                    origins[(obj["kind"], name)] = Origin(obj["kind"], meta["name"], container["name"])
            continue
        scanned.append(obj)  # checkov reads no RayService: its pods are scanned as Pods
        cluster = obj["spec"].get("rayClusterConfig", obj["spec"])
        groups = [("head", cluster["headGroupSpec"])] + [
            (group["groupName"], group) for group in cluster.get("workerGroupSpecs", [])
        ]
        for where, group in groups:
            template = group["template"]
            for field in ("initContainers", "containers"):
                for container in template["spec"].get(field, []):
                    name = _copy_name(obj["metadata"]["name"], where, container["name"])
                    meta = {
                        "name": name,
                        "namespace": obj["metadata"]["namespace"],
                        "labels": template.get("metadata", {}).get("labels", {}),
                        "annotations": template.get("metadata", {}).get("annotations", {}),
                    }
                    spec = _one_container_spec(template["spec"], field, container)
                    scanned.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
                    origins[("Pod", name)] = Origin(obj["kind"], obj["metadata"]["name"], container["name"])
    return scanned, origins
