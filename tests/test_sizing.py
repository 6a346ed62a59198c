"""The plan's sizing rule (fwbench.plan.sizing, `statistics.sizing`): its counts of pairs, its
power against simulated runs, the plan running each comparison and A/A control for as many
pairs as the rule asks at the SD it expects of it (`pilot`), and the gate passing an undecided
comparison only with the power the plan promised."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fwbench.analysis.gate import headline
from fwbench.errors import ConfigError
from fwbench.plan.config import validate
from fwbench.plan.sizing import (
    decision_power,
    equivalence_power,
    pairs_for_equivalence,
    pairs_to_decide,
)
from fwbench.plan.sweep import Plan

RULE = {"sd": 0.06, "ratio": 0.9, "power": 0.8}


def test_the_counts_of_pairs():
    # The measurement-design issue's figure: an SD of 0.15 and a true ratio of 0.9 need about
    # 26 pairs for 80 % power in a family of 4.
    assert pairs_to_decide(sd=0.15, ratio=0.9, alpha=0.05 / 4, power=0.8) == 26
    assert pairs_to_decide(sd=0.06, ratio=0.9, alpha=0.05 / 4, power=0.8) == 7
    assert pairs_for_equivalence(sd=0.06, rope=0.05, alpha=0.05 / 2, power=0.8) == 18
    # More noise or a smaller difference never needs fewer pairs.
    assert pairs_to_decide(sd=0.08, ratio=0.9, alpha=0.0125, power=0.8) > 7
    assert pairs_to_decide(sd=0.06, ratio=0.95, alpha=0.0125, power=0.8) > 7


@pytest.mark.parametrize("n", [5, 7, 12])
def test_the_power_matches_simulated_runs(n):
    """Normal per-pair log ratios, analysed as the comparisons are (t interval, TOST)."""
    rng = np.random.default_rng(n)
    sd, alpha, trials = 0.06, 0.0125, 4000
    d = rng.normal(np.log(0.9), sd, (trials, n))
    half = stats.t.ppf(1 - alpha / 2, n - 1) * d.std(axis=1, ddof=1) / np.sqrt(n)
    decided = (np.abs(d.mean(axis=1)) > half).mean()
    assert decided == pytest.approx(decision_power(n, sd=sd, ratio=0.9, alpha=alpha), abs=0.03)
    d = rng.normal(0.0, sd, (trials, n))
    half = stats.t.ppf(1 - alpha, n - 1) * d.std(axis=1, ddof=1) / np.sqrt(n)
    shown = (np.abs(d.mean(axis=1)) + half < np.log(1.05)).mean()
    # The approximation is a little low for few pairs, never high.
    power = equivalence_power(n, sd=sd, rope=0.05, alpha=alpha)
    assert power - 0.03 <= shown <= power + 0.08


def _config(tiny_config, **statistics):
    return validate({**tiny_config, "trials": 8, "controls": [{"framework": "pytorch"}],
                     "statistics": {**tiny_config.get("statistics", {}), **statistics}})


def _pairs(plan: Plan) -> dict[str, int]:
    """Pairs per cell group: its trials' highest index."""
    pairs: dict[str, int] = {}
    for trial in plan.trials:
        pairs[trial.cell.pair_id] = max(pairs.get(trial.cell.pair_id, 0), trial.index)
    return pairs


def test_each_control_runs_the_pairs_the_rule_asks(tiny_config):
    plan = Plan.from_config(_config(tiny_config, sizing=RULE))
    control = [t for t in plan.trials if t.cell.control]
    assert len(control) == 2 * pairs_for_equivalence(sd=0.06, rope=0.05, alpha=0.05, power=0.8)
    assert len([t for t in plan.trials if not t.cell.control]) == 2 * 8
    # Without a rule, a control runs the config's trials, as before.
    assert len([t for t in Plan.from_config(_config(tiny_config)).trials if t.cell.control]) == 16


def test_the_controls_are_sized_to_their_own_margin(tiny_config):
    # The default config's rule at one SD: 7 pairs decide 0.85 in a family of 4, and 12 show
    # each of two controls within ±10 %, where ±5 % (the rope) would take 38.
    plan = Plan.from_config(_config(tiny_config, sizing={"sd": 0.09, "ratio": 0.85, "power": 0.8},
                                    control_margin=0.10))
    assert len([t for t in plan.trials if t.cell.control]) == 2 * pairs_for_equivalence(
        sd=0.09, rope=0.10, alpha=0.05, power=0.8)
    assert pairs_to_decide(sd=0.09, ratio=0.85, alpha=0.05 / 4, power=0.8) == 7
    assert pairs_for_equivalence(sd=0.09, rope=0.10, alpha=0.05 / 2, power=0.8) == 12
    assert pairs_for_equivalence(sd=0.09, rope=0.05, alpha=0.05 / 2, power=0.8) == 38


