"""`--suite-report FILE` (what `make test` writes to build/suite.json): outcomes counted once per test,
the slowest tests first, the wall time and the machine."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _inner_ini(pytester: pytest.Pytester) -> None:
    """The inner run's own settings, as the project's pyproject.toml sets them: without this one,
    pytest-asyncio warns that its fixture loop scope is unset (a warning the outer run then shows)."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def test_the_report_counts_outcomes_and_ranks_the_slowest(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_sample="""
        import time
        import pytest

        def test_fast():
            pass

        def test_slow():
            time.sleep(0.3)

        def test_fails():
            assert False

        @pytest.mark.skip(reason="not here")
        def test_skipped():
            pass
        """
    )
    out = pytester.path / "results" / "suite.json"
    result = pytester.runpytest("-p", "suite_report", f"--suite-report={out}")
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    data = json.loads(out.read_text())
    assert data["outcomes"] == {"failed": 1, "passed": 2, "skipped": 1}
    assert data["tests"] == 4 and data["exit_status"] == 1 and data["workers"] == 0
    assert data["slowest"][0]["test"] == "test_sample.py::test_slow" and data["slowest"][0]["seconds"] >= 0.3
    assert len(data["slowest"]) == 4 and data["wall_s"] >= 0.3
    assert data["machine"]["cpus"] >= 1


def test_without_the_option_nothing_is_written(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest("-p", "suite_report")
    result.assert_outcomes(passed=1)
    assert not list(pytester.path.rglob("*.json"))
