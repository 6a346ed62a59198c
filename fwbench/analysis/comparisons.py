"""PyTorch against TensorFlow, matched pair by matched pair: comparisons.csv.

A comparison reads one framework's trial medians against the other's and is decided by a single
interval: the Hodges-Lehmann interval of the log ratio at the Bonferroni level of its family
(experiment × device × phase), so the chance of any false verdict in a family is at most alpha
(``compare_samples``; the memory comparisons use it too). Only trials that reached a steady
warm-up and do not drift decide (``trial_quality.usable``); too few of them on a side make the
comparison exploratory, a hint instead of a verdict.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fwbench.analysis.estimators import (
    cliffs_delta,
    cliffs_magnitude,
    hodges_lehmann,
    mann_whitney_test,
    signed_rank_test,
    verdict,
)
from fwbench.analysis.tables import AXES
from fwbench.analysis.trial_quality import (
    adjacency_recorded,
    adjacent,
    count_false,
    count_true,
    exploratory_reasons,
    usable,
)

__all__ = ["compare_samples", "compare_pairs", "family_level", "COMPARISON_COLUMNS"]

FAMILY_AXES = ["experiment", "device", "phase"]

COMPARISON_COLUMNS = [
    "run", "pair_id", *[a for a in AXES if a != "framework"], "family",
    "n_pytorch", "n_tensorflow", "median_pytorch_ns", "median_tensorflow_ns",
    "ratio", "ratio_ci_low", "ratio_ci_high", "ratio_ci_level", "ratio_ci_family_level",
    "ratio_hl", "ratio_method", "family_size", "mannwhitney_u", "mannwhitney_p",
    "mannwhitney_method", "p_adjusted", "cliffs_delta", "cliffs_magnitude",
    "n_pairs", "n_pairs_adjacent", "n_blocks", "blocks_wilcoxon_p", "unsteady_trials",
    "drift_trials", "rope_low", "rope_high", "verdict", "exploratory",
    "exploratory_reason", "verdict_note",
]


def family_name(row) -> str:
    """The family a comparison's error is controlled in: "experiment/device/phase"."""
    return "/".join(str(row[a]) for a in FAMILY_AXES)


