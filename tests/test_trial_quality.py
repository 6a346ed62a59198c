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


def test_a_trial_that_never_settled_is_left_out_of_its_comparison():
    # TensorFlow's trial 3 never settled and ran 10x slower: left out, it moves nothing.
    def extra(fw, model, phase, batch, k, rng):
        return {"warmup_steady": not (fw == "tensorflow" and k == 3)}

    def time_ns(fw, model, phase, batch, k, rng):
        slow = 10.0 if fw == "tensorflow" and k == 3 else 1.0
        return shifted(1.3, within=0.01)(fw, model, phase, batch, k, rng) * slow

    c, frames = _one_comparison(*make_tables(**QUIET, time_ns=time_ns, extra=extra))
    assert c["verdict"] == "tensorflow_faster" and not c["exploratory"]
    assert (c["n_pytorch"], c["n_tensorflow"], c["unsteady_trials"]) == (8, 7, 1)
    assert c["exploratory_reason"] == ""
    assert frames["cells"]["warmup_unsteady_trials"].sum() == 1
    without = make_tables(**QUIET, time_ns=time_ns)
    trials, iterations = without
    keep = ~((trials["framework"] == "tensorflow") & (trials["trial"] == 3))
    dropped, _ = _one_comparison(trials[keep], iterations)
    assert c["ratio"] == dropped["ratio"]
    assert (c["ratio_ci_low"], c["ratio_ci_high"]) == \
        (dropped["ratio_ci_low"], dropped["ratio_ci_high"])


def test_a_comparison_left_with_too_few_usable_trials_is_exploratory():
    def extra(fw, model, phase, batch, k, rng):
        return {"warmup_steady": not (fw == "tensorflow" and k in (3, 5))}

    c, _ = _one_comparison(*make_tables(**QUIET, time_ns=shifted(1.3, within=0.01),
                                        extra=extra))
    assert c["verdict"] == "tensorflow_faster" and c["exploratory"]
    assert c["n_tensorflow"] == 6 and c["unsteady_trials"] == 2
    assert c["exploratory_reason"] == ("6 usable trials on the smaller side, fewer than 7; "
                                       "2 trials left out that never reached a steady warm-up")
    firm, _ = _one_comparison(*make_tables(**QUIET, time_ns=shifted(1.3, within=0.01)))
    assert not firm["exploratory"] and firm["exploratory_reason"] == ""


def test_a_side_with_no_usable_trial_gives_a_hint_from_every_ok_trial():
    c, _ = _one_comparison(*make_tables(**QUIET, time_ns=shifted(1.3, within=0.01),
                                        extra=lambda fw, *a: {"warmup_steady": fw == "pytorch"}))
    assert c["exploratory"] and c["n_tensorflow"] == 8 and c["unsteady_trials"] == 8
    assert c["exploratory_reason"].startswith("0 usable trials")  # a hint from all 8


def _drifting(fw, model, phase, batch, k, rng):
    level = 1e6 * (1.3 if fw == "pytorch" else 1.0)
    times = level * rng.lognormal(0, 0.005, 20)
    if fw == "pytorch" and k in (2, 4):
        times *= np.linspace(1.0, 1.25, 20)    # a clear trend within the timed iterations
    return times


def test_trials_whose_timed_iterations_drift_are_left_out():
    c, frames = _one_comparison(*make_tables(**QUIET, time_ns=_drifting))
    assert c["exploratory"] and c["drift_trials"] == 2 and c["n_pytorch"] == 6
    assert c["exploratory_reason"] == ("6 usable trials on the smaller side, fewer than 7; "
                                       "2 trials left out that drift within their timed "
                                       "iterations")
    assert frames["cells"]["drift_trials"].sum() == 2


@pytest.mark.parametrize("column", ["drift_detected", "drift"])
def test_the_harness_drift_verdict_is_used_where_the_trial_recorded_one(column):
    # Recorded False everywhere: the harness's test decides, the trend above does not count.
    c, _ = _one_comparison(*make_tables(**QUIET, time_ns=_drifting,
                                        extra=lambda *a: {column: False}))
    assert not c["exploratory"] and c["drift_trials"] == 0 and c["n_pytorch"] == 8

    def recorded(fw, model, phase, batch, k, rng):
        return {column: fw == "tensorflow" and k == 5}

    c, _ = _one_comparison(*make_tables(**QUIET, time_ns=shifted(1.3, within=0.01),
                                        extra=recorded))
    assert c["drift_trials"] == 1 and c["n_tensorflow"] == 7 and not c["exploratory"]


def _adjacency(gaps: dict):
    """pair_adjacent / pair_gap_* columns: trial k of both frameworks ran ``gaps[k]`` trials
    apart (0: back to back; absent: 0)."""
    def extra(fw, model, phase, batch, k, rng):
        gap = gaps.get(k, 0)
        return {"pair_adjacent": gap == 0, "pair_gap_trials": gap, "pair_gap_s": 2.5 * gap}
    return extra


def test_the_paired_blocks_test_uses_only_pairs_that_ran_back_to_back():
    trials, iterations = make_tables(**QUIET, time_ns=shifted(1.3), extra=_adjacency({2: 5,
                                                                                      6: 57}))
    c, frames = _one_comparison(trials, iterations)
    assert (c["n_pairs"], c["n_pairs_adjacent"], c["n_blocks"]) == (8, 6, 6)
    medians = iterations.groupby(["framework", "trial"])["time_ns"].median()
    kept = [k for k in range(1, 9) if k not in (2, 6)]
    d = np.log(medians["pytorch"][kept].to_numpy()) - np.log(medians["tensorflow"][kept])
    assert c["blocks_wilcoxon_p"] == pytest.approx(sps.wilcoxon(d).pvalue)
    tests = frames["tests"]
    blocks = tests[tests["family"].str.startswith("comparison-blocks/")].iloc[0]
    assert blocks["n"] == "6" and "6 of 8 pairs did, only those are used" in blocks["note"]
    florencio = tests[tests["variant"] == "paired over interleaved blocks (sound)"].iloc[0]
    assert florencio["n"] == "6"
    summary = adjacency_summary(trials)
    assert summary == {"recorded": True, "pairs": 8, "adjacent": 6, "max_pair_gap_trials": 57.0,
                       "max_pair_gap_s": 142.5}


def test_runs_that_did_not_record_adjacency_pair_every_trial_and_say_so():
    trials, iterations = make_tables(**QUIET, time_ns=shifted(1.3))
    c, frames = _one_comparison(trials, iterations)
    assert pd.isna(c["n_pairs_adjacent"]) and c["n_blocks"] == c["n_pairs"] == 8
    blocks = frames["tests"][frames["tests"]["family"].str.startswith("comparison-blocks/")]
    assert "did not record whether they were, so all 8 pairs are used" in blocks.iloc[0]["note"]
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
    assert "(the widest gap: 3 trials, 15.0 s); the paired blocks test uses only the adjacent " \
           "ones" in method
    assert re.search(r"Of the \d+ ok trials, [1-9]\d* never reached a steady warm-up and \d+ "
                     r"drift within their timed iterations \(tested on each trial's timed "
                     r"iterations by the statistics\); the \d+ comparison\(s\) that had such "
                     r"a trial left it out, and \d+ of them kept too few trials for a verdict",
                     method)


def test_the_report_says_when_adjacency_was_not_recorded(tmp_path):
    from tests.test_report import section, visible

    method = visible(section(_page(tmp_path), "method")).text
    assert "ran back to back was not recorded in this run (its trials table has no " \
           "pair_adjacent column)" in method
