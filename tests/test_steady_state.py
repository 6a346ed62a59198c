"""The changepoint classes of fwbench.analysis.steady_state on seeded series whose answer is
known, and its error rates on simulated trials (benchmarks/error_rates.py prints the rates)."""

from __future__ import annotations

import numpy as np
import pytest

from fwbench.analysis.steady_state import changepoints, classify, warmup_end


def noise(rng, n, sd=0.03, spikes=0.02):
    """Lognormal step times around 1 with occasional 1.5x spikes (a page fault, a GC pause)."""
    t = np.exp(rng.normal(0.0, sd, n))
    t[rng.random(n) < spikes] *= 1.5
    return t


def test_a_flat_series_is_flat_from_its_first_step():
    t = noise(np.random.default_rng(0), 200)
    assert changepoints(t) == [] and classify(t) == "flat" and warmup_end(t) == 0


def test_a_slow_start_is_a_warmup_that_ends_where_the_steps_settle():
    t = noise(np.random.default_rng(1), 100)
    t[:20] *= 1.3
    assert classify(t) == "warmup"
    assert 18 <= warmup_end(t) <= 22


def test_a_faster_start_is_a_slowdown_still_steady_after_it():
    t = noise(np.random.default_rng(2), 100)
    t[:40] *= 0.8
    assert classify(t) == "slowdown"
    assert 38 <= warmup_end(t) <= 42


def test_a_change_near_the_end_leaves_no_steady_state():
    t = noise(np.random.default_rng(3), 100)
    t[90:] *= 1.4
    assert classify(t) == "no_steady_state" and warmup_end(t) is None


def test_steps_that_leave_a_level_and_come_back_show_the_host_switching_speed():
    # The reference's TensorFlow lenet5 train calibration: 3.11 / 2.00 / 3.06 / 1.97 ms.
    t = noise(np.random.default_rng(6), 400)
    for start, level in zip(range(0, 400, 100), (3.11, 2.00, 3.06, 1.97)):
        t[start:start + 100] *= level
    assert classify(t) == "switching"
    # An episode of slower steps amid steady ones is the host too, not a slowdown.
    episode = noise(np.random.default_rng(7), 300)
    episode[100:160] *= 1.4
    assert classify(episode) == "switching"
    # A warm-up in two stages never comes back to a level: still a warm-up.
    stages = noise(np.random.default_rng(8), 300)
    stages[:50] *= 1.6
    stages[50:100] *= 1.3
    assert classify(stages) == "warmup"


def test_a_small_step_in_a_long_series_is_not_a_warmup():
    # A 1% step is found in 20,000 steps of 3% noise; it is within the 2% equivalence.
    t = noise(np.random.default_rng(4), 20_000)
    t[:5_000] *= 1.01
    assert classify(t) == "flat"


def test_long_series_are_binned_and_changepoints_are_in_steps():
    t = noise(np.random.default_rng(5), 10_000)
    t[:2_000] *= 1.5
    (start,) = changepoints(t)
    assert 1_900 <= start <= 2_100 and classify(t) == "warmup"


@pytest.mark.parametrize("n", [30, 100])
def test_rates_on_simulated_trials(n):
    """Flat series are called flat at least 97% of the time; a 15% fall over the timed steps
    (the warm-up the old 5-step windows called steady) is seen in at least 80%."""
    rng = np.random.default_rng(2025 + n)
    flat = np.mean([classify(noise(rng, n)) == "flat" for _ in range(200)])
    trend = np.exp(np.log(0.85) * np.arange(n) / (n - 1))
    seen = np.mean([classify(trend * noise(rng, n)) != "flat" for _ in range(200)])
    assert flat >= 0.97
    assert seen >= 0.80
