"""moto's EC2 images, cut to the one the tests run instances from.

moto builds every image of its catalogue (moto/ec2/resources/amis.json, 1,299 of them, plus a region's
latest_amis file) each time an account's EC2 backend is made, which is after every
`POST /moto-api/reset`: about 0.15 CPU s per test and region. `MOTO_AMIS_PATH` (read by moto when
`moto.ec2` is first imported; moto/ec2/models/amis.py) replaces the catalogue with a file: here the
one image `an_image` looks up, taken from moto's own catalogue at start, so the tests see exactly the
record moto ships.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

# One of the AMIs moto serves in every region (moto/ec2/resources/amis.json).
MOTO_AMI_NAME = "amzn-ami-hvm-2017.09.1.20171103-x86_64-gp2"


def use_one_image() -> None:
    """Point MOTO_AMIS_PATH at a file holding moto's record of MOTO_AMI_NAME (unless it is set)."""
    if "MOTO_AMIS_PATH" in os.environ:
        return
    from moto.utilities.utils import load_resource  # moto's data loader; it does not import moto.ec2

    images = [image for image in load_resource("ec2/resources/amis.json") if image["name"] == MOTO_AMI_NAME]
    if len(images) != 1:
        raise RuntimeError(f"moto's image catalogue has {len(images)} images named {MOTO_AMI_NAME!r}, not 1")
    folder = Path(tempfile.mkdtemp(prefix="llmctl-moto-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "amis.json"
    path.write_text(json.dumps(images))
    os.environ["MOTO_AMIS_PATH"] = str(path)
