"""Section 5, Threats to validity: what limits this run's conclusions."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims import min_trials, wording
from fwbench.analysis.claims.numbers import fmt
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section

# The p-value florencio2019 reports for each of its five hypotheses (Results, paired Wilcoxon).
FLORENCIO_P = 3.896559845095909e-18


def context(data: Inputs, facts: dict) -> list[str]:
    out = []
    per_cell = data.trials.groupby("cell_id").size() if "cell_id" in data.trials else []
    least = min_trials(data.statistics)
    if len(per_cell) and int(per_cell.min()) < least:
        out.append(f"Few trials: some cells have {int(per_cell.min())} trials; an interval "
                   f"from fewer than {least} trials is wide, and verdicts drawn from it are "
                   "fragile.")
    if facts["devices"] == ["cpu"]:
        out.append("Only the CPU was measured: every GPU claim is left as not measured.")
    if "cpu" in facts["devices"]:
        out.append(_host(data.every_trial, has_controls=len(data.controls) > 0))
    if "defaults" not in facts["profiles"]:
        out.append("Only the matched settings profile was run; the papers measured each "
                   "framework as it comes, so no claim can be confirmed or contradicted here: "
                   "a claim judged on matched settings was measured in another setting.")
    out.append("Synthetic in-memory data: input pipelines, which the papers' epoch times "
               "include, are not measured by the throughput experiment.")
    out.append("Model equivalence: both frameworks build the same architecture from one spec; "
               "kernel choices (convolution algorithms, layouts) still differ, by design of each "
               "framework, and are part of what is compared.")
    out.append("Published statistics: florencio2019 applied a paired test to samples that were "
               "not paired (one script run per framework), and reports p = "
               f"{wording.fmt_p(FLORENCIO_P)} for five hypotheses, the floor the normal "
               "approximation of the Wilcoxon signed-rank test reaches at n = 100; we use the "
               "pairing our trials do have (trial k of both frameworks ran back to back) and "
               "intervals instead.")
    return out


def _host(trials: pd.DataFrame, *, has_controls: bool) -> str:
    """What the host of a virtual machine can do that nothing inside it sees, beside the work
    beside the trials that the machine does show (the outside_busy_pct of every trial, the A/A
    controls' too, as the shipping gate reads it)."""
    sentence = ("The host: the processors of a shared virtual machine can slow down for seconds "
                "to minutes, unseen from inside it; a slow spell over one trial of a pair and not "
                "the other widens that pair's spread"
                + (", which the A/A controls measure" if has_controls else
                   ", and this run has no A/A controls to measure it"))
    busy = pd.to_numeric(trials.get("outside_busy_pct", pd.Series(dtype=float)),
                         errors="coerce").dropna()
    if len(busy):
        sentence += (". Other work, which the machine does show, kept the processors outside a "
                     f"trial's own busy at most {fmt(busy.max() / 100, 'level')} of the time "
                     "while it was timed")
    return sentence + "."


SECTION = Section(key="threats", anchor="limits", place="body", order=50,
                  title="Limits of this run", context=lambda b: context(b.data, b.facts),
                  parts=lambda c: [("unmeasured", "What this run did not measure"),
                                   ("threats", "Threats to validity")])
