"""fwbench/plan/sweep.py and cells.py: stable ids, paths in one place, interleaved trial order."""

import itertools

from fwbench.plan.config import validate
from fwbench.plan.sweep import Plan


def _plan(config, **changes):
    return Plan.from_config(validate({**config, **changes}))


def test_cell_ids_are_readable_and_paths_follow_the_layout(tiny_config):
    plan = _plan(tiny_config)
    cell = plan.trials[0].cell
    assert cell.name == "infer-b2-1x28x28-fp32-idiomatic-matched"
    assert cell.id == f"throughput/cpu/{cell.framework}/lenet5/{cell.name}"
    assert plan.trials[0].path("tiny") == f"results/tiny/cells/{cell.id}/trial-1.json"
    assert plan.trial(plan.trials[0].path("tiny")) == plan.trials[0]


def test_every_cell_has_all_trials_and_a_partner(tiny_config):
    plan = _plan(tiny_config, trials=3, batch_sizes=[1, 2], phases=["train", "infer"])
    assert len(plan.cells()) == 8 and len(plan.trials) == 24
    for _, trials in itertools.groupby(sorted(plan.trials, key=lambda t: t.cell.pair_id),
                                       key=lambda t: t.cell.pair_id):
        trials = list(trials)
        assert {t.cell.framework for t in trials} == {"pytorch", "tensorflow"}
        assert sorted(t.index for t in trials) == [1, 1, 2, 2, 3, 3]


def test_trials_are_interleaved_never_three_in_a_row(tiny_config):
    plan = _plan(tiny_config, trials=7, batch_sizes=[1, 2, 3, 4])
    firsts = set()
    for pair_id in {t.cell.pair_id for t in plan.trials}:
        order = [t.cell.framework for t in plan.trials if t.cell.pair_id == pair_id]
        assert all(len(set(order[i:i + 3])) == 2 for i in range(len(order) - 2)), order
        firsts.add(order[0])
    assert firsts == {"pytorch", "tensorflow"}  # the seed, not the name, picks who starts


def test_previous_chains_each_group_in_order(tiny_config):
    plan = _plan(tiny_config, trials=2)
    chain = plan.trials
    assert plan.previous(chain[0]) is None
    assert [plan.previous(t) for t in chain[1:]] == chain[:-1]
    assert [plan.group_position(t) for t in chain] == [0, 1, 2, 3]


def test_adding_a_cell_changes_no_existing_trial_settings(tiny_config):
    before = _plan(tiny_config, trials=3)
    after = _plan(tiny_config, trials=3, batch_sizes=[2, 8], phases=["infer", "train"])
    for trial in before.trials:
        path = trial.path("tiny")
        assert before.trial_settings(trial) == after.trial_settings(after.trial(path))
        previous = [before.previous(trial), after.previous(after.trial(path))]
        assert len({p.path("tiny") if p else None for p in previous}) == 1


def test_trial_settings_carry_what_the_worker_needs(tiny_config):
    plan = _plan(tiny_config, threads=2, timeout_s=5, memory_limit_mb=4096)
    settings = plan.trial_settings(plan.trials[0])
    assert settings.threads == 2 and settings.timeout_s == 5
    assert settings.memory_limit_mb == 4096 and settings.cell.input_shape == (1, 28, 28)


def test_distributed_cells_name_their_strategy_and_take_threads_per_process(tiny_config):
    plan = _plan(tiny_config, experiment="distributed", phases=["train"], threads=1,
                 distributed={"strategies": ["multi_process"], "world_sizes": [1, 2]})
    names = sorted({t.cell.name for t in plan.trials})
    assert names == ["train-b2-1x28x28-fp32-idiomatic-matched-multi_process-w1",
                     "train-b2-1x28x28-fp32-idiomatic-matched-multi_process-w2"]
    assert sorted({plan.threads(t) for t in plan.trials}) == [1, 2]


