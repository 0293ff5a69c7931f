"""All-reduce results read from text: nccl-tests' `all_reduce_perf` output or the fabric probe's.

Both give one :class:`AllReduceResult`. nccl-tests' format (NVIDIA/nccl-tests a0b82b2, src/util.cu):
header lines start with ``#``; each row is ``size count type redop root`` then, out of place and in
place, ``time algbw busbw #wrong`` (time in us, bandwidths in GB/s; older releases print no root and
an ``error`` column instead of ``#wrong``; a row measured in place only leaves the out-of-place
columns blank); the footer says ``# Avg bus bandwidth : X``. Launchers prefix every line (``0: `` from
srun, ``[1,0]<stdout>:`` from mpirun --tag-output), which is skipped. The probe's own output is read
from its ``LLMCTL-FABRIC`` JSON line when present (exact numbers), else from its rows, which are in
the same format. NCCL's transport lines anywhere in the text are classified by the probe's own rule
(:func:`llmctl.serving.fabric.probe.transport_summary`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from llmctl.serving.fabric.probe import SUMMARY_PREFIX, TOOL, TRANSPORT_LINE, transport_summary

_NUM = r"(-?[0-9.]+(?:e[-+]?[0-9]+)?|N/A)"
#: size count type redop [root] then 4 or 8 numbers, at the end of a line (after any launcher prefix)
_ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+([a-z0-9_]+)\s+([a-z]+)\s+(?:(-?\d+)\s+)?"
    + r"\s+".join([_NUM] * 4)
    + r"(?:\s+"
    + r"\s+".join([_NUM] * 4)
    + r")?\s*$",
    re.IGNORECASE,
)
#: what launchers put before each line: srun's "0: ", mpirun --tag-output's "[1,0]<stdout>:"
_PREFIX = re.compile(r"^(?:\s*\d+:\s?|\[\d+,\d+\]<\w+>:)")
#: the header of nccl-tests releases whose last column is the largest error of a row, not a count of
#: wrong elements (aws/aws-ofi-nccl#33's run prints "busbw  error")
_ERROR_COLUMN = re.compile(r"busbw\s+error\b")
_AVG = re.compile(r"# Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_RANK = re.compile(r"#\s+Rank\s+\d+")


@dataclass(frozen=True)
class Measurement:
    """One timed all-reduce: time in us, bandwidths in GB/s (1e9 bytes), elements found wrong."""

    time_us: float
    algbw: float
    busbw: float
    wrong: float | None  # None: not counted (N/A, or a release that printed the largest error instead)


@dataclass(frozen=True)
class Row:
    """One size of the sweep, measured out of place and/or in place."""

    size: int
    count: int
    dtype: str
    redop: str
    out_of_place: Measurement | None
    in_place: Measurement | None

    @property
    def busbw(self) -> float:
        """The better of the two bus bandwidths at this size."""
        return max(m.busbw for m in (self.out_of_place, self.in_place) if m is not None)


@dataclass(frozen=True)
class AllReduceResult:
    """An all-reduce sweep: where it came from, its rows (ascending size) and what NCCL said it used."""

    source: str  # "nccl-tests" or the probe's tool name
    rows: tuple[Row, ...]
    avg_busbw: float | None
    ranks: int | None  # None when the output does not say
    transport: dict[str, Any] = field(default_factory=dict)
    wrong: float = 0.0

    @property
    def largest(self) -> Row:
        """The row of the largest size (the one compared with the fabric's bandwidth)."""
        return max(self.rows, key=lambda row: row.size)


def _number(text: str | None) -> float | None:
    return None if text is None or text.upper() == "N/A" else float(text)


def _measurement(values: tuple[str | None, ...], *, counts: bool) -> Measurement | None:
    if values[0] is None:
        return None
    time_us, algbw, busbw = (float(v) for v in values[:3] if v is not None)
    return Measurement(time_us, algbw, busbw, _number(values[3]) if counts else None)


def _rows(text: str) -> list[Row]:
    counts = _ERROR_COLUMN.search(text) is None  # else the column is an error, not a count
    rows: list[Row] = []
    for line in text.splitlines():
        found = _ROW.search(_PREFIX.sub("", line, count=1))
        if found is None:
            continue
        groups = found.groups()
        first, second = _measurement(groups[5:9], counts=counts), _measurement(groups[9:13], counts=counts)
        # two measurements: out of place then in place; one alone: in place (nccl-tests leaves the
        # out-of-place columns blank for rows it measures in place only)
        out_of_place, in_place = (first, second) if second is not None else (None, first)
        rows.append(Row(int(groups[0]), int(groups[1]), groups[2], groups[3], out_of_place, in_place))
    return sorted(rows, key=lambda row: row.size)


def _wrong(rows: list[Row]) -> float:
    return sum(m.wrong or 0.0 for row in rows for m in (row.out_of_place, row.in_place) if m is not None)


def _summary(text: str) -> dict[str, Any] | None:
    for line in reversed(text.splitlines()):
        at = line.find(SUMMARY_PREFIX)
        if at >= 0:
            data: dict[str, Any] = json.loads(line[at + len(SUMMARY_PREFIX) :])
            return data
    return None


def parse(text: str) -> AllReduceResult:
    """The all-reduce result in `text` (nccl-tests' or the probe's output, pod logs included); raises
    ValueError when it holds no row."""
    transport = transport_summary(line for line in text.splitlines() if TRANSPORT_LINE.search(line))
    summary = _summary(text)
    if summary is not None:
        rows = [
            Row(
                r["size"],
                r["count"],
                "float",
                "sum",
                None,
                Measurement(r["time_us"], r["algbw"], r["busbw"], r["wrong"]),
            )
            for r in summary["rows"]
        ]
        if not rows:
            raise ValueError("the fabric probe's summary holds no measurement")
        return AllReduceResult(
            source=TOOL,
            rows=tuple(rows),
            avg_busbw=summary["avg_busbw"],
            ranks=summary["ranks"],
            # the lines printed above the summary, classified by this version's rule; the summary's
            # own classification where the text kept none of them
            transport=transport if transport["kind"] != "unknown" else summary["transport"],
            wrong=float(summary["wrong"]),
        )
    rows = _rows(text)
    if not rows:
        raise ValueError("no all_reduce row in the output (nccl-tests' or the fabric probe's table)")
    average = _AVG.search(text)
    ranks = len(_RANK.findall(text)) or None
    source = TOOL if TOOL in text else "nccl-tests"
    return AllReduceResult(
        source=source,
        rows=tuple(rows),
        avg_busbw=float(average.group(1)) if average else None,
        ranks=ranks,
        transport=transport,
        wrong=_wrong(rows),
    )
