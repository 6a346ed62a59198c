"""fwbench/measure/calibration.py and `fwbench fix-warmup`: a cell's warm-up, fixed from its
calibration trials by the changepoint analysis, then read by each of its trials."""

import dataclasses
import json

import numpy as np
import pytest

from fwbench.analysis import steady_state
from fwbench.errors import ConfigError, ResultError
from fwbench.measure.calibration import read_warmup, uncalibrated
from fwbench.measure.results import write_json
from fwbench.measure.trial import with_warmup
from fwbench.plan.config import validate
from fwbench.plan.sweep import Plan


def _calibration(times, status="ok"):
    return {"cell_id": "throughput/cpu/pytorch/lenet5/x", "status": status,
            "iteration_ns": list(times) if status == "ok" else []}


def _fix(times, status="ok", **bounds):
    return _fix_several([_calibration(times, status)], **bounds)


def _fix_several(calibrations, **bounds):
    return steady_state.fixed_warmup(calibrations,
                                     **{"warmup_min": 5, "warmup_max": 100, **bounds})


def _warming_up(steps_slow, total=600, seed=0):
    """1.2 ms steps falling to 0.8 ms over ``steps_slow`` steps (the reference's PyTorch LeNet-5
    train b4, trial 1), then steady, with 2% noise."""
    rng = np.random.default_rng(seed)
    level = np.concatenate([np.linspace(1.2e6, 0.8e6, steps_slow), np.full(total - steps_slow,
                                                                            0.8e6)])
    return (level * (1 + 0.02 * rng.standard_normal(total))).astype(int).tolist()


def test_a_warmup_found_is_the_count_every_trial_takes():
    record = _fix(_warming_up(60))
    assert record["steady"] and record["class"] == "warmup"
    assert 40 <= record["iterations"] <= 75 and record["iterations"] == record["found"]
    assert record["calibration_steps"] == 600 and "steady from step" in record["reason"]


def test_a_flat_calibration_warms_up_the_minimum():
    rng = np.random.default_rng(1)
    record = _fix((1e6 * (1 + 0.02 * rng.standard_normal(400))).astype(int).tolist())
    assert (record["class"], record["found"], record["iterations"]) == ("flat", 0, 5)
    assert record["steady"] and "raised to warmup.min (5)" in record["reason"]


def test_a_warmup_past_the_maximum_is_cut_and_said_unsteady():
    record = _fix(_warming_up(200), warmup_max=100)
    assert record["found"] > 100 and record["iterations"] == 100 and record["steady"] is False
    assert "past warmup.max" in record["reason"]


def test_a_seconds_cap_lets_short_steps_reach_their_steady_state_and_keeps_slow_ones_short():
    # 0.8-1.2 ms steps settling after 200: past 100 steps, within 0.5 s (about 600 steps).
    short = _fix(_warming_up(200), warmup_max=100, warmup_max_s=0.5)
    assert short["bounds"]["cap"] > 200 and short["found"] > 100
    assert short["iterations"] == short["found"] and short["steady"] is True
    # The same steps at 80-120 ms: 0.5 s holds 6, so the cap stays at 100 steps.
    slow = _fix([t * 100 for t in _warming_up(200)], warmup_max=100, warmup_max_s=0.5)
    assert slow["bounds"]["cap"] == 100 and slow["iterations"] == 100
    assert slow["steady"] is False and "past warmup.max" in slow["reason"]
    # Settling past the seconds cap too: cut there, and said so.
    capped = _fix(_warming_up(200), warmup_max=100, warmup_max_s=0.12)
    assert 100 < capped["iterations"] == capped["bounds"]["cap"] < capped["found"]
    assert "past the 0.12 s cap" in capped["reason"] and capped["steady"] is False


def test_a_seconds_cap_longer_than_half_the_calibration_is_refused(tiny_config):
    with pytest.raises(ConfigError, match="'warmup.max_s': 0.8 s needs a calibration at least "
                                          "twice as long.*raise it to 1.6"):
        validate({**tiny_config, "warmup": {"min": 0, "max": 30, "max_s": 0.8,
                                            "calibration_s": 1}})


