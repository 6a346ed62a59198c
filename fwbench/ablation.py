"""The ablation: from each framework's defaults to matched settings one factor at a time, and
how much of the PyTorch/TensorFlow gap each factor explains. Framework-free.

Factors (config ``ablation.factors``, in the order the sequential ablation applies them):

- a settings factor of ``fwbench.frameworks.base.FACTORS`` (``tf32``, ``cudnn_autotune``,
  ``layout``, ``determinism``, ``memory_growth``): the settings profile gains it
  (``defaults`` → ``defaults+tf32`` → … → ``matched``; ``layout`` forces NHWC on both sides,
  which ``matched`` does not);
- ``mode=<pair>``: the execution-mode axis moves from the base mode (``ablation.base.mode``,
  default ``idiomatic``: PyTorch eager against TensorFlow tf.function) to the named pair of
  ``fwbench.cells.MODES`` (``eager``: both eager; ``compiled``: torch.compile against XLA);
- ``precision=<p>``: the precision axis moves from the base precision (``fp32``) to ``p``;
- ``threads``: accepted so the table can say why it explains nothing — both frameworks run
  with the same explicit thread counts in every profile, defaults included.

A factor the device cannot vary (TF32, cuDNN autotuning and memory growth on the CPU), a factor
whose matched value is already both frameworks' default (determinism), and threads give a point
whose cells end ``unsupported`` with the reason (``unsupported_reason``); such a point is skipped
by the chain: the next measured point is compared with the last measured one.

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

    points = ablation_points(config["ablation"], "cpu")   # the plan: one cell pair per point
    table = decompose(tables["trials"], config["ablation"])
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fwbench.cells import MODES
from fwbench.errors import ConfigError, Unsupported
from fwbench.frameworks.base import FACTORS, MATCHED, check_precision

ORDERS = ("sequential", "shapley")
PRECISIONS = ("fp32", "bf16", "fp16")
DEFAULT_BASE = {"mode": "idiomatic", "precision": "fp32"}
EXPERIMENT = "ablation"

THREADS_REASON = ("threads are set equal in both frameworks in every profile, defaults included "
                  "(the configured intra-op count and one inter-op thread, set explicitly in "
                  "each), so they cannot explain a gap")
# (factor, device) -> why matching the factor changes nothing that runs on the device.
_INERT = {
    ("tf32", "cpu"): "TF32 is a tensor-core math mode of NVIDIA GPUs (Ampere and later); CPU "
                     "kernels compute in full fp32 whatever the flag says",
    ("cudnn_autotune", "cpu"): "cuDNN autotuning chooses GPU convolution algorithms; CPU "
                               "convolutions (oneDNN, Eigen) are not affected by it",
    ("memory_growth", "cpu"): "memory growth is a GPU allocator setting (TensorFlow otherwise "
                              "reserves the whole GPU); CPU memory is allocated on demand by both",
}
_NO_OP = {
    "determinism": "nothing to vary: the matched value (non-deterministic kernels allowed) is "
                   "already both frameworks' default, so this step sets no value that differs",
}


def factor_reason(factor: str, device: str) -> str | None:
    """Why ``factor`` cannot vary on ``device`` (its cells end ``unsupported``), or None."""
    if factor == "threads":
        return THREADS_REASON
    if factor in _NO_OP:
        return _NO_OP[factor]
    if (factor, device) in _INERT:
        return _INERT[(factor, device)]
    if factor.startswith("precision="):
        try:
            check_precision(factor.split("=", 1)[1], device, bf16_supported=True)
        except Unsupported as exc:
            return str(exc)
    return None


def unsupported_reason(cell) -> str | None:
    """Why ``cell`` cannot be measured as an ablation step, or None: its profile names a factor
    its device cannot vary (``defaults+tf32`` on the CPU) or threads. ``matched`` is never
    refused: on the CPU it simply leaves the GPU-only settings without effect.

    The trial child calls this before importing a framework; the trial ends ``unsupported``.
    """
    if cell.profile == "matched":
        return None
    for factor in cell.profile.split("+")[1:]:
        reason = factor_reason(factor, cell.device)
        if reason:
            return f"{factor} on {cell.device}: {reason}"
    return None


# --- configuration -------------------------------------------------------------------------------

def validate_ablation(ablation: dict | None) -> dict | None:
    """The ``ablation`` config with its defaults, or None; ConfigError names a wrong value."""
    if ablation is None:
        return None
    out = {"order": "sequential", **ablation, "base": {**DEFAULT_BASE,
                                                       **(ablation.get("base") or {})}}
    factors = list(out.get("factors") or [])
    if not factors:
        raise ConfigError("ablation.factors must list at least one factor, e.g. [layout, "
                          "mode=eager]; got none")
    if out["order"] not in ORDERS:
        raise ConfigError(f"ablation.order must be one of {', '.join(ORDERS)}, got "
                          f"{out['order']!r}")
    if out["base"]["mode"] not in MODES:
        raise ConfigError(f"ablation.base.mode must be one of {', '.join(MODES)}, got "
                          f"{out['base']['mode']!r}")
    if out["base"]["precision"] not in PRECISIONS:
        raise ConfigError(f"ablation.base.precision must be one of {', '.join(PRECISIONS)}, "
                          f"got {out['base']['precision']!r}")
    seen_axes = set()
    for factor in factors:
        axis, _, value = factor.partition("=")
        if factor in FACTORS or factor == "threads":
            continue
        allowed = MODES if axis == "mode" else PRECISIONS if axis == "precision" else None
        if allowed is None or value not in allowed:
            raise ConfigError(
                f"ablation.factors: {factor!r} is not a factor; use threads, one of "
                f"{', '.join(FACTORS)}, mode=<{'|'.join(MODES)}> or "
                f"precision=<{'|'.join(PRECISIONS)}>")
        if axis in seen_axes:
            raise ConfigError(f"ablation.factors: at most one {axis}= factor, got "
                              f"{[f for f in factors if f.startswith(axis + '=')]}")
        if value == out["base"][axis]:
            raise ConfigError(f"ablation.factors: {factor!r} is the base {axis} "
                              f"(ablation.base.{axis}); name another {axis}")
        seen_axes.add(axis)
    if len(set(factors)) != len(factors):
        raise ConfigError(f"ablation.factors lists a factor twice: {factors}")
    out["factors"] = factors
    return out


# --- the points of the ablation ------------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    """One point of the ablation on one device: the cells (both frameworks) it measures.

    ``matched``: the factors matched here; ``factor``: the factor this point adds in the
    sequential order (None at the start and for Shapley subsets); ``reason``: why its cells are
    ``unsupported`` on the device (None when they are measured).
    """

    matched: frozenset
    profile: str
    mode: str
    precision: str
    factor: str | None = None
    reason: str | None = None


def profile_name(settings: set, device: str | None = None, *, shortcut: bool = True) -> str:
    """The canonical profile name of a set of matched settings factors (FACTORS order).

    With a ``device``, factors the device cannot vary count as matched, so the set that
    ``matched`` sets reads ``matched`` and the ablation reaches the sweep's own matched cells.
    The layout factor (NHWC forced on both sides) is not part of ``matched``, and the empty set
    is always ``defaults``: the ablation starts there even where ``matched`` changes nothing.
    """
    inert = {f for f in FACTORS if device and factor_reason(f, device)}
    if shortcut and settings and set(MATCHED) <= set(settings) | inert \
            and "layout" not in settings:
        return "matched"
    names = [f for f in (*FACTORS, "threads") if f in settings]
    return "+".join(["defaults", *names])


def _point(matched: frozenset, device: str, base: dict, factor=None, reason=None) -> Point:
    settings = {f for f in matched if f in FACTORS}
    mode, precision = base["mode"], base["precision"]
    for f in matched:
        if f.startswith("mode="):
            mode = f.split("=", 1)[1]
        elif f.startswith("precision="):
            precision = f.split("=", 1)[1]
    if reason and factor in (*FACTORS, "threads"):  # the cell's name says which cannot vary
        name = profile_name(settings | {factor}, shortcut=False)
    else:
        name = profile_name(settings, device)
    if reason:  # the axis value that cannot run (fp16 on the CPU): its trials say why
        if factor.startswith("precision="):
            precision = factor.split("=", 1)[1]
        elif factor.startswith("mode="):
            mode = factor.split("=", 1)[1]
    return Point(frozenset(matched), name, mode, precision, factor, reason)


def ablation_points(ablation: dict, device: str) -> list[Point]:
    """Every point the ablation measures on ``device``, the start (``defaults`` at the base mode
    and precision) first. The plan makes one cell per framework for each point, with
    ``experiment: ablation``; a point with a ``reason`` gives cells that end ``unsupported``.
    """
    ablation = validate_ablation(ablation)
    base, factors = ablation["base"], ablation["factors"]
    points = [_point(frozenset(), device, base)]
    if ablation["order"] == "sequential":
        matched = frozenset()
        for f in factors:
            reason = factor_reason(f, device)
            if not reason:
                matched = matched | {f}
            points.append(_point(matched, device, base, f, reason))
        return points
    variable = [f for f in factors if not factor_reason(f, device)]
    for f in factors:
        reason = factor_reason(f, device)
        if reason:
            points.append(_point(frozenset(), device, base, f, reason))
    for size in range(1, len(variable) + 1):
        for subset in itertools.combinations(variable, size):
            points.append(_point(frozenset(subset), device, base,
                                 subset[0] if size == 1 else None))
    return points


def ablation_profiles(factors, order: str = "sequential", device: str | None = None) -> list[str]:
    """The settings profiles an ablation over ``factors`` measures, from ``defaults`` on.

    Sequential: the cumulative profiles in the given order, ending at ``matched`` when every
    settings factor is listed (on a device, those it cannot vary count as listed); Shapley:
    every subset. Mode and precision factors add no profile (they move the mode and precision
    axes; see ``ablation_points``). Usage::

        ablation_profiles(["layout", "tf32"])        # ['defaults', 'defaults+layout',
                                                     #  'defaults+tf32+layout']
    """
    if device is None:
        settings = [f for f in factors if f in FACTORS]
        if order == "sequential":
            chain = [set(settings[:k]) for k in range(len(settings) + 1)]
        elif order == "shapley":
            chain = [set(c) for k in range(len(settings) + 1)
                     for c in itertools.combinations(settings, k)]
        else:
            raise ConfigError(f"ablation.order must be one of {', '.join(ORDERS)}, got {order!r}")
        names = [profile_name(s) for s in chain]
    else:
        names = [p.profile for p in ablation_points({"factors": list(factors), "order": order},
                                                    device)]
    return list(dict.fromkeys(names))


# --- the decomposition ---------------------------------------------------------------------------

GROUP = ["run", "experiment", "device", "model", "phase", "batch_size", "input_shape"]
DECOMPOSITION_COLUMNS = [
    *GROUP, "row", "step", "factor", "profile", "mode", "precision", "status", "reason",
    "n_pytorch", "n_tensorflow", "ratio", "contribution", "contribution_ci_low",
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

    ``trials``: the trials table (``median_ns`` per trial) or ``fwbench.stats.trial_statistics``
    output (``trial_median_ns``); only ok trials count, and only cells of the ablation's points.
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
        pt = cell.loc[cell["framework"] == "pytorch", "t"].to_numpy(float)
        tf = cell.loc[cell["framework"] == "tensorflow", "t"].to_numpy(float)
        if pt.size and tf.size:
            out[p] = (pt, tf)
    return out


def _boot_log_ratio(pt, tf, n_boot, rng) -> np.ndarray:
    bp = np.median(pt[rng.integers(pt.size, size=(n_boot, pt.size))], axis=1)
    bt = np.median(tf[rng.integers(tf.size, size=(n_boot, tf.size))], axis=1)
    return np.log(bp) - np.log(bt)


def _group_rows(ident, group, points, arms, ablation, confidence, n_boot, rng) -> list[dict]:
    tail = (1 - confidence) / 2 * 100
    g = {p: math.log(np.median(pt) / np.median(tf)) for p, (pt, tf) in arms.items()}
    reps = {p: _boot_log_ratio(pt, tf, n_boot, rng) for p, (pt, tf) in arms.items()}
    start = points[0]
    total, total_reps = g[start], reps[start]
    t_low, t_high = np.percentile(total_reps, [tail, 100 - tail])
    gap_known = bool(t_low > 0 or t_high < 0)
    order = ablation["order"]
    listed = " → ".join(ablation["factors"])
    method = (f"sequential, in the order {listed}" if order == "sequential" else
              "Shapley value over every order of the factors the device can vary")
    method += "; percentile bootstrap over trials within each arm"

    def row(kind, point, value, boot, **extra):
        pt, tf = arms.get(point, (np.array([]), np.array([]))) if point else ([], [])
        out = {**ident, "row": kind, "profile": point.profile if point else None,
               "mode": point.mode if point else None,
               "precision": point.precision if point else None,
               "n_pytorch": len(pt), "n_tensorflow": len(tf), "ci_level": confidence,
               "method": method, "status": "measured", "reason": "", "note": ""}
        if point is not None and point in g:
            out["ratio"] = math.exp(g[point])
        if value is not None and boot is not None:
            low, high = np.percentile(boot, [tail, 100 - tail])
            out.update(contribution=value, contribution_ci_low=float(low),
                       contribution_ci_high=float(high), ratio_explained=math.exp(value))
            if gap_known and kind != "total":
                s_low, s_high = np.percentile(boot / total_reps, [tail, 100 - tail])
                out.update(share=value / total, share_ci_low=float(s_low),
                           share_ci_high=float(s_high))
            elif kind == "total":
                out.update(share=1.0, share_ci_low=1.0, share_ci_high=1.0)
        out.update(extra)
        return out

    rows = [row("total", start, total, total_reps, step=0, factor="defaults",
                note="" if gap_known else "the gap's interval contains 0 (no gap established):"
                " shares are left out")]
    measured = [p for p in points if p in arms]
    if order == "sequential":
        previous, skipped = start, []
        for k, p in enumerate(points[1:], start=1):
            if p.reason:
                rows.append(row("factor", p, None, None, step=k, factor=p.factor,
                                status="unsupported", reason=p.reason))
                continue
            if p not in arms:
                skipped.append(p.factor)
                rows.append(row("factor", p, None, None, step=k, factor=p.factor,
                                status="not measured", reason=_failure(group, p)))
                continue
            note = (f"includes {', '.join(skipped)} (not measured: compared with the last "
                    "measured point)" if skipped else "")
            rows.append(row("factor", p, g[previous] - g[p], reps[previous] - reps[p], step=k,
                            factor=p.factor, note=note))
            previous, skipped = p, []
        last = previous
        if skipped or last is start and len(points) > 1 and any(
                not p.reason for p in points[1:]):
            residual_note = (f"at {last.profile}/{last.mode}/{last.precision}, the last measured "
                             "point: the listed factors after it are not all measured")
        else:
            residual_note = ""
    else:
        variable = [f for f in ablation["factors"] if not factor_reason(f, ident["device"])]
        by_set = {p.matched: p for p in measured}
        complete = all(frozenset(s) in by_set for k in range(len(variable) + 1)
                       for s in itertools.combinations(variable, k))
        m = len(variable)
        for k, f in enumerate(ablation["factors"], start=1):
            reason = factor_reason(f, ident["device"])
            p = next((q for q in points if q.factor == f), None)
            if reason:
                rows.append(row("factor", p, None, None, step=k, factor=f,
                                status="unsupported", reason=reason))
                continue
            if not complete:
                missing = [q for q in points if not q.reason and q not in arms]
                rows.append(row("factor", p, None, None, step=k, factor=f,
                                status="not measured",
                                reason="Shapley values need every subset measured; missing "
                                       + "; ".join(f"{q.profile}/{q.mode}/{q.precision} ("
                                                   f"{_failure(group, q)})" for q in missing)))
                continue
            value, boot = 0.0, np.zeros(n_boot)
            others = [v for v in variable if v != f]
            for size in range(len(others) + 1):
                weight = math.factorial(size) * math.factorial(m - size - 1) / math.factorial(m)
                for subset in itertools.combinations(others, size):
                    before, after = by_set[frozenset(subset)], by_set[frozenset(subset) | {f}]
                    value += weight * (g[before] - g[after])
                    boot = boot + weight * (reps[before] - reps[after])
            rows.append(row("factor", p, value, boot, step=k, factor=f))
        last = by_set.get(frozenset(variable), start) if complete else None
        residual_note = ""
    if last is not None:
        rows.append(row("residual", last, g[last], reps[last], step=len(ablation["factors"]) + 1,
                        factor="residual",
                        note=residual_note or "PyTorch/TensorFlow log ratio with every listed "
                                              "factor matched"))
    else:
        rows.append(row("residual", None, None, None, step=len(ablation["factors"]) + 1,
                        factor="residual", status="not measured",
                        reason="not every point of the ablation was measured"))
    return rows


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
    *GROUP, "precision", "profile", "counterfactual", "pytorch_mode", "tensorflow_mode",
    "tests", "n_pytorch", "n_tensorflow", "baseline_ratio", "baseline_ci_low",
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
    other = "tensorflow" if framework == "pytorch" else "pytorch"
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

    Ratios carry the Hodges-Lehmann interval of ``fwbench.stats`` (log trial medians);
    ``gap_closed`` a percentile bootstrap over trials. ``interleaved`` is False when the two arms
    come from different cell pairs (PyTorch torch.compile against TensorFlow tf.function has no
    mode pair of its own), which were measured in the same run but not alternated.
    """
    from fwbench.stats import hodges_lehmann

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
        pt0, m0 = _pick_arm(cells, "pytorch", BASELINE[0], BASELINE[1])
        tf0, n0 = _pick_arm(cells, "tensorflow", BASELINE[1], BASELINE[0])
        if not (pt0.size and tf0.size):
            continue
        base_hl = hodges_lehmann(np.log(pt0), np.log(tf0), confidence)
        base = math.log(np.median(pt0) / np.median(tf0))
        base_reps = _boot_log_ratio(pt0, tf0, n_boot, rng)
        for name, pmode, tmode, tests in COUNTERFACTUALS:
            pt, pm = _pick_arm(cells, "pytorch", pmode, tmode)
            tf, tm = _pick_arm(cells, "tensorflow", tmode, pmode)
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
                **ident, "counterfactual": name, "pytorch_mode": pmode, "tensorflow_mode": tmode,
                "tests": tests, "n_pytorch": pt.size, "n_tensorflow": tf.size,
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


