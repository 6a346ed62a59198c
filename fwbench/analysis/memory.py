"""Peak memory: per cell with its spread, and PyTorch against TensorFlow with the statistics of
time (``fwbench.analysis.comparisons.compare_samples``). Framework-free; reads the trials table
only.

Two peaks are recorded per trial: the process's peak resident set (``peak_rss_bytes``, every
device; it includes the framework's own libraries, hundreds of MB before any model) and the
framework allocator's peak on a GPU (``device_peak_bytes``; empty on the CPU). A cell whose
trials ran out of memory keeps its row, saying so.

memory_summaries(trials)  -> stats/memory.csv: one row per cell and measured peak
memory_comparisons(trials) -> stats/memory_comparisons.csv: one row per matched pair and peak

A peak whose trials span less than a tenth of the equivalence margin in both frameworks (the
process's peak RSS on the CPU, to a few pages) is known far better than any test could tell: its
comparison gets the ratio of medians and no test (``varies`` false, verdict ``not_tested``),
never a p-value from ranks of near-identical values with an interval of near-zero width.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fwbench.analysis.comparisons import compare_samples, family_level
from fwbench.analysis.estimators import median_ci
from fwbench.analysis.tables import AXES, AXIS_DEFAULTS
from fwbench.plan.frameworks import COMPARED, per_side, sides

# Each peak the trials record, with what it measures.
METRICS = {
    "device_peak_bytes": "device peak (framework allocator)",
    "peak_rss_bytes": "process peak RSS",
}
MEMORY_COLUMNS = [
    "run", "cell_id", "pair_id", *AXES, "metric", "n_trials", "n_ok", "n_values", "n_oom",
    "median_bytes", "ci_low_bytes", "ci_high_bytes", "ci_level", "min_bytes", "max_bytes",
    "iqr_bytes", "note",
]
MEMORY_COMPARISON_COLUMNS = [
    "run", "pair_id", *[a for a in AXES if a != "framework"], "metric", "family",
    *per_side("n_{}"), *per_side("median_{}_bytes"), "ratio",
    "ratio_ci_low", "ratio_ci_high", "ratio_ci_level", "ratio_ci_family_level", "ratio_hl",
    "family_size", "mannwhitney_p", "mannwhitney_method", "p_adjusted", "rope_low", "rope_high",
    "varies", "verdict", "exploratory", "exploratory_reason", "verdict_note",
]
KEY = ["run", "cell_id"]
# A peak whose trials of one framework span less than this share of the equivalence margin
# (relative to their median) is constant for the comparison.
CONSTANT_SHARE_OF_MARGIN = 0.1


def _measured(trials: pd.DataFrame) -> list[str]:
    """The peaks some trial of the run recorded, in METRICS order."""
    return [m for m in METRICS if m in trials and pd.to_numeric(trials[m], errors="coerce")
            .notna().any()]


def _values(group: pd.DataFrame, metric: str) -> np.ndarray:
    ok = group[group["status"] == "ok"]
    values = pd.to_numeric(ok[metric], errors="coerce").to_numpy(dtype=float)
    return values[np.isfinite(values) & (values > 0)]


def _with_axes(trials: pd.DataFrame) -> pd.DataFrame:
    return trials.assign(**{k: trials[k].fillna(v) if k in trials else v
                            for k, v in AXIS_DEFAULTS.items()})


def memory_summaries(trials: pd.DataFrame, *, confidence: float = 0.95) -> pd.DataFrame:
    """stats/memory.csv: per cell and measured peak, the median over ok trials with its
    distribution-free interval (fwbench.analysis.estimators.median_ci), the range and the
    interquartile range; cells whose trials ran out of memory say so in ``note`` (their values
    empty when none ended ok). Usage::

        memory_summaries(tables["trials"]).query("metric == 'peak_rss_bytes'")
    """
    metrics = _measured(trials)
    if trials.empty or not metrics:
        return pd.DataFrame(columns=MEMORY_COLUMNS)
    trials = _with_axes(trials)
    rows = []
    for _, group in trials.groupby(KEY, sort=True):
        first = group.iloc[0]
        n_oom = int((group["status"] == "oom").sum())
        for metric in metrics:
            values = _values(group, metric)
            if not values.size and not n_oom:
                continue  # this peak is not recorded for this cell (a CPU cell's device peak)
            row = {c: first[c] for c in ["run", "cell_id", "pair_id", *AXES]}
            row.update(metric=metric, n_trials=len(group),
                       n_ok=int((group["status"] == "ok").sum()), n_values=int(values.size),
                       n_oom=n_oom, note=_note(group, values, n_oom))
            if values.size:
                ci = median_ci(values, confidence)
                q1, q3 = np.percentile(values, [25, 75])
                row.update(median_bytes=ci.estimate, ci_low_bytes=ci.low, ci_high_bytes=ci.high,
                           ci_level=ci.level, min_bytes=float(values.min()),
                           max_bytes=float(values.max()), iqr_bytes=float(q3 - q1))
            rows.append(row)
    return pd.DataFrame(rows, columns=MEMORY_COLUMNS)


def _note(group: pd.DataFrame, values: np.ndarray, n_oom: int) -> str:
    notes = []
    if n_oom:
        notes.append(f"out of memory in {n_oom} of {len(group)} trials"
                     + ("" if values.size else ": no peak measured"))
    if 0 < values.size < 6:
        notes.append(f"{values.size} values: the interval is their range")
    return "; ".join(notes)


def _constant(values: np.ndarray, rope: float) -> bool:
    return bool(np.ptp(values) < CONSTANT_SHARE_OF_MARGIN * rope * np.median(values))


def memory_comparisons(trials: pd.DataFrame, *, confidence: float = 0.95, rope: float = 0.05,
                       min_trials_for_verdict: int = 7, family=("experiment",)) -> pd.DataFrame:
    """stats/memory_comparisons.csv: per matched pair and peak, PyTorch's median peak over
    TensorFlow's (> 1: PyTorch uses more) decided as an unpaired comparison: the Hodges-Lehmann
    interval of the log peaks at the Bonferroni level of its family (the plan's ``family``
    axes and the peak) over the peaks that vary, the exact Mann-Whitney p, the region of
    practical equivalence ±``rope``. Verdicts: ``pytorch_less``, ``tensorflow_less``,
    ``equivalent``, ``inconclusive``, and ``not_tested`` for a peak constant in both
    frameworks (spread below a tenth of ``rope``); exploratory with fewer than
    ``min_trials_for_verdict`` values on a side."""
    metrics = _measured(trials)
    if trials.empty or not metrics:
        return pd.DataFrame(columns=MEMORY_COMPARISON_COLUMNS)
    trials = _with_axes(trials)
    arms = []
    for (run, pair_id), group in trials.groupby(["run", "pair_id"], sort=True):
        for metric in metrics:
            a, b = (_values(group[group["framework"] == f], metric)
                    for f in COMPARED)
            if a.size and b.size:
                first = group.iloc[0]
                name = "/".join([*(str(first[k]) for k in family), metric])
                arms.append((run, pair_id, first, metric, name, a, b,
                             not (_constant(a, rope) and _constant(b, rope))))
    families = [arm[4] for arm in arms if arm[7]]
    rows = []
    for run, pair_id, first, metric, name, a, b, varies in arms:
        row = {"run": run, "pair_id": pair_id,
               **{c: first[c] for c in AXES if c != "framework"}, "metric": metric,
               "family": name, **sides("n_{}", a.size, b.size),
               **sides("median_{}_bytes", float(np.median(a)), float(np.median(b))),
               "varies": varies}
        if varies:
            row.update(compare_samples(a, b, family_size=families.count(name),
                                       confidence=confidence, rope=rope,
                                       names=per_side("{}_less")))
        else:
            ratio = float(np.median(a) / np.median(b))
            row.update(ratio=ratio, ratio_hl=ratio, family_size=0, verdict="not_tested",
                       rope_low=1.0 / (1.0 + rope), rope_high=1.0 + rope,
                       verdict_note=f"each framework's trials span less than "
                                    f"{CONSTANT_SHARE_OF_MARGIN * rope:.1%} of their median: "
                                    f"the ratio of medians is known far better than the margin, "
                                    f"there is nothing to test")
        smaller = min(a.size, b.size)
        reason = (f"{smaller} values on the smaller side, fewer than {min_trials_for_verdict}"
                  if smaller < min_trials_for_verdict and varies else "")
        row.update(exploratory=bool(reason), exploratory_reason=reason)
        rows.append(row)
    if not rows:
        return pd.DataFrame(columns=MEMORY_COMPARISON_COLUMNS)
    out = pd.DataFrame(rows).reindex(columns=[*MEMORY_COMPARISON_COLUMNS, "ratio_ci_attained"])
    tested = out["varies"].astype(bool)
    out.loc[tested, "ratio_ci_family_level"] = (
        out[tested].groupby("family")["ratio_ci_level"].transform(family_level))
    return out[MEMORY_COMPARISON_COLUMNS]
