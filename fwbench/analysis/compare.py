"""Two runs, cell by cell: what got slower, what got faster and what stayed the same from run A
(the baseline) to run B (``fwbench compare``), and what differs between their environments.

A cell is one framework's measurement (its cell id names every axis). Each cell the two runs
share gets the ratio B/A of the main analysis's per-trial quantity, the time per step
(``VALUE``, from ``trial_stats.trial_statistics``: the mean of a trial's timed blocks per
step), from every ok trial, as the main analysis uses them (``compare_unpaired``):

- The trials of two runs are not paired (different sessions, often different machines), so the
  interval is unpaired: Welch's t interval of the difference of the mean log times per step,
  exponentiated. It is the unpaired twin of the main analysis's paired t interval of the mean
  log ratio: the same estimand (a ratio of geometric means), so a ratio here means what a ratio
  in the report means, and the number shown, its interval and its test are one estimator.
  Welch's, not Student's: a run on another machine may be noisier.
- The rank check beside it, never instead: the Brunner-Munzel test (valid with unequal spreads,
  and insensitive to one slow trial), Holm-adjusted over the cells; a verdict it does not
  confirm at the same error rate says so in its note.
- One error control over every cell compared: each interval is at the Bonferroni level
  1 - alpha/m for the m cells, so all m cover together with probability at least 1 - alpha.
  "slower" and "faster" read that interval (it excludes 1); "same" is the TOST at alpha/m on
  each side against the margin of run A's analysis plan (``statistics.rope``), read from the
  1 - 2 alpha/m interval (Schuirmann 1987), as the main analysis reads it; anything else is
  "inconclusive" (``estimators.verdict``, the run's one verdict rule).
- Each cell states the smallest slowdown its interval would call "slower" with 80 % power,
  given its spreads and trials (``detectable_slowdown``): a gate that passes says what it
  could not have seen.
- The gate (``--fail-on-slowdown PCT``, ``slowdowns``) fails a cell that is confidently slower
  and whose ratio exceeds 1 + PCT/100, as asv continuous does.

docs/compare.md describes the columns, the rule and the gate's error rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.optimize import brentq

from fwbench.analysis.estimators import holm, quietly, verdict
from fwbench.analysis.run_folder import Run
from fwbench.analysis.stats import with_default_axes
from fwbench.analysis.tables import AXES
from fwbench.analysis.trial_quality import exploratory_reasons
from fwbench.analysis.trial_stats import trial_statistics
from fwbench.analysis.versions import diff_versions
from fwbench.errors import FwbenchError

__all__ = ["Comparison", "compare_runs", "compare_unpaired", "detectable_slowdown", "slowdowns",
           "environment_differences", "CELL_COLUMNS", "VERDICTS", "POWER"]

VERDICTS = ("slower", "faster", "same", "inconclusive")
# A cell only one run has (with ok trials) is listed but not compared.
NOT_COMPARED = "not compared"

CELL_COLUMNS = [
    "cell_id", *AXES, "n_a", "n_b", "time_a_ns", "time_b_ns", "ratio", "ratio_ci_low",
    "ratio_ci_high", "ratio_ci_level", "detectable_slowdown", "equivalence_ci_low",
    "equivalence_ci_high", "equivalence_ci_level", "family_size", "welch_t", "welch_df",
    "welch_p", "p_adjusted", "brunnermunzel_p", "brunnermunzel_p_holm", "rope_low", "rope_high",
    "verdict", "exploratory", "note",
]

# The per-trial quantity the main analysis's comparisons decide by: time per step.
VALUE = "trial_step_ns"
# The power at which each cell's detectable slowdown is stated.
POWER = 0.8

# What the machine section compares, from the trials table (fwbench.analysis.tables).
MACHINE = {"hostname": "host", "cpu_model": "CPU model", "cpu_count": "CPU cores",
           "platform": "platform", "device_name": "GPU", "driver": "NVIDIA driver"}
IMAGE = {"container": "container", "image_digest": "image digest"}
# Version-audit items the machine and image sections already show.
SHOWN = {"CPU model", "CPU logical cores", "NVIDIA driver", "GPU names", "container",
         "image digest"}


@dataclass
class Comparison:
    """The outcome of ``compare_runs``: one row per cell of either run, and what differs."""

    a: str
    b: str
    cells: pd.DataFrame
    environment: list[dict]
    confidence: float
    rope: float

    @property
    def compared(self) -> pd.DataFrame:
        return self.cells[self.cells["verdict"] != NOT_COMPARED]

    def counts(self) -> dict[str, int]:
        verdicts = list(self.compared["verdict"])
        return {v: verdicts.count(v) for v in VERDICTS}

    def undecided(self) -> str:
        """Why no cell could be decided, or "" when one could: a gate that saw nothing must
        not pass (``fwbench compare`` exits 3)."""
        compared = self.compared
        if compared.empty:
            return "the two runs share no cell with ok trials"
        if compared["ratio_ci_low"].isna().all():
            return (f"none of the {len(compared)} shared cells has an interval (fewer than two "
                    "ok trials on a side, or no spread)")
        return ""


def compare_runs(a: Run, b: Run) -> Comparison:
    """Compare run B against run A, the baseline, with A's analysis plan. Usage::

        result = compare_runs(load_run("results/reference"), load_run("results/default"))
        result.cells[["cell_id", "ratio", "verdict"]], result.environment
    """
    stats = a.statistics
    confidence, rope = float(stats["confidence"]), float(stats["rope"])
    arms_a, arms_b = _arms(a), _arms(b)
    shared = sorted(set(arms_a) & set(arms_b))
    m = max(1, len(shared))
    rows = []
    for cell_id in sorted(set(arms_a) | set(arms_b)):
        if cell_id not in shared:
            side = "A" if cell_id in arms_a else "B"
            axes = (arms_a if side == "A" else arms_b)[cell_id][0]
            rows.append({"cell_id": cell_id, **axes, "verdict": NOT_COMPARED,
                         "note": f"only in run {side}"})
            continue
        axes, arm_a = arms_a[cell_id]
        _, arm_b = arms_b[cell_id]
        rows.append({"cell_id": cell_id, **axes,
                     **_compare_cell(arm_a, arm_b, m, confidence, rope,
                                     int(stats["min_trials_for_verdict"]))})
    cells = pd.DataFrame(rows, columns=CELL_COLUMNS)
    compared = cells["verdict"] != NOT_COMPARED
    cells.loc[compared, "brunnermunzel_p_holm"] = holm(cells.loc[compared, "brunnermunzel_p"])
    cells["note"] = [_note(r, 1 - confidence) for r in cells.itertuples()]
    return Comparison(a.name, b.name, cells, environment_differences(a, b), confidence, rope)


def _arms(run: Run) -> dict[str, tuple[dict, dict]]:
    """cell id -> (its axes, its ok trials' values as arrays) of a single run."""
    trials = with_default_axes(run.trials)
    origins = sorted(trials["run"].astype(str).unique()) if "run" in trials else []
    if len(origins) > 1:
        raise FwbenchError(f"{run.path} is merged from {len(origins)} runs ({', '.join(origins)})"
                           ": its cells hold trials of several machines or sessions; compare "
                           "the runs it was merged from")
    per_trial = trial_statistics(trials, with_default_axes(run.iterations))
    columns = ["trial", VALUE]
    arms = {}
    for cell_id, group in per_trial.sort_values("trial").groupby("cell_id", sort=True):
        axes = {axis: group[axis].iloc[0] for axis in AXES}
        arms[cell_id] = axes, {c: group[c].to_numpy() for c in columns if c in group}
    return arms


def _compare_cell(arm_a: dict, arm_b: dict, m: int, confidence: float, rope: float,
                  min_trials: int) -> dict:
    values_a, values_b = (arm[VALUE].astype(float) for arm in (arm_a, arm_b))
    decided = compare_unpaired(values_a, values_b, family_size=m, confidence=confidence,
                               rope=rope)
    check, _ = quietly(sps.brunnermunzel, np.log(values_b), np.log(values_a))
    reasons = exploratory_reasons(values_a.size, values_b.size, min_trials)
    return {**decided, "n_a": values_a.size, "n_b": values_b.size,
            "time_a_ns": float(np.median(values_a)), "time_b_ns": float(np.median(values_b)),
            "brunnermunzel_p": float(check.pvalue), "exploratory": bool(reasons),
            "note": "; ".join([decided["note"], *reasons])}


def compare_unpaired(a, b, *, family_size: int = 1, confidence: float = 0.95,
                     rope: float = 0.05) -> dict:
    """The ratio B/A of two unpaired samples of positive per-trial values, decided as the
    module says: Welch's t interval of mean log b - mean log a at 1 - alpha/m ("slower",
    "faster"), the 1 - 2 alpha/m one for equivalence ("same"). Usage::

        compare_unpaired(steps_a, steps_b, family_size=16)["verdict"]
    """
    a, b = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    alpha = 1.0 - confidence
    level, eq_level = 1.0 - alpha / family_size, 1.0 - 2.0 * alpha / family_size
    out = {"ratio_ci_level": level, "equivalence_ci_level": eq_level, "family_size": family_size,
           "rope_low": 1.0 / (1.0 + rope), "rope_high": 1.0 + rope}
    if a.size < 2 or b.size < 2 or not (np.ptp(a) > 0 or np.ptp(b) > 0):
        ratio = math.exp(b.mean() - a.mean()) if a.size and b.size else math.nan
        return {**out, "ratio": ratio, "verdict": "inconclusive",
                "note": "no interval: fewer than two trials on a side, or no spread"}
    test = sps.ttest_ind(b, a, equal_var=False)
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    ci, eq = test.confidence_interval(level), test.confidence_interval(eq_level)
    low, high, eq_low, eq_high = (math.exp(v) for v in (ci.low, ci.high, eq.low, eq.high))
    decided, note = verdict(low, high, rope=rope, names=("faster", "slower"),
                            equivalence=(eq_low, eq_high))
    return {**out, "ratio": math.exp(b.mean() - a.mean()), "ratio_ci_low": low,
            "ratio_ci_high": high, "detectable_slowdown": detectable_slowdown(se, test.df, level),
            "equivalence_ci_low": eq_low, "equivalence_ci_high": eq_high,
            "welch_t": float(test.statistic), "welch_df": float(test.df),
            "welch_p": float(test.pvalue), "p_adjusted": min(1.0, family_size * test.pvalue),
            "verdict": "same" if decided == "equivalent" else decided, "note": note}


def detectable_slowdown(se: float, df: float, level: float, power: float = POWER) -> float:
    """The smallest true ratio B/A above 1 that Welch's interval at ``level`` calls "slower"
    with probability ``power``, for a log difference of standard error ``se`` on ``df``
    degrees of freedom: the non-centrality at which the t statistic passes the interval's
    critical value that often (the non-central t), as a ratio. The observed spreads stand in
    for the true ones, as in any power calculation from data."""
    critical = sps.t.ppf((1 + level) / 2, df)

    def shortfall(shift: float) -> float:
        return sps.nct.sf(critical, df, shift) - power

    high = critical + 1
    while shortfall(high) < 0:  # few degrees of freedom need a far shift
        high *= 2
    return math.exp(se * brentq(shortfall, 0.0, high))


def _note(row, alpha: float) -> str:
    """The cell's note, and where the rank check does not confirm a change the interval found
    (trials of A and B that do not overlap at all leave Brunner-Munzel no p-value, its variance
    estimate being zero: the separation itself confirms)."""
    note = "" if not isinstance(row.note, str) else row.note
    if row.verdict in ("slower", "faster") and row.brunnermunzel_p_holm > alpha:
        note += ("; the Brunner-Munzel check (unequal spreads) does not confirm it at the same "
                 f"error rate (Holm p={row.brunnermunzel_p_holm:.2g})")
    return note


def slowdowns(cells: pd.DataFrame, percent: float) -> pd.DataFrame:
    """The cells (rows of compare.csv) that fail ``--fail-on-slowdown percent``: confidently
    slower (the interval at the family's level above 1) and slower by more than ``percent`` by
    their ratio, as asv continuous gates. Asking the interval's lower end to clear the
    threshold instead passed, at 10 %, a copy of the reference run whose PyTorch cells were all
    30 % slower (their lower ends 1.02 to 1.06)."""
    return cells[(cells["ratio_ci_low"] > 1) & (cells["ratio"] > 1 + percent / 100)]


# --- what differs between the two runs' environments ---------------------------------------

def environment_differences(a: Run, b: Run) -> list[dict]:
    """Rows of ``section, framework, item, a, b, differs``: the machine and each framework's
    image (always listed, so a reader sees they are the same), then every item of the version
    audit that differs (``versions.diff_versions``), then the analysis plan where it does."""
    rows = []
    for section, columns, by_framework in (("machine", MACHINE, False), ("image", IMAGE, True)):
        for framework in (_frameworks(a, b) if by_framework else [""]):
            for column, item in columns.items():
                va, vb = _values(a, column, framework), _values(b, column, framework)
                if va or vb:
                    rows.append(_row(section, framework, item, va, vb))
    for diff in diff_versions(a.versions, b.versions):
        if diff["item"] not in SHOWN:
            rows.append(_row("versions", diff["framework"], diff["item"], diff["this_run"],
                             diff["other_run"]))
    for key in sorted(set(a.statistics) | set(b.statistics)):
        va, vb = a.statistics.get(key), b.statistics.get(key)
        if va != vb:
            rows.append(_row("analysis plan", "", f"statistics.{key} (A's is used)",
                             _text(va), _text(vb)))
    return rows


def _row(section: str, framework: str, item: str, a: str, b: str) -> dict:
    return {"section": section, "framework": framework, "item": item, "a": a, "b": b,
            "differs": a != b}


def _frameworks(a: Run, b: Run) -> list[str]:
    return sorted(set(a.trials["framework"].astype(str)) | set(b.trials["framework"].astype(str)))


def _values(run: Run, column: str, framework: str) -> str:
    trials = run.trials
    if column not in trials:
        return ""
    if framework:
        trials = trials[trials["framework"].astype(str) == framework]
    return " | ".join(sorted({_text(v) for v in trials[column] if not _missing(v)}))


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _text(value) -> str:
    return "" if value is None else str(value)
