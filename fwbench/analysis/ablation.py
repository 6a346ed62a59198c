"""How much of the PyTorch/TensorFlow gap each ablation factor explains, and patel2023's
explanation tested (stats/ablation.csv and stats/gaps.csv). Framework-free.

Decomposition (``decompose``), on g = log(PyTorch median / TensorFlow median) of each point:

- ``sequential`` (the default): the contribution of the k-th factor is g(before) − g(after)
  along the stated order; k + 1 points per model × phase × batch × device. Cheap, but when two
  factors interact the one applied first takes the interaction.
- ``shapley``: every subset of the factors the device can vary is measured (2^k points), and each
  factor's contribution is its Shapley value: the average of g(S) − g(S ∪ {factor}) over all k!
  orders. Independent of any order, interactions shared equally; exponential in k.

Both add up exactly: contributions + residual = the gap at defaults, where the residual is
g at the last point (all listed factors matched). Intervals: a percentile bootstrap that
resamples trials within each framework's arm of each point, jointly for all points of a group, so
every replicate adds up too (the unit of replication is the trial, as everywhere in fwbench).

Usage::

    table = decompose(tables["trials"], config["ablation"])
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from fwbench.analysis.columns import CELL_AXES, without
from fwbench.plan.ablation import Point, ablation_points, factor_reason, validate_ablation
from fwbench.plan.cells import MODES
from fwbench.plan.frameworks import COMPARED, per_side, sides

GROUP = ["run", *without(CELL_AXES, "framework", "precision", "mode", "profile")]
DECOMPOSITION_COLUMNS = [
    *GROUP, "row", "step", "factor", "profile", "mode", "precision", "status", "reason",
    *per_side("n_{}"), "ratio", "contribution", "contribution_ci_low",
    "contribution_ci_high", "ratio_explained", "share", "share_ci_low", "share_ci_high",
    "ci_level", "method", "note",
]


def _trial_medians(trials: pd.DataFrame) -> pd.DataFrame:
    column = "trial_median_ns" if "trial_median_ns" in trials else "median_ns"
    ok = trials[(trials["status"] == "ok") & trials[column].notna()].copy()
    ok["t"] = ok[column].astype(float)
    ok["input_shape"] = ok["input_shape"].map(_shape_text)
    return ok


def _shape_text(shape) -> str:
    if isinstance(shape, str):
        return shape
    return "x".join(str(int(v)) for v in shape)


def _failure(trials: pd.DataFrame, point: Point) -> str:
    """Why a point has no ok arm: the first message of its failed trials, or that none ran."""
    rows = trials[(trials["profile"] == point.profile) & (trials["mode"] == point.mode)
                  & (trials["precision"] == point.precision) & (trials["status"] != "ok")]
    if len(rows):
        first = rows.iloc[0]
        return f"{first['framework']} trials ended {first['status']}: {first['message']}"
    return "no ok trial of both frameworks at this point in the tables"


def decompose(trials: pd.DataFrame, ablation: dict, *, confidence: float = 0.95,
              n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per run × experiment × device × model × phase × batch × input shape: the gap at defaults
    (row ``total``), each factor's contribution (rows ``factor``), and what is left with every
    listed factor matched (row ``residual``), all on log(PyTorch median / TensorFlow median).

    ``trials``: the trials table (``median_ns`` per trial) or the output of
    ``fwbench.analysis.trial_stats.trial_statistics`` (``trial_median_ns``); only ok trials count,
    and only cells of the ablation's points.
    ``contribution`` > 0 means matching the factor lowers PyTorch's time relative to
    TensorFlow's, by the factor ``ratio_explained`` = exp(contribution); ``share`` is the
    contribution over the total gap, given only when the gap's interval excludes 0.
    """
    ablation = validate_ablation(ablation)
    if trials is None or trials.empty:
        return pd.DataFrame(columns=DECOMPOSITION_COLUMNS)
    frame = trials.copy()
    frame["input_shape"] = frame["input_shape"].map(_shape_text)
    ok = _trial_medians(frame)
    rng = np.random.default_rng(seed)
    rows = []
    keys = [k for k in GROUP if k in frame]
    for key, group in frame.groupby(keys, sort=True):
        ident = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        points = ablation_points(ablation, ident["device"])
        arms = _arms(ok.loc[ok.index.isin(group.index)], points)
        if points[0] not in arms:
            continue  # not an ablation group (or its start is missing entirely)
        rows.extend(_group_rows(ident, group, points, arms, ablation, confidence, n_boot, rng))
    return pd.DataFrame(rows, columns=DECOMPOSITION_COLUMNS)


