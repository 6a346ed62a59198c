"""A real trial of each framework on the CPU: result file, thread settings, unsupported inputs;
and the contract between a trial's parent and child: its settings, its payload, its entries."""

import dataclasses
import importlib
import json
import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from fwbench.errors import ConfigError, ResultError
from fwbench.measure.child import ENTRIES
from fwbench.measure.harness import Schedule, trial_schedule
from fwbench.measure.payload import TrialPayload
from fwbench.measure.results import load_trial
from fwbench.measure.trial import TIMELINE_PREFIX, run_trial
from fwbench.plan import ablation
from fwbench.plan.config import load_schema, validate
from fwbench.plan.contract import TrialSettings, Warmup
from fwbench.plan.sweep import Plan

FRAMEWORKS = ["pytorch", "tensorflow"]


def _settings(tiny_config, framework, **changes):
    plan = Plan.from_config(validate({**tiny_config, "frameworks": [framework], **changes}))
    return plan.trial_settings(plan.trials[0])


# --- the contract ----------------------------------------------------------------------------

def test_settings_read_back_what_the_plan_wrote(tiny_config):
    plan = Plan.from_config(validate({**tiny_config, "experiment": "epoch", "phases": ["train"]}))
    image = {"reference": "docker://fwbench/pytorch@sha256:ab", "digest": "sha256:ab",
             "engine": "podman", "tag": "fwbench/pytorch:2.14.1", "package": "torch",
             "version": "2.14.1"}
    warmup = {"iterations": 3, "steady": True, "class": "flat", "found": 2, "reason": "steady"}
    for params in (plan.trial_settings(plan.trials[0]).to_dict(),
                   plan.calibration_settings(plan.cells()[0]).to_dict(),
                   {**plan.trial_settings(plan.trials[0]).to_dict(), "gpu_uuids": ["GPU-1"],
                    "warmup": warmup, "images": {"pytorch": image}, "profile_steps": 4}):
        assert TrialSettings.from_dict(params).to_dict() == params
    # The plan's settings are what its JSON reads back as, blocks typed.
    settings = plan.trial_settings(plan.trials[0])
    assert TrialSettings.from_dict(settings.to_dict()) == settings
    assert settings.data.steps == 600 and settings.telemetry.period_s == 0.1


def test_a_bad_config_value_fails_when_the_plan_is_built(tiny_config):
    # A config that never met the schema (a hand-built dict) still cannot plan a bad value:
    # the plan's contract refuses it before any job starts.
    config = validate(tiny_config)
    with pytest.raises(ConfigError, match="config key 'data': steps must be an integer of at "
                                          "least 1, got 0"):
        Plan.from_config({**config, "data": {**config["data"], "steps": 0}})


@pytest.mark.parametrize("change, match", [
    (lambda d: d.pop("iterations"), "trial settings: iterations is missing"),
    (lambda d: d.update(iteratons=3), "trial settings: unknown field 'iteratons'"),
    (lambda d: d.update(threads="2"), "trial settings: threads must be an integer of at least 1, "
                                      "got '2'"),
    (lambda d: d.update(adaptive=[]), "trial settings: adaptive must be an object or null"),
    (lambda d: d["cell"].pop("batch_size"), "trial settings: cell: batch_size is missing"),
    (lambda d: d["cell"].update(batch_size=0), "cell: batch_size must be an integer of at least 1"),
    (lambda d: d.update(gpu_uuids=[0]), "gpu_uuids must be a list of strings"),
])
def test_a_bad_settings_field_is_one_error_naming_it(tiny_config, change, match):
    plan = Plan.from_config(validate(tiny_config))
    params = plan.trial_settings(plan.trials[0]).to_dict()
    change(params)
    with pytest.raises(ConfigError, match=match):
        TrialSettings.from_dict(params)


