"""Fixtures shared by every test folder."""

from __future__ import annotations

import functools
import gc
import os
from collections.abc import Iterator

import pytest
import typer.main
import typer.testing
from hypothesis import HealthCheck, settings
from moto_amis import use_one_image

pytest_plugins = ["suite_report"]

#: The property tests' search budget (Hypothesis profiles; docs/testing.md, "Properties").
#: `make test` runs `default`: a fixed number of examples per property, chosen the same way on every
#: run (`derandomize`), no time limit per example (a loaded 2-core machine is slow, not wrong) and no
#: example database written into the checkout. `make mutation` runs `mutation` (set by
#: benchmarks/mutation_test.py), and `thorough` searches longer by hand:
#: `LLMCTL_HYPOTHESIS_PROFILE=thorough pytest tests -k properties`.
HYPOTHESIS_PROFILE_ENV = "LLMCTL_HYPOTHESIS_PROFILE"
_PROFILE = {
    "deadline": None,
    "derandomize": True,
    "database": None,
    "print_blob": False,
    "suppress_health_check": [HealthCheck.too_slow],
}
settings.register_profile("default", max_examples=60, **_PROFILE)
settings.register_profile("mutation", max_examples=200, **_PROFILE)
settings.register_profile("thorough", max_examples=2000, **_PROFILE)
settings.load_profile(os.environ.get(HYPOTHESIS_PROFILE_ENV, "default"))


def pytest_configure(config: pytest.Config) -> None:
    """Before any test module imports moto: its EC2 image catalogue cut to one image (moto_amis.py).
    And Typer's CliRunner builds each Typer app's click command once per process, as the console
    script does, instead of once per `invoke` (typer.testing calls `typer.main.get_command` every
    time: 35 ms of CPU for llmctl's command tree; the tests invoke it thousands of times)."""
    use_one_image()
    typer.testing._get_command = functools.cache(typer.main.get_command)  # type: ignore[attr-defined]


#: the cyclic collector's thresholds while tests run (Python's default: 700, 10, 10)
GC_THRESHOLDS = (50_000, 20, 10)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The cyclic garbage collector tuned for a process that holds a large, long-lived heap.

    After collection a worker holds about 700,000 objects (moto's backends, botocore's service
    models, the Pulumi SDK and providers), and a lifecycle scenario allocates enough to trigger a
    full collection every few CLI calls: about 0.65 CPU s each, a fifth of a scenario's CPU. What
    exists now is moved out of the collector's reach (`gc.freeze`: it stays alive, as imported
    modules do anyway), and young collections run every 50,000 net allocations instead of 700.
    Garbage is still collected; a scenario's garbage waits a little longer for it."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """What the run left is frozen too (after the session fixtures' teardown): at exit pytest runs two
    full collections (its check for exceptions raised in `__del__` of garbage still uncollected),
    which walked everything the tests imported and kept, 5 to 10 s per worker at the end of the
    suite. Exceptions raised in `__del__` during the tests are still reported with their test."""
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse to run when ``--dist loadgroup`` does not group: a module-scoped server (Ray, moto)
    split over two workers makes two of them, and two local Ray servers share a port."""
    if not getattr(config.option, "loadgroup", False):
        return
    ungrouped = [i.nodeid for i in items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if ungrouped:
        raise pytest.UsageError(
            f"pytest-xdist's --dist loadgroup did not group {len(ungrouped)} tests (first: {ungrouped[0]}); "
            "this pytest and pytest-xdist do not work together: install the versions pyproject.toml pins"
        )


@pytest.fixture(autouse=True)
def no_inherited_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-xdist's workers inherit COLUMNS=80 from the controller's terminal, and piped output
    wraps at COLUMNS (cli/output.py): a test that wants a width sets it itself."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    """One moto server (real HTTP, real AWS API shapes) on 127.0.0.1 at a free port for the session.

    Tests that need a clean account reset it through ``POST <url>/moto-api/reset``.
    """
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="session", autouse=True)
def wheel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One cache of built llmctl wheels per run (infra/workload/delivery/wheel_cache.py): every `up` builds
    the wheel of this checkout, and unchanged sources are built once, not once per test. pytest-xdist's
    workers share it (their base temp folders have one parent for the run; the cache's `os.replace`
    keeps one copy when two build at once)."""
    base = tmp_path_factory.getbasetemp()
    folder = base.parent / "wheel-cache" if "PYTEST_XDIST_WORKER" in os.environ else base / "wheel-cache"
    folder.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LLMCTL_WHEEL_CACHE", str(folder))
        yield
