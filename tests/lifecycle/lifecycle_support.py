"""Helpers of the lifecycle tests (imported by conftest.py and the tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class FakePulumi:
    """Controls and reads the stand-in `pulumi` script (tests/lifecycle/fake_pulumi.py)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls_file = root / "calls.jsonl"
        self.control_file = root / "control.json"
        self.control_file.write_text("{}")

    def control(self, **settings: Any) -> None:
        """Tell the stand-in what to do: fail_up=[project], lock=[project], outputs={project: {...}}."""
        current = json.loads(self.control_file.read_text())
        current.update(settings)
        self.control_file.write_text(json.dumps(current))

    def calls(self) -> list[dict[str, Any]]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines() if line.strip()]

    def ops(self) -> list[tuple[str, str, str]]:
        """(operation, project, stack) of every up/preview/destroy, in order."""
        return [
            (call["op"], call["project"], call["stack"])
            for call in self.calls()
            if call.get("op") in ("up", "preview", "destroy", "cancel", "stack rm")
        ]


def seed_ami_parameters(
    variants: tuple[str, ...] = ("standard", "neuron", "nvidia"),
    alias: str | None = None,
    region: str = "us-west-2",
) -> None:
    """Put the SSM parameters AWS publishes for the pinned AMI alias into moto's backend (moto does
    not model the EKS AMI parameters and refuses PutParameter under /aws, as AWS does)."""
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter, ssm_backends

    from llmctl.blueprints.versions import versions
    from llmctl.infra.aws.pin_checks import ami_parameter

    alias = alias or versions().ami["al2023_alias"].value
    k8s = versions().eks.kubernetes_version.value
    store = ssm_backends["123456789012"][region]._parameters
    for index, variant in enumerate(variants):
        name = ami_parameter(k8s, alias, variant)
        store[name] = [
            Parameter(
                account_id="123456789012",
                name=name,
                value=f"ami-0{index}{variant[:3]}00000000000",
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=utcnow(),
                version=1,
                data_type="aws:ec2:image",
            )
        ]