def _arms(ok: pd.DataFrame, points: list[Point]) -> dict:
    """point -> (PyTorch trial medians, TensorFlow trial medians), for points with both."""
    out = {}
    for p in points:
        if p.reason:
            continue
        cell = ok[(ok["profile"] == p.profile) & (ok["mode"] == p.mode)
                  & (ok["precision"] == p.precision)]
        pt, tf = (cell.loc[cell["framework"] == side, "t"].to_numpy(float) for side in COMPARED)
        if pt.size and tf.size:
            out[p] = (pt, tf)
    return out


def _boot_log_ratio(pt, tf, n_boot, rng) -> np.ndarray:
    bp = np.median(pt[rng.integers(pt.size, size=(n_boot, pt.size))], axis=1)
    bt = np.median(tf[rng.integers(tf.size, size=(n_boot, tf.size))], axis=1)
    return np.log(bp) - np.log(bt)


class _Group:
    """One ablation group's measured points: the log ratio g of each, its bootstrap replicates
    (drawn once, in the order of ``arms``, so that every row of the group adds up in every
    replicate), and the row every table line of the group is made by."""

    def __init__(self, ident, trials, points, arms, ablation, confidence, n_boot, rng):
        self.ident, self.trials, self.points, self.arms = ident, trials, points, arms
        self.ablation, self.confidence, self.n_boot = ablation, confidence, n_boot
        self.tail = (1 - confidence) / 2 * 100
        self.g = {p: math.log(np.median(pt) / np.median(tf)) for p, (pt, tf) in arms.items()}
        self.reps = {p: _boot_log_ratio(pt, tf, n_boot, rng) for p, (pt, tf) in arms.items()}
        self.start = points[0]
        self.total, self.total_reps = self.g[self.start], self.reps[self.start]
        t_low, t_high = np.percentile(self.total_reps, [self.tail, 100 - self.tail])
        self.gap_known = bool(t_low > 0 or t_high < 0)
        listed = " → ".join(ablation["factors"])
        self.method = (f"sequential, in the order {listed}" if ablation["order"] == "sequential"
                       else "Shapley value over every order of the factors the device can vary")
        self.method += "; percentile bootstrap over trials within each arm"

    def row(self, kind, point, value, boot, **extra) -> dict:
        """A row of the table for ``point`` (None: no point), with its contribution ``value``
        and that contribution's replicates ``boot`` when there is one."""
        tail = self.tail
        pt, tf = self.arms.get(point, (np.array([]), np.array([]))) if point else ([], [])
        out = {**self.ident, "row": kind, "profile": point.profile if point else None,
               "mode": point.mode if point else None,
               "precision": point.precision if point else None,
               **sides("n_{}", len(pt), len(tf)), "ci_level": self.confidence,
               "method": self.method, "status": "measured", "reason": "", "note": ""}
        if point is not None and point in self.g:
            out["ratio"] = math.exp(self.g[point])
        if value is not None and boot is not None:
            low, high = np.percentile(boot, [tail, 100 - tail])
            out.update(contribution=value, contribution_ci_low=float(low),
                       contribution_ci_high=float(high), ratio_explained=math.exp(value))
            if self.gap_known and kind != "total":
                s_low, s_high = np.percentile(boot / self.total_reps, [tail, 100 - tail])
                out.update(share=value / self.total, share_ci_low=float(s_low),
                           share_ci_high=float(s_high))
            elif kind == "total":
                out.update(share=1.0, share_ci_low=1.0, share_ci_high=1.0)
        out.update(extra)
        return out