def test_a_bad_settings_file_stops_the_trial_command_naming_the_field(tmp_path, tiny_config):
    plan = Plan.from_config(validate(tiny_config))
    params = {**plan.trial_settings(plan.trials[0]).to_dict(), "blocks": -1}
    proc = subprocess.run(
        [sys.executable, "-m", "fwbench", "trial", "--settings", json.dumps(params),
         "--result", str(tmp_path / "r.json"), "--env", str(tmp_path / "e.json"),
         "--telemetry", str(tmp_path / "t.csv")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and not (tmp_path / "r.json").exists()
    assert proc.stderr.strip() == ("fwbench trial: trial settings: blocks must be an integer of "
                                   "at least 0, got -1")


def test_a_trial_warms_up_its_cells_fixed_count_and_a_calibration_times_single_steps_only(
        tiny_config):
    config = {**tiny_config, "iterations": 30, "min_run_time_s": 0.5,
              "warmup": {"min": 10, "max": 100, "calibration_s": 3},
              "blocks": {"count": 5, "size": 1, "min_time_s": 0.1, "run_time_s": 1.0}}
    plan = Plan.from_config(validate(config))
    settings = plan.trial_settings(plan.trials[0])
    trial = trial_schedule(dataclasses.replace(settings, warmup=Warmup(37, steady=True)))
    assert (trial.warmup, trial.iterations, trial.min_run_time_s) == (37, 30, 0.5)
    assert (trial.blocks, trial.blocks_run_time_s, trial.block_time_s) == (5, 1.0, 0.1)
    calibration = trial_schedule(dataclasses.replace(settings, calibration=True))
    # At least twice warmup.max single steps, so a warm-up that long leaves as long to see.
    assert calibration == Schedule(iterations=200, min_run_time_s=3)
    with pytest.raises(ConfigError, match="no warm-up"):
        trial_schedule(settings)


def test_a_payload_keeps_its_details_apart_and_refuses_a_bad_field():
    sent = {"iteration_ns": [3, 4], "cold_start_ns": 9, "steps": 600, "runs": [{"run": 1}]}
    payload = TrialPayload.from_dict(sent)
    assert payload.details == {"steps": 600, "runs": [{"run": 1}]}
    assert (payload.block_size, payload.warmup_ns, payload.peak_memory) == (0, [], None)
    assert TrialPayload.from_dict(payload.to_dict()) == payload
    with pytest.raises(ResultError, match="trial payload: iteration_ns must be a list of integers"):
        TrialPayload.from_dict({"iteration_ns": [1.5]})


def test_every_experiment_has_one_entry_and_none_is_in_the_trials_parent():
    experiments = load_schema()["properties"]["experiment"]["enum"]
    assert set(ENTRIES) == {*experiments, ablation.EXPERIMENT}
    for entry in set(ENTRIES.values()):
        module, function = entry.split(":")
        assert module != "fwbench.measure.trial"
        assert callable(getattr(importlib.import_module(module), function))


# --- real trials -----------------------------------------------------------------------------

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
    assert in_force["cpus"] == sorted(os.sched_getaffinity(0))[-2:]
    assert len(result["iteration_ns"]) == 3 and result["cold_start_ns"] > 0
    assert result["versions"]["framework_version"]
    assert (tmp_path / "trial-1.env.json").exists()
    # The telemetry side file spans the trial, on the harness's clock; no GPU is said so.
    samples = pd.read_csv(tmp_path / "trial-1.telemetry.csv")
    markers = result["markers_ns"]
    assert samples["t_ns"].min() <= markers["cold_start"] <= markers["end"] <= samples["t_ns"].max()
    assert set(result["telemetry"]["phases"]) >= {"warmup", "measure"}
    assert "gpu" in result["telemetry"]["unavailable"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one processor: nothing to confine")
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_cpu_trial_and_every_thread_its_framework_starts_stay_on_its_threads_processors(
        tmp_path, tiny_config, framework):
    # One thread: TensorFlow's own hand-off thread must not wake a second processor either.
    settings = _settings(tiny_config, framework, threads=1)
    run_trial(settings, tmp_path / "trial-1.json", tmp_path / "trial-1.env.json",
              tmp_path / "trial-1.telemetry.csv")
    result = load_trial(tmp_path / "trial-1.json")
    assert result["status"] == "ok", result["message"]
    assert result["settings"]["in_force"]["cpus"] == sorted(os.sched_getaffinity(0))[-1:]


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
        [sys.executable, "-m", "fwbench", "trial", "--settings", json.dumps(settings.to_dict()),
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
    record = fix_warmup([calibration], [{"found": steady_state.warmup_end(times),
                                         "class": steady_state.classify(times),
                                         "changepoints": steady_state.changepoints(times)}],
                        warmup_min=3, warmup_max=6)
    write_json({**record, "iterations": 5}, tmp_path / "warmup.json")
    run_trial(plan.trial_settings(plan.trials[0]), tmp_path / "trial-1.json",
              tmp_path / "e.json", tmp_path / "t.csv", warmup_path=tmp_path / "warmup.json")
    result = load_trial(tmp_path / "trial-1.json")
    assert len(result["warmup_ns"]) == 5 and result["settings"]["requested"]["warmup"][
        "iterations"] == 5
    assert result["warmup_steady"] is record["steady"]
