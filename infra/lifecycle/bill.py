"""What keeps costing money after `up` failed once nodes existed, and the command that stops it.

`up` on EKS that fails after the platform step began leaves a cluster running (control plane, NAT
gateway, core nodes) and, once the workload step ran, the serving nodes Karpenter launched for its
pods. The error then says so, with the hourly cost from the same price table as the plan, and the
exact `llmctl down` command (issue 25, item 6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunningBill:
    """What may still run after a failed `up`, its hourly cost, and how to remove it."""

    cluster: str
    platform_hourly_usd: float
    serving: str | None  # "2 x inf2.xlarge" when serving nodes may be up
    serving_hourly_usd: float
    command: str
    shared: bool  # other workloads use the platform: `down` of this one keeps it

    @property
    def hourly_usd(self) -> float:
        return self.serving_hourly_usd + (0.0 if self.shared else self.platform_hourly_usd)

    def text(self) -> str:
        parts = [] if self.shared else [f"cluster {self.cluster} (control plane, NAT, core nodes)"]
        if self.serving:
            parts.append(f"up to {self.serving} serving nodes")
        still = " and ".join(parts)
        kept = "; the platform stays for the environment's other workloads" if self.shared else ""
        return (
            f"still running: {still}, about ${self.hourly_usd:.2f}/h until removed{kept}; "
            f"stop it with `{self.command}`"
        )


def down_command(
    *, blueprint: str, stack: str, region: str, workload: str | None, shared: bool, backend: str | None
) -> str:
    """The `llmctl down` that removes what this `up` made (only its workload when others share)."""
    words = ["llmctl", "down"]
    if shared:
        words += ["-b", blueprint] + (["--workload", workload] if workload else [])
    words += ["--stack", stack, "--region", region]
    if backend:
        words += ["--backend", backend]
    return " ".join(words)


def running_bill(
    cost: Any,
    *,
    cluster: str,
    blueprint: str,
    stack: str,
    region: str,
    workload: str | None,
    shared: bool,
    serving_started: bool,
    backend: str | None = None,
) -> RunningBill:
    """The bill of a failed `up` (`cost`: its blueprint's CostReport)."""
    return RunningBill(
        cluster=cluster,
        platform_hourly_usd=float(cost.platform_hourly_usd),
        serving=f"{cost.nodes_max} x {cost.instance_type}" if serving_started else None,
        serving_hourly_usd=float(cost.serving_hourly_max_usd) if serving_started else 0.0,
        command=down_command(
            blueprint=blueprint, stack=stack, region=region, workload=workload, shared=shared, backend=backend
        ),
        shared=shared,
    )
