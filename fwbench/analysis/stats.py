"""Statistics over the tidy tables: per-cell summaries, PyTorch-against-TensorFlow comparisons, and
the tests the source papers used, replicated as published and beside them the sound alternative.

Framework-free: numpy, pandas, scipy and statsmodels only. The unit of replication is the trial (a
fresh process) summarized by its median iteration time; iterations are never pooled as if they were
independent, except in the rows that replicate a paper which did so, and those say it.

summarize(trials, iterations) -> {"cells", "comparisons", "tests"}, from these modules:
 ├── trial_stats    one row per ok trial (median, spread, outliers, drift), and cells.csv: the
 │                  median of trial medians with its interval, throughput, warnings
 ├── comparisons    comparisons.csv: ratio of medians with its interval, Mann-Whitney U, Cliff's
 │                  delta, verdict, at the Bonferroni level of its family
 ├── tests_table    tests.csv, one row per test: the tests behind comparisons.csv and the
 │                  geometric mean of ratios per family, corrected within each family
 ├── paper_tests    florencio2019 (Kolmogorov-Smirnov + paired Wilcoxon as published, and the
 │                  alternatives) and patel2023 (trend, plateau batch size, power TOST)
 └── estimators     what they all compute with: Cliff's delta, Hodges-Lehmann, exact
                    Mann-Whitney, Jonckheere-Terpstra, median interval, bootstraps, the verdict

docs/statistics.md describes every column and method.
"""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.comparisons import compare_pairs
from fwbench.analysis.paper_tests import florencio2019_tests, patel2023_tests
from fwbench.analysis.tables import AXIS_DEFAULTS
from fwbench.analysis.tests_table import comparison_tests, finish_tests, geometric_mean_tests
from fwbench.analysis.trial_stats import cell_summaries, iteration_groups, trial_statistics

__all__ = ["summarize", "with_default_axes"]


def with_default_axes(frame: pd.DataFrame) -> pd.DataFrame:
    """Tables written before an axis existed: give its rows the value of a cell without it, so
    grouping never drops a row on a missing key (such a trials table has ``optimizer`` from
    the trials' details, null outside the real-data experiments)."""
    return frame.assign(**{k: frame[k].fillna(v) if k in frame else v
                           for k, v in AXIS_DEFAULTS.items()})


def summarize(trials: pd.DataFrame, iterations: pd.DataFrame, *, confidence: float = 0.95,
              rope: float = 0.05, min_trials_for_verdict: int = 7, seed: int = 0,
              n_boot: int = 2000) -> dict[str, pd.DataFrame]:
    """cells.csv, comparisons.csv and tests.csv from the trials and iterations tables.

    ``confidence``: level of every interval (alpha = 1 - confidence for every test);
    ``rope``: half-width of the region of practical equivalence on the ratio (±5%: 1/1.05..1.05);
    ``min_trials_for_verdict``: fewer ok trials on either side marks a comparison exploratory;
    ``seed`` and ``n_boot``: the bootstrap and the random re-pairings. Usage::

        frames = summarize(tables["trials"], tables["iterations"], seed=0)
        frames["comparisons"].to_csv("results/default/stats/comparisons.csv", index=False)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    if rope <= 0:
        raise ValueError(f"rope must be positive (e.g. 0.05 for ±5%), got {rope!r}")
    trials = with_default_axes(trials)
    iterations = iteration_groups(with_default_axes(iterations))  # index once, shared below
    per_trial = trial_statistics(trials, iterations)
    cells = cell_summaries(trials, per_trial, iterations, confidence=confidence,
                           min_trials_for_verdict=min_trials_for_verdict, n_boot=n_boot,
                           seed=seed)
    comparisons = compare_pairs(per_trial, confidence=confidence, rope=rope,
                                min_trials_for_verdict=min_trials_for_verdict)
    rows = (comparison_tests(comparisons, confidence)
            + florencio2019_tests(trials, per_trial, iterations, seed=seed)
            + patel2023_tests(per_trial, confidence=confidence, rope=rope,
                              min_trials_for_verdict=min_trials_for_verdict)
            + geometric_mean_tests(per_trial, confidence=confidence, rope=rope, n_boot=n_boot,
                                   seed=seed, comparisons=comparisons))
    return {"cells": cells, "comparisons": comparisons,
            "tests": finish_tests(rows, 1.0 - confidence)}
