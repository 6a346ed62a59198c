"""tests.csv: every hypothesis test the statistics run, one row each, corrected per family.

The rows come from fwbench's own tests (here: the paired t test each comparison's interval
inverts and its TOST, the sign-flip check, the rank checks, the quality classes' Fisher test, the
geometric mean of a family's ratios) and from the source papers' tests replicated beside the
sound alternative (``paper_tests``).
``finish_tests`` applies each family's correction (Holm or Bonferroni) and the decisions that
follow from it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fwbench.analysis.comparisons import DEFAULT_FAMILY, arm_arrays, family_name
from fwbench.analysis.estimators import geometric_mean_ratio, holm, verdict
from fwbench.analysis.steady_state import CLASSES
from fwbench.plan.frameworks import per_side

__all__ = ["comparison_tests", "quality_tests", "geometric_mean_tests", "finish_tests",
           "result_row", "TEST_COLUMNS"]

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
    """Per comparison: the paired t test its interval inverts and the TOST its equivalence
    reads (Bonferroni within the family: they decide exactly as the verdict does), the exact
    sign-flip test of the same log ratios (Bonferroni: the check), and the unpaired rank tests
    of every ok trial, Brunner-Munzel and Mann-Whitney (Holm: robustness)."""
    rows = []
    alpha = 1.0 - confidence
    for r in comparisons.itertuples(index=False):
        base = dict(source="fwbench", scope=r.pair_id, phase=r.phase, metric="time per step",
                    exploratory=r.exploratory)
        pairs = f"{r.n_pairs_used} pairs"
        rows.append(result_row(
            **base, family=f"comparison/{r.family}",
            hypothesis="the mean PyTorch/TensorFlow log ratio of time per step is 0",
            test="paired t, two-sided", variant="per-pair log ratios (the primary)", n=pairs,
            statistic=r.paired_t, estimate=r.ratio, ci_low=r.ratio_ci_low,
            ci_high=r.ratio_ci_high, p=r.paired_p, correction="bonferroni",
            decision="reject H0" if r.p_adjusted <= alpha else "do not reject H0",
            note=f"estimate: exp(mean log ratio); interval: the verdict's (1 - alpha/m); "
                 f"verdict {r.verdict}"))
        rows.append(result_row(
            **base, family=f"equivalence/{r.family}",
            hypothesis=f"the ratio lies outside {r.rope_low:.4g}..{r.rope_high:.4g}",
            test="TOST (two one-sided paired t tests)", variant="per-pair log ratios", n=pairs,
            estimate=r.ratio, ci_low=r.equivalence_ci_low, ci_high=r.equivalence_ci_high,
            p=r.tost_p, correction="bonferroni",
            note="interval: 1 - 2 alpha/m (Schuirmann), the one the verdict's equivalence reads"))
        rows.append(result_row(
            **base, family=f"comparison-signflip/{r.family}",
            hypothesis="the per-pair log ratios are symmetric around 0",
            test="sign-flip permutation, two-sided", variant=r.signflip_method, n=pairs,
            p=r.signflip_p, correction="bonferroni",
            note=f"the distribution-free check of the paired t; its smallest p is 2/2^n = "
                 f"{2.0 ** (1 - r.n_pairs_used):.2g}" if r.n_pairs_used else "no pairs"))
        trials = "+".join(str(getattr(r, n)) for n in per_side("n_{}"))
        rows.append(result_row(
            **base, family=f"comparison-ranks/{r.family}",
            hypothesis="P(PyTorch slower) = P(TensorFlow slower) for a trial of each",
            test="Brunner-Munzel, two-sided", variant="unpaired, every ok trial (robustness)",
            n=trials, p=r.brunner_munzel_p, correction="holm",
            note="allows the two frameworks' spreads between trials to differ"))
        rows.append(result_row(
            **base, family=f"comparison-ranks/{r.family}",
            hypothesis="PyTorch and TensorFlow trials come from the same distribution",
            test="Mann-Whitney U, two-sided", variant=f"unpaired, every ok trial, "
                                                      f"{r.mannwhitney_method}",
            n=trials, statistic=r.mannwhitney_u, estimate=r.ratio_hl, ci_low=r.ratio_hl_ci_low,
            ci_high=r.ratio_hl_ci_high, p=r.mannwhitney_p, correction="holm",
            note="estimate: Hodges-Lehmann ratio with its interval at 1 - alpha/m; assumes "
                 "equal shapes, which unequal spreads break"))
    return rows


def quality_tests(quality: pd.DataFrame) -> list[dict]:
    """Per family: Fisher's exact test that the quality classes of the trials occur at the same
    rates in both frameworks (``trial_quality.quality_table``); Holm across families."""
    rows = []
    for (_run, family), group in quality.groupby(["run", "family"], sort=True):
        counts = "; ".join(
            f"{r.framework}: " + ", ".join(f"{c}={getattr(r, f'n_{c}')}" for c in CLASSES)
            for r in group.itertuples())
        rows.append(result_row(
            family="quality", source="fwbench", scope=family,
            hypothesis="the quality classes of trials occur at the same rates in both "
                       "frameworks",
            test="Fisher's exact test", variant="frameworks x classes", metric="class",
            n=str(int(group["n_trials"].sum())), p=group["fisher_p"].iloc[0],
            correction="holm", note=counts))
    return rows


def geometric_mean_tests(per_trial: pd.DataFrame, *, confidence: float = 0.95,
                         rope: float = 0.05, n_boot: int = 2000, seed: int = 0,
                         comparisons: pd.DataFrame | None = None,
                         family=DEFAULT_FAMILY) -> list[dict]:
    """One row per family: the geometric mean over its comparisons of the ratio of the cells'
    time per step, every ok trial.

    Exploratory when any of its comparisons is (``comparisons``: compare_pairs' table), since
    a mean of hints is a hint."""
    by_family: dict = {}
    for _run, _pair_id, axes, pt, tf in arm_arrays(per_trial, ["trial_step_ns"]):
        by_family.setdefault(family_name(axes, family), []).append(
            (pt["trial_step_ns"].astype(float), tf["trial_step_ns"].astype(float)))
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
            hypothesis="across these cells, PyTorch and TensorFlow take the same time per step",
            test="geometric mean of ratios", variant=gm.method, scope=fam,
            phase="", metric="time per step", n=str(len(pairs)), estimate=gm.estimate,
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
