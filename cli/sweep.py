"""`llmctl sweep`: delete what in-cluster controllers left behind for one cluster."""

from __future__ import annotations

from typing import Any

import typer

from llmctl.cli import options, output


def sweep(
    cluster: str | None = typer.Option(
        None, "--cluster", help="EKS cluster name, for a cluster of another name than llmctl-<stack>."
    ),
    stack: str | None = options.SOME_STACK,
    region: str | None = options.REGION,
    dry_run: bool = options.DRY_RUN,
    yes: bool = options.YES,
    json_output: bool = options.JSON,
) -> None:
    """Find load balancers, target groups, security groups, Karpenter instances, launch templates and
    instance profiles, detached ENIs and volumes tagged for the cluster, and its EKS and Container
    Insights log groups, and delete them."""
    output.start(json_output=json_output)
    from llmctl.cli.output import confirm
    from llmctl.errors import Declined
    from llmctl.infra.aws.preflight import require_aws
    from llmctl.infra.aws.sweep import Sweeper, cluster_to_sweep

    name = cluster_to_sweep(cluster, stack)  # a missing or doubled name fails before any AWS call
    ident = require_aws(region)
    sweeper = Sweeper(name, ident.region)
    found = sweeper.find()
    deleted: list[Any] = []
    failed: list[Any] = []
    if found and not dry_run:
        if not confirm(
            f"Delete these {len(found)} objects?", [f"{i.label()} [{i.reason}]" for i in found], yes=yes
        ):
            raise Declined("nothing was deleted", None)
        deleted, failed = sweeper.delete(found)
    from llmctl.infra.aws.sweep import SweepReport

    report = SweepReport(
        cluster=name, region=ident.region, dry_run=dry_run, found=found, deleted=deleted, failed=failed
    )
    if json_output:
        output.emit_json(report.to_dict())
    else:
        con = output.console
        con.print(f"found {len(report.found)} object(s) tagged for {name} in {ident.region}")
        for item in report.found:
            con.print(f"  {item.label()}  [{item.reason}]", markup=False)
        if dry_run:
            con.print("dry run: nothing was deleted")
        else:
            con.print(f"deleted {len(deleted)}, failed {len(failed)}")
            for item, error in failed:
                con.print(f"  [red]failed[/] {item.label()}: {error}")
    if failed:
        from llmctl.errors import CloudError

        raise CloudError(
            f"{len(failed)} object(s) could not be deleted",
            "run `llmctl sweep` again in a few minutes; AWS frees dependencies asynchronously",
        )


def register(app: typer.Typer) -> None:
    """Add `llmctl sweep`."""
    app.command("sweep")(sweep)