def _group_rows(ident, group, points, arms, ablation, confidence, n_boot, rng) -> list[dict]:
    """A group's rows: the gap at defaults, one per factor, and the residual."""
    grp = _Group(ident, group, points, arms, ablation, confidence, n_boot, rng)
    rows = [grp.row("total", grp.start, grp.total, grp.total_reps, step=0, factor="defaults",
                    note="" if grp.gap_known else "the gap's interval contains 0 (no gap "
                    "established): shares are left out")]
    if ablation["order"] == "sequential":
        factor_rows, last, residual_note = _sequential_rows(grp)
    else:
        factor_rows, last, residual_note = _shapley_rows(grp)
    rows += factor_rows
    step = len(ablation["factors"]) + 1
    if last is not None:
        rows.append(grp.row("residual", last, grp.g[last], grp.reps[last], step=step,
                            factor="residual",
                            note=residual_note or "PyTorch/TensorFlow log ratio with every "
                                                  "listed factor matched"))
    else:
        rows.append(grp.row("residual", None, None, None, step=step,
                            factor="residual", status="not measured",
                            reason="not every point of the ablation was measured"))
    return rows


def _sequential_rows(grp: _Group) -> tuple[list[dict], Point, str]:
    """Each factor's contribution along the stated order, from the last measured point before
    it; (rows, the last measured point, the residual's note)."""
    rows, points, arms, g, reps = [], grp.points, grp.arms, grp.g, grp.reps
    start = grp.start
    previous, skipped = start, []
    for k, p in enumerate(points[1:], start=1):
        if p.reason:
            rows.append(grp.row("factor", p, None, None, step=k, factor=p.factor,
                                status="unsupported", reason=p.reason))
            continue
        if p not in arms:
            skipped.append(p.factor)
            rows.append(grp.row("factor", p, None, None, step=k, factor=p.factor,
                                status="not measured", reason=_failure(grp.trials, p)))
            continue
        note = (f"includes {', '.join(skipped)} (not measured: compared with the last "
                "measured point)" if skipped else "")
        rows.append(grp.row("factor", p, g[previous] - g[p], reps[previous] - reps[p], step=k,
                            factor=p.factor, note=note))
        previous, skipped = p, []
    last = previous
    if skipped or last is start and len(points) > 1 and any(
            not p.reason for p in points[1:]):
        residual_note = (f"at {last.profile}/{last.mode}/{last.precision}, the last measured "
                         "point: the listed factors after it are not all measured")
    else:
        residual_note = ""
    return rows, last, residual_note


def _shapley_rows(grp: _Group) -> tuple[list[dict], Point | None, str]:
    """Each factor's Shapley value over the factors the device can vary, when every subset of
    them was measured; (rows, the point with all of them matched or None, the residual's
    note)."""
    rows, points, arms, g, reps = [], grp.points, grp.arms, grp.g, grp.reps
    device = grp.ident["device"]
    measured = [p for p in points if p in arms]
    variable = [f for f in grp.ablation["factors"] if not factor_reason(f, device)]
    by_set = {p.matched: p for p in measured}
    complete = all(frozenset(s) in by_set for k in range(len(variable) + 1)
                   for s in itertools.combinations(variable, k))
    m = len(variable)
    for k, f in enumerate(grp.ablation["factors"], start=1):
        reason = factor_reason(f, device)
        p = next((q for q in points if q.factor == f), None)
        if reason:
            rows.append(grp.row("factor", p, None, None, step=k, factor=f,
                                status="unsupported", reason=reason))
            continue
        if not complete:
            missing = [q for q in points if not q.reason and q not in arms]
            rows.append(grp.row("factor", p, None, None, step=k, factor=f,
                                status="not measured",
                                reason="Shapley values need every subset measured; missing "
                                       + "; ".join(f"{q.profile}/{q.mode}/{q.precision} ("
                                                   f"{_failure(grp.trials, q)})"
                                                   for q in missing)))
            continue
        value, boot = 0.0, np.zeros(grp.n_boot)
        others = [v for v in variable if v != f]
        for size in range(len(others) + 1):
            weight = math.factorial(size) * math.factorial(m - size - 1) / math.factorial(m)
            for subset in itertools.combinations(others, size):
                before, after = by_set[frozenset(subset)], by_set[frozenset(subset) | {f}]
                value += weight * (g[before] - g[after])
                boot = boot + weight * (reps[before] - reps[after])
        rows.append(grp.row("factor", p, value, boot, step=k, factor=f))
    last = by_set.get(frozenset(variable), grp.start) if complete else None
    return rows, last, ""


