"""The statistics of trials: one row per ok trial, and per cell the summary of its trials.

The unit of replication is the trial (a fresh process). Each ok trial gets its **time per step**
(``trial_step_ns``: the mean over its timed blocks of block time / block size, the quantity every
throughput comparison reads; the mean of its single steps where it timed no blocks), the median
of its single steps (its latency), their spread and outliers, and its quality class
(``steady_state_class``: flat, warmup, slowdown, switching or no_steady_state, from the
changepoints of its timed steps, fwbench.analysis.steady_state). ``cell_summaries`` turns a
cell's trials into its row of cells.csv: the geometric mean time per step with its interval and
the throughput from it (the numbers the comparisons' ratios are made of), the median of single
steps, and the warnings a reader needs before trusting them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sps

from fwbench.analysis.estimators import (
    hierarchical_bootstrap_mean_ci,
    median_ci,
    t_interval,
    tukey_outliers,
)
from fwbench.analysis.steady_state import classify
from fwbench.analysis.tables import AXES
from fwbench.analysis.trial_quality import class_counts, recorded_drift

__all__ = ["trial_statistics", "cell_summaries", "iteration_groups", "CELL_COLUMNS"]

# "Standard deviation at least 10% of the mean" marks a cell unstable (issue 7).
UNSTABLE_CV = 0.10

KEY = ["run", "cell_id"]

CELL_COLUMNS = [
    "run", "cell_id", "pair_id", *AXES,
    "n_trials", "n_ok", "statuses", "n_iterations",
    "step_ns", "step_ci_low_ns", "step_ci_high_ns", "step_source",
    "median_ns", "ci_low_ns", "ci_high_ns", "ci_level", "ci_method",
    "mean_ns", "mean_ci_low_ns", "mean_ci_high_ns", "sd_ns", "iqr_ns", "min_ns", "max_ns",
    "cv", "cv_within", "iteration_min_ns", "iteration_max_ns", "cold_start_median_ns",
    "samples_per_iteration", "throughput_sps", "throughput_ci_low_sps", "throughput_ci_high_sps",
    "throughput_source",
    "outliers", "outlier_trials", "quality_classes", "drift", "drift_trials",
    "warmup_unsteady_trials",
    "order_trend_p", "unstable", "warnings",
]


# --- trials ---------------------------------------------------------------------------------

def iteration_groups(iterations) -> dict:
    """{(run, cell_id, trial): iteration times in iteration order}; a dict passes through."""
    if isinstance(iterations, dict):
        return iterations
    if iterations is None or iterations.empty:
        return {}
    it = iterations.sort_values(["run", "cell_id", "trial", "iteration"], kind="stable")
    values = it["time_ns"].to_numpy(dtype=float)
    positions = it.groupby(["run", "cell_id", "trial"], sort=False).indices
    return {key: values[idx] for key, idx in positions.items()}


def _step(rec, t) -> tuple[float, str]:
    """A trial's time per step and where it comes from: the mean over its timed blocks of block
    time / block size (tables from before that column: the median block, the same with one
    block), else the mean of its single steps."""
    for column in ("block_mean_ns_per_iteration", "block_ns_per_iteration"):
        value = getattr(rec, column, None)
        if value is not None and pd.notna(value):
            return float(value), "blocks"
    if t is not None and t.size:
        return float(t.mean()), "single steps"
    return math.nan, "none"


def trial_statistics(trials: pd.DataFrame, iterations: pd.DataFrame) -> pd.DataFrame:
    """One row per ok trial: its time per step (``trial_step_ns``, the comparisons' quantity),
    the median, mean and standard deviation of its single steps, their number and Tukey
    outliers, its quality class (the trials table's ``steady_state_class``, else classified
    here from its timed steps) and drift: the trial's own ``drift_detected`` where the harness
    recorded it, else a class other than flat (its timed steps changed level)."""
    ok = trials[trials["status"] == "ok"].copy()
    groups = iteration_groups(iterations)
    recorded = recorded_drift(ok)
    classes = (ok["steady_state_class"] if "steady_state_class" in ok
               else pd.Series(None, index=ok.index, dtype=object))
    rows = []
    for rec, harness_drift, cls in zip(ok.itertuples(index=False), recorded, classes):
        t = groups.get((rec.run, rec.cell_id, rec.trial))
        step, source = _step(rec, t)
        if not isinstance(cls, str):
            cls = classify(t) if t is not None and t.size else None
        drifting = (cls not in (None, "flat")) if harness_drift is pd.NA else bool(harness_drift)
        if t is None or t.size == 0:
            median = float(rec.median_ns) if pd.notna(rec.median_ns) else math.nan
            rows.append((step, source, median, math.nan, math.nan, 0, 0, cls, drifting))
            continue
        rows.append((step, source, float(np.median(t)), float(t.mean()),
                     float(t.std(ddof=1)) if t.size > 1 else math.nan,
                     int(t.size), tukey_outliers(t), cls, drifting))
    stats_cols = ["trial_step_ns", "trial_step_source", "trial_median_ns", "trial_mean_ns",
                  "trial_sd_ns", "trial_n", "trial_outliers", "steady_state_class",
                  "trial_drift"]
    extra = pd.DataFrame(rows, columns=stats_cols, index=ok.index)
    out = pd.concat([ok.drop(columns=["steady_state_class"], errors="ignore"), extra], axis=1)
    out = out[np.isfinite(out["trial_step_ns"].astype(float))]
    return out.reset_index(drop=True)


# --- cells ----------------------------------------------------------------------------------

def _samples_per_iteration(row) -> float:
    if "samples_per_iteration" in row and pd.notna(row["samples_per_iteration"]):
        return float(row["samples_per_iteration"])
    if row["experiment"] == "throughput":
        return float(row["batch_size"])
    return math.nan


def _statuses(group: pd.DataFrame) -> str:
    counts = group["status"].value_counts()
    return ", ".join(f"{k}={int(v)}" for k, v in sorted(counts.items()))


def cell_summaries(trials: pd.DataFrame, per_trial: pd.DataFrame, iterations: pd.DataFrame, *,
                   confidence: float = 0.95, min_trials_for_verdict: int = 7,
                   n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """cells.csv: one row per cell, including cells with no ok trial (their statistics NaN)."""
    if trials.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    groups = iteration_groups(iterations)
    by_cell = {k: g for k, g in per_trial.groupby(KEY, sort=False)}
    rng = np.random.default_rng(seed)
    rows = []
    for key, group in trials.groupby(KEY, sort=True):
        first = group.iloc[0]
        row = {c: first[c] for c in ["run", "cell_id", "pair_id", *AXES]}
        row.update(n_trials=len(group), n_ok=int((group["status"] == "ok").sum()),
                   statuses=_statuses(group))
        pt = by_cell.get(key)
        row.update(_cell_stats(pt, groups, first, confidence, min_trials_for_verdict,
                               n_boot, rng, group))
        rows.append(row)
    cells = pd.DataFrame(rows, columns=CELL_COLUMNS)
    counts = ["n_iterations", "outliers", "outlier_trials", "drift_trials",
              "warmup_unsteady_trials"]
    cells[counts] = cells[counts].astype("Int64")
    return cells


def _steps(pt, spi: float, confidence: float) -> dict:
    """The cell's time per step: the geometric mean of its trials' (``trial_step_ns``), with
    the t interval of their logs, exponentiated, at ``confidence``: the numbers a comparison's
    ratio is made of (with every trial paired, PyTorch's over TensorFlow's is its ratio). The
    throughput maps it through samples / time."""
    steps = pt["trial_step_ns"].to_numpy(dtype=float)
    ci = t_interval(np.log(steps), confidence)
    step, low, high = (math.exp(v) if np.isfinite(v) else math.nan
                       for v in (ci.estimate, ci.low, ci.high))
    sources = set(pt["trial_step_source"])
    source = "blocks" if sources == {"blocks"} else (
        "single steps" if sources == {"single steps"} else "blocks and single steps")
    return {"step_ns": step, "step_ci_low_ns": low, "step_ci_high_ns": high,
            "step_source": source, "throughput_sps": spi / step * 1e9,
            "throughput_ci_low_sps": spi / high * 1e9, "throughput_ci_high_sps": spi / low * 1e9,
            "throughput_source": source}


def _cell_stats(pt, groups, first, confidence, min_trials, n_boot, rng, group) -> dict:
    warn = []
    failed = group[group["status"] != "ok"]
    if len(failed):
        warn.append(f"{len(failed)} of {len(group)} trials not ok ({_statuses(failed)})")
    spi = _samples_per_iteration(first)
    if pt is None or pt.empty:
        warn.append("no ok trial: nothing measured")
        return {"n_iterations": 0, "samples_per_iteration": spi, "drift": False,
                "unstable": False, "warnings": "; ".join(warn)}
    pt = pt.sort_values("run_order")
    stats = _trial_spread(pt, groups, spi, confidence, n_boot, rng)
    warn += _cell_warnings(stats, len(pt), min_trials, confidence, first["experiment"])
    return {**stats, "warnings": "; ".join(warn)}


def _trial_spread(pt, groups, spi, confidence, n_boot, rng) -> dict:
    """A cell's numbers from its ok trials in run order: the time per step with its interval and
    the throughput from it, the median of trial medians (single steps) with its interval, the
    bootstrapped mean, spread between and within trials, outliers, quality classes, unsteady
    warm-ups and any trend of the time per step with run order."""
    med = pt["trial_median_ns"].to_numpy(dtype=float)
    n = med.size
    ci = median_ci(med, confidence)
    samples = [groups.get((r, c, t), np.array([]))
               for r, c, t in zip(pt["run"], pt["cell_id"], pt["trial"])]
    mean_ci = hierarchical_bootstrap_mean_ci(samples, confidence=confidence, n_boot=n_boot,
                                             rng=rng)
    iters = np.concatenate(samples) if any(len(s) for s in samples) else np.array([])
    mean_med = med.mean()
    sd = float(med.std(ddof=1)) if n > 1 else math.nan
    cv = sd / mean_med if n > 1 and mean_med > 0 else math.nan
    within = (pt["trial_sd_ns"] / pt["trial_mean_ns"]).to_numpy(dtype=float)
    cv_within = float(np.nanmedian(within)) if np.isfinite(within).any() else math.nan
    drift_trials = int(pt["trial_drift"].sum())
    unsteady = int((pt["warmup_steady"] == False).sum())  # noqa: E712 (None is not unsteady)
    counts = class_counts(pt["steady_state_class"])
    steps = pt["trial_step_ns"].to_numpy(dtype=float)
    order_p = math.nan
    if n >= 5 and np.ptp(steps) > 0:
        order_p = float(sps.kendalltau(pt["run_order"].to_numpy(), steps).pvalue)
    unstable = bool((np.isfinite(cv) and cv >= UNSTABLE_CV)
                    or (np.isfinite(cv_within) and cv_within >= UNSTABLE_CV))
    cold = pd.to_numeric(pt["cold_start_ns"], errors="coerce").to_numpy(dtype=float)
    q1, q3 = np.percentile(med, [25, 75])
    return {
        "n_iterations": int(pt["trial_n"].sum()),
        "median_ns": ci.estimate, "ci_low_ns": ci.low, "ci_high_ns": ci.high,
        "ci_level": ci.level, "ci_method": ci.method,
        "mean_ns": mean_ci.estimate if np.isfinite(mean_ci.estimate) else float(mean_med),
        "mean_ci_low_ns": mean_ci.low, "mean_ci_high_ns": mean_ci.high,
        "sd_ns": sd, "iqr_ns": float(q3 - q1), "min_ns": float(med.min()),
        "max_ns": float(med.max()), "cv": cv, "cv_within": cv_within,
        "iteration_min_ns": float(iters.min()) if iters.size else math.nan,
        "iteration_max_ns": float(iters.max()) if iters.size else math.nan,
        "cold_start_median_ns": float(np.nanmedian(cold)) if np.isfinite(cold).any() else math.nan,
        "samples_per_iteration": spi,
        **_steps(pt, spi, confidence),
        "outliers": int(pt["trial_outliers"].sum()),
        "outlier_trials": tukey_outliers(med),
        "quality_classes": ", ".join(f"{c}={k}" for c, k in counts.items() if k),
        "drift": bool(drift_trials > 0), "drift_trials": drift_trials,
        "warmup_unsteady_trials": unsteady, "order_trend_p": order_p,
        "unstable": unstable,
    }


def _cell_warnings(stats: dict, n: int, min_trials: int, confidence: float,
                   experiment) -> list[str]:
    """What a reader must know before trusting a cell's numbers (``_trial_spread``'s) from its
    ``n`` ok trials, in the order cells.csv lists them."""
    warn = []
    cv, cv_within = stats["cv"], stats["cv_within"]
    drift_trials, unsteady = stats["drift_trials"], stats["warmup_unsteady_trials"]
    order_p, level = stats["order_trend_p"], stats["ci_level"]
    if n < min_trials:
        warn.append(f"too few trials for a verdict ({n} ok < {min_trials})")
    if np.isfinite(cv) and cv >= UNSTABLE_CV:
        warn.append(f"unstable between trials: sd is {cv:.0%} of the mean")
    if np.isfinite(cv_within) and cv_within >= UNSTABLE_CV:
        warn.append(f"unstable within trials: median sd is {cv_within:.0%} of the mean")
    if drift_trials:
        warn.append(f"timed steps not flat in {drift_trials} of {n} trials "
                    f"({stats['quality_classes']})")
    if unsteady:
        warn.append(f"warm-up did not reach a steady state in {unsteady} of {n} trials")
    if np.isfinite(order_p) and order_p < 0.05:
        warn.append(f"time per step trends with run order (Kendall p={order_p:.3g})")
    if level < confidence - 1e-9:
        warn.append(f"interval of the median only reaches {level:.1%} with {n} trials")
    if not np.isfinite(stats["samples_per_iteration"]):
        warn.append(f"no throughput: samples per iteration unknown for experiment "
                    f"{experiment!r} (no samples_per_iteration column)")
    return warn
