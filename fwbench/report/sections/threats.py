"""Section 5, Threats to validity: what limits this run's conclusions."""

from __future__ import annotations

from fwbench.analysis.claims import MIN_TRIALS_FOR_VERDICT
from fwbench.report.inputs import Inputs


def context(data: Inputs, facts: dict) -> list[str]:
    out = []
    per_cell = data.trials.groupby("cell_id").size() if "cell_id" in data.trials else []
    if len(per_cell) and int(per_cell.min()) < MIN_TRIALS_FOR_VERDICT:
        out.append(f"Few trials: some cells have {int(per_cell.min())} trials; an interval of "
                   f"a median from fewer than {MIN_TRIALS_FOR_VERDICT} trials is wide, and "
                   "verdicts drawn from it are fragile.")
    if facts["devices"] == ["cpu"]:
        out.append("Only the CPU was measured: every GPU claim is left as not measured, and "
                   "CPU numbers from a shared virtual machine vary with its neighbours.")
    if "defaults" not in facts["profiles"]:
        out.append("Only the matched settings profile was run; the papers measured each "
                   "framework as it comes, so their claims are judged on matched settings here.")
    out.append("Synthetic in-memory data: input pipelines, which the papers' epoch times "
               "include, are not measured by the throughput experiment.")
    out.append("Model equivalence: both frameworks build the same architecture from one spec; "
               "kernel choices (convolution algorithms, layouts) still differ, by design of each "
               "framework, and are part of what is compared.")
    out.append("Published statistics: florencio2019 paired runs that were not paired and "
               "reports p = 3.896559845095909e-18, the floor the normal approximation of the "
               "Wilcoxon signed-rank test reaches at n = 100, for five hypotheses; we compare "
               "independent trials with Mann-Whitney U and intervals instead.")
    return out
