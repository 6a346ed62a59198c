"""Section 5, Threats to validity: what limits this run's conclusions."""

from __future__ import annotations

from fwbench.analysis.claims import min_trials, wording
from fwbench.report.inputs import Inputs

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
        out.append("Only the CPU was measured: every GPU claim is left as not measured, and "
                   "CPU numbers from a shared virtual machine vary with its neighbours.")
    if "defaults" not in facts["profiles"]:
        out.append("Only the matched settings profile was run; the papers measured each "
                   "framework as it comes, so no claim can be confirmed or contradicted here: "
                   "a claim judged on matched settings was measured in another setting.")
    out.append("Synthetic in-memory data: input pipelines, which the papers' epoch times "
               "include, are not measured by the throughput experiment.")
    out.append("Model equivalence: both frameworks build the same architecture from one spec; "
               "kernel choices (convolution algorithms, layouts) still differ, by design of each "
               "framework, and are part of what is compared.")
    out.append("Published statistics: florencio2019 paired runs that were not paired and "
               f"reports p = {wording.fmt_p(FLORENCIO_P)}, the floor the normal approximation "
               "of the Wilcoxon signed-rank test reaches at n = 100, for five hypotheses; we "
               "use the pairing our trials do have (trial k of both frameworks ran back to "
               "back) and intervals instead.")
    return out
