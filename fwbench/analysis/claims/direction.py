"""Claims on who is faster, judged on the comparisons (PyTorch/TensorFlow ratios with their
verdicts): ``direction`` (one framework faster, or by how much where the paper states a ratio),
``mixed`` (each wins somewhere) and ``sometimes`` (one wins somewhere, not everywhere)."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims.kinds import register
from fwbench.analysis.claims.rows import comparisons_hint, on_selected
from fwbench.analysis.claims.wording import (
    OUTCOME_LABELS,
    fmt_interval,
    missing,
    outcome,
    sig,
)
from fwbench.plan.frameworks import FASTER, opposite


def _rated(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[[not missing(r) for r in rows["ratio"]]] if "ratio" in rows else rows.iloc[0:0]


NO_RATIO = "not measured in this run: the selected pairs have no ratio"


def judge_direction(rows: pd.DataFrame, claim: dict, margin: float) -> tuple[str, str]:
    """``expect`` faster in every selected pair (``aggregate: all``) or in most of them; a claim
    of a size (``published_ratio``) by its size (``judge_size``)."""
    rows = _rated(rows)
    if rows.empty:
        return "not measured", NO_RATIO
    kinds = [outcome(r) for _, r in rows.iterrows()]
    if claim.get("published_ratio"):
        return judge_size(rows, kinds, widened(claim["published_ratio"], margin))
    expect = claim["test"]["expect"]
    n, agree, against = len(kinds), kinds.count(expect), kinds.count(opposite(expect))
    equal = kinds.count("equivalent")
    need = n if claim["test"].get("aggregate", "all") == "all" else n // 2 + 1
    if agree >= need:
        verdict = "confirmed"
    elif against >= need or (against and not agree and need == n):
        verdict = "contradicted"
    elif equal >= need:
        verdict = "equivalent"
    else:
        verdict = "inconclusive"
    return verdict, ratio_summary(rows, kinds)


def widened(published, margin: float) -> tuple[float, float]:
    """A published ratio range widened by the plan's margin, on the log scale as the region of
    practical equivalence is (fwbench.analysis.estimators.verdict)."""
    return published[0] / (1 + margin), published[1] * (1 + margin)


def judge_size(rows: pd.DataFrame, kinds: list[str], band: tuple[float, float]):
    """"18 % faster" is a size, not a direction: confirmed when every pair's interval lies within
    ``band`` (the published range widened), contradicted when some exclude it and none lies
    within, else inconclusive. An interval that decides nothing (too few trials for its level,
    or none) stays open."""
    places = [_place(row, kind, band) for (_, row), kind in zip(rows.iterrows(), kinds)]
    within, outside = places.count("within"), places.count("outside")
    verdict = ("confirmed" if within == len(places) else
               "contradicted" if outside and not within else "inconclusive")
    said = (f"{within} of {len(places)} intervals within" if len(places) > 1 else
            "no interval at its level to set against" if places[0] == "open" else places[0])
    return verdict, (f"{ratio_summary(rows, kinds)}; {said} the published range widened by "
                     f"the margin, {sig(band[0])}–{sig(band[1])}")


def _place(row, kind: str, band: tuple[float, float]) -> str:
    """Where a pair's interval lies against ``band``: within, outside, overlaps, or open (no
    interval that decides)."""
    low, high = row.get("ratio_ci_low"), row.get("ratio_ci_high")
    if missing(low) or missing(high):
        return "open"
    low, high = float(low), float(high)
    if kind == "inconclusive" and (high < 1 or low > 1):
        return "open"      # excludes 1 yet inconclusive: its level was not attained
    if band[0] <= low and high <= band[1]:
        return "within"
    return "outside" if high < band[0] or low > band[1] else "overlaps"


def ratio_summary(rows: pd.DataFrame, kinds: list[str]) -> str:
    """The ratios judged, with the outcomes counted (one pair: with its interval)."""
    counts = ", ".join(f"{kinds.count(k)} {OUTCOME_LABELS[k]}" for k in OUTCOME_LABELS
                       if kinds.count(k))
    if len(rows) == 1:
        row = rows.iloc[0]
        text = f"ratio {sig(row['ratio'])}"
        if not missing(row.get("ratio_ci_low")) and not missing(row.get("ratio_ci_high")):
            text += f" {fmt_interval(row['ratio_ci_low'], row['ratio_ci_high'])}"
        return f"{text} ({counts})"
    ratios = rows["ratio"].astype(float)
    return (f"{len(rows)} pairs, ratio {sig(ratios.min())} to {sig(ratios.max())}: {counts}")


def judge_mixed(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    """Each framework shown faster in at least one selected pair."""
    rows = _rated(rows)
    if rows.empty:
        return "not measured", NO_RATIO
    kinds = [outcome(r) for _, r in rows.iterrows()]
    pt, tf = (kinds.count(faster) for faster in FASTER)
    if pt and tf:
        verdict = "confirmed"
    elif len(kinds) >= 2 and (pt == len(kinds) or tf == len(kinds)):
        verdict = "contradicted"
    else:
        verdict = "inconclusive"
    return verdict, ratio_summary(rows, kinds)


def judge_sometimes(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    """``expect`` is sometimes faster: both outcomes occur, or it occurs and the other is not
    excluded everywhere (a pair whose interval contains 1). Faster in every pair of two or more
    is always, not sometimes; never faster where every pair excludes it, contradicted too."""
    rows = _rated(rows)
    if rows.empty:
        return "not measured", NO_RATIO
    kinds = [outcome(r) for _, r in rows.iterrows()]
    expect = claim["test"]["expect"]
    wins, open_ = kinds.count(expect), kinds.count(opposite(expect)) + kinds.count("inconclusive")
    if wins and open_:
        verdict = "confirmed"
    elif (wins == len(kinds) >= 2) or (not wins and "inconclusive" not in kinds):
        verdict = "contradicted"
    else:
        verdict = "inconclusive"
    return verdict, ratio_summary(rows, kinds)


register("direction", on_selected(
    "comparisons", lambda rows, claim, _, margin: judge_direction(rows, claim, margin)),
    comparisons_hint)
register("mixed", on_selected("comparisons", lambda rows, claim, *_: judge_mixed(rows, claim)),
         comparisons_hint)
register("sometimes", on_selected(
    "comparisons", lambda rows, claim, *_: judge_sometimes(rows, claim)), comparisons_hint)