def test_each_optimizer_of_a_real_data_run_is_its_own_cell_pair(tiny_config):
    throughput = sorted(c.id for c in _plan(tiny_config).cells())
    plan = _plan(tiny_config, experiment="convergence", phases=["train"],
                 data={"optimizer": ["sgd", "adam"]})
    cells = plan.cells()
    assert len(cells) == 4 and len({c.name for c in cells}) == 2
    for optimizer in ("sgd", "adam"):
        pair = [c for c in cells if c.optimizer == optimizer]
        assert {c.framework for c in pair} == {"pytorch", "tensorflow"}
        assert {c.name for c in pair} == {f"train-b2-1x28x28-fp32-idiomatic-matched-{optimizer}"}
        assert len({c.pair_id for c in pair}) == 1
        assert plan.trial_settings(plan.last_trial(pair[0])).cell.optimizer == optimizer
    one = _plan(tiny_config, experiment="epoch", phases=["train"], data={"optimizer": "adam"})
    assert {c.optimizer for c in one.cells()} == {"adam"}
    # Elsewhere no optimizer: throughput names, ids and trial settings are as they were.
    assert throughput == [f"throughput/cpu/{f}/lenet5/infer-b2-1x28x28-fp32-idiomatic-matched"
                          for f in ("pytorch", "tensorflow")]
    plan = _plan(tiny_config, data={"optimizer": ["sgd", "adam"]})
    assert sorted(c.id for c in plan.cells()) == throughput
    assert "optimizer" not in plan.trial_settings(plan.trials[0]).to_dict()["cell"]


def test_real_data_experiments_name_their_data_record(tiny_config):
    assert _plan(tiny_config).data_path() is None
    plan = _plan(tiny_config, experiment="epoch", phases=["train"], data={"steps": 5})
    assert plan.data_path() == "results/tiny/environment/data.json"
    assert plan.trial_settings(plan.trials[0]).data.steps == 5


def test_ablation_adds_its_cells_beside_the_sweep(tiny_config):
    plan = _plan(tiny_config, ablation={"factors": ["layout", "mode=eager"]},
                 profiling={"steps": 2})
    ablation = {(t.cell.profile, t.cell.mode) for t in plan.trials
                if t.cell.experiment == "ablation"}
    assert ("defaults", "idiomatic") in ablation and ("defaults+layout", "eager") in ablation
    assert {t.cell.experiment for t in plan.trials} == {"throughput", "ablation"}
    cell = plan.trials[0].cell
    assert plan.profile_path(cell) == f"results/tiny/cells/{cell.id}/profile.json"
    assert plan.last_trial(cell).cell == cell


def test_cell_groups_come_in_a_seeded_random_order(tiny_config):
    config = {**tiny_config, "batch_sizes": [1, 2, 4, 8, 16, 32]}
    def batches(seed):
        plan = _plan(config, seed=seed)
        return list(dict.fromkeys(t.cell.batch_size for t in plan.trials))
    assert batches(0) == batches(0) and sorted(batches(0)) == [1, 2, 4, 8, 16, 32]
    assert batches(0) != sorted(batches(0)) or batches(1) != sorted(batches(1))


def test_second_members_outrank_every_other_trial_then_the_planned_order(tiny_config):
    plan = _plan(tiny_config, trials=3, batch_sizes=[2, 4])
    assert len(plan.trials) == 12
    seconds = [t for t in plan.trials if plan.partner_before(t)]
    firsts = [t for t in plan.trials if not plan.partner_before(t)]
    assert len(seconds) == len(firsts) == 6
    for second in seconds:
        partner = plan.partner_before(second)
        assert partner.index == second.index and partner.cell.pair_id == second.cell.pair_id
        assert partner.cell.framework != second.cell.framework
        assert partner.position == second.position - 1
    # Any second member above any first member; first members in planned order; all above a
    # profiled run (Snakemake's default priority, 0).
    assert min(map(plan.priority, seconds)) > max(map(plan.priority, firsts))
    assert [plan.priority(t) for t in firsts] == sorted(map(plan.priority, firsts), reverse=True)
    assert min(map(plan.priority, plan.trials)) > 0


