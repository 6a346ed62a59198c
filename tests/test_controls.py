"""A/A controls (config `controls`, fwbench.analysis.controls): the plan runs a selected cell in
both slots of a pair of its own, their trials stay out of the sweep's tables, the analysis
passes a control whose slots are alike and fails one whose slots differ, and a tiny workflow
with controls writes stats/controls.csv, gates on it and shows it in its report."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from fwbench.analysis.controls import control_comparisons
from fwbench.errors import ConfigError
from fwbench.plan.config import validate
from fwbench.plan.sizing import pairs_for_equivalence
from fwbench.plan.sweep import Plan
from tests.conftest import snakemake
from tests.reference_runs import rebuild


def _plan(tiny_config, **changes) -> Plan:
    return Plan.from_config(validate({**tiny_config, "trials": 4, **changes}))


def test_a_control_is_the_cell_in_both_slots_of_a_pair_of_its_own(tiny_config):
    plan = _plan(tiny_config, controls=[{"framework": "pytorch"}])
    controls = [t for t in plan.trials if t.cell.control]
    assert {t.cell.framework for t in controls} == {"pytorch"}
    assert {t.cell.name for t in controls} == {"infer-b2-1x28x28-fp32-idiomatic-matched-aa-a",
                                               "infer-b2-1x28x28-fp32-idiomatic-matched-aa-b"}
    assert {t.cell.pair_id for t in controls} == {
        "throughput/cpu/lenet5/infer-b2-1x28x28-fp32-idiomatic-matched-aa-pytorch"}
    # interleaved as a real pair: trial k of slot a and of slot b run one right after the other
    for k in range(1, 5):
        first, second = [t for t in controls if t.index == k]
        assert second.position == first.position + 1 and plan.partner_before(second) == first
    # the sweep's own trials are those of a run without controls, and the controls come apart
    assert len(plan.trial_paths(controls=False)) == len(_plan(tiny_config).trials) == 8
    assert len(plan.trial_paths(controls=True)) == 8
    assert all("-aa-" in p for p in plan.trial_paths(controls=True))
    # both slots take the warm-up their sweep cell's calibrations fix, and calibrate nothing
    [sweep] = [c for c in plan.cells() if c.framework == "pytorch" and not c.control]
    assert {plan.warmup_path(t.cell) for t in controls} == {plan.warmup_path(sweep)}
    assert plan.warmup_path(sweep).endswith("infer-b2-1x28x28-fp32-idiomatic-matched/warmup.json")
    assert not any(plan.calibration_names(t.cell) for t in controls)
    assert plan.calibration_names(sweep)


def test_a_cell_without_a_control_keeps_its_settings(tiny_config):
    """Adding the field reruns no trial of a run planned before it: a cell's settings (a trial
    job's params) do not name it."""
    plan = _plan(tiny_config)
    assert all("control" not in plan.trial_settings(t).to_dict()["cell"] for t in plan.trials)


@pytest.mark.parametrize("selector", [{"model": "resnet18"}, {"phase": "train"},
                                      {"model": "lenet5", "input_shape": [3, 32, 32]}])
def test_a_control_that_selects_no_cell_is_refused(tiny_config, selector):
    with pytest.raises(ConfigError, match=r"controls\[0\].*selects no cell of the sweep"):
        validate({**tiny_config, "controls": [selector]})


def _control_tables(slot_b_factor: float, pairs: int = 10, sd: float = 0.01, seed: int = 1):
    """Trials and iterations tables of one PyTorch control, its slots' times drawn around 1 ms
    with a shared per-pair level (the pairing's point), a trial's own level of SD ``sd`` (log
    scale) and slot b's scaled by the factor."""
    rng = np.random.default_rng(seed)
    trials, iterations = [], []
    for k in range(1, pairs + 1):
        level = rng.normal(0, 0.05)
        for slot, factor in (("a", 1.0), ("b", slot_b_factor)):
            cell_id = f"throughput/cpu/pytorch/lenet5/infer-b2-aa-{slot}"
            head = {"run": "r", "cell_id": cell_id,
                    "pair_id": "throughput/cpu/lenet5/infer-b2-aa-pytorch", "experiment":
                    "throughput", "device": "cpu", "framework": "pytorch", "model": "lenet5",
                    "phase": "infer", "batch_size": 2, "input_shape": "1x28x28",
                    "precision": "fp32", "mode": "idiomatic", "profile": "matched",
                    "strategy": "none", "world_size": 1, "optimizer": "none", "trial": k}
            times = 1e6 * factor * np.exp(level + rng.normal(0, sd) + rng.normal(0, 0.01, 20))
            trials.append({**head, "control": slot, "status": "ok",
                           "median_ns": float(np.median(times)),
                           "steady_state_class": "flat"})
            iterations += [{**head, "iteration": i, "time_ns": t} for i, t in enumerate(times)]
    return pd.DataFrame(trials), pd.DataFrame(iterations)


