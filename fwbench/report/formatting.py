"""Values of a table as text: a value that was not measured becomes ``NotMeasured`` with its
reason numbered in the table's notes (never "nan" or "None"), an interval carries its coverage
when that is not the nominal 95 %. Every number is written by ``fmt(value, quantity)``
(fwbench.analysis.claims.numbers), as the verdicts write theirs; ``sig``, ``percent`` and the
other short names of fwbench.analysis.claims.wording are names for it."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from fwbench.analysis.claims import wording
from fwbench.analysis.claims.numbers import fmt  # noqa: F401
from fwbench.analysis.claims.wording import count, fmt_interval, missing, percent, sig  # noqa: F401


@dataclass(frozen=True)
class NotMeasured:
    """A value that was not measured; ``note`` numbers its reason in the table's notes."""

    reason: str
    note: int

    def __str__(self) -> str:
        return "not measured"


class Notes:
    """The reasons behind a table's ``not measured`` entries, each numbered once."""

    def __init__(self):
        self.reasons: list[str] = []

    def missing(self, reason: str) -> NotMeasured:
        if reason not in self.reasons:
            self.reasons.append(reason)
        return NotMeasured(reason, self.reasons.index(reason) + 1)


def cell_text(row, column: str, notes: Notes, reason: str, write=str):
    """The formatted value of ``row[column]``, or NotMeasured with ``reason``."""
    if column not in row.index:
        return notes.missing(f"the statistics have no column `{column}`")
    value = row[column]
    return notes.missing(reason) if missing(value) else write(value)


def interval_text(row, low: str, high: str, notes: Notes, reason: str, write=sig):
    for column in (low, high):
        if column not in row.index:
            return notes.missing(f"the statistics have no column `{column}`")
    if missing(row[low]) or missing(row[high]):
        return notes.missing(reason)
    return fmt_interval(row[low], row[high], write)


def span(values) -> str:
    """A count or range of counts as text: "3" or "2–3"."""
    values = sorted({int(v) for v in values if not missing(v)})
    if not values:
        return "none"
    return str(values[0]) if len(values) == 1 else f"{values[0]}–{values[-1]}"


def interval_methods(frame) -> list[str]:
    """The distinct interval methods of a stats table's ``ratio_method`` column, those that
    differ only in their degrees of freedom said once with their range ("t interval, 4–11
    df"): a run sizes its comparisons to different counts of pairs."""
    dfs: dict[str, list[int]] = {}
    for method in wording.unique(frame, "ratio_method"):
        dfs.setdefault(re.sub(r"\b\d+ df\b", "{} df", method), []).extend(
            int(df) for df in re.findall(r"\b(\d+) df\b", method))
    return [form.replace("{} df", f"{span(values)} df") if values else form
            for form, values in dfs.items()]


def nominal(plan: dict) -> float:
    """The analysis plan's confidence level: the coverage every interval is meant to have."""
    value = plan.get("confidence")
    return float(value) if isinstance(value, (int, float)) else float("nan")


def with_level(interval, level, uniform=None, nominal_level: float = float("nan")):
    """An interval, with its coverage when that is not the plan's level nor said in the
    caption."""
    if isinstance(interval, NotMeasured):
        return interval
    return wording.with_level(interval, level, uniform, nominal_level)


def uniform_level(frame: pd.DataFrame, column: str):
    """The one interval level every row has, or None when they differ or are unknown."""
    return one_level(v for v in frame.get(column, []) if not missing(v))


def one_level(levels):
    """The level all of ``levels`` share (equal within 10⁻⁶), or None when they differ or
    there is none."""
    levels = [float(v) for v in levels]
    if not levels or any(abs(v - levels[0]) > 1e-6 for v in levels):
        return None
    return levels[0]


def level_sentence(level, nominal_level: float) -> str:
    """What a caption says when every interval of its table falls short of the plan's level."""
    if level is None or abs(level - nominal_level) < 1e-9:
        return ""
    return (f" Every interval here has {percent(level)} coverage: with so few trials "
            f"{percent(nominal_level)} cannot be reached.")


def level_phrase(uniform, nominal_level: float) -> str:
    """"at 95 % unless stated": the coverage a caption states for its intervals."""
    level = uniform if uniform is not None else nominal_level
    return f"at {percent(level)} unless stated" if level == level else "at the level stated"


def verdict_text(row, notes: Notes):
    """A comparison's verdict in words ("PyTorch faster"), tagged when exploratory."""
    verdict = cell_text(row, "verdict", notes, "no verdict recorded",
                        lambda v: wording.OUTCOME_LABELS.get(str(v), str(v)))
    exploratory = row.get("exploratory")
    if not isinstance(verdict, NotMeasured) and not missing(exploratory) and bool(exploratory):
        return f"{verdict} (exploratory)"
    return verdict


# Paths a reader has no use for and that name a machine: a virtual environment's or a package's
# location is shown from the environment's folder on; temporary and home folders are redacted.
_PATH_REDACTIONS = [
    (re.compile(r"(?<![\w.~])/(?:[^\s/:;,]+/)*?(\.venv|site-packages|dist-packages)/"), r"\1/"),
    (re.compile(r"(?<![\w.~])/(?:var/)?tmp(?:/[^\s:;,]*)?"), "[temporary folder]"),
    (re.compile(r"(?<![\w.~])/(?:home/[^\s/:;,]+|root)(?=/|\b)"), "~"),
]


def redact(text: str) -> str:
    """``text`` with temporary and home paths redacted and environment paths made relative."""
    for pattern, replacement in _PATH_REDACTIONS:
        text = pattern.sub(replacement, text)
    return text
