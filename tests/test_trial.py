"""A real trial of each framework on the CPU: result file, thread settings, unsupported inputs."""

import json
import subprocess
import sys
import time

import pandas as pd
import pytest

from fwbench.measure.results import load_trial
from fwbench.measure.trial import TIMELINE_PREFIX, run_trial
from fwbench.plan.config import validate
from fwbench.plan.sweep import Plan

FRAMEWORKS = ["pytorch", "tensorflow"]


def _settings(tiny_config, framework, **changes):
    plan = Plan.from_config(validate({**tiny_config, "frameworks": [framework], **changes}))
    return plan.trial_settings(plan.trials[0])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_threads_are_set_in_both_frameworks_whatever_the_environment(
        tmp_path, monkeypatch, tiny_config, framework):
    # Snakemake exports OMP_NUM_THREADS=1 under --cores 1; the configured count must still win.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    settings = _settings(tiny_config, framework, threads=2)
    run_trial(settings, tmp_path / "trial-1.json", tmp_path / "trial-1.env.json",
              tmp_path / "trial-1.telemetry.csv")
    result = load_trial(tmp_path / "trial-1.json")
    assert result["status"] == "ok", result["message"]
    in_force = result["settings"]["in_force"]
    assert (in_force["threads_intra"], in_force["threads_inter"]) == (2, 1)
    assert len(result["iteration_ns"]) == 3 and result["cold_start_ns"] > 0
    assert result["versions"]["framework_version"]
    assert (tmp_path / "trial-1.env.json").exists()
    # The telemetry side file spans the trial, on the harness's clock; no GPU is said so.
    samples = pd.read_csv(tmp_path / "trial-1.telemetry.csv")
    markers = result["markers_ns"]
    assert samples["t_ns"].min() <= markers["cold_start"] <= markers["end"] <= samples["t_ns"].max()
    assert set(result["telemetry"]["phases"]) >= {"warmup", "measure"}
    assert "gpu" in result["telemetry"]["unavailable"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_input_too_small_is_unsupported_with_a_reason(tmp_path, tiny_config, framework):
    tiny_config["models"]["lenet5"]["input_shapes"] = [[1, 8, 8]]
    run_trial(_settings(tiny_config, framework), tmp_path / "r.json", tmp_path / "e.json",
              tmp_path / "t.csv")
    result = load_trial(tmp_path / "r.json")
    assert result["status"] == "unsupported"
    assert "lenet5" in result["message"] and "8x8" in result["message"]
    assert result["iteration_ns"] == []


def test_epoch_cells_run_through_their_experiment(tmp_path, tiny_config):
    settings = _settings(tiny_config, "pytorch", experiment="epoch", phases=["train"],
                         batch_sizes=[50], iterations=1, data={"steps": 3})
    run_trial(settings, tmp_path / "r.json", tmp_path / "e.json", tmp_path / "t.csv")
    result = load_trial(tmp_path / "r.json")
    assert result["status"] == "ok", result["message"]
    assert result["details"]["steps"] == 3 and result["details"]["data_source"]
    assert len(result["iteration_ns"]) == 1


def test_the_trial_command_logs_its_timeline_in_order(tmp_path, tiny_config):
    # Through the command the workflow runs: every stage of the trial is stamped, in order,
    # from the job's shell ($EPOCHREALTIME) to the last line.
    settings = _settings(tiny_config, "pytorch")
    shell_started = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "fwbench", "trial", "--settings", json.dumps(settings),
         "--result", str(tmp_path / "r.json"), "--env", str(tmp_path / "e.json"),
         "--telemetry", str(tmp_path / "t.csv"), f"--job-started={shell_started:.6f}"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stderr.splitlines() if l.startswith(TIMELINE_PREFIX))
    timeline = json.loads(line.removeprefix(TIMELINE_PREFIX))
    order = ["job_started", "python_started", "trial_started", "sampler_started",
             "sampler_ready", "child_started", "child_python_started", "child_imported",
             "framework_import_started", "framework_imported", "model_built", "cold_start",
             "warmup", "measure", "blocks", "end", "payload_ready", "child_exited",
             "sampler_stopped", "provenance_read", "result_ready", "written", "ended"]
    assert sorted(timeline, key=timeline.get) == order
    assert abs(timeline["job_started"] - shell_started * 1e9) < 10_000  # bash gives µs
    # The timeline stays out of the result: it is in the log.
    assert "timeline_ns" not in load_trial(tmp_path / "r.json")["details"]


def test_a_calibration_times_single_steps_and_fixes_the_warmup_its_trials_take(tmp_path,
                                                                              tiny_config):
    from fwbench.analysis import steady_state
    from fwbench.measure.calibration import fix_warmup
    from fwbench.measure.results import write_json

    plan = Plan.from_config(validate({**tiny_config, "frameworks": ["pytorch"],
                                      "warmup": {"min": 3, "max": 6, "calibration_s": 0}}))
    cell = plan.cells()[0]
    run_trial(plan.calibration_settings(cell), tmp_path / "calibration.json",
              tmp_path / "c.env.json", tmp_path / "c.csv")
    calibration = load_trial(tmp_path / "calibration.json")
    assert calibration["status"] == "ok", calibration["message"]
    assert calibration["trial"] == 0 and calibration["settings"]["requested"]["calibration"]
    # Single steps only: twice warmup.max of them, no warm-up of its own, no blocks.
    assert len(calibration["iteration_ns"]) == 12
    assert calibration["warmup_ns"] == [] and calibration["block_ns"] == []
    times = calibration["iteration_ns"]
    record = fix_warmup(calibration, found=steady_state.warmup_end(times),
                        kind=steady_state.classify(times),
                        changepoints=steady_state.changepoints(times), warmup_min=3,
                        warmup_max=6)
    write_json({**record, "iterations": 5}, tmp_path / "warmup.json")
    run_trial(plan.trial_settings(plan.trials[0]), tmp_path / "trial-1.json",
              tmp_path / "e.json", tmp_path / "t.csv", warmup_path=tmp_path / "warmup.json")
    result = load_trial(tmp_path / "trial-1.json")
    assert len(result["warmup_ns"]) == 5 and result["settings"]["requested"]["warmup"][
        "iterations"] == 5
    assert result["warmup_steady"] is record["steady"]