def test_a_control_whose_slots_are_alike_passes_and_one_whose_slots_differ_fails():
    [alike] = control_comparisons(*_control_tables(1.0)).to_dict("records")
    assert alike["passed"] and alike["verdict"] == "equivalent" and alike["covers_1"]
    assert alike["n_pairs"] == 10 and abs(alike["ratio"] - 1) < 0.02
    [slower] = control_comparisons(*_control_tables(1.10)).to_dict("records")
    assert not slower["passed"] and slower["verdict"] == "a_faster"
    assert slower["note"].startswith("failed: the design found a difference")
    [noisy] = control_comparisons(*_control_tables(1.0, pairs=3, sd=0.2)).to_dict("records")
    assert not noisy["passed"] and noisy["verdict"] == "inconclusive"
    assert "for its 3 pairs to decide" in noisy["note"]
    assert "fewer than the 7 pairs a verdict needs" in noisy["note"]
    # What would decide it: the sizing rule's pairs at its own SD (fwbench.plan.sizing).
    try:
        needed = pairs_for_equivalence(sd=noisy["sd_log_ratio"], rope=0.05, alpha=0.05,
                                       power=0.8)
    except ValueError:
        needed = "more than 200"
    assert (f"at its per-pair SD of {noisy['sd_log_ratio']:.3f}, showing it with power 0.8 "
            f"needs {needed} pairs") in noisy["note"]


def test_a_control_is_judged_within_the_plans_control_margin():
    # A control 7 % slower in slot b over 20 quiet pairs: not shown within ±5 % (the rope), but
    # within the ±10 % the plan states for controls; without a control margin, the rope holds.
    tables = _control_tables(1.07, pairs=20, sd=0.01)
    [by_rope] = control_comparisons(*tables, rope=0.05).to_dict("records")
    [by_margin] = control_comparisons(*tables, rope=0.05, control_margin=0.10).to_dict("records")
    assert not by_rope["passed"] and by_rope["rope_high"] == pytest.approx(1.05)
    assert by_margin["passed"] and by_margin["rope_high"] == pytest.approx(1.10)


@pytest.mark.slow
def test_a_run_with_controls_measures_gates_reports_and_rebuilds_them(tmp_path, tiny_config):
    # The controls' own margin goes through every rule that reads the plan.
    config = {**tiny_config, "trials": 2, "controls": [{"framework": "tensorflow"}],
              "statistics": {**tiny_config.get("statistics", {}), "control_margin": 0.10}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    done = snakemake(tmp_path, "--cores", "1", "--configfile", "config.yaml")
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp_path / "results" / "tiny"
    [control] = pd.read_csv(run / "stats" / "controls.csv").to_dict("records")
    assert control["framework"] == "tensorflow" and control["n_pairs"] == 2
    assert control["rope_high"] == pytest.approx(1.10)
    assert '"control_margin":0.1' in pd.read_csv(run / "stats" / "plan.csv")["plan"][0]
    assert "Its A/A controls ran 4 more trials." in (run / "README.md").read_text()
    assert not control["passed"]                      # 2 pairs cannot show equivalence
    assert len(pd.read_parquet(run / "tables" / "controls.parquet")) == 4
    trials = pd.read_parquet(run / "tables" / "trials.parquet")
    assert len(trials) == 4 and not trials["cell_id"].str.contains("-aa-").any()
    comparisons = pd.read_csv(run / "stats" / "comparisons.csv")
    assert not comparisons["pair_id"].str.contains("-aa-").any()
    gate = pd.read_csv(run / "stats" / "gate.csv")
    [reason] = gate[gate["check"] == "A/A controls"]["reason"]
    assert reason.startswith("TensorFlow's A/A control of lenet5 ") and "failed" in reason
    html = (run / "report" / "report.html").read_text()
    assert "A/A controls: one cell of one framework in both slots" in html
    assert "margin for controls (±10 %)" in html
    # `fwbench rebuild` remakes them from the cell files alone, to the same bytes
    written = (run / "stats" / "controls.csv").read_bytes()
    done = rebuild(run)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (run / "stats" / "controls.csv").read_bytes() == written
