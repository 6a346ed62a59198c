"""The parts every table and figure of the report shares: numbering in document order, the
table and figure entries the template lays out, a legend for long remarks, and the axes a
caption names once."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims import wording
from fwbench.analysis.claims.wording import PAIR_AXES, missing
from fwbench.report.figures.style import Figure, constant_axes
from fwbench.report.formatting import Notes
from fwbench.report.inputs import Inputs


class Numbering:
    """Numbers figures and tables in the order the template shows them."""

    def __init__(self):
        self.count = {"figure": 0, "table": 0}

    def next(self, kind: str) -> int:
        self.count[kind] += 1
        return self.count[kind]


class Legend:
    """Long remarks shared by many rows, each written once under the table and cited by label."""

    def __init__(self, prefix: str):
        self.prefix, self.texts = prefix, []

    def cite(self, texts) -> str:
        labels = []
        for text in texts:
            if text not in self.texts:
                self.texts.append(text)
            labels.append(f"{self.prefix}{self.texts.index(text) + 1}")
        return ", ".join(labels)

    def entries(self) -> list[tuple[str, str]]:
        return [(f"{self.prefix}{i}", text) for i, text in enumerate(self.texts, 1)]


def table(numbering: Numbering, key: str, caption: str, columns: list[str], rows: list,
          notes: Notes, empty: str, wide: bool = True, classes: list[str] | None = None,
          legend: Legend | None = None) -> dict:
    """A numbered table; a row is a list of values, or {"group": title} to head a group."""
    return {"key": key, "number": numbering.next("table") if rows else None, "caption": caption,
            "columns": columns, "rows": rows, "notes": notes.reasons, "empty": empty,
            "wide": wide, "classes": classes or ["" for _ in columns],
            "legend": legend.entries() if legend else []}


def figure_entry(numbering: Numbering, figure: Figure, href: str) -> dict:
    return {"key": figure.key, "title": figure.title, "caption": figure.caption,
            "source": figure.source, "reason": figure.reason,
            "src": f"{href}/{figure.file}" if figure.file else None,
            "number": numbering.next("figure") if figure.file else None,
            "narrow": figure.narrow}


def varying(frame: pd.DataFrame, axes: list[str]) -> list[str]:
    return [a for a in axes if a in frame and frame[a].astype(str).nunique() > 1]


def constant(frame: pd.DataFrame, axes: list[str]) -> str:
    """The axes with one value over the table, as a sentence of its caption ("" if none)."""
    words = wording.setting(constant_axes(frame, axes))
    return f"Every row: {words}." if words else ""


def every_cell(shared: list[str]) -> str:
    """The caption's sentence for remarks that hold for every row (empty when none do)."""
    return f" Every cell: {'; '.join(shared)}." if shared else ""


def axis_header(axis: str) -> str:
    return {"batch_size": "Batch", "input_shape": "Shape", "world_size": "Processes"}.get(
        axis, axis.capitalize())


def sorted_rows(frame: pd.DataFrame, extra: list[str] = ()) -> pd.DataFrame:
    keys = [a for a in PAIR_AXES + list(extra) if a in frame]
    return frame.sort_values(keys, kind="stable") if keys else frame


def absent_reason(data: Inputs, name: str, default: str) -> str:
    """Why an optional table is empty: how reading it failed, else ``default`` (what an empty
    table means)."""
    problem = data.problems.get(name)
    return problem if problem and not problem.endswith("has no rows") else default


def shown_axes(frame: pd.DataFrame) -> list[str]:
    return varying(frame, PAIR_AXES) or ["model"]


def remarks(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The ``note`` column split into remarks every row shares (said once, in the caption) and
    each row's own."""
    lists = [[] if missing(v) or not str(v) else str(v).split("; ")
             for v in frame.get("note", pd.Series([""] * len(frame)))]
    shared = ([r for r in lists[0] if all(r in other for other in lists[1:])]
              if len(lists) > 1 else [])
    return shared, [[r for r in rows if r not in shared] for rows in lists]


def without_empty_remarks(entry: dict) -> dict:
    """A table whose Remarks column (its last) cites nothing loses it."""
    if entry["rows"] and not entry["legend"] and all(not r[-1] for r in entry["rows"]):
        entry.update(columns=entry["columns"][:-1], classes=entry["classes"][:-1],
                     rows=[r[:-1] for r in entry["rows"]])
    return entry
