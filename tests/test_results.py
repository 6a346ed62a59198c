"""fwbench/measure/results.py: atomic writes, validated reads, and tables built without a
framework."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from fwbench.errors import ResultError
from fwbench.measure.results import JSON_VERSION, load_trial, make_result, write_json
from fwbench.measure.supervisor import Outcome
from fwbench.plan.config import validate
from fwbench.plan.sweep import Plan


def _results(tiny_config, tmp_path):
    """Trial results for each planned trial, as the supervisor would write them."""
    plan = Plan.from_config(validate({**tiny_config, "trials": 2}))
    paths = []
    for i, trial in enumerate(plan.trials):
        ok = i != 1
        outcome = Outcome("ok" if ok else "oom", "" if ok else "out of memory",
                          {"iteration_ns": [1000 + i, 1100 + i, 1200 + i], "cold_start_ns": 5000,
                           "warmup_ns": [2000], "settings_in_force": {"threads_intra": 1}}
                          if ok else {}, 0)
        result = make_result(plan.trial_settings(trial), outcome,
                             started_at=f"2026-01-01T00:00:0{i}+00:00",
                             ended_at=f"2026-01-01T00:00:0{i + 1}+00:00",
                             workflow={"git_commit": "abc", "git_dirty": False,
                                       "session": "host:1:1"})
        path = tmp_path / trial.path(plan.run)
        write_json(result, path)
        paths.append(str(path))
    return paths


def test_round_trip_validates(tmp_path, tiny_config):
    path = _results(tiny_config, tmp_path)[0]
    assert load_trial(path)["schema_version"] == JSON_VERSION


def test_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "r.json"
    write_json({"a": 1}, path)
    with pytest.raises(TypeError):
        write_json({"a": object()}, path)
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.update(schema_version=99), "unknown schema_version 99"),
    (lambda d: d.update(status="fine"), "status"),
    (lambda d: d.pop("iteration_ns"), "iteration_ns"),
])
def test_invalid_results_are_rejected(tmp_path, tiny_config, mutate, match):
    path = _results(tiny_config, tmp_path)[0]
    with open(path) as f:
        data = json.load(f)
    mutate(data)
    write_json(data, path)
    with pytest.raises(ResultError, match=match):
        load_trial(path)


BLOCK_FRAMEWORKS = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'tensorflow', 'keras', 'torchvision'):
            raise ImportError('framework import blocked: ' + name)
sys.meta_path.insert(0, Block())
from fwbench.analysis.tables import collect_tables
import json
tables = collect_tables(json.loads(sys.argv[1]))
print(len(tables['iterations']), len(tables['trials']), len(tables['cells']))
"""


