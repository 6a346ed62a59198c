"""The timing loop, written once for both frameworks and for every rank of a distributed trial.

A backend hands over ``step`` (one training step or one inference batch, data already on the
device) and ``synchronize`` (waits until the device has finished). After the first call, timed
apart as cold start, and a fixed warm-up (the cell's, found once by its calibration trial:
fwbench.measure.calibration), a trial measures for a time budget, as torch.utils.benchmark's
``min_run_time`` does, rather than for a fixed handful of steps:

- latency: single steps, each synchronized on both sides (their median and percentiles);
- throughput: blocks of steps with one synchronization at the end of each, so host run-ahead
  shows too, each lasting at least ``block_time_s`` (its step count chosen from the median
  single step and checked on pilot blocks); their mean time per step.

Every timed region's time is kept. A budget is a sum of timed regions, never a wall-clock read:
the ranks of a distributed trial, which see the same gathered times, take the same decisions.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fwbench.errors import ConfigError
from fwbench.plan.contract import Adaptive, Record, TrialSettings, bounded

# Empty synchronizations timed per trial: what one wait costs this framework on this device.
SYNC_CALIBRATION = 25
# A block is sized from the median single step, then timed once as a pilot and resized until a
# pilot lasts block_time_s (at most PILOT_BLOCKS pilots): steps run back to back can be several
# times faster than single synchronized ones (LeNet-5 training on a busy CPU: 0.7 ms against
# 2-7 ms), which sized blocks of 28 ms against 100 ms asked. BLOCK_MARGIN keeps the blocks of a
# pilot's size above the target through the noise.
PILOT_BLOCKS = 5
BLOCK_MARGIN = 1.2
Z_95 = 1.959963984540054


@dataclass(frozen=True)
class Schedule(Record):
    """What a trial times after its cold start: every count and budget, checked where built
    (a trial's comes from its settings: ``trial_schedule``).

    Usage::

        Schedule(warmup=20, iterations=30, min_run_time_s=0.5, blocks=5, block_time_s=0.1,
                 blocks_run_time_s=1.0)
    """

    WHAT = "measurement schedule"
    # Steps after the cold start, timed and kept apart (the cell's fixed warm-up).
    warmup: int = bounded(0, minimum=0)
    # Single steps: at least this many, and until their times add up to min_run_time_s.
    iterations: int = bounded(1, minimum=1)
    min_run_time_s: float = bounded(0.0, minimum=0)
    adaptive: Adaptive | None = None
    # Blocks: at least this many, and until their times add up to blocks_run_time_s; each of
    # at least block_min_size steps and, from the median single step, block_time_s long.
    blocks: int = bounded(0, minimum=0)
    blocks_run_time_s: float = bounded(0.0, minimum=0)
    block_time_s: float = bounded(0.0, minimum=0)
    block_min_size: int = bounded(1, minimum=1)

    def block_size(self, step_ns: float) -> int:
        """Steps per block, so that a block of ``step_ns`` steps lasts ``block_time_s`` with
        ``BLOCK_MARGIN`` to spare."""
        if step_ns <= 0:
            return self.block_min_size
        return max(self.block_min_size,
                   math.ceil(BLOCK_MARGIN * self.block_time_s * 1e9 / step_ns))


def trial_schedule(settings: TrialSettings) -> Schedule:
    """What the trial in ``settings`` times after its cold start.

    A calibration trial times single steps only, for ``calibration_s`` and at least twice
    ``warmup_max``, so a warm-up as long as the longest allowed leaves a steady run as long to
    see. Any other trial warms up the steps its cell's calibration fixed (``warmup``)."""
    if settings.calibration:
        return Schedule(iterations=max(settings.iterations, 2 * settings.warmup_max),
                        min_run_time_s=settings.calibration_s)
    if settings.warmup is None:
        raise ConfigError(f"trial settings of {settings.cell_id}: no warm-up; run the trial "
                          "through fwbench.measure.trial.run_trial, which adds its cell's")
    return Schedule(
        warmup=settings.warmup.iterations, iterations=settings.iterations,
        min_run_time_s=settings.min_run_time_s, adaptive=settings.adaptive,
        blocks=settings.blocks, blocks_run_time_s=settings.blocks_run_time_s,
        block_time_s=settings.block_time_s, block_min_size=settings.block_min_size)


@dataclass
class Measurement:
    """Raw times of one trial, in nanoseconds on the monotonic clock (time.perf_counter_ns).

    Each timed region holds one value per rank (one rank outside a distributed trial)."""

    cold_start_ns: list[int]
    warmup_ns: list[list[int]]
    iteration_ns: list[list[int]]
    stop_reason: str
    block_size: int = 0
    block_ns: list[list[int]] = field(default_factory=list)
    markers_ns: dict[str, int] = field(default_factory=dict)
    sync_ns: int | None = None
    # The pilot blocks that sized the blocks: [steps, ns], not part of the measurement.
    pilot_blocks: list[list[int]] = field(default_factory=list)


def measure(
    step: Callable[[], object],
    synchronize: Callable[[], None],
    schedule: Schedule,
    *,
    on_marker: Callable[[str], None] | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> Measurement:
    """Time ``step`` as ``schedule`` says, ``synchronize`` closing every timed region; the
    measurement of one process (one value per timed region).

    ``on_marker`` is called with each phase name right after its marker is taken (telemetry
    reads energy there).

    Usage::

        m = measure(lambda: model(x), sync, Schedule(warmup=10, min_run_time_s=0.5))
        m.iteration_ns  # every timed single step
    """
    sync = calibrate_sync(synchronize, clock)

    def timed(steps: int) -> list[int]:
        synchronize()
        start = clock()
        for _ in range(steps):
            step()
        synchronize()
        return [clock() - start]

    m = run(timed, synchronize, schedule, on_marker=on_marker, clock=clock)
    m.sync_ns = sync
    return one_rank(m)


def run(timed: Callable[[int], list[int]], synchronize: Callable[[], None], schedule: Schedule,
        *, on_marker: Callable[[str], None] | None = None,
        clock: Callable[[], int] = time.perf_counter_ns, before_marker=None) -> Measurement:
    """The phases of one trial over ``timed(steps)``, which times ``steps`` steps from one
    synchronized start to one synchronized end and returns every rank's time: cold start,
    warm-up, single steps, blocks. Every decision reads the slowest rank, so all ranks step
    equally often and no collective is left waiting. ``before_marker`` runs before each marker
    is taken (a barrier between ranks)."""
    markers: dict[str, int] = {}

    def mark(name: str) -> None:
        synchronize()
        if before_marker:
            before_marker()
        markers[name] = clock()
        if on_marker:
            on_marker(name)

    mark("cold_start")
    cold = timed(1)
    mark("warmup")
    warmup = [timed(1) for _ in range(schedule.warmup)]
    mark("measure")
    times, reason = _single_steps(timed, schedule)
    mark("blocks")
    size, blocks, pilots = 0, [], []
    if schedule.blocks or schedule.blocks_run_time_s:
        size, pilots = _size_blocks(timed, schedule, statistics.median(max(t) for t in times))
        blocks = _for_budget(lambda: timed(size), schedule.blocks, schedule.blocks_run_time_s)
    mark("end")
    return Measurement(cold, warmup, times, reason, size, blocks, markers, pilot_blocks=pilots)


def _size_blocks(timed, schedule: Schedule, step_ns: float) -> tuple[int, list[list[int]]]:
    """The block size, and the pilot blocks timed to find it ([size, ns of the slowest rank])."""
    size, pilots = schedule.block_size(step_ns), []
    target = schedule.block_time_s * 1e9
    while target and len(pilots) < PILOT_BLOCKS:
        pilots.append([size, max(timed(size))])
        if pilots[-1][1] >= target:
            break
        size = schedule.block_size(pilots[-1][1] / size)
    return size, pilots


def _for_budget(timed: Callable[[], list[int]], count: int, budget_s: float) -> list[list[int]]:
    """Timed regions until at least ``count`` were timed and the slowest rank's times add up
    to ``budget_s``."""
    times: list[list[int]] = []
    spent, budget_ns = 0, budget_s * 1e9
    while len(times) < count or spent < budget_ns:
        times.append(timed())
        spent += max(times[-1])
    return times


def _single_steps(timed, schedule: Schedule) -> tuple[list[list[int]], str]:
    times = _for_budget(lambda: timed(1), schedule.iterations, schedule.min_run_time_s)
    reason = (f"{len(times)} single steps: at least {schedule.iterations} and "
              f"{schedule.min_run_time_s:g} s of them")
    adaptive = schedule.adaptive
    if adaptive:
        while True:
            if median_halfwidth([max(t) for t in times]) <= adaptive.target:
                reason += f", then until the median interval was within ±{adaptive.target:.1%}"
                break
            if len(times) >= adaptive.max_iterations:
                reason += f", then max_iterations={adaptive.max_iterations} reached"
                break
            times.append(timed(1))
    return times, reason


def one_rank(m: Measurement) -> Measurement:
    """``m`` with each timed region's one value in place of its list of ranks."""
    m.cold_start_ns = m.cold_start_ns[0]
    m.warmup_ns = [t[0] for t in m.warmup_ns]
    m.iteration_ns = [t[0] for t in m.iteration_ns]
    m.block_ns = [t[0] for t in m.block_ns]
    return m


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
