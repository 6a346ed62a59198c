"""Appendix C, Every hypothesis test: tests.csv as the statistics wrote it, grouped by the family
its p-values are corrected in."""

from __future__ import annotations

from fwbench.analysis.claims import wording
from fwbench.report.formatting import Notes
from fwbench.report.inputs import Inputs
from fwbench.report.tables import Legend, Numbering, table

TEST_DETAIL = ["scope", "hypothesis", "test", "variant", "n", "estimate", "p", "p_corrected",
               "decision"]


def context(numbering: Numbering, data: Inputs) -> dict:
    frame, notes, legend = data.tests, Notes(), Legend("N")
    columns = [c for c in TEST_DETAIL if c in frame] or list(frame.columns)
    has_note = "note" in frame
    groups = frame.groupby("family", sort=False) if "family" in frame else [(None, frame)]
    rows = []
    for family, group in groups:
        if family is not None:
            rows.append({"group": str(family)})
        for _, row in group.iterrows():
            note = row["note"] if has_note and not wording.missing(row["note"]) else ""
            rows.append([_test_value(row, c, notes) for c in columns]
                        + ([legend.cite([note] if note else [])] if has_note else []))
    why = data.problems.get("tests", "the statistics ran no test")
    return table(numbering, "tests-all", "Every hypothesis test, as the statistics wrote it "
                 "(tests.csv), grouped by the family its p-values are corrected in; — where "
                 "the test gives no such value.",
                 [c.replace("_", " ") for c in columns] + (["Note"] if has_note else []),
                 rows, notes, f"No test: {why}.",
                 classes=["num" if c in ("n", "estimate", "p", "p_corrected") else
                          "id" if c == "scope" else "" for c in columns] + [""], legend=legend)


def _test_value(row, column: str, notes: Notes):
    value = row[column]
    if column == "decision" and not wording.missing(value) and wording.is_exploratory(row):
        return f"{value} (exploratory)"
    if wording.missing(value):
        return "" if column in ("note", "variant") else "—"
    if isinstance(value, float):
        return wording.fmt_p(value) if column.lower().startswith("p") or column.endswith("_p") \
            else wording.sig(value)
    return str(value)
