"""Summaries over trials that the report shows beside the comparisons: a median with its
distribution-free interval, and a median with its range, of a column or per group. Computed
here, so that the report only formats them.

Usage::

    median_interval(trials["final_accuracy"])        # {"n", "median", "low", "high", "level"}
    median_range(trials, "batch_size", "median_ns")  # one row per batch size: median, min, max
"""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims.wording import missing
from fwbench.analysis.estimators import median_ci


def median_interval(values) -> dict:
    """The median over trials with its distribution-free interval
    (fwbench.analysis.estimators.median_ci); missing values left out."""
    values = [float(v) for v in values if not missing(v)]
    ci = median_ci(values)
    return {"n": len(values), "median": ci.estimate, "low": ci.low, "high": ci.high,
            "level": ci.level}


def median_range(frame: pd.DataFrame, by, column: str, sort: bool = True) -> pd.DataFrame:
    """Per group of ``by``, the median of ``column`` and its range (columns median, min, max)."""
    return frame.groupby(by, sort=sort)[column].agg(["median", "min", "max"])


def spread(values: pd.Series) -> dict:
    """The median of ``values`` and their range: {"median", "min", "max"}."""
    return {"median": values.median(), "min": values.min(), "max": values.max()}