def test_the_rule_raises_trials_where_they_fall_short(tiny_config):
    """`trials` is the least a comparison runs: at an SD of 0.15 a family of 1 needs 18."""
    plan = Plan.from_config(_config(tiny_config, sizing={"sd": 0.15, "ratio": 0.9, "power": 0.8}))
    assert {pairs for pair_id, pairs in _pairs(plan).items() if "-aa-" not in pair_id} == {18}


def test_a_pilot_sizes_the_comparisons_and_controls_it_names(tiny_config):
    """An entry without a framework sizes the comparisons it names, one with a framework that
    framework's A/A control; the rest keep `sd`, and no comparison runs fewer than `trials`."""
    sizing = {"sd": 0.06, "ratio": 0.9, "power": 0.8,
              "pilot": [{"phase": "train", "sd": 0.15},
                        {"framework": "pytorch", "phase": "infer", "sd": 0.03}]}
    pairs = _pairs(Plan.from_config(_config({**tiny_config, "phases": ["train", "infer"]},
                                            sizing=sizing)))
    family = max(1, len([p for p in pairs if "-aa-" not in p]))
    train = [n for p, n in pairs.items() if "/train-" in p and "-aa-" not in p]
    infer = [n for p, n in pairs.items() if "/infer-" in p and "-aa-" not in p]
    controls = {p.split("/")[3].split("-")[0]: n for p, n in pairs.items() if "-aa-" in p}
    assert train and set(train) == {pairs_to_decide(sd=0.15, ratio=0.9, alpha=0.05 / family,
                                                    power=0.8)}
    assert infer and set(infer) == {8}  # `trials`: the 0.06 of `sd` asks fewer
    assert controls == {phase: pairs_for_equivalence(sd=sd, rope=0.05, alpha=0.05 / 2, power=0.8)
                        for phase, sd in (("infer", 0.03), ("train", 0.06))}


def test_a_pilot_entry_that_names_nothing_sizes_nothing(tiny_config):
    """A sweep narrowed from the one its pilot measured keeps the pilot: an entry naming a
    model it lacks is no error, and its comparisons keep `sd`."""
    sizing = {**RULE, "pilot": [{"model": "vgg16", "sd": 0.5}]}
    assert _pairs(Plan.from_config(_config(tiny_config, sizing=sizing))) == _pairs(
        Plan.from_config(_config(tiny_config, sizing=RULE)))


def test_a_rule_no_count_can_meet_is_refused(tiny_config):
    with pytest.raises(ConfigError, match=r"'statistics.sizing': the cell group .* cannot be "
                                          r"sized \(no count of pairs up to 200"):
        _config(tiny_config, sizing={"sd": 2.0, "ratio": 0.99, "power": 0.99})


def _undecided(pairs: int, low: float, high: float) -> pd.DataFrame:
    return pd.DataFrame([{"pair_id": "throughput/cpu/lenet5/infer-b4", "model": "lenet5",
                          "phase": "infer", "batch_size": 4.0, "verdict": "inconclusive",
                          "exploratory": False, "family_size": 4, "n_pairs_used": pairs,
                          "ratio_ci_low": low, "ratio_ci_high": high}])


def test_an_undecided_comparison_passes_only_with_the_power_promised():
    plan = {"confidence": 0.95, "rope": 0.05, "sizing": RULE}
    ok, [reason] = headline(_undecided(8, 0.93, 1.02), plan)
    assert ok and "had 8 pairs and its interval [0.930, 1.020] lies within 0.900 to 1.11" in reason
    ok, [reason] = headline(_undecided(6, 0.93, 1.02), plan)
    assert not ok and reason.endswith("is inconclusive: 6 pairs where the plan's sizing rule "
                                      "asked 7.")
    ok, [reason] = headline(_undecided(8, 0.88, 1.02), plan)
    assert not ok and "[0.880, 1.020] reaches past 0.900 to 1.11" in reason
    ok, [reason] = headline(_undecided(8, 0.93, 1.02), {"confidence": 0.95})
    assert not ok and reason.endswith("the plan states no power for undecided comparisons.")
    # A pilot's SD for this very comparison sets the pairs it needed (a table's 4.0 is 4).
    pilot = {**RULE, "pilot": [{"model": "lenet5", "batch_size": 4, "sd": 0.15}]}
    ok, [reason] = headline(_undecided(8, 0.93, 1.02), {**plan, "sizing": pilot})
    assert not ok and reason.endswith("8 pairs where the plan's sizing rule asked 26.")


def test_the_plan_table_says_what_each_pilot_entry_sizes():
    from fwbench.report.sections.plan import plan_value

    sizing = {**RULE, "pilot": [{"model": "resnet18", "phase": "train", "sd": 0.124},
                                {"framework": "pytorch", "model": "lenet5",
                                 "input_shape": [1, 28, 28], "sd": 0.095}]}
    assert plan_value("sizing", sizing) == (
        "sd 0.06; ratio 0.9; power 0.8; pilot 0.124 for resnet18 train and 0.095 for PyTorch's "
        "A/A control of lenet5 1x28x28")
