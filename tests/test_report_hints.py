"""Exploratory stays exploratory: a verdict drawn from too few trials (or unsteady or drifting
ones) is labelled a hint in the statistics, the claims table, the abstract and the figures.

The fixture run is tests/test_report.py's (three trials per cell, so every comparison is
exploratory), with its statistics made by fwbench.analysis.stats.summarize as the workflow makes
them.
"""

from __future__ import annotations

import html as htmllib
import re

import pandas as pd
import pytest

from fwbench.analysis import stats as st
from fwbench.analysis.claims import evaluate_claim
from fwbench.report import render as report
from tests.test_report import DIRECTION, LEAKS, _pairs, html_only, section, visible, write_run
from tests.test_stats import make_tables, shifted


def _hints(frame: pd.DataFrame, exploratory: bool) -> pd.DataFrame:
    return frame.assign(exploratory=exploratory,
                        exploratory_reason="3 trials on the smaller side, fewer than 7"
                        if exploratory else "")


def test_a_claim_confirmed_only_by_exploratory_comparisons_is_labelled_exploratory():
    pairs = _pairs((0.8, 0.7, 0.9), (0.85, 0.8, 0.95))
    hinted = evaluate_claim(DIRECTION, _hints(pairs, True), pd.DataFrame())
    assert hinted["verdict"] == "confirmed"
    assert hinted["exploratory"] == ("2 of 2 comparisons are exploratory (3 trials on the "
                                     "smaller side, fewer than 7)")
    firm = evaluate_claim(DIRECTION, _hints(pairs, False), pd.DataFrame())
    assert firm["verdict"] == "confirmed" and firm["exploratory"] == ""


def test_real_data_claims_with_few_trials_are_exploratory():
    claim = {"id": "y", "test": {"kind": "first_epoch", "expect": "tensorflow_faster",
                                 "select": {"experiment": "convergence"}}}
    rows = []
    for framework, first in (("pytorch", 3e9), ("tensorflow", 2e9)):
        for trial in range(1, 6):
            rows.append({"run": "r", "experiment": "convergence", "device": "cuda",
                         "framework": framework, "model": "resnet18", "phase": "train",
                         "batch_size": 64, "input_shape": "3x32x32", "precision": "fp32",
                         "mode": "eager", "profile": "defaults", "optimizer": "sgd",
                         "cell_id": f"c-{framework}", "pair_id": "p", "trial": trial,
                         "status": "ok", "cold_start_ns": first * (1 + 0.01 * trial),
                         "median_ns": 1e9})
    result = evaluate_claim(claim, pd.DataFrame(), pd.DataFrame(),
                                   trials=pd.DataFrame(rows))
    assert result["verdict"] == "confirmed"       # TensorFlow's first epoch is the faster
    assert result["exploratory"] == "as few as 5 ok trials in a cell, fewer than 7"
    # the analysis plan sets the bar, not a constant of the claims
    planned = evaluate_claim(claim, pd.DataFrame(), pd.DataFrame(), trials=pd.DataFrame(rows),
                             statistics={"min_trials_for_verdict": 5})
    assert planned["verdict"] == "confirmed" and planned["exploratory"] == ""
    stricter = evaluate_claim(claim, pd.DataFrame(), pd.DataFrame(), trials=pd.DataFrame(rows),
                              statistics={"min_trials_for_verdict": 6})
    assert stricter["exploratory"] == "as few as 5 ok trials in a cell, fewer than 6"


def test_statistics_mark_exploratory_comparisons_and_the_geometric_mean_built_on_them():
    trials, iterations = make_tables(trials=4, phases=("infer",), batches=(1, 16),
                                     time_ns=shifted(1.5))
    frames = st.summarize(trials, iterations, n_boot=100)
    comparisons = frames["comparisons"]
    assert comparisons["exploratory"].all()
    assert (comparisons["exploratory_reason"] == "4 pairs of trials, fewer than 7").all()
    tests = frames["tests"]
    geomean = tests[tests["family"].str.startswith("geomean/")].iloc[0]
    assert bool(geomean["exploratory"])
    assert geomean["note"].startswith("exploratory: 2 of its 2 comparisons are exploratory")
    assert tests[tests["family"].str.startswith("comparison/")]["exploratory"].all()
    trend = tests[tests["test"].str.startswith("Jonckheere")]
    assert len(trend) and trend["exploratory"].all()
    firm = st.summarize(*make_tables(trials=7, phases=("infer",), batches=(1, 16),
                                     time_ns=shifted(1.5, within=0.01)), n_boot=100)
    assert not firm["comparisons"]["exploratory"].any()
    assert not firm["tests"]["exploratory"].any()


@pytest.fixture(scope="module")
def exploratory_page(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hints")
    inputs = write_run(folder)
    frames = st.summarize(pd.read_parquet(inputs["trials"]), pd.read_parquet(inputs["iterations"]),
                          seed=0, n_boot=100)
    for name, key in (("cells", "cell_stats"), ("comparisons", "comparisons"),
                      ("tests", "tests")):
        frames[name].to_csv(inputs[key], index=False)
    return html_only(report.load_inputs(inputs), folder), folder


def test_the_report_labels_exploratory_verdicts_in_the_claims_abstract_and_figures(
        exploratory_page):
    page, folder = exploratory_page
    assert not LEAKS.findall(visible(page).text)
    claims = htmllib.unescape(section(page, "tab-claims"))
    tags = re.findall(r'class="verdict verdict-[\w-]+ exploratory">(\w[\w ]*)<br><span '
                      r'class="hint-tag">exploratory</span>', claims)
    assert tags, "no claim verdict is tagged exploratory"
    assert "Exploratory: " in claims and "comparisons are exploratory" in claims
    abstract = visible(section(page, "abstract")).text
    assert "every one of these verdicts is exploratory, a hint rather than a finding" in abstract
    assert re.search(r"\d+ (inconclusive|measured in another setting) \((all|\d+) "
                     r"exploratory\)", abstract)
    assert "exploratory verdicts rest on too few trials" in abstract
    assert "data/tests.html" in section(page, "appendix-tests")  # every test, flagged there
    figure = visible(section(page, "fig-relative_time")).text
    assert "Hollow markers and dashed bars: 7 exploratory comparisons" in figure
    svg = (folder / "figures" / "relative_time.svg").read_text()
    assert "fill: #ffffff" in svg   # hollow markers