def test_tables_are_built_with_framework_imports_blocked(tmp_path, tiny_config):
    paths = _results(tiny_config, tmp_path)
    proc = subprocess.run([sys.executable, "-c", BLOCK_FRAMEWORKS, json.dumps(paths)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["9", "4", "2"]  # 3 ok trials x 3 iterations; 4 trials; 2 cells


def test_groups_not_measured_together_are_flagged(tmp_path, tiny_config):
    from fwbench.analysis.tables import collect_tables
    paths = _results(tiny_config, tmp_path)
    assert collect_tables(paths)["trials"]["measured_together"].all()
    # Re-measure one trial in a later session, as a partial rerun would.
    with open(paths[0]) as f:
        rerun = json.load(f)
    rerun["workflow"]["session"] = "host:2:2"
    rerun["started_at"] = "2026-01-02T00:00:00+00:00"
    write_json(rerun, paths[0])
    assert not collect_tables(paths)["trials"]["measured_together"].any()


def _ran_in_order(plan, order, tmp_path):
    """Results of ``plan``'s trials as if they ran one after another in ``order`` (indices into
    plan.trials), each 8 s long, 2 s apart."""
    paths = []
    for slot, i in enumerate(order):
        trial = plan.trials[i]
        outcome = Outcome("ok", "", {"iteration_ns": [1000, 1100], "warmup_ns": []}, 0)
        result = make_result(plan.trial_settings(trial), outcome,
                             started_at=f"2026-01-01T00:{slot:02d}:00+00:00",
                             ended_at=f"2026-01-01T00:{slot:02d}:08+00:00",
                             workflow={"git_commit": "abc", "git_dirty": False, "session": "h:1:1"})
        write_json(result, tmp_path / trial.path(plan.run))
        paths.append(str(tmp_path / trial.path(plan.run)))
    return paths


def test_pair_gaps_come_from_the_recorded_times_of_every_trial(tmp_path, tiny_config):
    from fwbench.analysis.tables import collect_tables
    plan = Plan.from_config(validate({**tiny_config, "trials": 2, "batch_sizes": [2, 4]}))
    assert len(plan.trials) == 8  # two groups of two pairs, planned back to back
    # As planned, except that the other group's first trial slipped into the second pair: both
    # pairs it touches are split by one trial.
    order = [0, 1, 2, 4, 3, 5, 6, 7]
    trials = collect_tables(_ran_in_order(plan, order, tmp_path))["trials"]
    gaps = dict(list(trials.groupby(["pair_id", "trial"])))
    split = {(plan.trials[i].cell.pair_id, plan.trials[i].index) for i in (2, 4)}
    assert len(gaps) == 4 and len(split) == 2
    for key, group in gaps.items():
        assert len(group) == 2 and group["pair_gap_trials"].nunique() == 1
        if key in split:
            assert list(group["pair_adjacent"]) == [False, False]
            assert list(group["pair_gap_trials"]) == [1, 1]
            assert list(group["pair_gap_s"]) == [2 * 60 - 8.0] * 2
        else:
            assert group["pair_adjacent"].all() and (group["pair_gap_trials"] == 0).all()
            assert (group["pair_gap_s"] == 60 - 8.0).all()
    assert trials["pair_adjacent"].dtype == bool
    assert str(trials["pair_gap_trials"].dtype) == "Int64"

    # A trial whose partner is missing from the run: not adjacent, no gap.
    alone = collect_tables(_ran_in_order(plan, order, tmp_path)[:-1])["trials"]
    last = alone[alone["pair_id"] == plan.trials[6].cell.pair_id].sort_values("run_order").iloc[-1]
    assert not last["pair_adjacent"] and last["pair_gap_trials"] is pd.NA


def test_a_merged_run_judges_each_origin_on_its_own(tmp_path, tiny_config):
    """fwbench merge keeps each origin's trials under its own ``run`` (trials renumbered): two
    machines that each ran the plan as planned, at the same time, measured every group together
    and every pair back to back, although the other machine's trials started in between."""
    from fwbench.analysis.tables import collect_tables
    plan = Plan.from_config(validate({**tiny_config, "trials": 2}))
    paths = []
    for origin, offset, start_s in (("a", 0, 0), ("b", 2, 1)):   # b starts 1 s after each of a's
        for slot, trial in enumerate(plan.trials):
            outcome = Outcome("ok", "", {"iteration_ns": [1000, 1100], "warmup_ns": []}, 0)
            result = make_result(plan.trial_settings(trial), outcome,
                                 started_at=f"2026-01-01T00:{slot:02d}:{start_s:02d}+00:00",
                                 ended_at=f"2026-01-01T00:{slot:02d}:{start_s + 8:02d}+00:00",
                                 workflow={"git_commit": "abc", "git_dirty": False,
                                           "session": f"{origin}:1:1"})
            result.update(run=origin, trial=result["trial"] + offset)
            path = tmp_path / origin / f"trial-{slot}.json"
            write_json(result, path)
            paths.append(str(path))
    trials = collect_tables(paths)["trials"]
    assert set(trials["run"]) == {"a", "b"} and len(trials) == 2 * len(plan.trials)
    assert list(trials["run"].iloc[:4]) == ["a", "b", "a", "b"]   # interleaved in time
    assert trials["measured_together"].all()
    assert trials["pair_adjacent"].all() and (trials["pair_gap_trials"] == 0).all()
