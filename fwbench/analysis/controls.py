"""The A/A controls (config `controls`): one cell of one framework in both slots of a pair,
measured with the design of a real comparison and read with its primary analysis
(``comparisons.compare_paired``: the per-pair log ratios of time per step, slot a over slot b),
in a family of their own, outside the headline one: stats/controls.csv.

A design that finds a difference between a cell and itself cannot be trusted to find one
between two frameworks. A control passes when its ratio is equivalent to 1 within the plan's
margin for controls (``control_margin``, else ``rope``); the shipping gate
(fwbench.analysis.gate) fails a run with a control that does not.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fwbench.analysis.columns import AXES
from fwbench.analysis.comparisons import compare_paired
from fwbench.analysis.stats import with_default_axes
from fwbench.analysis.trial_stats import iteration_groups, trial_statistics
from fwbench.plan.sizing import N_MAX, control_margin as margin_of, pairs_for_equivalence

# Every axis of the controlled cell, its optimizer and world size included, so that the gate
# names it as it names the comparisons ("... with sgd").
CONTROL_AXES = AXES
CONTROL_COLUMNS = [
    "run", "control", *CONTROL_AXES, "family_size", "n_a", "n_b", "n_pairs", "ratio",
    "ratio_ci_low", "ratio_ci_high", "ratio_ci_level", "equivalence_ci_low",
    "equivalence_ci_high", "equivalence_ci_level", "sd_log_ratio", "paired_p", "tost_p",
    "rope_low", "rope_high", "verdict", "covers_1", "passed", "note",
]


def control_comparisons(trials: pd.DataFrame, iterations: pd.DataFrame, *,
                        confidence: float = 0.95, rope: float = 0.05,
                        control_margin: float | None = None,
                        min_trials_for_verdict: int = 7, seed: int = 0,
                        **_plan) -> pd.DataFrame:
    """controls.csv from the controls' trials and iterations tables: one row per control, its
    ratio (slot a over slot b) and interval at the Bonferroni level over the run's controls,
    its verdict, and whether it passed (equivalent to 1 within ``control_margin``, else
    ``rope``). ``_plan``: the rest of the analysis plan, which a control does not read (its
    family is the run's controls)."""
    if trials.empty:
        return pd.DataFrame(columns=CONTROL_COLUMNS)
    per_trial = trial_statistics(with_default_axes(trials),
                                 iteration_groups(with_default_axes(iterations)))
    groups = dict(list(trials.groupby(["run", "pair_id"], sort=True)))
    power = (_plan.get("sizing") or {}).get("power", 0.8)
    margin = margin_of({"control_margin": control_margin, "rope": rope})
    rows = []
    for (run, pair_id), planned in groups.items():
        ok = per_trial[(per_trial["run"] == run) & (per_trial["pair_id"] == pair_id)]
        a, b = (ok[ok["control"] == slot].set_index("trial")["trial_step_ns"].astype(float)
                for slot in ("a", "b"))
        common = a.index.intersection(b.index).sort_values()
        d = np.log(a[common].to_numpy()) - np.log(b[common].to_numpy())
        result = compare_paired(d, family_size=len(groups), confidence=confidence, rope=margin,
                                seed=seed, names=("a_faster", "b_faster"))
        covers = bool(result["ratio_ci_low"] <= 1 <= result["ratio_ci_high"])
        passed = result["verdict"] == "equivalent"
        first = planned.iloc[0]
        sd = float(np.std(d, ddof=1)) if d.size > 1 else math.nan
        rows.append({
            "run": run, "control": pair_id, **{k: first[k] for k in CONTROL_AXES},
            "family_size": len(groups), "n_a": len(a), "n_b": len(b), "n_pairs": len(common),
            **{k: result[k] for k in CONTROL_COLUMNS if k in result},
            "sd_log_ratio": sd, "covers_1": covers, "passed": passed,
            "note": _note(result, len(common), min_trials_for_verdict, covers,
                          _pairs_needed(sd, rope=margin, alpha=(1 - confidence) / len(groups),
                                        power=power)),
        })
    return pd.DataFrame(rows, columns=CONTROL_COLUMNS)


def passed(controls: pd.DataFrame) -> pd.Series:
    """Whether each control of a controls table passed (read back from controls.csv; none in
    a run without controls, whose table has no columns)."""
    if "passed" not in controls:
        return pd.Series(False, index=controls.index, dtype=bool)
    return controls["passed"].astype(str).str.lower().isin(["true", "1"])


def _pairs_needed(sd: float, *, rope: float, alpha: float, power: float) -> str:
    """What would show a true 1 equivalent at this control's per-pair SD, in words: the pairs
    the plan's sizing rule would ask (fwbench.plan.sizing) with ``power``; "" without an SD."""
    if not sd > 0:
        return ""
    try:
        needed = str(pairs_for_equivalence(sd=sd, rope=rope, alpha=alpha, power=power))
    except ValueError:
        needed = f"more than {N_MAX}"
    return (f" (at its per-pair SD of {sd:.3f}, showing it with power {power:g} needs {needed} "
            "pairs)")


def _note(result: dict, pairs: int, min_pairs: int, covers: bool, needed: str = "") -> str:
    if result["verdict"] == "equivalent":
        return f"passed: equivalent to 1 over {pairs} pairs"
    if result["verdict"].endswith("_faster"):
        return (f"failed: the design found a difference between a cell and itself "
                f"({result['ratio']:.3f}, interval excluding 1), a false positive")
    few = f"; fewer than the {min_pairs} pairs a verdict needs" if pairs < min_pairs else ""
    return ("failed: not shown equivalent to 1 within the margin: the run's noise is too large "
            f"for its {pairs} pairs to decide a difference that size{needed}{few}"
            + ("" if covers else "; its interval excludes 1"))

