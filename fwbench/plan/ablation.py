"""The ablation's plan: from each framework's defaults to matched settings one factor at a time.
How much of the gap each factor explains is fwbench.analysis.ablation. Framework-free.

Factors (config ``ablation.factors``, in the order the sequential ablation applies them):

- a settings factor of ``fwbench.plan.profiles.FACTORS`` (``tf32``, ``cudnn_autotune``,
  ``layout``, ``determinism``, ``memory_growth``): the settings profile gains it
  (``defaults`` → ``defaults+tf32`` → … → ``matched``; ``layout`` forces NHWC on both sides,
  which ``matched`` does not);
- ``mode=<pair>``: the execution-mode axis moves from the base mode (``ablation.base.mode``,
  default ``idiomatic``: PyTorch eager against TensorFlow tf.function) to the named pair of
  ``fwbench.plan.cells.MODES`` (``eager``: both eager; ``compiled``: torch.compile against XLA);
- ``precision=<p>``: the precision axis moves from the base precision (``fp32``) to ``p``;
- ``threads``: accepted so the table can say why it explains nothing — both frameworks run
  with the same explicit thread counts in every profile, defaults included.

A factor the device cannot vary (TF32, cuDNN autotuning and memory growth on the CPU), a factor
whose matched value is already both frameworks' default (determinism), and threads give a point
whose cells end ``unsupported`` with the reason (``unsupported_reason``); such a point is skipped
by the chain: the next measured point is compared with the last measured one.

Usage::

    points = ablation_points(config["ablation"], "cpu")   # the plan: one cell pair per point
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from fwbench.errors import ConfigError, Unsupported
from fwbench.plan.cells import MODES
from fwbench.plan.profiles import FACTORS, MATCHED, check_precision

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
