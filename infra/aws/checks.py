"""One check's result, shared by `llmctl doctor` and the checks it runs (pins, images, reservations,
quota): the lowest module of `infra/aws/`, so the checks need not import the doctor that runs them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One doctor check. `ok` is None when the check could not run (a warning, not a failure)."""

    name: str
    ok: bool | None
    detail: str
    fix: str | None = None
    skipped: bool = False  # not run, because a check it depends on failed (listed, never dropped)


def client_error(exc: Exception) -> str:
    """`Code: Message` of a botocore error (the exception's type and text for any other)."""
    response = getattr(exc, "response", None) or {}
    error = response.get("Error", {})
    return f"{error.get('Code', type(exc).__name__)}: {error.get('Message', str(exc))}"
