"""Statistics over the tidy tables: per-cell summaries, PyTorch-against-TensorFlow comparisons, and
the tests the source papers used, replicated as published and beside them the sound alternative.

Framework-free: numpy, pandas, scipy, statsmodels and ruptures only. The unit of replication is
the trial (a fresh process) summarized by its time per step; iterations are never pooled as if
they were independent, except in the rows that replicate a paper which did so, and those say it.
Every parameter is the analysis plan's (the config's `statistics` block), fixed before measuring:
stats/plan.csv records it with its hash and whether the trials were measured under it.

summarize(trials, iterations, **plan) -> {"cells", "comparisons", "sensitivity", "quality",
"tests", "plan"}, from these modules:
 ├── trial_stats    one row per ok trial (time per step, median, spread, outliers, quality
 │                  class), and cells.csv: the time per step with its interval, throughput,
 │                  the median of single steps, warnings
 ├── comparisons    comparisons.csv: the paired ratio of time per step with its interval, test,
 │                  TOST and verdict at the level of its family, the rank checks beside; and
 │                  sensitivity.csv, the same without the trials of the plan's quality classes
 ├── trial_quality  quality.csv: the quality classes per framework and family, Fisher's test
 ├── steady_state   the changepoints each trial's class comes from
 ├── tests_table    tests.csv, one row per test: the tests behind comparisons.csv, the quality
 │                  test and the geometric mean of ratios per family, corrected within each
 ├── paper_tests    florencio2019 (Kolmogorov-Smirnov + paired Wilcoxon as published, and the
 │                  alternatives) and patel2023 (trend, plateau batch size, power TOST)
 └── estimators     what they all compute with: Cliff's delta, Hodges-Lehmann, exact
                    Mann-Whitney, Jonckheere-Terpstra, median interval, bootstraps, the verdict

docs/statistics.md describes every column and method.
"""

from __future__ import annotations

import json

import pandas as pd

from fwbench.analysis.comparisons import (
    DEFAULT_FAMILY,
    compare_pairs,
    family_name,
    sensitivity_table,
)
from fwbench.analysis.paper_tests import florencio2019_tests, patel2023_tests
from fwbench.analysis.tables import AXIS_DEFAULTS
from fwbench.analysis.tests_table import (
    comparison_tests,
    finish_tests,
    geometric_mean_tests,
    quality_tests,
)
from fwbench.analysis.trial_quality import FINDINGS, quality_table
from fwbench.analysis.trial_stats import cell_summaries, iteration_groups, trial_statistics
from fwbench.plan.analysis_plan import plan_hash

__all__ = ["summarize", "with_default_axes", "plan_record", "PLAN_COLUMNS"]

PLAN_COLUMNS = ["plan_hash", "plan", "trials", "trials_same_plan", "trials_other_plan",
                "trials_no_plan", "recorded_plans", "status"]


def with_default_axes(frame: pd.DataFrame) -> pd.DataFrame:
    """Tables written before an axis existed: give its rows the value of a cell without it, so
    grouping never drops a row on a missing key (such a trials table has ``optimizer`` from
    the trials' details, null outside the real-data experiments)."""
    return frame.assign(**{k: frame[k].fillna(v) if k in frame else v
                           for k, v in AXIS_DEFAULTS.items()})


def plan_record(trials: pd.DataFrame, plan: dict) -> pd.DataFrame:
    """stats/plan.csv, one row: the plan the statistics used (canonical JSON and its hash) and
    how many trials recorded it, another plan, or none (``analysis_plan``, from before trials
    recorded it). ``status``: "fixed before measuring" when every trial recorded this plan,
    "changed after the data were measured" when any recorded another, else "not recorded"."""
    recorded = (trials["analysis_plan"] if "analysis_plan" in trials
                else pd.Series(None, index=trials.index, dtype=object))
    digest = plan_hash(plan)
    known = recorded.dropna()
    same, other = int((known == digest).sum()), int((known != digest).sum())
    status = ("changed after the data were measured" if other else
              "fixed before measuring" if same and same == len(trials) else
              "not recorded by every trial" if same else "not recorded by the trials")
    return pd.DataFrame([{
        "plan_hash": digest, "plan": json.dumps(plan, sort_keys=True, separators=(",", ":")),
        "trials": len(trials), "trials_same_plan": same, "trials_other_plan": other,
        "trials_no_plan": int(recorded.isna().sum()),
        "recorded_plans": " ".join(sorted(set(known))), "status": status}],
        columns=PLAN_COLUMNS)


