"""A merged run's origins (fwbench.analysis.merge): each machine or session is a level of the
analysis, and its comparisons are pooled only where pooling is valid.

comparisons.csv already has one row per origin and pair (its ``run`` column is the origin),
each decided on that origin's trials alone. ``pooled_comparisons`` adds, per pair measured in
two origins or more, a pooled ratio under this rule:

- pool only when the origins agree: Cochran's Q test of heterogeneity of their log ratios does
  not reject at ``HETEROGENEITY_ALPHA``, and no two origins reach opposite verdicts;
- then the fixed-effect (inverse-variance) mean of the log ratios, each origin's standard error
  read back from its t interval (its level and ``n_pairs_used`` - 1 degrees of freedom), with
  a normal interval at the lowest level the origins' intervals have (the family's Bonferroni
  level) and the run's one verdict rule (``estimators.verdict``);
- otherwise no pooled number: a ratio averaged over machines that disagree describes none of
  them, and the note gives Q's p-value and I^2 (the share of the spread beyond noise).
A Q test that does not reject is no proof that the origins agree (with two origins it has
little power): the per-origin rows stay the primary result, the pooled row a summary.

Beside the rule, every row states the two spreads a reader weighs: ``within_sd``, the SD of one
pair's log ratio inside an origin (the root mean square over the origins, read back from their
intervals: the noise a run's own interval covers), and ``between_sd``, the SD of the origins'
true log ratios around their mean (DerSimonian and Laird's tau: the spread between machines
and sittings that no run's interval covers); and ``holds_on`` says whether one verdict holds on
every origin ("every origin") or which origins reached which.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.special import ndtri

from fwbench.analysis.claims.wording import is_exploratory, outcome
from fwbench.analysis.estimators import verdict
from fwbench.plan.frameworks import FASTER

__all__ = ["origins", "pooled_comparisons", "POOLED_COLUMNS", "HETEROGENEITY_ALPHA"]

POOLED_COLUMNS = ["pair_id", "origins", "ratio", "ratio_ci_low", "ratio_ci_high",
                  "ratio_ci_level", "heterogeneity_q", "heterogeneity_p", "i_squared",
                  "within_sd", "between_sd", "holds_on", "pooled", "verdict", "exploratory",
                  "note"]
OPPOSITE = set(FASTER)
# The level of the heterogeneity test: fixed, so the rule is planned before the data exist.
HETEROGENEITY_ALPHA = 0.05


def origins(trials: pd.DataFrame) -> list[str]:
    """The run's origins in the order their first trial started (one for an unmerged run)."""
    if trials.empty or "run" not in trials:
        return []
    order = trials.sort_values("started_at", kind="stable") if "started_at" in trials else trials
    return list(dict.fromkeys(order["run"].astype(str)))


def pooled_comparisons(comparisons: pd.DataFrame) -> pd.DataFrame:
    """One row per pair that two origins or more compared, pooled where the rule allows; a
    pooled verdict from an exploratory origin is exploratory."""
    rows = []
    if not comparisons.empty:
        for pair_id, group in comparisons.groupby("pair_id", sort=True):
            if group["run"].nunique() > 1:
                rows.append({"pair_id": pair_id, **_pool(group, HETEROGENEITY_ALPHA),
                             "exploratory": any(is_exploratory(r) for _, r in group.iterrows())})
    return pd.DataFrame(rows, columns=POOLED_COLUMNS)


def _pool(group: pd.DataFrame, alpha: float) -> dict:
    names = ", ".join(group["run"].astype(str))
    low, high = (group[c].to_numpy(dtype=float) for c in ("ratio_ci_low", "ratio_ci_high"))
    levels = group["ratio_ci_level"].to_numpy(dtype=float)
    theta = np.log(group["ratio"].to_numpy(dtype=float))
    base = {"origins": names, "pooled": False, "holds_on": _holds_on(group)}
    if not (np.isfinite(theta).all() and np.isfinite(low).all() and np.isfinite(high).all()
            and (high > low).all()):
        return {**base, "verdict": "not pooled",
                "note": "an origin has no interval: nothing to pool"}
    n = group["n_pairs_used"].to_numpy(dtype=float)
    se = (np.log(high) - np.log(low)) / (2 * sps.t.ppf(0.5 + levels / 2, n - 1))
    w = 1.0 / se**2
    mean = float(np.sum(w * theta) / np.sum(w))
    q = float(np.sum(w * (theta - mean) ** 2))
    p = float(sps.chi2.sf(q, theta.size - 1))
    i2 = max(0.0, (q - (theta.size - 1)) / q) if q > 0 else 0.0
    tau2 = max(0.0, (q - (theta.size - 1)) / (np.sum(w) - np.sum(w**2) / np.sum(w)))
    found = {outcome(r) for _, r in group.iterrows()}
    tested = {**base, "heterogeneity_q": q, "heterogeneity_p": p, "i_squared": i2,
              "within_sd": float(np.sqrt(np.mean(se**2 * n))), "between_sd": math.sqrt(tau2)}
    if p < alpha or OPPOSITE <= found:
        why = "opposite verdicts" if OPPOSITE <= found else "ratios that differ beyond noise"
        return {**tested, "verdict": "not pooled",
                "note": f"the origins disagree ({why}: Cochran's Q p={p:.2g}, I²={i2:.0%}); "
                        "read each origin's ratio"}
    level = float(levels.min())
    half = float(ndtri(0.5 + level / 2) / math.sqrt(np.sum(w)))
    rope = float(group["rope_high"].iloc[0]) - 1.0 if "rope_high" in group else 0.05
    decided, note = verdict(math.exp(mean - half), math.exp(mean + half), rope=rope)
    return {**tested, "ratio": math.exp(mean), "ratio_ci_low": math.exp(mean - half),
            "ratio_ci_high": math.exp(mean + half), "ratio_ci_level": level, "pooled": True,
            "verdict": decided,
            "note": f"{note}; fixed-effect mean of {theta.size} origins (Q p={p:.2g})"}


def _holds_on(group: pd.DataFrame) -> str:
    """"every origin" when all reached one verdict, else each verdict with its origins."""
    verdicts = dict(zip(group["run"].astype(str), group["verdict"].astype(str)))
    if len(set(verdicts.values())) == 1:
        return "every origin"
    by = {}
    for origin, found in verdicts.items():
        by.setdefault(found, []).append(origin)
    return "; ".join(f"{found}: {', '.join(names)}" for found, names in sorted(by.items()))
