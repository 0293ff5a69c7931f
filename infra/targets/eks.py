"""The `eks` target: llmctl builds the platform (VPC, EKS, Karpenter, plugins) and the workload."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmctl.infra.names import TARGET_SUMMARIES
from llmctl.infra.targets.base import OwnFlags, UpRequest, needs_table
from llmctl.infra.targets.cluster import KubernetesTarget, plan_offline

if TYPE_CHECKING:
    from llmctl.infra.lifecycle.drift_notes import DriftReader
    from llmctl.infra.lifecycle.progress import Progress
    from llmctl.infra.lifecycle.reports import PreviewReport


class EksTarget(KubernetesTarget):
    name = "eks"
    summary = TARGET_SUMMARIES["eks"]
    owns_platform = True
    needs = needs_table(
        # every tool `up` calls, checked before the plan: the kubeconfig's `aws eks get-token`
        # for each Kubernetes resource, kubectl (within the cluster's version skew) for readiness;
        # `down` needs kubectl for its finalizer checks, at any version, so that it never stands
        # between a user and the end of the bill
        # (and a gated model's Hugging Face token, reported with them)
        up={"pulumi", "aws", "aws-cli", "kubectl-eks", "hf-token"},
        down={"pulumi", "aws", "aws-cli", "kubectl"},
        preview={"pulumi", "aws", "aws-cli", "hf-token"},
        status={"pulumi"},
        connect={"kubectl"},
    )
    own_flags = (
        OwnFlags(
            ("reselect_azs",),
            "--reselect-azs applies to --target eks only",
            "llmctl chooses AZs only for the platforms it builds",
        ),
    )

    def region(self, given: str | None) -> str:
        """--region, then AWS_REGION / AWS_DEFAULT_REGION, then the profile's region (checked)."""
        from llmctl.infra.aws.preflight import resolve_region  # lazy: off the CLI start-up path

        return resolve_region(given)

    def check_account(self, request: UpRequest, progress: Progress) -> None:
        """What only the account and the chart repositories know (the vCPU quota, the capacity
        reservations, the pinned AMI alias per node variant, the pinned chart versions): a definite
        failure stops `up` before anything is built, a check that could not run is a warning, never a
        pass."""
        from llmctl.infra.aws.preflight import (  # lazy: off the CLI start-up path
            preflight_capacity,
            preflight_pins,
        )

        # the vCPU quota and capacity reservations first: on a fresh account the quota is the usual
        # reason the serving nodes never come, and the platform takes about 20 minutes to build
        for warning in preflight_capacity(request.blueprint, stack=request.stack, region=request.region):
            progress.note(f"warn: {warning}")
        for warning in preflight_pins(request.blueprint, stack=request.stack, region=request.region):
            progress.note(f"warn: {warning}")

    def preview(self, request: UpRequest, *, drift: DriftReader | None = None) -> PreviewReport:
        from llmctl.infra.lifecycle.progress import Progress  # lazy: off the CLI start-up path

        self.check_offline(request)
        self.preflight(
            "preview",
            region=request.region,
            look_offline=plan_offline(request),
            blueprint=request.blueprint,
            hf_token_file=request.hf_token_file,
        )
        lifecycle = self._lifecycle(request.stack, request.backend, Progress("quiet"), drift)
        return lifecycle.preview(
            request.blueprint,
            region=self.region(request.region),
            hf_token_file=request.hf_token_file,
            workload=request.workload,
            reselect_azs=request.reselect_azs,
        )
