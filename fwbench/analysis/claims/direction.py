"""Claims on who is faster, judged on the comparisons (PyTorch/TensorFlow ratios with their
verdicts): ``direction`` (one framework faster) and ``mixed`` (each wins somewhere)."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims.wording import (
    OUTCOME_LABELS,
    fmt_interval,
    missing,
    outcome,
    sig,
)


def _rated(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[[not missing(r) for r in rows["ratio"]]] if "ratio" in rows else rows.iloc[0:0]


NO_RATIO = "not measured in this run: the selected pairs have no ratio"


def judge_direction(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    """``expect`` faster in every selected pair (``aggregate: all``) or in most of them."""
    rows = _rated(rows)
    if rows.empty:
        return "not measured", NO_RATIO
    expect = claim["test"]["expect"]
    opposite = "tensorflow_faster" if expect == "pytorch_faster" else "pytorch_faster"
    kinds = [outcome(r) for _, r in rows.iterrows()]
    n, agree, against = len(kinds), kinds.count(expect), kinds.count(opposite)
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
    return verdict, ratio_summary(rows, kinds, claim.get("published_ratio"))


def ratio_summary(rows: pd.DataFrame, kinds: list[str], published) -> str:
    """The ratios judged, with the outcomes counted (and, for one pair, its interval against
    the published range)."""
    counts = ", ".join(f"{kinds.count(k)} {OUTCOME_LABELS[k]}" for k in OUTCOME_LABELS
                       if kinds.count(k))
    if len(rows) == 1:
        row = rows.iloc[0]
        text = f"ratio {sig(row['ratio'])}"
        if not missing(row.get("ratio_ci_low")) and not missing(row.get("ratio_ci_high")):
            text += f" {fmt_interval(row['ratio_ci_low'], row['ratio_ci_high'])}"
            if published:
                low, high = row["ratio_ci_low"], row["ratio_ci_high"]
                inside = low <= published[1] and high >= published[0]
                text += (f"; {'overlaps' if inside else 'outside'} the published "
                         f"{sig(published[0])}–{sig(published[1])}")
        return f"{text} ({counts})"
    ratios = rows["ratio"].astype(float)
    return (f"{len(rows)} pairs, ratio {sig(ratios.min())} to {sig(ratios.max())}: {counts}")


def judge_mixed(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    """Each framework shown faster in at least one selected pair."""
    rows = _rated(rows)
    if rows.empty:
        return "not measured", NO_RATIO
    kinds = [outcome(r) for _, r in rows.iterrows()]
    pt, tf = kinds.count("pytorch_faster"), kinds.count("tensorflow_faster")
    if pt and tf:
        verdict = "confirmed"
    elif len(kinds) >= 2 and (pt == len(kinds) or tf == len(kinds)):
        verdict = "contradicted"
    else:
        verdict = "inconclusive"
    return verdict, ratio_summary(rows, kinds, None)