def compare_samples(a, b, *, family_size: int = 1, confidence: float = 0.95,
                    rope: float = 0.05, names=("pytorch_faster", "tensorflow_faster")) -> dict:
    """The ratio of two samples of positive per-trial values (a over b), decided by one interval.

    One error control for every verdict of a family of ``family_size`` comparisons: the
    Hodges-Lehmann interval of the log values is taken at the Bonferroni level
    1 - alpha/family_size, so that all intervals of the family cover their true ratios together
    with probability >= 1 - alpha. "Faster" (the interval excludes 1) and "equivalent" (it lies
    inside the region of practical equivalence) both read this interval, so the chance of any
    false verdict in the family is at most alpha. The p-value is the Mann-Whitney test the
    interval inverts (exact where the interval is), and ``p_adjusted`` = min(1, m p) is at most
    alpha exactly when the interval excludes 1. ``names``: the verdicts for a below and above b.
    Usage::

        compare_samples(pytorch_medians, tensorflow_medians, family_size=6)["verdict"]
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    alpha = 1.0 - confidence
    hl = hodges_lehmann(np.log(a), np.log(b), 1.0 - alpha / family_size)
    u, p, test_method = mann_whitney_test(a, b)
    low, high = math.exp(hl.low), math.exp(hl.high)
    decided, note = verdict(low, high, attained=hl.attained, rope=rope, names=names)
    return {
        "ratio": float(np.median(a) / np.median(b)),
        "ratio_ci_low": low, "ratio_ci_high": high, "ratio_ci_level": hl.level,
        "ratio_ci_attained": hl.attained, "ratio_hl": math.exp(hl.estimate),
        "ratio_method": (f"Hodges-Lehmann interval of the log trial values, {hl.method}, "
                         "Bonferroni level within the family, exponentiated"),
        "family_size": int(family_size), "mannwhitney_u": u, "mannwhitney_p": p,
        "mannwhitney_method": test_method, "p_adjusted": min(1.0, family_size * p),
        "rope_low": 1.0 / (1.0 + rope), "rope_high": 1.0 + rope,
        "verdict": decided, "verdict_note": note,
    }


def family_level(levels) -> float:
    """The level at which a family's intervals hold together (Bonferroni: 1 - sum of misses),
    from the coverage each interval attains; never below 0."""
    return max(0.0, 1.0 - float(np.sum(1.0 - np.asarray(levels, dtype=float))))


def arm_arrays(per_trial: pd.DataFrame, columns: list[str]):
    """Yield (run, pair_id, the pair's axes, PyTorch's and TensorFlow's ``columns`` as arrays in
    trial order) for pairs with ok trials on both sides. Arrays, not frames: a large sweep (or
    the error-rate simulation in the tests) compares thousands of pairs."""
    if per_trial.empty:
        return
    frame = per_trial.sort_values(["run", "pair_id", "trial"], kind="stable")
    axes = [a for a in AXES if a != "framework"]
    values = {c: frame[c].to_numpy() for c in {*columns, *axes, "trial"} if c in frame}
    framework = frame["framework"].to_numpy()
    for (run, pair_id), idx in frame.groupby(["run", "pair_id"], sort=True).indices.items():
        pt, tf = idx[framework[idx] == "pytorch"], idx[framework[idx] == "tensorflow"]
        if len(pt) and len(tf):
            yield (run, pair_id, {a: values[a][pt[0]] for a in axes},
                   {c: v[pt] for c, v in values.items()}, {c: v[tf] for c, v in values.items()})


# The per-trial columns a verdict reads: the medians and the two flags that make a trial usable.
VERDICT_COLUMNS = ["trial_median_ns", "warmup_steady", "trial_drift"]


def usable_arm(arm: dict) -> tuple[dict, int]:
    """One framework's arm without its unsteady or drifting trials, and how many are left (all
    of them are kept where none would be: the comparison is then a hint from every ok trial)."""
    keep = usable(arm.get("warmup_steady", [None] * len(arm["trial"])),
                  arm.get("trial_drift", [None] * len(arm["trial"])))
    return ({c: v[keep] for c, v in arm.items()} if keep.any() else arm), int(keep.sum())


def compare_pairs(per_trial: pd.DataFrame, *, confidence: float = 0.95, rope: float = 0.05,
                  min_trials_for_verdict: int = 7) -> pd.DataFrame:
    """comparisons.csv: one row per matched pair with ok trials on both sides, each decided by
    its interval at the family's Bonferroni level (``compare_samples``) from the trials that
    reached a steady warm-up and do not drift (``trial_quality.usable``)."""
    arms = list(arm_arrays(per_trial, [*VERDICT_COLUMNS, "pair_adjacent"]))
    recorded = adjacency_recorded(per_trial)
    families = [family_name(axes) for _, _, axes, _, _ in arms]
    sizes = {f: families.count(f) for f in set(families)}
    rows = []
    for (run, pair_id, axes, pt, tf), family in zip(arms, families):
        flags = {c: np.concatenate([pt[c], tf[c]]) if c in pt else []
                 for c in ("warmup_steady", "trial_drift")}
        (pt, n_pt), (tf, n_tf) = usable_arm(pt), usable_arm(tf)
        a = pt["trial_median_ns"].astype(float)
        b = tf["trial_median_ns"].astype(float)
        row = {"run": run, "pair_id": pair_id, **axes, "family": family}
        row.update(compare_samples(a, b, family_size=sizes[family], confidence=confidence,
                                   rope=rope))
        _, i, j = np.intersect1d(pt["trial"], tf["trial"], return_indices=True)
        n_adjacent = math.nan
        if recorded:  # pair only the trials that really ran back to back
            keep = adjacent(pt["pair_adjacent"][i], tf["pair_adjacent"][j])
            n_adjacent = int(keep.sum())
            i, j = i[keep], j[keep]
        _, p_blocks, _ = signed_rank_test(np.log(a[i]) - np.log(b[j]))
        delta = cliffs_delta(a, b)
        reasons = exploratory_reasons(n_pt, n_tf, min_trials_for_verdict,
                                      unsteady=count_false(flags["warmup_steady"]),
                                      drifting=count_true(flags["trial_drift"]))
        row.update(
            n_pytorch=a.size, n_tensorflow=b.size,
            median_pytorch_ns=float(np.median(a)), median_tensorflow_ns=float(np.median(b)),
            cliffs_delta=delta, cliffs_magnitude=cliffs_magnitude(delta),
            n_pairs=int(np.intersect1d(pt["trial"], tf["trial"]).size),
            n_pairs_adjacent=n_adjacent, n_blocks=len(i), blocks_wilcoxon_p=p_blocks,
            unsteady_trials=count_false(flags["warmup_steady"]),
            drift_trials=count_true(flags["trial_drift"]),
            exploratory=bool(reasons), exploratory_reason="; ".join(reasons),
        )
        rows.append(row)
    if not rows:
        return pd.DataFrame(columns=COMPARISON_COLUMNS)
    out = pd.DataFrame(rows)
    out["n_pairs_adjacent"] = out["n_pairs_adjacent"].astype("Int64")
    out["ratio_ci_family_level"] = out.groupby("family")["ratio_ci_level"].transform(family_level)
    out["verdict_note"] = [_comparison_note(r, confidence) for r in out.itertuples()]
    return out[COMPARISON_COLUMNS]


def _comparison_note(r, confidence: float) -> str:
    note = r.verdict_note
    if r.exploratory:
        note = f"exploratory ({r.exploratory_reason}): a hint, not a verdict; " + note
    if r.family_size > 1:
        note += (f"; interval at {r.ratio_ci_level:.2%} (Bonferroni over the family's "
                 f"{r.family_size} comparisons: together at least {r.ratio_ci_family_level:.1%})")
    elif r.ratio_ci_level < confidence - 1e-9:
        note += f"; interval level {r.ratio_ci_level:.1%}"
    if not r.ratio_ci_low <= r.ratio <= r.ratio_ci_high:
        note += ("; the ratio of medians lies outside the Hodges-Lehmann interval (skewed or "
                 "bimodal trial medians: read ratio_hl)")
    return note

