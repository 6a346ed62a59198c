"""Which trials can support a confirmatory verdict, and which interleaved pairs really ran back
to back. Framework-free; ``fwbench.analysis.comparisons`` applies it to every comparison, the report
counts it.

A trial whose warm-up never settled, or whose timed iterations drift, did not measure the steady
state the verdict is about: it is left out of its comparison (both frameworks, same rule, decided
before any comparison). A comparison left with fewer than ``min_trials_for_verdict`` trials on a
side is only a hint: ``exploratory``, with the reason.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Columns the harness may record per trial for drift within its timed iterations; without one,
# the statistics compute drift from the iterations (fwbench.analysis.trial_stats._drift).
DRIFT_COLUMNS = ("drift_detected", "drift")


def recorded_drift(trials: pd.DataFrame) -> pd.Series:
    """Per trial row: the drift the trial recorded (True/False), or NA where it recorded none."""
    for column in DRIFT_COLUMNS:
        if column in trials and trials[column].notna().any():
            return trials[column].astype("boolean")
    return pd.Series(pd.NA, index=trials.index, dtype="boolean")


def exploratory_reasons(n_pytorch: int, n_tensorflow: int, min_trials: int, *,
                        unsteady: int = 0, drifting: int = 0) -> list[str]:
    """Why a comparison's verdict is only a hint (empty: it may confirm). ``n_pytorch`` and
    ``n_tensorflow`` count the trials it used; ``unsteady`` and ``drifting`` the trials it left
    out, both frameworks together."""
    smaller = min(n_pytorch, n_tensorflow)
    if smaller >= min_trials:
        return []
    reasons = [f"{smaller} usable trials on the smaller side, fewer than {min_trials}"]
    if unsteady:
        reasons.append(f"{_trials(unsteady)} left out that never reached a steady warm-up")
    if drifting:
        reasons.append(f"{_trials(drifting)} left out that drift within their timed iterations")
    return reasons


def _trials(n: int) -> str:
    return f"{n} trial" if n == 1 else f"{n} trials"


def usable(warmup_steady, drift) -> np.ndarray:
    """Which trials can support a verdict: not known to be unsteady, not known to drift."""
    return np.array([not (_known(s) and not bool(s)) and not (_known(d) and bool(d))
                     for s, d in zip(warmup_steady, drift)], dtype=bool)


def _known(value) -> bool:
    return value is not None and value is not pd.NA and not (
        isinstance(value, float) and np.isnan(value))


def count_false(values) -> int:
    """How many values are False (None and NA, "not recorded", are not)."""
    return int(sum(1 for v in values if _known(v) and not bool(v)))


def count_true(values) -> int:
    """How many values are True (None and NA, "not recorded", are not)."""
    return int(sum(1 for v in values if _known(v) and bool(v)))


def adjacent(pytorch, tensorflow) -> np.ndarray:
    """Which pairs ran back to back: both members recorded ``pair_adjacent`` True (a pair a run
    that records adjacency left unrecorded is not known to be adjacent)."""
    return np.array([_known(a) and _known(b) and bool(a) and bool(b)
                     for a, b in zip(pytorch, tensorflow)], dtype=bool)


def adjacency_recorded(trials: pd.DataFrame) -> bool:
    """The run recorded whether each pair ran back to back (the ``pair_adjacent`` column)."""
    return "pair_adjacent" in trials and trials["pair_adjacent"].notna().any()


def adjacency_summary(trials: pd.DataFrame) -> dict:
    """How many interleaved pairs (trial k of PyTorch with trial k of TensorFlow, both recorded)
    ran back to back, and the largest gap between the members of a pair, for the report.
    ``recorded`` is False for runs from before the column existed."""
    if not {"pair_id", "trial", "framework"} <= set(trials.columns) or trials.empty:
        return {"recorded": False, "pairs": 0}
    both = trials.groupby(["pair_id", "trial"])["framework"].transform("nunique") == 2
    frame = trials[both]
    pairs = frame.groupby(["pair_id", "trial"])
    n = pairs.ngroups
    if not adjacency_recorded(trials):
        return {"recorded": False, "pairs": n}
    flags = pairs["pair_adjacent"].agg(lambda v: bool(all(_known(x) and bool(x) for x in v)))
    out = {"recorded": True, "pairs": n, "adjacent": int(flags.sum())}
    for column in ("pair_gap_trials", "pair_gap_s"):
        if column in frame and frame[column].notna().any():
            out[f"max_{column}"] = float(pd.to_numeric(frame[column], errors="coerce").max())
    return out


def steadiness_summary(trials: pd.DataFrame, cell_stats: pd.DataFrame,
                       comparisons: pd.DataFrame) -> dict:
    """Counts for the report: ok trials, those whose warm-up never settled, those that drift
    (``drift_source`` says whether the harness recorded it or the statistics computed it), the
    comparisons that left such trials out, and those of them left exploratory."""
    ok = int((trials["status"] == "ok").sum()) if "status" in trials else 0
    total = {c: int(pd.to_numeric(cell_stats[c], errors="coerce").fillna(0).sum())
             if c in cell_stats else None for c in ("warmup_unsteady_trials", "drift_trials")}
    touched = short = None
    if {"unsteady_trials", "drift_trials"} <= set(comparisons.columns):
        counts = comparisons[["unsteady_trials", "drift_trials"]].apply(
            pd.to_numeric, errors="coerce").fillna(0)
        touched = counts.sum(axis=1) > 0
        short = comparisons["exploratory"].astype(bool) if "exploratory" in comparisons else False
        touched, short = int(touched.sum()), int((touched & short).sum())
    recorded = not recorded_drift(trials).isna().all() if len(trials) else False
    return {"ok": ok, "unsteady": total["warmup_unsteady_trials"],
            "drifting": total["drift_trials"], "comparisons": touched,
            "exploratory": short,
            "drift_source": "recorded by the harness" if recorded else
                            "tested on each trial's timed iterations by the statistics"}
