"""The user of the pods whose images record none (issue 53): the Neuron DLC images.

versions.yaml records a non-root user for the images that have one (the Ray images' `ray`, Triton's
`triton-server`), and `security.harden` runs their pods as it. The Neuron Deep Learning Containers
have none (aws-neuron/deep-learning-containers `docker/pytorch/inference/2.7.0/Dockerfile.neuronx` sets no
`USER`), and nothing in their start needs root any more: base-image mode installs into the user site on
a volume, every place the runtimes write is a volume (`writable.py`). What is left is the device:

- a pod that uses no Neuron device (the Ray head of a Neuron blueprint) runs as llmctl's non-root user,
  `delivery.NON_ROOT_USER`, always;
- a pod that requests Neuron devices or cores runs as it where containerd on its pool's nodes gives a
  pod's devices to the pod's user (`PoolFacts.device_ownership`: llmctl's Neuron pools set it through
  their EC2NodeClass, `infra/platform/node_config.py`; a kubeconfig cluster file may declare it), else
  as root: llmctl does not know that pool's udev rule for `/dev/neuron*` (0666 from the driver's
  package, 0660 for a `neuron` group as Neuron's security guide advises, 0600 without one).

The uid has no entry in the image's /etc/passwd, so each container of such a pod gets `USER` and
`LOGNAME`: Python's `getpass.getuser()` reads them before it asks the password database (which would
raise `KeyError` for the uid), and the Neuron compiler and torch name their work folders by it.
"""

from __future__ import annotations

from typing import Any

from llmctl.infra.workload.builders.security import all_containers, pod_user
from llmctl.infra.workload.delivery.serving_code import NON_ROOT_USER
from llmctl.infra.workload.scheduling.capacity import NEURON_CORE, NEURON_DEVICE
from llmctl.infra.workload.scheduling.pods import container_requests, pod_templates

Obj = dict[str, Any]
#: the name `getpass.getuser()` returns in those containers
USER_NAME = "llmctl"


def uses_neuron(spec: Obj) -> bool:
    """Whether a pod's containers request Neuron devices or NeuronCores."""
    return any(
        container_requests(container).get(resource, 0) > 0
        for container in all_containers(spec)
        for resource in (NEURON_DEVICE, NEURON_CORE)
    )


def choose_users(objects: list[Obj], *, device_ownership: bool) -> None:
    """Run the pods of images without a recorded user as llmctl's non-root user, where their devices
    allow it (`device_ownership`: the serving pool's containerd gives devices to the pod's user)."""
    uid, gid = NON_ROOT_USER
    for obj in objects:
        for template in pod_templates(obj):
            spec = template.spec
            if pod_user(spec) is not None or (uses_neuron(spec) and not device_ownership):
                continue
            spec["securityContext"] = {
                **(spec.get("securityContext") or {}),
                "runAsUser": uid,
                "runAsGroup": gid,
            }
            for container in all_containers(spec):
                env = container.setdefault("env", [])
                named = {item.get("name") for item in env}
                env.extend(
                    {"name": key, "value": USER_NAME} for key in ("USER", "LOGNAME") if key not in named
                )
