"""PyTorch against TensorFlow, matched pair by matched pair: comparisons.csv, and beside it the
sensitivity analysis (sensitivity.csv).

One quantity per comparison: the **time per step** of each trial (``trial_step_ns``: the mean of
its timed blocks per step). Trial k of both frameworks ran back to back, so the comparison reads
the **per-pair log ratios** d_k = log(PyTorch_k) - log(TensorFlow_k): the ratio is exp(mean d),
its interval the t interval of mean d at the Bonferroni level of its family (1 - alpha/m), its
test the paired t test that interval inverts, and equivalence the TOST that the 1 - 2 alpha/m
interval reads (Schuirmann 1987) (``compare_paired``). The family is every comparison of the
plan's ``family`` axes (the run's headline claims: all comparisons of an experiment), so the
chance of any false verdict among them is at most alpha. Beside it, never instead: the exact
sign-flip test of the same d, and the unpaired rank analysis of all ok trials (Hodges-Lehmann,
Mann-Whitney, Brunner-Munzel, which allows unequal spreads). Every ok trial counts; quality
classes are findings (``trial_quality``), and the analysis without them is the sensitivity
table. ``compare_samples`` is the unpaired comparison the memory peaks use.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fwbench.analysis.estimators import (
    brunner_munzel,
    cliffs_delta,
    cliffs_magnitude,
    hodges_lehmann,
    mann_whitney_test,
    sign_flip_test,
    signed_rank_test,
    t_interval,
    t_test,
    verdict,
)
from fwbench.analysis.steady_state import CLASSES
from fwbench.analysis.tables import AXES
from fwbench.analysis.trial_quality import (
    adjacency_recorded,
    adjacent,
    count_false,
    sensitive_trials,
)
from fwbench.plan.frameworks import COMPARED, FASTER, per_side, sides

__all__ = ["compare_samples", "compare_paired", "compare_pairs", "sensitivity_table",
           "family_level", "family_name", "COMPARISON_COLUMNS", "SENSITIVITY_COLUMNS"]

# The family of a comparison when the plan names none: every comparison of its experiment.
DEFAULT_FAMILY = ("experiment",)

COMPARISON_COLUMNS = [
    "run", "pair_id", *[a for a in AXES if a != "framework"], "family", "family_axes",
    "family_size", *per_side("n_{}"), "n_pairs", "n_pairs_adjacent", "n_pairs_used",
    "n_unpaired", *per_side("step_{}_ns"), *per_side("median_{}_ns"), "ratio", "ratio_ci_low",
    "ratio_ci_high", "ratio_ci_level",
    "ratio_ci_family_level", "ratio_method", "equivalence_ci_low", "equivalence_ci_high",
    "equivalence_ci_level", "paired_t", "paired_p", "p_adjusted", "tost_p", "signflip_p",
    "signflip_method", "ratio_hl", "ratio_hl_ci_low", "ratio_hl_ci_high", "mannwhitney_u",
    "mannwhitney_p", "mannwhitney_method", "brunner_munzel_p", "cliffs_delta",
    "cliffs_magnitude", "n_blocks", "blocks_wilcoxon_p", *per_side("classes_{}"),
    "unsteady_trials", "drift_trials", "rope_low", "rope_high",
    "verdict", "exploratory", "exploratory_reason", "verdict_note",
]

# sensitivity.csv: the comparisons again under another rule, beside the primary verdict.
SENSITIVITY_COLUMNS = [
    "run", "pair_id", *[a for a in AXES if a != "framework"], "analysis", "without",
    "excluded", *per_side("n_{}"), "n_pairs_used", "family_size", "ratio",
    "ratio_ci_low", "ratio_ci_high", "verdict", "exploratory", "primary_ratio",
    "primary_verdict", "agrees",
]


def family_name(row, axes=DEFAULT_FAMILY) -> str:
    """The family a comparison's error is controlled in: its values of the plan's ``family``
    axes, joined by "/" (e.g. "throughput")."""
    return "/".join(str(row[a]) for a in axes)


def compare_samples(a, b, *, family_size: int = 1, confidence: float = 0.95,
                    rope: float = 0.05, names=FASTER) -> dict:
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
        pt, tf = (idx[framework[idx] == side] for side in COMPARED)
        if len(pt) and len(tf):
            yield (run, pair_id, {a: values[a][pt[0]] for a in axes},
                   {c: v[pt] for c, v in values.items()}, {c: v[tf] for c, v in values.items()})


def compare_paired(d, *, family_size: int = 1, confidence: float = 0.95, rope: float = 0.05,
                   seed: int = 0, names=FASTER) -> dict:
    """The primary comparison from the per-pair log ratios ``d`` (PyTorch over TensorFlow).

    ratio = exp(mean d); its interval the t interval of mean d at 1 - alpha/m (m =
    ``family_size``), which "faster" reads; equivalence the TOST at alpha/m each side, read from
    the 1 - 2 alpha/m interval (Schuirmann 1987). So across the family the chance of any false
    verdict, "faster" or "equivalent", is at most alpha. ``paired_p`` is the paired t test the
    interval inverts (``p_adjusted`` = min(1, m p) <= alpha exactly when it excludes 1); the
    exact sign-flip test of the same d is its distribution-free check. ``names``: the verdicts
    for a ratio below and above 1. Usage::

        compare_paired(np.log(pt_steps) - np.log(tf_steps), family_size=8)["verdict"]
    """
    d = np.asarray(d, dtype=float)
    alpha = 1.0 - confidence
    level, eq_level = 1.0 - alpha / family_size, 1.0 - 2.0 * alpha / family_size
    ci, eq = t_interval(d, level), t_interval(d, eq_level)
    low, high = (math.exp(v) if np.isfinite(v) else math.nan for v in (ci.low, ci.high))
    eq_low, eq_high = (math.exp(v) if np.isfinite(v) else math.nan for v in (eq.low, eq.high))
    t, p = t_test(d)
    bound = math.log1p(rope)
    tost = max(t_test(d, -bound, "greater")[1], t_test(d, bound, "less")[1])
    flip_p, flip_method = sign_flip_test(d, seed=seed)
    decided, note = verdict(low, high, attained=d.size >= 2, rope=rope, names=names,
                            equivalence=(eq_low, eq_high))
    return {
        "ratio": math.exp(ci.estimate) if np.isfinite(ci.estimate) else math.nan,
        "ratio_ci_low": low, "ratio_ci_high": high, "ratio_ci_level": level,
        "ratio_method": (f"exp of the mean per-pair log ratio of time per step; "
                         f"{ci.method} at 1 - alpha/m (Bonferroni over the family)"),
        "equivalence_ci_low": eq_low, "equivalence_ci_high": eq_high,
        "equivalence_ci_level": eq_level, "family_size": int(family_size), "paired_t": t,
        "paired_p": p, "p_adjusted": min(1.0, family_size * p) if np.isfinite(p) else math.nan,
        "tost_p": tost, "signflip_p": flip_p, "signflip_method": flip_method,
        "rope_low": 1.0 / (1.0 + rope), "rope_high": 1.0 + rope,
        "verdict": decided, "verdict_note": note,
    }


def _robustness(a: np.ndarray, b: np.ndarray, confidence: float, family_size: int) -> dict:
    """The unpaired rank analysis of every ok trial, beside the primary: Hodges-Lehmann
    ratio with its interval at the family's level, Mann-Whitney, Brunner-Munzel (unequal
    spreads allowed), Cliff's delta."""
    hl = hodges_lehmann(np.log(a), np.log(b), 1.0 - (1.0 - confidence) / family_size)
    u, p_mw, mw_method = mann_whitney_test(a, b)
    _, p_bm, _ = brunner_munzel(np.log(a), np.log(b))
    delta = cliffs_delta(a, b)
    return {"ratio_hl": math.exp(hl.estimate), "ratio_hl_ci_low": math.exp(hl.low),
            "ratio_hl_ci_high": math.exp(hl.high), "mannwhitney_u": u, "mannwhitney_p": p_mw,
            "mannwhitney_method": mw_method, "brunner_munzel_p": p_bm, "cliffs_delta": delta,
            "cliffs_magnitude": cliffs_magnitude(delta)}