def summarize(trials: pd.DataFrame, iterations: pd.DataFrame, *, confidence: float = 0.95,
              rope: float = 0.05, min_trials_for_verdict: int = 7,
              family=DEFAULT_FAMILY, pairs: str = "all",
              sensitivity_leaves_out=tuple(FINDINGS[1:]), seed: int = 0,
              n_boot: int = 2000, quiet_busy_max: float | None = None,
              sizing: dict | None = None,
              control_margin: float | None = None) -> dict[str, pd.DataFrame]:
    """cells.csv, comparisons.csv, sensitivity.csv, quality.csv, tests.csv and plan.csv from the
    trials and iterations tables, under the analysis plan given by the keywords (the config's
    `statistics` block, whole: ``summarize(trials, iterations, seed=0, **config["statistics"])``).

    ``confidence``: 1 - alpha, the level a family's verdicts hold at together; ``rope``:
    equivalence margin on the ratio (±5%: 1/1.05..1.05); ``min_trials_for_verdict``: fewer pairs
    make a comparison exploratory; ``family``: the axes whose values make one family;
    ``pairs``: "all" or "adjacent"; ``sensitivity_leaves_out``: the quality findings the
    sensitivity analysis leaves out; ``seed`` and ``n_boot``: the bootstraps, the sign-flip
    draws and the random re-pairings; ``quiet_busy_max``, ``sizing`` and ``control_margin``:
    the shipping gate's bound, the plan's sizing rule and the A/A controls' margin, kept in the
    plan when the config sets them (fwbench.analysis.gate, fwbench.plan.sizing,
    fwbench.analysis.controls). Usage::

        frames = summarize(tables["trials"], tables["iterations"], seed=0, **plan)
        frames["comparisons"].to_csv("results/default/stats/comparisons.csv", index=False)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    if rope <= 0:
        raise ValueError(f"rope must be positive (e.g. 0.05 for ±5%), got {rope!r}")
    plan = {"confidence": confidence, "rope": rope,
            "min_trials_for_verdict": min_trials_for_verdict, "family": list(family),
            "pairs": pairs, "sensitivity_leaves_out": list(sensitivity_leaves_out),
            **{key: value for key, value in (("quiet_busy_max", quiet_busy_max),
                                             ("sizing", sizing),
                                             ("control_margin", control_margin))
               if value is not None}}
    trials = with_default_axes(trials)
    iterations = iteration_groups(with_default_axes(iterations))  # index once, shared below
    per_trial = trial_statistics(trials, iterations)
    cells = cell_summaries(trials, per_trial, iterations, confidence=confidence,
                           min_trials_for_verdict=min_trials_for_verdict, n_boot=n_boot,
                           seed=seed)
    rule = dict(confidence=confidence, rope=rope, min_trials_for_verdict=min_trials_for_verdict,
                family=tuple(family), seed=seed)
    comparisons = compare_pairs(per_trial, pairs=pairs, **rule)
    sensitivity = sensitivity_table(per_trial, comparisons, leave_out=sensitivity_leaves_out,
                                    pairs=pairs, **rule)
    quality = quality_table(per_trial, lambda row: family_name(row, family))
    rows = (comparison_tests(comparisons, confidence)
            + quality_tests(quality)
            + florencio2019_tests(trials, per_trial, iterations, seed=seed)
            + patel2023_tests(per_trial, confidence=confidence, rope=rope,
                              min_trials_for_verdict=min_trials_for_verdict)
            + geometric_mean_tests(per_trial, confidence=confidence, rope=rope, n_boot=n_boot,
                                   seed=seed, comparisons=comparisons, family=tuple(family)))
    return {"cells": cells, "comparisons": comparisons, "sensitivity": sensitivity,
            "quality": quality, "tests": finish_tests(rows, 1.0 - confidence),
            "plan": plan_record(trials, plan)}
