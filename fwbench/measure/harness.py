"""The timing loop, written once for both frameworks.

A backend hands over ``step`` (one training step or one inference batch, data already on the
device) and ``synchronize`` (waits until the device has finished). The loop times the first call
as cold start, warms up until the iteration time is steady, then keeps every timed iteration:
each synchronized on both sides, and then blocks of several iterations with one synchronization
at the end, so host run-ahead (launching the next step while the device still works) shows too.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fwbench.plan.config import STEADY_TOLERANCE, STEADY_WINDOW

# Empty synchronizations timed per trial: what one wait costs this framework on this device.
SYNC_CALIBRATION = 25
Z_95 = 1.959963984540054


@dataclass(frozen=True)
class Adaptive:
    """Stop timing once the 95% interval of the median is narrower than ``target`` (a fraction)."""

    target: float = 0.02
    max_iterations: int = 200


@dataclass
class Measurement:
    """Raw times of one trial, in nanoseconds on the monotonic clock (time.perf_counter_ns)."""

    cold_start_ns: int
    warmup_ns: list[int]
    iteration_ns: list[int]
    warmup_steady: bool
    stop_reason: str
    block_size: int = 0
    block_ns: list[int] = field(default_factory=list)
    markers_ns: dict[str, int] = field(default_factory=dict)
    sync_ns: int | None = None


def measure(
    step: Callable[[], object],
    synchronize: Callable[[], None],
    *,
    iterations: int,
    warmup_min: int,
    warmup_max: int,
    blocks: int = 0,
    block_size: int = 0,
    adaptive: Adaptive | None = None,
    on_marker: Callable[[str], None] | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> Measurement:
    """Time ``step`` with ``synchronize`` closing every timed region.

    ``iterations`` is the count kept, or the minimum when ``adaptive`` is given. ``on_marker`` is
    called with each phase name right after its marker is taken (telemetry reads energy there).

    Usage::

        m = measure(lambda: model(x), sync, iterations=10, warmup_min=2, warmup_max=20)
        m.iteration_ns  # every timed iteration
    """
    markers: dict[str, int] = {}
    sync = calibrate_sync(synchronize, clock)

    def mark(name: str) -> None:
        synchronize()
        markers[name] = clock()
        if on_marker:
            on_marker(name)

    mark("cold_start")
    cold = _timed(step, synchronize, clock)
    mark("warmup")
    warmup: list[int] = []
    while len(warmup) < warmup_max and not (len(warmup) >= warmup_min and is_steady(warmup)):
        warmup.append(_timed(step, synchronize, clock))
    mark("measure")
    times = [_timed(step, synchronize, clock) for _ in range(iterations)]
    reason = "fixed iteration count"
    if adaptive:
        while True:
            if median_halfwidth(times) <= adaptive.target:
                reason = f"median interval within ±{adaptive.target:.1%}"
                break
            if len(times) >= adaptive.max_iterations:
                reason = f"max_iterations={adaptive.max_iterations} reached"
                break
            times.append(_timed(step, synchronize, clock))
    mark("blocks")
    block_times = [_block(step, synchronize, clock, block_size) for _ in range(blocks)]
    mark("end")
    return Measurement(cold, warmup, times, is_steady(warmup), reason, block_size, block_times,
                       markers, sync)


def calibrate_sync(synchronize, clock=time.perf_counter_ns) -> int:
    """Median cost of one synchronization with nothing to wait for, in ns: recorded with every
    trial, so the two frameworks' waits can be compared (each timed step pays one)."""
    synchronize()
    costs = []
    for _ in range(SYNC_CALIBRATION):
        start = clock()
        synchronize()
        costs.append(clock() - start)
    return int(statistics.median(costs))


def _timed(step, synchronize, clock) -> int:
    synchronize()
    start = clock()
    step()
    synchronize()
    return clock() - start


def _block(step, synchronize, clock, size) -> int:
    synchronize()
    start = clock()
    for _ in range(size):
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


def median_halfwidth(times: list[int]) -> float:
    """Half-width of the distribution-free 95% interval of the median, relative to the median.

    Order statistics n/2 ± 1.96·√n/2 (the binomial interval); infinite while n is too small.
    """
    n = len(times)
    half = Z_95 * math.sqrt(n) / 2
    low, high = math.floor(n / 2 - half), math.ceil(n / 2 + half)
    if low < 0 or high > n - 1:
        return math.inf
    ordered = sorted(times)
    return (ordered[high] - ordered[low]) / 2 / statistics.median(ordered)
