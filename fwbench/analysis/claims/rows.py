"""The rows a claim is judged on, and why a verdict drawn from them is only a hint."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from fwbench.analysis.claims.kinds import Judge, Tables
from fwbench.analysis.claims.wording import flag, join, missing, setting, unique


def min_trials(statistics: dict | None = None) -> int:
    """Fewer trials than this on a side (in a cell, of a strategy) make a verdict a hint: the
    analysis plan's ``min_trials_for_verdict``."""
    return int(_plan(statistics, "min_trials_for_verdict"))


def rope(statistics: dict | None = None) -> float:
    """The plan's margin of practical equivalence (``rope``: 0.05 is ±5 % on the log scale),
    which also widens a published range before a claim of a size is judged against it."""
    return float(_plan(statistics, "rope"))


def _plan(statistics: dict | None, key: str):
    """The analysis plan's ``key``: the config's statistics block (which the statistics read
    too), else the schema's default."""
    if statistics and statistics.get(key) is not None:
        return statistics[key]
    from fwbench.plan.config import load_schema

    return load_schema()["properties"]["statistics"]["properties"][key]["default"]


@dataclass(frozen=True)
class Selected:
    """The rows a claim selects (None when there are none, and ``why``), and notes on how they
    were chosen."""

    rows: pd.DataFrame | None
    notes: list[str] = field(default_factory=list)
    why: str = ""


def claim_rows(frame: pd.DataFrame, select: dict) -> Selected:
    """The rows of ``frame`` a claim selects (``select``: its axis values), or why there are
    none; notes on how they were chosen."""
    if frame.empty:
        return Selected(None, why="the statistics hold no rows")
    for axis, wanted in select.items():
        values = [str(v) for v in (wanted if isinstance(wanted, list) else [wanted])]
        have = unique(frame, axis)
        if not set(values) & set(have):
            if axis == "device":  # "on the GPU", as prose names a device
                measured = join(setting({axis: v}) for v in have) or "nothing"
                return Selected(None, why=f"it has no pair "
                                f"{' or '.join(setting({axis: v}) for v in values)} "
                                f"(this run measured {measured})")
            return Selected(None, why=f"it has no pair with {axis.replace('_', ' ')} "
                            f"{' or '.join(values)} (this run measured {join(have) or 'none'})")
        frame = frame[frame[axis].astype(str).isin(values)]
    if frame.empty:
        return Selected(None, why="no pair has every selected setting at once")
    notes = []
    if "profile" in frame:
        if (frame["profile"] == "defaults").any():
            frame = frame[frame["profile"] == "defaults"]
        else:
            notes.append("Judged on the matched profile: this run has no `defaults` profile, "
                         "and the paper ran each framework's defaults.")
    if "device" not in select and "device" in frame:
        notes.append(f"Measured on: {join(unique(frame, 'device'))}.")
    return Selected(frame, notes)


def on_selected(table: str, judge_rows) -> Judge:
    """The judge of a kind that reads the rows of ``table`` (``comparisons``, ``cell_stats``)
    its claim selects: ``judge_rows(rows, claim, tables, margin)`` gives (verdict, ours); with
    no rows, the claim was not measured."""
    def judge(claim: dict, tables: Tables, margin: float) -> dict:
        selected = claim_rows(getattr(tables, table), claim["test"].get("select", {}))
        if selected.rows is None:
            return not_measured(selected.why, selected.notes)
        verdict, ours = judge_rows(selected.rows, claim, tables, margin)
        return {"verdict": verdict, "ours": ours, "notes": selected.notes}
    return judge


def comparisons_hint(claim: dict, tables: Tables, least: int) -> str:
    """The hint of a kind judged on comparisons: how many of those it selects are exploratory."""
    return hint_from_comparisons(claim_rows(tables.comparisons,
                                            claim["test"].get("select", {})).rows)


def not_measured(why: str, notes: list) -> dict:
    """A verdict of ``not measured`` for ``why``."""
    return {"verdict": "not measured", "ours": f"not measured in this run: {why}",
            "notes": notes}


def hint_from_comparisons(rows) -> str:
    """How many of the comparisons with a ratio the statistics mark exploratory, and why."""
    if rows is None or "exploratory" not in rows:
        return ""
    rated = rows[[not missing(r) for r in rows["ratio"]]] if "ratio" in rows else rows
    hints = rated[[flag(v) for v in rated["exploratory"]]]
    if hints.empty:
        return ""
    reasons = list(dict.fromkeys(part for r in hints.get("exploratory_reason", [])
                                 if not missing(r) for part in str(r).split("; ") if part))
    why = f" ({'; '.join(reasons[:3])}{'; …' if len(reasons) > 3 else ''})" if reasons else ""
    return f"{len(hints)} of {len(rated)} comparisons are exploratory{why}"


def fewest(rows, columns: list[str], what: str, least: int) -> str:
    """"" when every row has at least ``least`` (``min_trials``) in each count column, else
    why."""
    if rows is None or rows.empty:
        return ""
    counts = [pd.to_numeric(rows[c], errors="coerce") for c in columns if c in rows]
    if not counts:
        return ""
    smallest = min(float(c.min()) for c in counts)
    if missing(smallest) or smallest >= least:
        return ""
    return f"as few as {int(smallest)} {what}, fewer than {least}"