def test_a_single_framework_has_no_pairs(tiny_config):
    plan = _plan(tiny_config, trials=3, frameworks=["pytorch"])
    assert not any(plan.partner_before(t) for t in plan.trials)


def test_wildcard_constraints_come_from_the_cells_names(tiny_config):
    import re

    plan = _plan(tiny_config, experiment="convergence", phases=["train"],
                 data={"optimizer": ["sgd", "adam"]})
    pattern = re.compile(plan.wildcard_constraints()["cell"])
    for cell in plan.cells():
        assert pattern.fullmatch(cell.name)
    assert not pattern.fullmatch("train-b2-1x28x28-fp32-idiomatic-matched-rmsprop")
    assert plan.wildcard_constraints()["framework"] == "pytorch|tensorflow"


def test_each_group_calibrates_before_its_first_trial_and_never_between_a_pair(tiny_config):
    plan = _plan(tiny_config, trials=3, batch_sizes=[2, 4])
    seconds = [t for t in plan.trials if plan.partner_before(t)]
    for cell in plan.cells():
        group = [t for t in plan.trials if t.cell.pair_id == cell.pair_id]
        before = [t for t in plan.trials if t.position < group[0].position]
        priority = plan.calibration_priority(cell)
        # Below every trial planned before the group and every second member, above the
        # group's first trial: Snakemake runs it just before that trial, never inside a pair.
        assert priority > plan.priority(group[0]) > 0
        assert all(priority < plan.priority(t) for t in before + seconds)
        # The group's first trial waits for the warm-up of both its cells.
        assert sorted(plan.group_warmup_paths(group[0])) == sorted(
            f"results/tiny/cells/{c.id}/warmup.json" for c in plan.cells()
            if c.pair_id == cell.pair_id)
        assert plan.calibration_path(cell) == f"results/tiny/cells/{cell.id}/calibration.json"


def test_a_calibration_is_a_trial_of_its_cell_timing_single_steps(tiny_config):
    plan = _plan(tiny_config, warmup={"min": 5, "max": 40, "calibration_s": 2})
    cell = plan.cells()[0]
    settings = plan.calibration_settings(cell).to_dict()
    trial = plan.trial_settings(plan.last_trial(cell)).to_dict()
    assert settings["calibration"] and (settings["trial"], settings["group_position"]) == (0, 0)
    assert {k: v for k, v in settings.items() if k not in ("trial", "group_position",
                                                          "calibration")} == \
        {k: v for k, v in trial.items() if k not in ("trial", "group_position")}
    assert (trial["warmup_min"], trial["warmup_max"], trial["calibration_s"]) == (5, 40, 2)
    assert "calibration" not in trial


def test_a_cell_runs_the_calibrations_its_config_asks_and_one_where_it_does_not_say(
        tiny_config):
    cell = _plan(tiny_config).cells()[0]
    assert _plan(tiny_config).calibration_names(cell) == ["calibration"]
    three = _plan(tiny_config, warmup={"min": 0, "max": 2, "calibration_s": 0,
                                       "calibrations": 3})
    assert three.calibration_names(cell) == ["calibration", "calibration-2", "calibration-3"]
    assert three.calibration_path(cell, "env.json", "calibration-3") == (
        f"results/tiny/cells/{cell.id}/calibration-3.env.json")


def test_only_cells_that_warm_up_are_calibrated(tiny_config):
    plan = _plan(tiny_config)
    assert all(map(plan.calibrates, plan.cells()))
    real = _plan(tiny_config, experiment="epoch", phases=["train"])
    assert not any(map(real.calibrates, real.cells()))
    assert real.warmup_path(real.cells()[0]) is None
    assert real.calibration_names(real.cells()[0]) == []
    assert real.group_warmup_paths(real.trials[0]) == []
