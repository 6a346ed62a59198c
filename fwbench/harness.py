"""The timing loop, written once for both frameworks.

A backend hands over ``step`` (one training step or one inference batch, data already on the
device) and ``synchronize`` (waits until the device has finished). The loop times the first call
as cold start, warms up until the iteration time is steady, then keeps every timed iteration.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# Warm-up is steady when the median of the last STEADY_WINDOW iterations is within
# STEADY_TOLERANCE of the median of the window before it.
STEADY_WINDOW = 3
STEADY_TOLERANCE = 0.10


@dataclass
class Measurement:
    """Raw times of one trial, in nanoseconds on the monotonic clock."""

    cold_start_ns: int
    warmup_ns: list[int]
    iteration_ns: list[int]
    warmup_steady: bool
    markers_ns: dict[str, int] = field(default_factory=dict)


def measure(
    step: Callable[[], object],
    synchronize: Callable[[], None],
    *,
    iterations: int,
    warmup_min: int,
    warmup_max: int,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> Measurement:
    """Time ``step`` with ``synchronize`` inside every timed region.

    Usage::

        m = measure(lambda: model(x), sync, iterations=10, warmup_min=2, warmup_max=20)
        m.iteration_ns  # every timed iteration
    """
    markers = {"cold_start": clock()}
    cold = _timed(step, synchronize, clock)
    markers["warmup"] = clock()
    warmup: list[int] = []
    while len(warmup) < warmup_max and not (len(warmup) >= warmup_min and is_steady(warmup)):
        warmup.append(_timed(step, synchronize, clock))
    markers["measure"] = clock()
    times = [_timed(step, synchronize, clock) for _ in range(iterations)]
    markers["end"] = clock()
    return Measurement(cold, warmup, times, is_steady(warmup), markers)


def _timed(step, synchronize, clock) -> int:
    synchronize()
    start = clock()
    step()
    synchronize()
    return clock() - start


def is_steady(times: list[int]) -> bool:
    """True when the last window's median is within tolerance of the window before it."""
    if len(times) < 2 * STEADY_WINDOW:
        return False
    last = statistics.median(times[-STEADY_WINDOW:])
    before = statistics.median(times[-2 * STEADY_WINDOW:-STEADY_WINDOW])
    return abs(last - before) <= STEADY_TOLERANCE * before