def test_no_steady_state_and_a_failed_calibration_fall_back_to_the_maximum():
    drifting = np.linspace(1e6, 3e6, 400).astype(int).tolist()  # still slowing at the end
    record = _fix(drifting)
    assert record["class"] == "no_steady_state" and record["found"] is None
    assert (record["iterations"], record["steady"]) == (100, False)
    assert "no steady state" in record["reason"]
    failed = _fix([], status="unsupported")
    assert (failed["iterations"], failed["steady"]) == (100, None)
    assert "ended unsupported" in failed["reason"]


def _switching(total=600, seed=0):
    """Steps at 3.1 ms, then 2.0, 3.1 and 2.0 ms again, 150 each, with 2% noise: the host
    switching speed under the process (the reference's TensorFlow lenet5 train calibration)."""
    rng = np.random.default_rng(seed)
    level = np.repeat([3.1e6, 2.0e6, 3.1e6, 2.0e6], total // 4)
    return (level * (1 + 0.02 * rng.standard_normal(total))).astype(int).tolist()


def test_the_warmup_is_where_a_majority_of_the_calibrations_is_steady():
    # Steady from about 60, 120 and 180 steps: the median, 120, with two of three steady there.
    record = _fix_several([_calibration(_warming_up(n, seed=n)) for n in (60, 180, 120)],
                          warmup_max=300)
    found = [c["found"] for c in record["calibrations"]]
    assert record["found"] == sorted(found)[1] and record["iterations"] == record["found"]
    assert record["steady"] and record["class"] == "warmup"
    assert f"steady from step {record['found']} in 2 of the 3 calibrations" in record["reason"]


def test_a_host_that_switches_speed_in_one_calibration_moves_nothing():
    alone = _fix(_warming_up(60))
    record = _fix_several([_calibration(_warming_up(60)), _calibration(_switching()),
                           _calibration(_warming_up(60, seed=1))])
    assert [c["class"] for c in record["calibrations"]] == ["warmup", "switching", "warmup"]
    assert abs(record["found"] - alone["found"]) <= 20 and record["steady"]


def test_a_host_that_switches_speed_in_most_calibrations_is_said_so_not_called_unsteady():
    record = _fix_several([_calibration(_switching(seed=k)) for k in range(2)]
                          + [_calibration(_warming_up(60))])
    assert (record["class"], record["found"], record["steady"]) == ("switching", None, None)
    assert record["iterations"] == 100
    assert "the host switched speed in 2 of the 3 calibrations" in record["reason"]
    one = _fix(_switching())
    assert (one["class"], one["steady"]) == ("switching", None)
    assert one["reason"].startswith("the host switched speed in the calibration:")


def test_too_few_calibrations_that_ended_ok_fall_back_to_the_maximum():
    record = _fix_several([_calibration(_warming_up(60)), _calibration([], "crashed"),
                           _calibration([], "timeout")])
    assert (record["iterations"], record["steady"], record["calibration_status"]) == (
        100, None, "crashed")
    assert "2 of the 3 calibrations did not end ok (crashed, timeout)" in record["reason"]


def _settings(tiny_config, **changes):
    plan = Plan.from_config(validate({**tiny_config, "warmup": {"min": 0, "max": 30}, **changes}))
    return plan.trial_settings(plan.trials[0])


def test_a_trial_reads_its_cells_record_and_without_one_takes_the_fallback(tmp_path,
                                                                           tiny_config):
    settings = _settings(tiny_config)
    path = tmp_path / "warmup.json"
    write_json(_fix(_warming_up(60)), path)
    warmup = with_warmup(settings, path).warmup
    assert warmup.iterations == read_warmup(path)["iterations"] and warmup.steady
    assert with_warmup(settings).warmup.to_dict() == {k: uncalibrated(30)[k]
                                                      for k in warmup.to_dict()}
    assert with_warmup(settings, "").warmup.iterations == 30  # `--warmup=`: none
    # A calibration warms up nothing of its own; a real-data trial times whole runs.
    assert with_warmup(dataclasses.replace(settings, calibration=True), path).warmup is None
    epoch = _settings(tiny_config, experiment="epoch", phases=["train"])
    assert with_warmup(epoch, path).warmup is None


def test_a_malformed_record_is_refused_naming_the_field(tmp_path):
    path = tmp_path / "warmup.json"
    path.write_text(json.dumps({**_fix(_warming_up(60)), "iterations": -1}))
    with pytest.raises(ResultError, match="warmup.json: invalid at iterations"):
        read_warmup(path)
