"""Has a trial reached a steady state, and from which step on: changepoints in its step times.

Barrett et al. (OOPSLA 2017, "Virtual machine warmup blows hot and cold") classify each process
execution by the changepoints of its in-process iteration times: **flat** (no change worth the
name), **warmup** (the last segment is the fastest), **slowdown** (an earlier segment was
faster) or **no steady state** (the last change comes too late to leave a steady final segment).
One class is ours: **switching**, where the steps leave a level and come back to it (3.1, 2.0,
3.1, 2.0 ms): that is the host changing speed under the process, not a warm-up, and a shared
virtual machine does it (docs/statistics.md, "Quality classes"). This module does the same with
PELT (Killick, Fearnhead & Eckley 2012, from ``ruptures``):

- on **log** step times, so a change is relative (a 15% slower segment is the same change at
  0.1 ms and at 1 s) and scaled by the series' own noise (a robust sd of successive differences,
  which level shifts barely move), so one penalty serves every device and model;
- with the **least absolute deviation** cost, so a single slow step (a page fault, a GC pause)
  does not open a segment of its own, and segments of at least ``MIN_SIZE`` steps;
- at the penalty ``PENALTY_PER_LOG_N`` · log n, chosen by simulation: series of independent 3%
  noise with 2% of 1.5x spikes are called flat in over 99% of trials from 30 to 3,000 steps, and
  a 15% fall over 30 steps is seen in about 90% (docs/statistics.md, "Steady state", gives the
  rates, ``benchmarks/error_rates.py`` prints them); a lower penalty (2) flags one series in five
  of autocorrelated noise (AR(1), 0.5) at 30 steps;
- series longer than ``MAX_POINTS`` are cut into that many bins, each the median of its steps
  (``min_size`` then counts bins);
- segments whose means differ by less than ``EQUIVALENCE`` (relative) count as one, as Barrett
  et al. merge segments within a tolerance: a 0.5% step found in 100,000 steps is no warm-up.

Host side (numpy, ruptures); ``fwbench.measure`` calls it on a cell's calibration trials to fix its
warm-up, and the statistics on every trial's timed steps to record its class.
"""

from __future__ import annotations

import math

import numpy as np

from fwbench.measure.calibration import fix_warmup

__all__ = ["changepoints", "warmup_end", "classify", "CLASSES", "PENALTY_PER_LOG_N",
           "MIN_SIZE", "EQUIVALENCE", "FINAL_FRACTION"]

CLASSES = ("flat", "warmup", "slowdown", "switching", "no_steady_state")
# PELT penalty per changepoint, in units of log(n), on the noise-scaled least-absolute-deviation
# cost (calibrated by simulation: see the module docstring).
PENALTY_PER_LOG_N = 3.0
# The shortest segment PELT may return (steps).
MIN_SIZE = 5
# Segments whose typical step times differ by less than this (relative) are one segment.
EQUIVALENCE = 0.02
# The steady final segment must hold at least this share of the steps (Barrett et al.: the last
# 500 of 2,000 iterations), else the series has no steady state.
FINAL_FRACTION = 0.25
# Longer series are cut into at most this many bins of consecutive steps, each its median: PELT's
# cost grows with the square of the points, and a calibration trial may time 10^5 steps.
MAX_POINTS = 200


def _binned_log(times) -> tuple[np.ndarray, int]:
    """(log step times, binned to at most MAX_POINTS medians of consecutive steps; steps per
    bin). A trailing partial bin joins the last one."""
    x = np.log(np.asarray(times, dtype=float))
    k = max(1, math.ceil(x.size / MAX_POINTS))
    if k == 1:
        return x, 1
    m = x.size // k
    bins = np.median(x[: m * k].reshape(m, k), axis=1)
    if x.size > m * k:
        bins[-1] = np.median(x[(m - 1) * k:])
    return bins, k


def _scaled(x: np.ndarray) -> np.ndarray:
    """Values over their noise: a robust sd of successive differences (MAD / sqrt 2), which a
    few level shifts barely move; a series without noise is returned unscaled."""
    if x.size < 2:
        return x
    d = np.diff(x)
    sigma = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2.0)
    if sigma <= 0:
        sigma = float(np.std(d)) / math.sqrt(2.0)
    return (x - np.median(x)) / sigma if sigma > 0 else x - np.median(x)


def _segments(times, penalty_per_log_n: float, min_size: int) -> list[int]:
    """PELT breakpoints (segment starts after the first, in steps) of the scaled log times."""
    import ruptures

    x, k = _binned_log(times)
    z = _scaled(x)
    n = z.size
    if n < 2 * min_size or np.ptp(z) == 0:
        return []
    ends = ruptures.Pelt(model="l1", min_size=min_size).fit(z).predict(
        pen=penalty_per_log_n * math.log(n))
    return [int(e) * k for e in ends[:-1]]