# --- the "why" paragraph ------------------------------------------------------------------------

FACTOR_LABELS = {
    "threads": "threads",
    "tf32": "TF32 (off in both)",
    "cudnn_autotune": "cuDNN autotuning (on in both)",
    "layout": "the layout (NHWC in both: PyTorch channels_last)",
    "determinism": "op determinism (off in both)",
    "memory_growth": "GPU memory growth (on demand in both)",
    "mode=eager": "the execution mode (eager in both)",
    "mode=idiomatic": "the execution mode (PyTorch eager, TensorFlow tf.function)",
    "mode=compiled": "the execution mode (torch.compile against XLA)",
    "mode=keras": "the execution mode (PyTorch eager against Keras's loop)",
    "precision=bf16": "mixed precision (bf16 in both)",
    "precision=fp16": "mixed precision (fp16 in both)",
    "precision=fp32": "full fp32 precision",
}


SHORT_LABELS = {"threads": "threads", "tf32": "TF32", "cudnn_autotune": "cuDNN autotuning",
                "layout": "layout", "determinism": "op determinism",
                "memory_growth": "GPU memory growth"}


def _and(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def factor_label(factor: str) -> str:
    return FACTOR_LABELS.get(factor, factor)


def _r(value) -> str:
    return f"{float(value):.2f}"


def _gap_sentence(ratio: float, low=None, high=None) -> str:
    interval = f" (interval {_r(low)}–{_r(high)})" if _present(low) and _present(high) else ""
    if ratio >= 1:
        return f"PyTorch took {_r(ratio)}× TensorFlow's time{interval}"
    return f"PyTorch took {_r(ratio)}× TensorFlow's time, i.e. TensorFlow took {_r(1 / ratio)}× " \
           f"PyTorch's{interval}"


def _present(value) -> bool:
    return value is not None and value == value


def explain(decomposition: pd.DataFrame, gaps: pd.DataFrame | None = None,
            profiles: pd.DataFrame | None = None) -> list[dict]:
    """One short paragraph per ablation group answering "why": the gap at defaults, what each
    factor changed, what remains, where the time goes (profiles), and patel2023's test.

    Returns [{"title": ..., "text": ..., "key": {group columns}}] in group order.
    """
    out = []
    if decomposition is None or decomposition.empty:
        return out
    keys = [k for k in GROUP if k in decomposition]
    for key, rows in decomposition.groupby(keys, sort=True):
        ident = dict(zip(keys, key))
        total = rows[rows["row"] == "total"].iloc[0]
        gap = _gap_sentence(total["ratio"], math.exp(total["contribution_ci_low"]),
                            math.exp(total["contribution_ci_high"]))
        parts = [f"With each framework's defaults ({total['mode']} mode pair), {gap}."]
        ratio_before = total["ratio"]
        moved, unsupported = [], []
        for _, r in rows[rows["row"] == "factor"].iterrows():
            if r["status"] == "unsupported":
                unsupported.append(r)
                continue
            if r["status"] != "measured":
                moved.append(f"{factor_label(r['factor'])} was not measured ({r['reason']})")
                continue
            share = (f", {float(r['share']):.0%} of the gap"
                     if _present(r.get("share")) and 0 <= float(r["share"]) <= 1 else "")
            low, high = float(r["contribution_ci_low"]), float(r["contribution_ci_high"])
            ci = (f"; contribution {float(r['contribution']):+.3f} on log time, interval "
                  f"{low:+.3f} to {high:+.3f}"
                  + (", not distinguishable from no effect" if low <= 0 <= high else ""))
            after = f"to {_r(r['ratio'])}" if _present(r.get("ratio")) else ""
            verb = ("Matching" if not str(r["factor"]).startswith(("mode=", "precision="))
                    else "Switching")
            moved.append(f"{verb} {factor_label(r['factor'])} moved the ratio from "
                         f"{_r(ratio_before)} {after}{share}{ci}")
            ratio_before = r["ratio"] if _present(r.get("ratio")) else ratio_before
        if moved:
            parts.append("; ".join(moved) + ".")
        if unsupported:
            names = [SHORT_LABELS.get(r["factor"], r["factor"]) for r in unsupported]
            parts.append(f"Not varied on the {ident.get('device', 'device')}: "
                         + _and(names) + " (each reason is in the decomposition table; threads "
                         "are equal in every profile).")
        residual = rows[rows["row"] == "residual"]
        if len(residual) and residual.iloc[0]["status"] == "measured":
            res = residual.iloc[0]
            share = (f" ({float(res['share']):.0%} of the gap at defaults)"
                     if _present(res.get("share")) and 0 <= float(res["share"]) <= 1 else "")
            if "last measured" in str(res.get("note") or ""):
                parts.append(f"At the last measured point ({res['profile']}, {res['mode']}), "
                             f"{_gap_sentence(res['ratio'])}; the steps after it were not "
                             "measured, so no residual is claimed.")
            else:
                parts.append(f"With every listed factor matched, {_gap_sentence(res['ratio'])}:"
                             f" this residual{share} is what none of the listed factors "
                             "explains.")
        parts.extend(_profile_sentences(profiles, ident, rows))
        parts.extend(_gap_test_sentences(gaps, ident))
        title = (f"{ident.get('model')} {ident.get('phase')}, batch {ident.get('batch_size')}, "
                 f"{ident.get('input_shape')}, {ident.get('device')}")
        out.append({"title": title, "text": " ".join(parts), "key": ident})
    return out


def _profile_sentences(profiles, ident, rows) -> list[str]:
    if profiles is None or profiles.empty or "category" not in profiles:
        return []
    p = profiles[(profiles["status"] == "ok")]
    for k, v in ident.items():
        if k in p and k != "run":
            p = p[p[k].astype(str) == str(v)]
    out = []
    points = rows[(rows["status"] == "measured") & rows["profile"].notna()]
    ends = points.iloc[[0, -1]].drop_duplicates(["profile", "mode", "precision"])
    for _, point in ends.iterrows():
        cell = p[(p["profile"] == point["profile"]) & (p["mode"] == point["mode"])
                 & (p["precision"] == point["precision"])]
        sides = {fw: cell[cell["framework"] == fw].set_index("category")
                 for fw in ("pytorch", "tensorflow")}
        if any(s.empty for s in sides.values()):
            continue
        pt, tf = sides["pytorch"], sides["tensorflow"]
        diff = (pt["ns_per_step"] - tf["ns_per_step"]).dropna()
        biggest = diff.abs().sort_values(ascending=False).index[:2]
        where = "; ".join(
            f"{category.replace('_', ' ')}: {pt.loc[category, 'ns_per_step'] / 1e3:.0f} µs "
            f"against {tf.loc[category, 'ns_per_step'] / 1e3:.0f} µs"
            for category in biggest)
        out.append(
            f"Profiled at {point['profile']}/{point['mode']}: PyTorch spent "
            f"{pt.loc['host_overhead', 'share']:.0%} of a step outside operators (host "
            f"overhead) against TensorFlow's {tf.loc['host_overhead', 'share']:.0%}; the largest "
            f"differences per step (PyTorch against TensorFlow, profiled time) are {where}.")
    return out


def _gap_test_sentences(gaps, ident) -> list[str]:
    if gaps is None or gaps.empty:
        return []
    g = gaps
    for k, v in ident.items():
        if k in g and k not in ("run", "experiment"):
            g = g[g[k].astype(str) == str(v)]
    out = []
    for profile, rows in g.groupby("profile", sort=True):
        first = rows.iloc[0]
        tested = "; ".join(
            f"{r['counterfactual']}: ratio {_r(r['ratio'])} (gap closed "
            f"{float(r['gap_closed']):.0%}), {r['verdict']}" for _, r in rows.iterrows())
        out.append(f"patel2023's explanation at {profile} (baseline PyTorch eager against "
                   f"TensorFlow tf.function, ratio {_r(first['baseline_ratio'])}): {tested}.")
    return out
