"""The progress line a trial job prints: trials done of planned, failures, time left, read from
the run's result files, each result read once."""

import os

import pytest

from fwbench.measure.results import make_result, write_json
from fwbench.measure.supervisor import Outcome
from fwbench.plan.config import validate
from fwbench.plan.sweep import Plan
from fwbench.workflow import progress


@pytest.fixture
def run(tmp_path, tiny_config, monkeypatch):
    """A planned run of 8 trials with nothing measured yet, in a temporary working folder."""
    monkeypatch.chdir(tmp_path)
    plan = Plan.from_config(validate({**tiny_config, "trials": 2, "batch_sizes": [2, 4]}))
    progress.write_planned(plan.trial_paths(), plan.results_dir())
    return plan


def _finish(plan, i, status="ok", seconds=10, start=0):
    """Trial i's result: it started ``start`` s after midnight and ran ``seconds``."""
    trial = plan.trials[i]
    outcome = Outcome(status, "" if status == "ok" else "it failed",
                      {"iteration_ns": [1], "warmup_ns": []} if status == "ok" else {}, 0)
    result = make_result(plan.trial_settings(trial), outcome,
                         started_at=f"2026-01-01T00:{start // 60:02d}:{start % 60:02d}+00:00",
                         ended_at=f"2026-01-01T00:{(start + seconds) // 60:02d}:"
                                  f"{(start + seconds) % 60:02d}+00:00",
                         workflow={"git_commit": None, "git_dirty": None, "session": "h:1:1"})
    write_json(result, trial.path(plan.run))
    return trial.path(plan.run)


def test_progress_counts_done_failed_and_time_left(run):
    assert progress.progress(run.results_dir()) == {
        "planned": 8, "done": 0, "failed": 0, "unsupported": 0, "per_trial_s": None}
    _finish(run, 0, seconds=10, start=0)
    _finish(run, 1, "oom", seconds=20, start=12)
    _finish(run, 2, "unsupported", seconds=30, start=34)
    _finish(run, 3, seconds=20, start=3000)
    state = progress.progress(run.results_dir())
    assert state == {"planned": 8, "done": 4, "failed": 1, "unsupported": 1, "per_trial_s": 20.0}
    assert progress.progress_line(state) == \
        "fwbench: trial 4/8 done (1 failed, 1 unsupported) · ~1 min 20 s left"
    for i in range(4, 8):
        _finish(run, i, seconds=1, start=3100 + 10 * i)
    assert progress.progress_line(progress.progress(run.results_dir())) == \
        "fwbench: trial 8/8 done (1 failed, 1 unsupported) · all planned trials done"


def test_each_result_is_read_once_and_again_only_when_rewritten(run, monkeypatch):
    reads = []
    real = progress._status_and_times
    monkeypatch.setattr(progress, "_status_and_times",
                        lambda path: reads.append(path) or real(path))
    first = _finish(run, 0)
    progress.progress(run.results_dir())
    second = _finish(run, 1)
    progress.progress(run.results_dir())
    assert reads == [first, second]
    # A trial measured again (a new file, a new modification time) is read again; a deleted
    # one no longer counts.
    os.utime(first, ns=(1, 1))
    os.remove(second)
    assert progress.progress(run.results_dir())["done"] == 1
    assert reads == [first, second, first]


def test_report_progress_writes_one_line_to_the_named_descriptor(run, monkeypatch):
    path = _finish(run, 0, seconds=4)
    read_end, write_end = os.pipe()
    monkeypatch.setenv(progress.PROGRESS_FD, str(write_end))
    progress.report_progress(path)
    os.close(write_end)
    assert os.read(read_end, 1000).decode() == \
        "fwbench: trial 1/8 done (0 failed) · ~28 s left\n"
    # Outside a workflow job (no descriptor named), or with no plan recorded: nothing, no error.
    monkeypatch.delenv(progress.PROGRESS_FD)
    progress.report_progress(path)
    monkeypatch.setenv(progress.PROGRESS_FD, "2")
    os.remove(progress.planned_list(run.results_dir()))
    progress.report_progress(path)


@pytest.mark.parametrize("seconds, text", [(40, "40 s"), (250, "4 min 10 s"),
                                           (3900, "1 h 5 min")])
def test_durations_read_at_a_glance(seconds, text):
    assert progress._duration(seconds) == text
