"""tests.csv: every hypothesis test the statistics run, one row each, corrected per family.

The rows come from fwbench's own tests (here: the Mann-Whitney test each comparison's interval
inverts, the paired test over interleaved blocks, the geometric mean of a family's ratios) and
from the source papers' tests replicated beside the sound alternative (``paper_tests``).
``finish_tests`` applies each family's correction (Holm or Bonferroni) and the decisions that
follow from it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fwbench.analysis.comparisons import VERDICT_COLUMNS, arm_arrays, family_name, usable_arm
from fwbench.analysis.estimators import geometric_mean_ratio, holm, verdict

__all__ = ["comparison_tests", "geometric_mean_tests", "finish_tests", "result_row",
           "TEST_COLUMNS"]

TEST_COLUMNS = [
    "family", "source", "hypothesis", "test", "variant", "scope", "phase", "metric", "n",
    "statistic", "estimate", "ci_low", "ci_high", "p", "p_corrected", "correction", "decision",
    "exploratory", "note",
]


def result_row(**kw) -> dict:
    """One row of tests.csv: every column present, no correction and no note unless given."""
    row = dict.fromkeys(TEST_COLUMNS)
    row.update(correction="none", note="")
    row.update(kw)
    return row


def comparison_tests(comparisons: pd.DataFrame, confidence: float = 0.95) -> list[dict]:
    """The Mann-Whitney test over trial medians behind each comparison (Bonferroni within the
    family: the test its interval inverts, so it rejects exactly when the verdict says faster),
    and the paired Wilcoxon over interleaved blocks (trial k of one framework with trial k of the
    other)."""
    rows = []
    alpha = 1.0 - confidence
    for r in comparisons.itertuples(index=False):
        rows.append(result_row(
            family=f"comparison/{r.family}", source="fwbench",
            hypothesis="PyTorch and TensorFlow trial medians come from the same distribution",
            test="Mann-Whitney U, two-sided", variant=f"trial medians (unit: trial), "
                                                      f"{r.mannwhitney_method}",
            scope=r.pair_id, phase=r.phase, metric="time", n=f"{r.n_pytorch}+{r.n_tensorflow}",
            statistic=r.mannwhitney_u, estimate=r.ratio, ci_low=r.ratio_ci_low,
            ci_high=r.ratio_ci_high, p=r.mannwhitney_p, correction="bonferroni",
            decision="reject H0" if r.p_adjusted <= alpha else "do not reject H0",
            exploratory=r.exploratory,
            note=f"estimate: ratio of medians; interval: the verdict's (Bonferroni level); "
                 f"verdict {r.verdict}"))
        rows.append(result_row(
            family=f"comparison-blocks/{r.family}", source="fwbench",
            hypothesis="within interleaved blocks the PyTorch/TensorFlow log ratio is centred on 0",
            test="Wilcoxon signed-rank, two-sided", variant="paired over blocks (trial k with k)",
            scope=r.pair_id, phase=r.phase, metric="time", n=str(r.n_blocks),
            p=r.blocks_wilcoxon_p, correction="holm", exploratory=r.exploratory,
            note=_blocks_note(r.n_pairs, r.n_pairs_adjacent)))
    return rows


def _blocks_note(pairs: int, adjacent_pairs) -> str:
    if pd.isna(adjacent_pairs):
        return (f"pairs trial k of both frameworks, planned back to back; this run did not "
                f"record whether they were, so all {pairs} pairs are used")
    return (f"pairs trial k of both frameworks where they ran back to back: {adjacent_pairs} "
            f"of {pairs} pairs did, only those are used")


def geometric_mean_tests(per_trial: pd.DataFrame, *, confidence: float = 0.95,
                         rope: float = 0.05, n_boot: int = 2000, seed: int = 0,
                         comparisons: pd.DataFrame | None = None) -> list[dict]:
    """One row per family (experiment×device×phase): geometric mean of the ratios of medians.

    Exploratory when any of its comparisons is (``comparisons``: compare_pairs' table), since
    a mean of hints is a hint."""
    by_family: dict = {}
    for _run, _pair_id, axes, pt, tf in arm_arrays(per_trial, VERDICT_COLUMNS):
        (pt, _), (tf, _) = usable_arm(pt), usable_arm(tf)  # as compare_pairs does
        by_family.setdefault(family_name(axes), []).append(
            (pt["trial_median_ns"].astype(float), tf["trial_median_ns"].astype(float)))
    hints = (comparisons[comparisons["exploratory"].astype(bool)]
             if comparisons is not None and len(comparisons) else pd.DataFrame(columns=["family"]))
    rows = []
    for fam, pairs in sorted(by_family.items()):
        gm = geometric_mean_ratio(pairs, confidence=confidence, n_boot=n_boot, seed=seed)
        decision, note = verdict(gm.low, gm.high, rope=rope)
        n_hints = int((hints["family"] == fam).sum())
        if n_hints:
            note = (f"exploratory: {n_hints} of its {len(pairs)} comparisons are exploratory; "
                    + note)
        rows.append(result_row(exploratory=bool(n_hints),
            family=f"geomean/{fam}", source="fwbench",
            hypothesis="across these cells, PyTorch and TensorFlow take the same time",
            test="geometric mean of ratios", variant=gm.method, scope=fam,
            phase=fam.split("/")[-1], metric="time", n=str(len(pairs)), estimate=gm.estimate,
            ci_low=gm.low, ci_high=gm.high, decision=decision,
            note=f"{note}; >1 means PyTorch slower; the interval covers trial noise for these "
                 f"{len(pairs)} cells, not other configurations"))
    return rows


def finish_tests(rows: list[dict], alpha: float) -> pd.DataFrame:
    """tests.csv from its rows: p corrected within each family as the row asks (Holm or
    Bonferroni), and every row without a decision decided at ``alpha`` (TOST rows: equivalent or
    not shown equivalent)."""
    tests = pd.DataFrame(rows, columns=TEST_COLUMNS)
    if tests.empty:
        return tests
    tests["p"] = tests["p"].astype(float)
    tests["p_corrected"] = tests["p"]
    holm_rows = tests["correction"] == "holm"
    for _, idx in tests[holm_rows].groupby("family").groups.items():
        tests.loc[idx, "p_corrected"] = holm(tests.loc[idx, "p"])
    bonferroni_rows = tests["correction"] == "bonferroni"
    for _, idx in tests[bonferroni_rows].groupby("family").groups.items():
        tests.loc[idx, "p_corrected"] = np.minimum(1.0, tests.loc[idx, "p"] * len(idx))
    undecided = tests["decision"].isna() & tests["p_corrected"].notna()
    tests.loc[undecided, "decision"] = np.where(
        tests.loc[undecided, "p_corrected"] < alpha, "reject H0", "do not reject H0")
    power = undecided & tests["test"].str.startswith("TOST")
    tests.loc[power, "decision"] = np.where(
        tests.loc[power, "p_corrected"] < alpha, "equivalent", "not shown equivalent")
    tests["decision"] = tests["decision"].fillna("")
    tests["exploratory"] = tests["exploratory"].fillna(False).astype(bool)
    return tests
