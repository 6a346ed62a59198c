"""Trials that cannot support a verdict, and pairs that did not run back to back, on hand-built
tables shaped like fwbench.analysis.tables.collect_tables (tests/test_stats.py's make_tables)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from fwbench.analysis import stats as st
from fwbench.analysis.trial_quality import adjacency_summary
from tests.test_stats import make_tables, shifted

QUIET = dict(phases=("infer",), batches=(1,), trials=8)


def _one_comparison(trials, iterations):
    frames = st.summarize(trials, iterations, n_boot=50)
    return frames["comparisons"].iloc[0], frames


def test_a_trial_that_never_settled_stays_in_the_primary_and_leaves_the_sensitivity():
    # TensorFlow's trial 3 never settled and ran 10x slower: the primary keeps it (it is a
    # finding, not a reason), the sensitivity analysis without it agrees on the verdict.
    def extra(fw, model, phase, batch, k, rng):
        return {"warmup_steady": not (fw == "tensorflow" and k == 3)}

    def time_ns(fw, model, phase, batch, k, rng):
        slow = 10.0 if fw == "tensorflow" and k == 3 else 1.0
        return shifted(1.3, within=0.01)(fw, model, phase, batch, k, rng) * slow

    c, frames = _one_comparison(*make_tables(**QUIET, time_ns=time_ns, extra=extra))
    assert (c["n_pytorch"], c["n_tensorflow"], c["n_pairs_used"], c["unsteady_trials"]) == \
        (8, 8, 8, 1)
    assert not c["exploratory"]
    assert frames["cells"]["warmup_unsteady_trials"].sum() == 1
    s = frames["sensitivity"].set_index("analysis").loc["without quality classes"]
    assert s["excluded"] == 1 and s["n_tensorflow"] == 7 and s["n_pairs_used"] == 7
    assert s["verdict"] == "tensorflow_faster" and s["primary_verdict"] == c["verdict"]
    assert s["ratio"] > c["ratio"]   # the slow TensorFlow trial pulled the primary ratio down
    quality = frames["quality"].set_index("framework")
    assert quality.loc["tensorflow", "n_unsteady_warmup"] == 1
    assert quality.loc["pytorch", "n_unsteady_warmup"] == 0


def test_a_comparison_with_too_few_pairs_is_exploratory():
    trials, iterations = make_tables(**QUIET, time_ns=shifted(1.3, within=0.01))
    keep = ~((trials["framework"] == "tensorflow") & trials["trial"].isin([3, 5]))
    c, _ = _one_comparison(trials[keep], iterations)
    assert c["verdict"] == "tensorflow_faster" and c["exploratory"]
    assert (c["n_tensorflow"], c["n_pairs_used"], c["n_unpaired"]) == (6, 6, 2)
    assert c["exploratory_reason"] == "6 pairs of trials, fewer than 7"
    assert "2 trials without their partner enter only the rank checks" in c["verdict_note"]
    firm, _ = _one_comparison(trials, iterations)
    assert not firm["exploratory"] and firm["exploratory_reason"] == ""


def _drifting(fw, model, phase, batch, k, rng):
    level = 1e6 * (1.3 if fw == "pytorch" else 1.0)
    times = level * rng.lognormal(0, 0.005, 20)
    if fw == "pytorch" and k in (2, 4):
        times *= np.linspace(1.0, 1.25, 20)    # a clear trend within the timed iterations
    return times


def test_trials_whose_timed_steps_change_level_are_classified_and_counted():
    c, frames = _one_comparison(*make_tables(**QUIET, time_ns=_drifting))
    assert c["drift_trials"] == 2 and c["n_pytorch"] == 8 and not c["exploratory"]
    assert c["classes_tensorflow"] == "flat=8"
    assert frames["cells"]["drift_trials"].sum() == 2
    quality = frames["quality"].set_index("framework")
    assert quality.loc["pytorch", "n_flat"] == 6 and quality.loc["tensorflow", "n_flat"] == 8
    p = quality.loc["pytorch", "fisher_p"]
    table = [[quality.loc[f, f"n_{k}"] for k in ("flat", "warmup", "slowdown",
                                                 "no_steady_state")]
             for f in ("pytorch", "tensorflow")]
    table = np.array(table)[:, np.array(table).sum(axis=0) > 0]
    assert p == pytest.approx(sps.fisher_exact(table).pvalue)
    fisher = frames["tests"][frames["tests"]["family"] == "quality"].iloc[0]
    assert fisher["p"] == pytest.approx(p)


@pytest.mark.parametrize("column", ["drift_detected", "drift"])
def test_the_harness_drift_verdict_is_used_where_the_trial_recorded_one(column):
    # Recorded False everywhere: the harness's test decides, the changepoints do not count.
    _, frames = _one_comparison(*make_tables(**QUIET, time_ns=_drifting,
                                             extra=lambda *a: {column: False}))
    assert frames["cells"]["drift_trials"].sum() == 0


def _adjacency(gaps: dict):
    """pair_adjacent / pair_gap_* columns: trial k of both frameworks ran ``gaps[k]`` trials
    apart (0: back to back; absent: 0)."""
    def extra(fw, model, phase, batch, k, rng):
        gap = gaps.get(k, 0)
        return {"pair_adjacent": gap == 0, "pair_gap_trials": gap, "pair_gap_s": 2.5 * gap}
    return extra


def test_pairs_that_did_not_run_back_to_back_are_counted_and_tried_without():
    trials, iterations = make_tables(**QUIET, time_ns=shifted(1.3), extra=_adjacency({2: 5,
                                                                                      6: 57}))
    c, frames = _one_comparison(trials, iterations)
    assert (c["n_pairs"], c["n_pairs_adjacent"], c["n_pairs_used"]) == (8, 6, 8)
    means = iterations.groupby(["framework", "trial"])["time_ns"].mean()
    d = np.log(means["pytorch"].to_numpy()) - np.log(means["tensorflow"].to_numpy())
    assert c["blocks_wilcoxon_p"] == pytest.approx(sps.wilcoxon(d).pvalue)
    assert c["paired_p"] == pytest.approx(sps.ttest_1samp(d, 0).pvalue)
    adjacent_only = frames["sensitivity"].set_index("analysis").loc["adjacent pairs only"]
    kept = [k - 1 for k in range(1, 9) if k not in (2, 6)]
    assert adjacent_only["n_pairs_used"] == 6
    assert adjacent_only["ratio"] == pytest.approx(np.exp(d[kept].mean()))
    strict = st.summarize(trials, iterations, n_boot=50, pairs="adjacent")["comparisons"]
    assert strict.iloc[0]["n_pairs_used"] == 6
    summary = adjacency_summary(trials)
    assert summary == {"recorded": True, "pairs": 8, "adjacent": 6, "max_pair_gap_trials": 57.0,
                       "max_pair_gap_s": 142.5}


def test_runs_that_did_not_record_adjacency_pair_every_trial():
    trials, iterations = make_tables(**QUIET, time_ns=shifted(1.3))
    c, frames = _one_comparison(trials, iterations)
    assert pd.isna(c["n_pairs_adjacent"]) and c["n_pairs_used"] == c["n_pairs"] == 8
    assert "adjacent pairs only" not in set(frames["sensitivity"]["analysis"])
    assert adjacency_summary(trials) == {"recorded": False, "pairs": 8}


# --- what the report says ------------------------------------------------------------------------

def _page(folder, trials_change=None) -> str:
    from fwbench.report import render as report
    from tests.test_report import html_only, write_run

    inputs = write_run(folder)
    trials = pd.read_parquet(inputs["trials"])
    if trials_change:
        trials = trials_change(trials)
        trials.to_parquet(inputs["trials"])
    frames = st.summarize(trials, pd.read_parquet(inputs["iterations"]), seed=0, n_boot=50)
    for name, key in (("cells", "cell_stats"), ("comparisons", "comparisons"),
                      ("tests", "tests")):
        frames[name].to_csv(inputs[key], index=False)
    return html_only(report.load_inputs(inputs), folder)


def test_the_report_counts_adjacent_pairs_and_unsteady_trials(tmp_path):
    from tests.test_report import section, visible

    def recorded(trials):
        # trial 2 of the four resnet18 pairs ran apart
        apart = (trials["pair_id"].str.contains("resnet18")) & (trials["trial"] == 2)
        unsteady = (trials["framework"] == "tensorflow") & (trials["trial"] == 1) & \
            (trials["status"] == "ok")
        return trials.assign(pair_adjacent=~apart, pair_gap_trials=np.where(apart, 3, 0),
                             pair_gap_s=np.where(apart, 15.0, 0.0),
                             warmup_steady=~unsteady)

    method = visible(section(_page(tmp_path, recorded), "method")).text
    pairs = int(re.search(r"(\d+) of (\d+) pairs \(trial k", method).group(2))
    assert f"{pairs - 4} of {pairs} pairs (trial k of PyTorch and of TensorFlow) ran back to " \
           "back" in method
    assert "(the widest gap: 3 trials, 15.0 s)" in method
    # every ok trial stays in the primary analysis: the report counts the findings
    assert re.search(r"Of the \d+ ok trials, [1-9]\d* never reached a steady warm-up", method)


def test_the_report_says_when_adjacency_was_not_recorded(tmp_path):
    from tests.test_report import section, visible

    method = visible(section(_page(tmp_path), "method")).text
    assert "ran back to back was not recorded in this run (its trials table has no " \
           "pair_adjacent column)" in method