def _classes(values) -> str:
    counts = {c: sum(1 for v in values if v == c) for c in CLASSES}
    return ", ".join(f"{c}={k}" for c, k in counts.items() if k)


ARM_COLUMNS = ["trial_step_ns", "trial_median_ns", "pair_adjacent", "steady_state_class",
               "warmup_steady", "trial_drift"]


def compare_pairs(per_trial: pd.DataFrame, *, confidence: float = 0.95, rope: float = 0.05,
                  min_trials_for_verdict: int = 7, family=DEFAULT_FAMILY, pairs: str = "all",
                  seed: int = 0) -> pd.DataFrame:
    """comparisons.csv: one row per matched pair with ok trials on both sides, decided from the
    per-pair log ratios of time per step (``compare_paired``) over the pairs of the plan
    (``pairs``: "all", trial k of both frameworks as planned; "adjacent", only those that ran
    back to back), at the level of its family (``family``: the axes whose values make one).
    Every ok trial counts; a trial whose partner is missing enters the rank checks but no pair
    (``n_unpaired``)."""
    arms = list(arm_arrays(per_trial, ARM_COLUMNS))
    recorded = adjacency_recorded(per_trial)
    families = [family_name(axes, family) for _, _, axes, _, _ in arms]
    sizes = {f: families.count(f) for f in set(families)}
    rows = []
    for (run, pair_id, axes, pt, tf), fam in zip(arms, families):
        a, b = pt["trial_step_ns"].astype(float), tf["trial_step_ns"].astype(float)
        _, i, j = np.intersect1d(pt["trial"], tf["trial"], return_indices=True)
        n_pairs, n_adjacent = len(i), math.nan
        if recorded:
            keep = adjacent(pt["pair_adjacent"][i], tf["pair_adjacent"][j])
            n_adjacent = int(keep.sum())
            if pairs == "adjacent":
                i, j = i[keep], j[keep]
        d = np.log(a[i]) - np.log(b[j])
        row = {"run": run, "pair_id": pair_id, **axes, "family": fam,
               "family_axes": "/".join(family)}
        row.update(compare_paired(d, family_size=sizes[fam], confidence=confidence, rope=rope,
                                  seed=seed))
        row.update(_robustness(a, b, confidence, sizes[fam]))
        _, p_blocks, _ = signed_rank_test(d)
        reason = (f"{len(i)} pairs of trials, fewer than {min_trials_for_verdict}"
                  if len(i) < min_trials_for_verdict else "")
        classes = np.concatenate([pt.get("steady_state_class", []),
                                  tf.get("steady_state_class", [])])
        steady = np.concatenate([pt.get("warmup_steady", []), tf.get("warmup_steady", [])])
        row.update(
            **sides("n_{}", a.size, b.size), n_pairs=n_pairs, n_pairs_adjacent=n_adjacent,
            n_pairs_used=len(i), n_unpaired=a.size + b.size - 2 * n_pairs,
            **sides("step_{}_ns", *(float(np.exp(np.log(x).mean())) if len(i) else math.nan
                                    for x in (a[i], b[j]))),
            **sides("median_{}_ns", *(float(np.median(x["trial_median_ns"].astype(float)))
                                      for x in (pt, tf))),
            n_blocks=len(i), blocks_wilcoxon_p=p_blocks,
            **sides("classes_{}", *(_classes(x.get("steady_state_class", []))
                                    for x in (pt, tf))),
            unsteady_trials=count_false(steady),
            drift_trials=int(sum(1 for c in classes if c in CLASSES and c != "flat")),
            exploratory=bool(reason), exploratory_reason=reason,
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
    alpha = 1.0 - confidence
    if r.exploratory:
        note = f"exploratory ({r.exploratory_reason}): a hint, not a verdict; " + note
    note += (f"; paired over {r.n_pairs_used} pairs, interval at {r.ratio_ci_level:.2%}, "
             f"equivalence at {r.equivalence_ci_level:.2%} (family `{r.family}`: "
             f"{r.family_size} comparisons, together at least {r.ratio_ci_family_level:.1%})")
    if r.verdict.endswith("_faster"):
        note += _signflip_note(r.signflip_p, r.n_pairs_used, alpha / r.family_size)
    if r.n_unpaired:
        note += f"; {r.n_unpaired} trials without their partner enter only the rank checks"
    return note


def _signflip_note(p: float, pairs: int, level: float) -> str:
    """What the exact sign-flip check says of a decided comparison at the family's level
    ``level`` (alpha/m). With n pairs its smallest p is 2/2^n: below the level's reach it can
    confirm nothing, whatever the data, and the note says so rather than report a failure."""
    floor = 2.0 ** (1 - pairs)
    if floor > level:
        needed = math.ceil(1 - math.log2(level))
        return (f"; the exact sign-flip check cannot reach the family's level with {pairs} "
                f"pairs (its smallest p, 2/2^{pairs} = {floor:.2g}, is above {level:.2g}; it "
                f"needs {needed} pairs), so it neither confirms nor questions the verdict")
    if p > level:
        return (f"; the exact sign-flip check does not confirm it at the family's level "
                f"(p = {p:.2g} > {level:.2g})")
    return ""


NOT_ESTIMABLE = "not estimable"


def _with_not_estimable(out: pd.DataFrame, primary: pd.DataFrame, dropped: pd.DataFrame,
                        kept: pd.DataFrame) -> pd.DataFrame:
    """``out`` with a row for each primary comparison that lost every trial of a side to the
    analysis (``dropped``): verdict "not estimable", its ok trials per side as kept, so it
    is said rather than missing."""
    lost = primary[primary.set_index(["run", "pair_id"]).index.isin(
        dropped.set_index(["run", "pair_id"]).index)]
    if not out.empty:
        lost = lost[~lost.set_index(["run", "pair_id"]).index.isin(
            out.set_index(["run", "pair_id"]).index)]
    if lost.empty:
        return out
    per_side_ok = kept.groupby(["run", "pair_id", "framework"]).size()
    rows = lost[[c for c in ("run", "pair_id", *AXES, "family", "family_size") if c in lost]]
    rows = rows.assign(
        verdict=NOT_ESTIMABLE, n_pairs_used=0,
        **{f"n_{f}": [int(per_side_ok.get((r, p, f), 0))
                      for r, p in zip(lost["run"], lost["pair_id"])] for f in COMPARED})
    return pd.concat([out, rows], ignore_index=True) if not out.empty else rows


def sensitivity_table(per_trial: pd.DataFrame, primary: pd.DataFrame, *, leave_out,
                      pairs: str = "all", **plan) -> pd.DataFrame:
    """sensitivity.csv: the comparisons again without the trials whose quality findings the
    plan names (``leave_out``; both frameworks, one rule), and, where the primary pairs every
    trial k as planned and some pair did not run back to back, with adjacent pairs only. Each
    row sits beside the primary verdict (``agrees``); never the primary. ``plan``:
    compare_pairs' arguments."""
    analyses = []
    if len(per_trial) and leave_out:
        drop = sensitive_trials(per_trial, leave_out)
        analyses.append(("without quality classes", ", ".join(leave_out),
                         per_trial[~drop], drop, pairs))
    if pairs == "all" and adjacency_recorded(per_trial) and not per_trial["pair_adjacent"].all():
        analyses.append(("adjacent pairs only", "pairs that did not run back to back",
                         per_trial, pd.Series(False, index=per_trial.index), "adjacent"))
    key = ["run", "pair_id"]
    base = primary.set_index(key)[["ratio", "verdict"]] if len(primary) else None
    frames = []
    for name, without, frame, dropped, rule in analyses:
        out = _with_not_estimable(compare_pairs(frame, pairs=rule, **plan), primary,
                                  per_trial[dropped], frame)
        if out.empty:
            continue
        excluded = per_trial[dropped].groupby(key).size()
        out = out.assign(analysis=name, without=without,
                         excluded=[int(excluded.get(k, 0)) for k in
                                   zip(out["run"], out["pair_id"])])
        joined = base.reindex(pd.MultiIndex.from_frame(out[key]))
        out["primary_ratio"] = joined["ratio"].to_numpy()
        out["primary_verdict"] = joined["verdict"].to_numpy()
        out["agrees"] = out["verdict"] == out["primary_verdict"]
        frames.append(out.reindex(columns=SENSITIVITY_COLUMNS))
    if not frames:
        return pd.DataFrame(columns=SENSITIVITY_COLUMNS)
    return pd.concat(frames, ignore_index=True)
