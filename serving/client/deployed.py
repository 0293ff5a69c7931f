"""What is deployed, as the commands that use a deployment find it: the endpoint of a blueprint
(`chat`, `bench`, `endpoint`, `connect`), the one endpoint of a stack when no blueprint is named, and
a misspelled blueprint name told apart from one that is simply not deployed."""

from __future__ import annotations

from pathlib import Path

from llmctl.errors import BadInput, BlueprintError, NotDeployed, did_you_mean
from llmctl.state import Endpoint, list_endpoints, load_endpoint, recorded_blueprints


def known_names() -> set[str]:
    """Every blueprint name a command may be asked about: the catalog's and every one this machine
    has a record of (an endpoint, an `up` that ran, a local server)."""
    from llmctl.blueprints.catalog import catalog_names  # lazy: off the CLI start-up path
    from llmctl.serving.client.local import local_blueprints  # lazy: httpx, off the start-up path

    return {*catalog_names(), *recorded_blueprints(), *local_blueprints()}


def check_blueprint_name(blueprint: str | None) -> None:
    """A name that is neither in the catalog nor recorded here is a misspelling (exit 2, with the
    closest name), not a blueprint that is not deployed (exit 8). A path to a file is taken as given."""
    if blueprint is None or Path(blueprint).expanduser().is_file():
        return
    names = known_names()
    if blueprint in names:
        return
    close = did_you_mean(blueprint, sorted(names))
    raise BlueprintError(
        f"unknown blueprint {blueprint!r}" + (f"; {close}" if close else ""),
        "run `llmctl blueprints list` for the catalog, or `llmctl status` for what is deployed",
    )


def find_endpoint(stack: str, blueprint: str, workload: str | None = None) -> Endpoint:
    """The recorded endpoint of a deployed blueprint; a misspelled name says so first."""
    check_blueprint_name(blueprint)
    return load_endpoint(stack, blueprint, workload)


def sole_endpoint(stack: str) -> Endpoint:
    """The stack's one recorded endpoint, for a command given neither --endpoint nor --blueprint."""
    found = list_endpoints(stack)
    if len(found) == 1:
        return found[0]
    if not found:
        others = sorted({e.stack for e in list_endpoints()})
        raise NotDeployed(
            f"nothing is deployed in stack {stack!r}",
            f"pass --stack {' or '.join(others)}"
            if others
            else "deploy with `llmctl up --blueprint NAME` (e.g. tiny-cpu --target local), or pass --endpoint URL",
        )
    names = ", ".join(e.blueprint + (f" (--workload {e.workload})" if e.workload else "") for e in found)
    raise BadInput(
        f"stack {stack!r} has {len(found)} endpoints: {names}", "pass --blueprint NAME to say which"
    )
