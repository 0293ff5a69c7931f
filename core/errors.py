"""The llmctl error hierarchy.

Every error a user can cause or fix derives from :class:`LlmctlError`, which carries a message
(what went wrong) and a hint (what to do next). The CLI catches this base type in one place and
prints both; anything else that escapes is a bug and shows a traceback.

Hierarchy::

    LlmctlError
    ├── BlueprintError          a blueprint file or name is invalid (names file and field path)
    ├── CatalogError            a hardware or model catalog lookup failed (unknown instance/model)
    ├── PrerequisiteError       a tool, credential or package that a command needs is missing
    ├── CloudError              AWS answered with an error (quota, capacity, credentials, ...)
    ├── EngineError             a Pulumi operation failed (lock, conflict, failed update)
    ├── ServingError            a serving app or the local target failed
    ├── EndpointError           an OpenAI-compatible endpoint could not be reached or answered badly
    ├── BadInput                a flag, value or name given on the command line is wrong
    ├── FabricError             the fabric preflight measured the nodes' interconnect far below its EFA
    ├── NotDeployed             nothing is recorded as deployed for what was asked
    └── UserAbort               the user pressed Ctrl-C
        └── Declined            the user answered "no" at a confirmation (not an error: exit 0)

Each class carries its exit code; :data:`EXIT_CODES` is the one table of them (printed by
`llmctl --help` and by the generated CLI reference, docs/_hooks/cli_reference.py, and the README's
table is held to it by a test).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# code -> meaning: one code per meaning, for every command. `llmctl --help` prints this table.
EXIT_CODES: dict[int, str] = {
    0: "success, or a declined confirmation (nothing was changed)",
    1: "a failed verdict: policy violations, `plan diff` found changes, the fabric preflight",
    2: "bad input: unknown flag or value, misspelled name or region, bad file",
    3: "missing prerequisite: a tool, credentials, a package, a quota",
    4: "AWS refused or failed a call, or resources are left after down",
    5: "a Pulumi operation failed",
    6: "a serving app or the local target failed",
    7: "an endpoint could not be reached or answered with an error",
    8: "not deployed: nothing is recorded for that blueprint, stack or workload",
    130: "interrupted (Ctrl-C)",
}


class LlmctlError(Exception):
    """Base error: a message plus a hint on how to fix it."""

    exit_code: int = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} (hint: {self.hint})"

    def to_dict(self) -> dict[str, str | None]:
        """A stable JSON shape for `--json` output."""
        return {"error": type(self).__name__, "message": self.message, "hint": self.hint}


class BlueprintError(LlmctlError):
    """A blueprint is invalid; carries the file and the problems found, one per field path."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        source: str | None = None,
        problems: list[tuple[str, str]] | None = None,
        lines: dict[str, int] | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.source = source
        self.problems = problems or []
        self.lines = lines or {}  # field path -> its line in the file (1-based), where known

    def to_dict(self) -> dict[str, str | None]:
        data = super().to_dict()
        data["source"] = self.source
        return data


class CatalogError(LlmctlError):
    """An instance type, model or accelerator is not in the catalog."""

    exit_code = 2


class PrerequisiteError(LlmctlError):
    """A tool, credential or optional package the command needs is missing; `fixes` lists every
    one found at once (what is missing, its fix), each shown on its own lines."""

    exit_code = 3

    def __init__(
        self, message: str, hint: str | None = None, *, fixes: list[tuple[str, str | None]] | None = None
    ) -> None:
        super().__init__(message, hint)
        self.fixes = fixes or []


class CloudError(LlmctlError):
    """AWS refused or failed a call; the hint names the fix (quota request, credentials, region)."""

    exit_code = 4


class EngineError(LlmctlError):
    """A Pulumi operation failed."""

    exit_code = 5


class ServingError(LlmctlError):
    """A serving app or the local target failed to start or answer."""

    exit_code = 6


class EndpointError(LlmctlError):
    """An OpenAI-compatible endpoint could not be reached or answered with an error."""

    exit_code = 7


class BadInput(LlmctlError):
    """A flag, value or name given on the command line is wrong (the same code as a usage error)."""

    exit_code = 2


class FabricError(LlmctlError):
    """The fabric preflight (an all-reduce across a replica's nodes before the model loads) measured a bus
    bandwidth far below what the instance type's EFA gives, or NCCL fell back to TCP: a failed verdict."""

    exit_code = 1


class NotDeployed(LlmctlError):
    """Nothing is recorded as deployed for the blueprint, stack or workload asked about."""

    exit_code = 8


class UserAbort(LlmctlError):
    """The user interrupted the command (Ctrl-C)."""

    exit_code = 130


class Declined(UserAbort):
    """The user answered "no" at a confirmation: nothing was changed, which is not an error."""

    exit_code = 0


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """Return 'did you mean X?' for the closest choice, or None when nothing is close."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {matches[0]!r}?" if matches else None