# --- patel2023's explanation, tested -------------------------------------------------------------

# Each counterfactual changes what one or both frameworks run, from the idiomatic baseline
# (PyTorch eager, TensorFlow tf.function): (name, PyTorch mode, TensorFlow mode, what it tests).
BASELINE = ("eager", "function")
COUNTERFACTUALS = (
    ("TensorFlow eager", "eager", "eager",
     "TensorFlow without its static graph: if the graph is TensorFlow's advantage, the gap closes"),
    ("PyTorch torch.compile", "compile", "function",
     "PyTorch with a compiled graph of its own: if graphs are the advantage, the gap closes"),
    ("TensorFlow XLA", "eager", "xla",
     "TensorFlow compiled by XLA: if XLA is the advantage, the gap widens"),
    ("both compiled", "compile", "xla",
     "torch.compile against XLA: the compilers compared"),
)
GAP_COLUMNS = [
    *GROUP, "precision", "profile", "counterfactual", *per_side("{}_mode"),
    "tests", *per_side("n_{}"), "baseline_ratio", "baseline_ci_low",
    "baseline_ci_high", "ratio", "ratio_ci_low", "ratio_ci_high", "ci_level", "gap_closed",
    "gap_closed_ci_low", "gap_closed_ci_high", "interleaved", "verdict", "note",
]


def _framework_mode(row) -> str:
    return MODES.get(row["mode"], {}).get(row["framework"], "")


def _pick_arm(cells: pd.DataFrame, framework: str, fmode: str, partner: str | None):
    """Trial medians of ``framework`` running ``fmode``; from the cell whose pair also runs
    ``partner`` on the other side when there is one (interleaved), else from any cell.
    Returns (values, mode pair name)."""
    side = cells[(cells["framework"] == framework) & (cells["fmode"] == fmode)]
    if side.empty:
        return np.array([]), None
    other = next(side for side in COMPARED if side != framework)
    for mode, group in side.groupby("mode", sort=True):
        if partner and MODES.get(mode, {}).get(other) == partner:
            return group["t"].to_numpy(float), mode
    mode = sorted(side["mode"].unique())[0]
    return side.loc[side["mode"] == mode, "t"].to_numpy(float), mode


