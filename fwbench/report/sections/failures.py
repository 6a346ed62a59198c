"""Appendix B, Failures: every trial that did not end ok, with its reason."""

from __future__ import annotations

from fwbench.report.formatting import Notes
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section
from fwbench.report.tables import Numbering, table


def context(numbering: Numbering, data: Inputs) -> dict:
    trials = data.trials
    failed = trials[trials["status"] != "ok"] if "status" in trials else trials.iloc[0:0]
    failed = failed.sort_values([c for c in ("cell_id", "trial") if c in failed], kind="stable")
    rows = [[str(r["cell_id"]), str(r.get("trial", "")), str(r["status"]),
             " ".join(str(r.get("message", "")).split()) or "no message was recorded"]
            for _, r in failed.iterrows()]
    caption = ("Every trial that did not end ok, with its reason. Unlike patel2023, which drops "
               "its out-of-memory points, a failure here is a result: it stays in the tables "
               "and the figures mark its cell as not measured.")
    return table(numbering, "failures", caption, ["Cell", "Trial", "Status", "Reason"], rows,
                 Notes(), f"Every one of the {len(trials)} trials ended ok.",
                 classes=["id", "num", "", "msg"])


SECTION = Section(key="failures", anchor="appendix-failures", place="appendix", order=20,
                  title="Failures and trials", context=lambda b: context(b.numbering, b.data))
