"""patel2023's explanation of TensorFlow's CPU advantage (its static graph and XLA), judged on
the counterfactual mode tests (``gap_explanation``; fwbench.analysis.ablation.gap_tests)."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims.numbers import fmt
from fwbench.analysis.claims.rows import claim_rows, not_measured
from fwbench.analysis.claims.wording import join, sig

GAP_CLOSES = ("closes the gap", "reverses the gap", "narrows the gap")
GAP_KEEPS = ("does not close the gap", "widens the gap")
NO_ADVANTAGE = "no TensorFlow advantage to explain"


def judge_gap_explanation(gaps: pd.DataFrame | None, select: dict) -> dict:
    """It holds where switching TensorFlow to eager closes (or narrows, or reverses) an
    established TensorFlow advantage in most selected cells."""
    needs = ("needs PyTorch eager against TensorFlow tf.function and against TensorFlow eager "
             "on the selected cells (mode pairs `idiomatic` and `eager`)")
    if gaps is None or gaps.empty:
        return not_measured(needs, [])
    rows, notes = claim_rows(gaps, select)
    if isinstance(rows, str):
        return not_measured(rows, notes)
    eager = rows[rows["counterfactual"] == "TensorFlow eager"]
    if eager.empty:
        return not_measured(needs, notes)
    with_gap = eager[eager["verdict"] != NO_ADVANTAGE]
    ratios = join(sig(v) for v in eager["baseline_ratio"])
    if with_gap.empty:
        return {"verdict": "inconclusive", "notes": notes,
                "ours": f"no selected cell shows a TensorFlow advantage to explain (PyTorch "
                        f"eager / TensorFlow tf.function: {ratios})"}
    verdicts = list(with_gap["verdict"])
    closes = sum(v in GAP_CLOSES for v in verdicts)
    keeps = sum(v in GAP_KEEPS for v in verdicts)
    n = len(verdicts)
    verdict = ("confirmed" if closes > n / 2 else "contradicted" if keeps > n / 2
               else "inconclusive")
    ours = (f"switching TensorFlow to eager closed, narrowed or reversed the gap in {closes} of "
            f"{n} cells with a TensorFlow advantage (gap closed: "
            + join(fmt(v, "share") for v in with_gap["gap_closed"]) + ")")
    compiled = rows[(rows["counterfactual"] == "PyTorch torch.compile")
                    & (rows["verdict"] != NO_ADVANTAGE)]
    if len(compiled):
        ours += (f"; PyTorch with torch.compile did so in "
                 f"{sum(v in GAP_CLOSES for v in compiled['verdict'])} of {len(compiled)}")
    return {"verdict": verdict, "ours": ours, "notes": notes}