def gap_tests(trials: pd.DataFrame, *, confidence: float = 0.95, rope: float = 0.05,
              n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """patel2023 credits TensorFlow's CPU advantage to its static graph and XLA. Per model ×
    phase × batch × device × precision × profile with an idiomatic baseline (PyTorch eager
    against TensorFlow tf.function), each counterfactual of ``COUNTERFACTUALS`` that was
    measured: its ratio, and how much of the baseline gap it closes, on log time
    (``gap_closed`` = 1 − log r / log r_baseline: 1 closes it, 0 leaves it, < 0 widens it).

    Ratios carry the Hodges-Lehmann interval of ``fwbench.analysis.estimators`` (log trial medians);
    ``gap_closed`` a percentile bootstrap over trials. ``interleaved`` is False when the two arms
    come from different cell pairs (PyTorch torch.compile against TensorFlow tf.function has no
    mode pair of its own), which were measured in the same run but not alternated.
    """
    from fwbench.analysis.estimators import hodges_lehmann

    if trials is None or trials.empty:
        return pd.DataFrame(columns=GAP_COLUMNS)
    ok = _trial_medians(trials)
    if ok.empty:
        return pd.DataFrame(columns=GAP_COLUMNS)
    ok["fmode"] = ok.apply(_framework_mode, axis=1)
    rng = np.random.default_rng(seed)
    tail = (1 - confidence) / 2 * 100
    keys = [k for k in (*GROUP, "precision", "profile") if k in ok]
    rows = []
    for key, cells in ok.groupby(keys, sort=True):
        ident = dict(zip(keys, key))
        pt0, m0 = _pick_arm(cells, COMPARED[0], BASELINE[0], BASELINE[1])
        tf0, n0 = _pick_arm(cells, COMPARED[1], BASELINE[1], BASELINE[0])
        if not (pt0.size and tf0.size):
            continue
        base_hl = hodges_lehmann(np.log(pt0), np.log(tf0), confidence)
        base = math.log(np.median(pt0) / np.median(tf0))
        base_reps = _boot_log_ratio(pt0, tf0, n_boot, rng)
        for name, pmode, tmode, tests in COUNTERFACTUALS:
            pt, pm = _pick_arm(cells, COMPARED[0], pmode, tmode)
            tf, tm = _pick_arm(cells, COMPARED[1], tmode, pmode)
            if not (pt.size and tf.size):
                continue
            hl = hodges_lehmann(np.log(pt), np.log(tf), confidence)
            value = math.log(np.median(pt) / np.median(tf))
            reps = _boot_log_ratio(pt, tf, n_boot, rng)
            closed = 1 - value / base if base else math.nan
            with np.errstate(divide="ignore", invalid="ignore"):
                c_low, c_high = np.percentile(1 - reps / base_reps, [tail, 100 - tail])
            verdict, note = _gap_verdict(base_hl, hl, c_low, c_high, rope)
            if not hl.attained or not base_hl.attained:
                note += (f"; too few trials for a {confidence:.0%} interval (levels "
                         f"{base_hl.level:.0%} and {hl.level:.0%})")
            rows.append({
                **ident, "counterfactual": name, **sides("{}_mode", pmode, tmode),
                "tests": tests, **sides("n_{}", pt.size, tf.size),
                "baseline_ratio": math.exp(base), "baseline_ci_low": math.exp(base_hl.low),
                "baseline_ci_high": math.exp(base_hl.high), "ratio": math.exp(value),
                "ratio_ci_low": math.exp(hl.low), "ratio_ci_high": math.exp(hl.high),
                "ci_level": confidence, "gap_closed": closed, "gap_closed_ci_low": float(c_low),
                "gap_closed_ci_high": float(c_high), "interleaved": pm == tm, "verdict": verdict,
                "note": note,
            })
    return pd.DataFrame(rows, columns=GAP_COLUMNS)


def _gap_verdict(base, cf, closed_low, closed_high, rope) -> tuple[str, str]:
    lo_b, hi_b = math.log(1 / (1 + rope)), math.log(1 + rope)
    if not base.low > 0:
        return ("no TensorFlow advantage to explain",
                "the baseline interval does not lie above 1: TensorFlow is not shown faster here")
    if lo_b <= cf.low and cf.high <= hi_b:
        return "closes the gap", "the counterfactual ratio lies inside the equivalence region"
    if cf.high < 0:
        return "reverses the gap", "PyTorch is faster in the counterfactual"
    if closed_low > 0 and cf.low > 0:
        return "narrows the gap", "the gap shrinks but TensorFlow stays faster"
    if closed_high < 0:
        return "widens the gap", "TensorFlow's advantage grows"
    return "does not close the gap", "the change in the gap is not distinguishable from 0"


def summarize_ablation(trials: pd.DataFrame, ablation: dict | None, *, confidence: float = 0.95,
                       rope: float = 0.05, n_boot: int = 2000,
                       seed: int = 0) -> dict[str, pd.DataFrame]:
    """stats/ablation.csv (``decompose``) and stats/gaps.csv (``gap_tests``) from the trials
    table; the decomposition is empty when the config has no ablation."""
    decomposition = (decompose(trials, ablation, confidence=confidence, n_boot=n_boot, seed=seed)
                     if ablation else pd.DataFrame(columns=DECOMPOSITION_COLUMNS))
    return {"ablation": decomposition,
            "gaps": gap_tests(trials, confidence=confidence, rope=rope, n_boot=n_boot,
                              seed=seed)}
