"""The quality of trials as findings, and which interleaved pairs really ran back to back.
Framework-free; the report counts it.

Each ok trial has a quality class from the changepoints of its timed steps
(fwbench.analysis.steady_state: flat, warmup, slowdown, switching, no_steady_state), and may
have a warm-up that never settled (``warmup_steady`` false). The primary analysis keeps every ok
trial: leaving trials out on their own outcome moves the ratio (the three slowest trials of a
cell were the ones left out). The classes are counted per framework and family, with Fisher's
exact test of whether their rates differ between the frameworks (``quality_table``); the
analysis without the classes the plan names (``statistics.sensitivity_leaves_out``) is a
sensitivity analysis beside the primary one (``sensitive_trials``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fwbench.analysis.estimators import fisher_exact
from fwbench.analysis.steady_state import CLASSES

# Columns the harness may record per trial for drift within its timed iterations; without one,
# the statistics take a quality class other than flat (fwbench.analysis.trial_stats).
DRIFT_COLUMNS = ("drift_detected", "drift")


def recorded_drift(trials: pd.DataFrame) -> pd.Series:
    """Per trial row: the drift the trial recorded (True/False), or NA where it recorded none."""
    for column in DRIFT_COLUMNS:
        if column in trials and trials[column].notna().any():
            return trials[column].astype("boolean")
    return pd.Series(pd.NA, index=trials.index, dtype="boolean")


def exploratory_reasons(n_a: int, n_b: int, min_trials: int) -> list[str]:
    """Why a comparison of ``n_a`` against ``n_b`` ok trials is only a hint (empty: it may
    decide): fewer than ``min_trials`` on a side (``fwbench compare``)."""
    smaller = min(n_a, n_b)
    if smaller >= min_trials:
        return []
    return [f"{smaller} trials on the smaller side, fewer than {min_trials}"]


def _known(value) -> bool:
    return value is not None and value is not pd.NA and not (
        isinstance(value, float) and np.isnan(value))


def count_false(values) -> int:
    """How many values are False (None and NA, "not recorded", are not)."""
    return int(sum(1 for v in values if _known(v) and not bool(v)))


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
    widest = {"max_pair_gap_trials": "pair_gap_trials", "max_pair_gap_s": "pair_gap_s"}
    for key, column in widest.items():
        if column in frame and frame[column].notna().any():
            out[key] = float(pd.to_numeric(frame[column], errors="coerce").max())
    return out


def steadiness_summary(trials: pd.DataFrame, cell_stats: pd.DataFrame,
                       comparisons: pd.DataFrame) -> dict:
    """Counts for the report: ok trials, those whose warm-up never settled, those whose timed
    steps are not flat (``drift_source`` says whether the harness recorded drift or the
    changepoints found it), each quality class, the comparisons with such trials (all kept in
    the primary analysis), and those of them left exploratory."""
    ok_rows = trials[trials["status"] == "ok"] if "status" in trials else trials.iloc[:0]
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
    classes = (class_counts(ok_rows["steady_state_class"])
               if "steady_state_class" in ok_rows else {})
    return {"ok": len(ok_rows), "unsteady": total["warmup_unsteady_trials"],
            "drifting": total["drift_trials"], "comparisons": touched,
            "exploratory": short, "classes": classes,
            "drift_source": "recorded by the harness" if recorded else
                            "changepoints of each trial's timed steps"}


# The quality findings a trial may have: its class, and a warm-up that never settled.
FINDINGS = (*CLASSES, "unsteady_warmup")
QUALITY_COLUMNS = ["run", "family", "framework", "n_trials", *[f"n_{c}" for c in FINDINGS],
                   "fisher_p", "test"]


def class_counts(classes) -> dict:
    """{class: number of trials} for every class of steady_state.CLASSES, in that order."""
    values = list(classes)
    return {c: sum(1 for v in values if v == c) for c in CLASSES}


def findings(per_trial: pd.DataFrame) -> pd.DataFrame:
    """One boolean column per finding (FINDINGS) per trial row: its class, and
    ``unsteady_warmup`` where its warm-up recorded that it never settled."""
    cls = per_trial["steady_state_class"] if "steady_state_class" in per_trial else None
    out = {c: (cls == c) if cls is not None else pd.Series(False, index=per_trial.index)
           for c in CLASSES}
    steady = per_trial["warmup_steady"] if "warmup_steady" in per_trial else None
    out["unsteady_warmup"] = pd.Series(
        [_known(s) and not bool(s) for s in steady] if steady is not None
        else [False] * len(per_trial), index=per_trial.index)
    return pd.DataFrame(out, index=per_trial.index).astype(bool)


def sensitive_trials(per_trial: pd.DataFrame, leave_out) -> pd.Series:
    """Per trial row: True where it has a finding the sensitivity analysis leaves out."""
    flags = findings(per_trial)
    names = [c for c in leave_out if c in flags]
    return flags[names].any(axis=1) if names else pd.Series(False, index=per_trial.index)


def quality_table(per_trial: pd.DataFrame, family_of) -> pd.DataFrame:
    """stats/quality.csv: per family of comparisons (``family_of``: row -> family name) and
    framework, the ok trials and how many have each finding; ``fisher_p`` is Fisher's exact test
    that the classes (steady_state.CLASSES) occur at the same rates in both
    frameworks of the family (a 2 x k table of counts), the same on both rows."""
    test = f"Fisher's exact test, frameworks x classes ({', '.join(CLASSES)})"
    if per_trial.empty:
        return pd.DataFrame(columns=QUALITY_COLUMNS)
    frame = per_trial.assign(family=[family_of(r) for _, r in per_trial.iterrows()])
    flags = findings(frame)
    rows = []
    for (run, family), group in frame.groupby(["run", "family"], sort=True):
        counts = {fw: flags.loc[g.index].sum() for fw, g in group.groupby("framework")}
        table = [[int(counts[fw][c]) for c in CLASSES] for fw in sorted(counts)]
        p = fisher_exact(table) if len(table) == 2 else float("nan")
        for fw in sorted(counts):
            rows.append({"run": run, "family": family, "framework": fw,
                         "n_trials": int((group["framework"] == fw).sum()),
                         **{f"n_{c}": int(counts[fw][c]) for c in FINDINGS},
                         "fisher_p": p, "test": test})
    return pd.DataFrame(rows, columns=QUALITY_COLUMNS)
