"""fwbench/measure/harness.py: synchronized timed regions, cold start apart, a fixed warm-up,
single steps and blocks each for a time budget, every time kept."""

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fwbench.errors import ConfigError
from fwbench.measure.harness import Adaptive, Schedule, measure, median_halfwidth, run


class Recorder:
    """A fake device: records the order of step and synchronize calls; the clock ticks per call."""

    def __init__(self, durations):
        self.durations = iter(durations)
        self.events = []
        self.now = 0

    def clock(self):
        return self.now

    def step(self):
        self.events.append("step")
        self.now += next(self.durations)

    def synchronize(self):
        self.events.append("sync")


def test_every_timed_region_is_synchronized_on_both_sides():
    rec = Recorder(itertools.repeat(100))
    m = measure(rec.step, rec.synchronize, Schedule(iterations=4), clock=rec.clock)
    steps = [i for i, e in enumerate(rec.events) if e == "step"]
    assert len(steps) == 5
    assert all(rec.events[i - 1] == rec.events[i + 1] == "sync" for i in steps)
    assert m.iteration_ns == [100] * 4 and m.cold_start_ns == 100 and m.warmup_ns == []
    assert m.block_ns == [] and m.block_size == 0


def test_blocks_synchronize_once_at_their_end():
    rec = Recorder(itertools.repeat(100))
    m = measure(rec.step, rec.synchronize, Schedule(blocks=2, block_min_size=4),
                clock=rec.clock)
    assert m.block_ns == [400, 400] and m.block_size == 4
    tail = rec.events[-13:-1]  # two blocks, before the end marker
    assert tail == ["sync", "step", "step", "step", "step", "sync"] * 2


def test_single_steps_go_on_until_their_count_and_their_time_budget_are_both_reached():
    def single_steps(**schedule):
        rec = Recorder(itertools.repeat(1000))
        return len(measure(rec.step, rec.synchronize, Schedule(**schedule),
                           clock=rec.clock).iteration_ns)

    assert single_steps(iterations=3, min_run_time_s=10e-6) == 10  # 10 µs of 1 µs steps
    assert single_steps(iterations=20, min_run_time_s=10e-6) == 20
    assert single_steps(iterations=3, min_run_time_s=0) == 3


def test_blocks_last_their_block_time_and_go_on_for_their_budget():
    rec = Recorder(itertools.repeat(1000))
    m = measure(rec.step, rec.synchronize,
                Schedule(iterations=5, blocks=2, block_time_s=10e-6, blocks_run_time_s=50e-6),
                clock=rec.clock)
    # 10 µs blocks of 1 µs steps, 20% to spare, from the median single step; a pilot block of
    # that size lasts them; 50 µs of blocks.
    assert m.block_size == 12 and m.pilot_blocks == [[12, 12_000]]
    assert m.block_ns == [12_000] * 5
    rec = Recorder(itertools.repeat(1000))
    m = measure(rec.step, rec.synchronize,
                Schedule(blocks=7, block_time_s=10e-6, blocks_run_time_s=50e-6, block_min_size=20),
                clock=rec.clock)
    assert m.block_size == 20 and len(m.block_ns) == 7  # at least 20 steps, at least 7 blocks


def test_blocks_are_resized_when_steps_run_faster_back_to_back():
    """Single synchronized steps of 5 µs, steps in a block 1 µs each (the host runs ahead):
    blocks sized from the single steps would last 3 µs against 10 µs asked; the pilots grow
    them until one lasts the 10 µs."""
    now = [0]

    def timed(steps):
        start = now[0]
        now[0] += 5000 if steps == 1 else 1000 * steps
        return [now[0] - start]

    m = run(timed, lambda: None, Schedule(iterations=3, blocks=2, block_time_s=10e-6),
            clock=lambda: now[0])
    assert [size for size, _ in m.pilot_blocks] == [3, 12]
    assert m.block_size == 12 and all(t[0] >= 10_000 for t in m.block_ns)


def test_markers_are_reported_in_phase_order():
    rec, seen = Recorder(itertools.repeat(10)), []
    m = measure(rec.step, rec.synchronize, Schedule(warmup=1, iterations=2, blocks=1),
                on_marker=seen.append, clock=rec.clock)
    assert seen == ["cold_start", "warmup", "measure", "blocks", "end"] == list(m.markers_ns)


def test_adaptive_goes_on_past_the_budget_until_the_median_interval_is_narrow_enough():
    noisy = Recorder([1000] + [1000, 1300] * 100)
    m = measure(noisy.step, noisy.synchronize,
                Schedule(iterations=5, adaptive=Adaptive(target=0.02, max_iterations=40)),
                clock=noisy.clock)
    assert len(m.iteration_ns) == 40 and m.stop_reason.endswith("max_iterations=40 reached")
    flat = Recorder(itertools.repeat(1000))
    m = measure(flat.step, flat.synchronize,
                Schedule(iterations=5, adaptive=Adaptive(target=0.02, max_iterations=40)),
                clock=flat.clock)
    assert 5 <= len(m.iteration_ns) < 40 and "median interval" in m.stop_reason


def test_median_halfwidth():
    assert median_halfwidth([1, 2]) == float("inf")
    assert median_halfwidth([100] * 20) == 0
    assert 0 < median_halfwidth(list(range(100, 200))) < 0.2


def test_cold_start_is_kept_apart_and_the_warmup_is_the_count_given():
    rec = Recorder([5000, 900, 700, 400, 300, 300, *[300] * 5])
    m = measure(rec.step, rec.synchronize, Schedule(warmup=3, iterations=5), clock=rec.clock)
    assert m.cold_start_ns == 5000 and m.warmup_ns == [900, 700, 400]
    assert m.iteration_ns == [300] * 5
    assert m.markers_ns["cold_start"] <= m.markers_ns["warmup"] <= m.markers_ns["measure"] \
        <= m.markers_ns["end"]


@pytest.mark.parametrize("field, value", [("warmup", -1), ("iterations", 0),
                                          ("min_run_time_s", -0.5), ("block_min_size", 1.5)])
def test_a_bad_schedule_is_refused_naming_its_field(field, value):
    with pytest.raises(ConfigError, match=f"schedule: {field} must be (an integer|a number) of "
                                          "at least"):
        Schedule(**{field: value})


# --- the CUDA path: scripts/verify_gpu_harness.py --------------------------------------------

VERIFY = Path(__file__).resolve().parent.parent / "scripts" / "verify_gpu_harness.py"


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_gpu_verification_says_so_without_a_gpu(tmp_path):
    if _cuda():
        pytest.skip("a GPU is visible: the gpu-marked test runs the script")
    done = subprocess.run([sys.executable, str(VERIFY), str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "no CUDA device" in done.stderr


@pytest.mark.gpu
def test_harness_agrees_with_cuda_events_and_the_gpu_sweep_runs(tmp_path):
    if not _cuda():
        pytest.skip("needs an NVIDIA GPU")
    done = subprocess.run([sys.executable, str(VERIFY), str(tmp_path)], capture_output=True,
                          text=True, timeout=1800)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["known_kernel"]["agrees"], summary["known_kernel"]
    assert done.returncode == 0, done.stderr[-3000:]