def _merged(times, starts: list[int], equivalence: float) -> list[tuple[int, int, float]]:
    """(start, end, median step time) per segment, neighbours within ``equivalence`` merged."""
    t = np.asarray(times, dtype=float)
    bounds = [0, *starts, t.size]
    segments = [(a, b, float(np.median(t[a:b]))) for a, b in zip(bounds[:-1], bounds[1:])]
    out = [segments[0]]
    for a, b, m in segments[1:]:
        a0, _, m0 = out[-1]
        if abs(math.log(m / m0)) < math.log1p(equivalence):
            out[-1] = (a0, b, float(np.median(t[a0:b])))
        else:
            out.append((a, b, m))
    return out


def changepoints(times, *, penalty_per_log_n: float = PENALTY_PER_LOG_N,
                 min_size: int = MIN_SIZE) -> list[int]:
    """Indices where a new segment of the step times starts (PELT on the noise-scaled log times,
    least absolute deviation cost, penalty ``penalty_per_log_n`` · log n); empty: no change.
    Usage::

        changepoints(trial["iteration_ns"])   # e.g. [12]: steps 0-11 and 12-29 differ
    """
    return _segments(times, penalty_per_log_n, min_size)


def _final_run(times, *, penalty_per_log_n, min_size, equivalence):
    """The merged segments and the index of the first one equivalent to the last (the steady
    final run may span several segments PELT split for smaller differences)."""
    segments = _merged(times, _segments(times, penalty_per_log_n, min_size), equivalence)
    last = segments[-1][2]
    first = len(segments) - 1
    while first > 0 and abs(math.log(segments[first - 1][2] / last)) < math.log1p(equivalence):
        first -= 1
    return segments, first


def classify(times, *, penalty_per_log_n: float = PENALTY_PER_LOG_N, min_size: int = MIN_SIZE,
             equivalence: float = EQUIVALENCE, final_fraction: float = FINAL_FRACTION) -> str:
    """Barrett et al.'s class of one series of step times: "flat" (every segment within
    ``equivalence`` of the last), "switching" (a level left and returned to: the host changed
    speed), "no_steady_state" (the last segment holds fewer than ``final_fraction`` of the
    steps), "warmup" (every earlier segment is slower than the last) or "slowdown" (some
    earlier segment was faster). Fewer than ``2 * min_size`` steps: "flat" (nothing to split).
    Usage::

        classify(trial["iteration_ns"])   # "warmup"
    """
    t = np.asarray(times, dtype=float)
    segments, first = _final_run(t, penalty_per_log_n=penalty_per_log_n, min_size=min_size,
                                 equivalence=equivalence)
    if first == 0:
        return "flat"
    if _returns(segments, equivalence):
        return "switching"
    if t.size - segments[first][0] < final_fraction * t.size:
        return "no_steady_state"
    last = segments[-1][2]
    return "warmup" if all(m > last for _, _, m in segments[:first]) else "slowdown"


def _returns(segments: list[tuple[int, int, float]], equivalence: float) -> bool:
    """Whether the steps come back to a level they left: two segments within ``equivalence``
    of each other with another level between them (neighbours within it are merged already)."""
    levels = [m for _, _, m in segments]
    return any(abs(math.log(levels[k] / levels[i])) < math.log1p(equivalence)
               for i in range(len(levels)) for k in range(i + 2, len(levels)))


def warmup_end(times, *, penalty_per_log_n: float = PENALTY_PER_LOG_N,
               min_size: int = MIN_SIZE, equivalence: float = EQUIVALENCE,
               final_fraction: float = FINAL_FRACTION) -> int | None:
    """The index where the steady final segment starts (0 for a flat series, also after a
    slowdown: the series is steady from there, only slower); None when the series has no steady
    state (``classify``). Usage::

        start = warmup_end(calibration["iteration_ns"])   # warm up this many steps
    """
    t = np.asarray(times, dtype=float)
    segments, first = _final_run(t, penalty_per_log_n=penalty_per_log_n, min_size=min_size,
                                 equivalence=equivalence)
    start = segments[first][0]
    if first and t.size - start < final_fraction * t.size:
        return None
    return int(start)


def fixed_warmup(calibrations: list[dict], *, warmup_min: int, warmup_max: int,
                 warmup_max_s: float | None = None) -> dict:
    """A cell's warm-up record (fwbench.measure.calibration.fix_warmup) from what this analysis
    finds in each of its calibration trials' single steps; a failed calibration finds nothing."""
    findings = []
    for calibration in calibrations:
        times = calibration["iteration_ns"] if calibration["status"] == "ok" else []
        findings.append({"found": warmup_end(times) if times else None,
                         "class": classify(times) if times else None,
                         "changepoints": changepoints(times) if times else []})
    return fix_warmup(calibrations, findings, warmup_min=warmup_min, warmup_max=warmup_max,
                      warmup_max_s=warmup_max_s)
