"""The wheel in ConfigMaps (configmap delivery, existing clusters): split into parts, joined in the pod.

The API server refuses a ConfigMap whose values add up to more than 1 MiB (kubernetes/kubernetes
pkg/apis/core/validation/validation.go, ValidateConfigMap: the lengths of every `data` string and every
*decoded* `binaryData` value, against core.MaxSecretSize); llmctl's wheel outgrew that (it carries every
runtime's lock, hash lines that compress poorly). So the wheel goes in parts: byte slices of at most
:data:`PART_BYTES`, one immutable ConfigMap each (`<base>-1`, `<base>-2`, ..., the base named after the
wheel's content digest, so new code means new names and the pods roll), each holding its slice under
the key `part-<i>`. One `projected` volume combines them in the pod: the kubelet merges every configMap
source's keys into one payload written to one directory (kubernetes/kubernetes
pkg/volume/projected/projected.go `collectData`, commit 4b8e552a8882b205c5365b7ea0b042f969579a4e; a
binaryData key becomes a file of that name, pkg/volume/configmap/configmap.go `MakePayload`), and the keys
differ, so no part hides another. The serving container joins the files in order into its writable /tmp
(:data:`ASSEMBLED_DIR`), checks the whole wheel's sha256 against the one `up` wrote into its spec, and
installs it (`serving_code.install_script`). A wheel with one part goes the same way.

base64 and the metadata count only on the wire (JSON), where the request limit is 3 MiB (a 900 KiB part
is 1.2 MB of base64), and etcd stores the object in protobuf, binary as decoded. More than
:data:`MAX_PARTS` parts is refused before any change (`prepare/delivery.py`): a bigger app belongs in an
image.
"""

from __future__ import annotations

import base64
import shlex
from pathlib import Path
from typing import Any

from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.meta import metadata

Obj = dict[str, Any]

#: what the API server accepts in one ConfigMap (core.MaxSecretSize: 1 MiB of data plus decoded binaryData)
CONFIGMAP_LIMIT = 1024 * 1024
#: the largest slice of the wheel in one ConfigMap: 124 KiB under the limit
PART_BYTES = 900 * 1024
#: the most parts llmctl deploys (3600 KiB of wheel; today's wheel is about 1 MiB)
MAX_PARTS = 4
#: where the serving container joins the parts (on its writable /tmp volume, `builders/writable.py`)
ASSEMBLED_DIR = "/tmp/llmctl-wheel"
#: a marker on every part: which slice it holds, of how many
PART_ANNOTATION = "llmctl.dev/wheel-part"


def part_count(size: int) -> int:
    """How many ConfigMaps a wheel of `size` bytes takes (one, empty, for an offline plan's)."""
    return max(1, -(-size // PART_BYTES))


def wheel_size(path: str | None) -> int:
    """Bytes of the wheel `up` built (0 in an offline plan, where none was built)."""
    return Path(path).stat().st_size if path else 0


def part_names(base: str, count: int) -> list[str]:
    """The ConfigMaps' names, in the order the pod joins them: `<base>-1` ... `<base>-<count>`."""
    return [f"{base}-{index}" for index in range(1, count + 1)]


def part_keys(count: int) -> list[str]:
    """The parts' keys (file names in the projected volume), in order; distinct across the ConfigMaps."""
    return [f"part-{index}" for index in range(1, count + 1)]


def split(data: bytes) -> list[bytes]:
    """The wheel's bytes in slices of at most :data:`PART_BYTES` (one empty slice for no bytes)."""
    return [data[at : at + PART_BYTES] for at in range(0, len(data), PART_BYTES)] or [b""]


def part_configmaps(config: WorkloadConfig, base: str, data: bytes, digest: str) -> list[Obj]:
    """One immutable ConfigMap per slice of the wheel's `data` (`binaryData`, key `part-<i>`)."""
    slices = split(data)
    names, keys = part_names(base, len(slices)), part_keys(len(slices))
    objects = []
    for index, (name, key, chunk) in enumerate(zip(names, keys, slices, strict=True), start=1):
        part = f"{index} of {len(slices)}"
        meta = metadata(config, name, "app", {"llmctl.dev/wheel-sha256": digest, PART_ANNOTATION: part})
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta,
                "immutable": True,
                "binaryData": {key: base64.b64encode(chunk).decode()},
            }
        )
    return objects


def parts_volume(volume: str, names: list[str]) -> Obj:
    """The pod volume combining the part ConfigMaps in one directory (a `projected` volume)."""
    return {"name": volume, "projected": {"sources": [{"configMap": {"name": name}} for name in names]}}


_JOIN = (
    "import os, sys\n"
    "os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)\n"
    "with open(sys.argv[1], 'wb') as out:\n"
    "    for part in sys.argv[2:]:\n"
    "        out.write(open(part, 'rb').read())\n"
)


def join_step(folder: str, count: int, target: str) -> str:
    """Shell: write the parts mounted in `folder`, in order, to `target` (python3, as the other steps)."""
    parts = [f"{folder}/{key}" for key in part_keys(count)]
    return "python3 -c " + shlex.join([_JOIN, target, *parts])
