"""What a framework costs its user: peak memory per cell and PyTorch against TensorFlow
(fwbench.analysis.memory), latency percentiles (fwbench.analysis.latency), and their place in the
report with the speed-up heatmap (fwbench.report.figures, fwbench.report.sections.memory and
latency), on hand-built tables."""

from __future__ import annotations

import html as htmllib

import numpy as np
import pandas as pd
import pytest

from fwbench.analysis.estimators import median_ci
from fwbench.analysis.latency import latency_summaries, percentiles_with_intervals
from fwbench.analysis.memory import memory_comparisons, memory_summaries
from fwbench.report import render as report
from tests.test_report import LEAKS, html_only, section, visible, write_run
from tests.test_stats import make_tables, shifted

MIB = 2**20


def peaks(pytorch_mib: float, tensorflow_mib: float, *, device: bool = False, oom=None):
    """``extra`` for make_tables: per-trial peaks around the given MiB (1% spread), with a
    constant device peak when ``device``; ``oom(fw, batch)`` marks trials out of memory."""
    def extra(fw, model, phase, batch, k, rng):
        base = (pytorch_mib if fw == "pytorch" else tensorflow_mib) * MIB
        row = {"peak_rss_bytes": float(base * (1 + 0.01 * rng.standard_normal())),
               "device_peak_bytes": float(base / 4 * batch) if device else None}
        return row
    return extra


def oom_tables(trials: int = 7):
    def status(fw, model, phase, batch, k):
        return "oom" if fw == "pytorch" and batch == 64 else "ok"

    tables = make_tables(trials=trials, phases=("train",), batches=(1, 16, 64),
                         time_ns=shifted(1.2, within=0.01), status=status,
                         extra=peaks(900, 800, device=True))
    trials_, iterations = tables
    failed = trials_["status"] == "oom"
    trials_.loc[failed, ["peak_rss_bytes", "device_peak_bytes"]] = None
    return trials_, iterations


# --- memory ----------------------------------------------------------------------------------

def test_memory_per_cell_is_the_median_over_ok_trials_with_its_interval_and_says_oom():
    trials, _ = oom_tables()
    memory = memory_summaries(trials)
    assert set(memory["metric"]) == {"peak_rss_bytes", "device_peak_bytes"}
    cell = "throughput/cpu/pytorch/lenet5/train-b16-1x28x28-fp32-idiomatic-matched"
    row = memory[(memory["cell_id"] == cell) & (memory["metric"] == "peak_rss_bytes")].iloc[0]
    values = trials[trials["cell_id"] == cell]["peak_rss_bytes"].astype(float)
    ci = median_ci(values.to_numpy())
    assert (row["median_bytes"], row["ci_low_bytes"], row["ci_high_bytes"]) == \
        pytest.approx((ci.estimate, ci.low, ci.high))
    assert (row["min_bytes"], row["max_bytes"]) == (values.min(), values.max())
    assert row["n_values"] == 7 and row["n_oom"] == 0 and row["note"] == ""
    oom = memory[memory["cell_id"].str.contains("pytorch/lenet5/train-b64")]
    assert len(oom) == 2 and oom["median_bytes"].isna().all()
    assert (oom["note"] == "out of memory in 7 of 7 trials: no peak measured").all()


def test_memory_comparisons_use_the_statistics_of_time():
    trials, _ = oom_tables()
    comparisons = memory_comparisons(trials)
    rss = comparisons[comparisons["metric"] == "peak_rss_bytes"].set_index("batch_size")
    assert set(rss.index) == {1, 16}        # batch 64: PyTorch ran out of memory
    assert rss["ratio"].to_numpy() == pytest.approx(900 / 800, rel=0.02)
    assert (rss["verdict"] == "tensorflow_less").all() and not rss["exploratory"].any()
    assert (rss["family_size"] == 2).all() and (rss["ratio_ci_level"] >= 1 - 0.05 / 2).all()
    assert (rss["p_adjusted"] <= 0.05).all()
    few = memory_comparisons(trials, min_trials_for_verdict=8)
    assert few[few["varies"]]["exploratory"].all()
    device = comparisons[comparisons["metric"] == "device_peak_bytes"]   # constant per batch
    assert (device["verdict"] == "not_tested").all() and device["p_adjusted"].isna().all()
    assert not device["varies"].any() and device["ratio"].notna().all()
    same = memory_comparisons(make_tables(trials=7, phases=("infer",), batches=(1,),
                                          extra=peaks(800, 800))[0])
    assert same.iloc[0]["verdict"] == "equivalent"


# --- latency ---------------------------------------------------------------------------------

def test_latency_percentiles_pool_the_kept_iterations_of_ok_trials():
    trials, iterations = make_tables(trials=4, phases=("infer",), batches=(1,),
                                     status=lambda fw, m, p, b, k: "error" if k == 4 else "ok")
    latency = latency_summaries(trials, iterations, n_boot=200).set_index("framework")
    for framework, row in latency.iterrows():
        ok = trials[(trials["framework"] == framework) & (trials["status"] == "ok")]["trial"]
        kept = iterations[(iterations["framework"] == framework)
                          & iterations["trial"].isin(ok)]["time_ns"]
        expected = np.percentile(kept, [50, 90, 99], method="inverted_cdf")
        assert [row["p50_ns"], row["p90_ns"], row["p99_ns"]] == pytest.approx(expected)
        assert row["n_trials"] == 3 and row["n_iterations"] == 60
        for q in (50, 90, 99):
            assert row[f"p{q}_ci_low_ns"] <= row[f"p{q}_ns"] <= row[f"p{q}_ci_high_ns"]
        assert "p99 of 60 iterations is their largest or next to it" in row["note"]


def test_latency_intervals_resample_whole_trials():
    # Two trials, each constant: a bootstrap over trials can only give either trial's time.
    estimates, low, high = percentiles_with_intervals([np.full(50, 1.0), np.full(50, 2.0)],
                                                      n_boot=500)
    assert list(estimates) == [1.0, 2.0, 2.0]
    assert list(low) == [1.0, 1.0, 1.0] and list(high) == [2.0, 2.0, 2.0]


# --- the report --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def usage_page(tmp_path_factory):
    """tests/test_report.py's fixture run (three trials per cell, PyTorch out of memory in one
    cell) with memory and latency computed as the workflow computes them."""
    folder = tmp_path_factory.mktemp("usage")
    inputs = write_run(folder)
    trials = pd.read_parquet(inputs["trials"])
    trials["peak_rss_bytes"] = np.where(trials["status"] == "ok",
                                        np.where(trials["framework"] == "pytorch", 900, 800)
                                        * MIB * (1 + 0.01 * trials["trial"]), np.nan)
    trials.to_parquet(inputs["trials"])
    iterations = pd.read_parquet(inputs["iterations"])
    for name, frame in (("memory", memory_summaries(trials)),
                        ("memory_comparisons", memory_comparisons(trials)),
                        ("latency", latency_summaries(trials, iterations, n_boot=100))):
        inputs[name] = str(folder / f"{name}.csv")
        frame.to_csv(inputs[name], index=False)
    return html_only(report.load_inputs(inputs), folder), folder


def test_the_report_shows_memory_per_cell_the_comparison_and_the_figure(usage_page):
    page, folder = usage_page
    assert not LEAKS.findall(visible(page).text)
    memory = htmllib.unescape(section(page, "tab-memory"))
    assert "out of memory in all 3 trials" in memory          # the cell that ran out
    assert "918" in memory and "816" in memory   # PyTorch's and TensorFlow's medians, MiB
    comparisons = visible(section(page, "tab-memory-comparisons")).text
    assert "1.12" in comparisons and "p (Bonferroni)" in comparisons
    assert "of its family (7 comparisons, the peaks that vary)" in comparisons
    figure = visible(section(page, "fig-memory_vs_batch")).text
    assert "ran out of memory in some trial" in figure
    assert (folder / "figures" / "memory_vs_batch.svg").stat().st_size > 0


def test_the_report_shows_latency_percentiles_their_distribution_and_the_heatmap(usage_page):
    page, folder = usage_page
    latency = visible(section(page, "tab-latency")).text
    assert "p50" in latency and "p99" in latency and "30 (3)" in latency
    assert "Latency distribution (infer)" in visible(section(page, "fig-latency_ecdf")).text
    heatmap = visible(section(page, "fig-speedup_heatmap")).text   # PyTorch / TensorFlow time
    assert "the time ratio per model and batch size" in heatmap
    assert "orange where the statistics find PyTorch faster, blue where they find" in heatmap
    for name in ("latency_ecdf.svg", "speedup_heatmap.svg"):
        assert (folder / "figures" / name).stat().st_size > 0


def test_the_heatmap_colours_only_the_pairs_whose_verdict_names_a_winner():
    from matplotlib.figure import Figure

    from fwbench.report.figures.speed import _draw_heatmap

    verdicts = ["pytorch_faster", "inconclusive", "equivalent", "tensorflow_faster"]
    part = pd.DataFrame({"model": "lenet5", "batch_size": [1, 2, 4, 8], "pair_id": list("abcd"),
                         "ratio": [0.5, 0.5, 1.02, 1.6], "verdict": verdicts,
                         "exploratory": False})
    image = _draw_heatmap(Figure().add_subplot(), part, ["lenet5"], np.log(2), {})
    assert np.round(image.get_array()[0], 3).tolist() == [
        round(np.log(0.5), 3), 0.0, 0.0, round(np.log(1.6), 3)]   # white: no winner named
    hinted = _draw_heatmap(Figure().add_subplot(), part.assign(exploratory=True), ["lenet5"],
                           np.log(2), {})
    assert not hinted.get_array().any()                           # an exploratory hint: white


def test_without_memory_or_latency_tables_the_report_says_why(tmp_path):
    page = html_only(report.load_inputs(write_run(tmp_path)), tmp_path)
    assert 'id="tab-memory"' not in page and 'id="fig-memory_vs_batch"' not in page
    left_out = visible(section(page, "unmeasured-list")).text
    assert ("Peak memory against batch size; peak memory: the workflow passed no memory "
            "table") in left_out and "stats/memory.csv" not in left_out
    assert "latency percentiles: the workflow passed no latency table" in left_out.lower()
    # The latency section stays for its distribution, drawn from the iterations.
    assert "No latency percentiles: the workflow passed no latency table" in \
        visible(section(page, "tab-latency")).text


def test_a_peak_constant_in_both_frameworks_is_reported_per_cell_not_tested(tmp_path):
    inputs = write_run(tmp_path)
    trials = pd.read_parquet(inputs["trials"])
    trials["peak_rss_bytes"] = np.where(trials["status"] == "ok",
                                        np.where(trials["framework"] == "pytorch", 900, 800)
                                        * MIB * (1 + 0.0001 * trials["trial"]), np.nan)
    for name, frame in (("memory", memory_summaries(trials)),
                        ("memory_comparisons", memory_comparisons(trials))):
        inputs[name] = str(tmp_path / f"{name}.csv")
        frame.to_csv(inputs[name], index=False)
    assert (pd.read_csv(inputs["memory_comparisons"])["verdict"] == "not_tested").all()
    page = html_only(report.load_inputs(inputs), tmp_path)
    assert "918" not in visible(section(page, "tab-memory")).text   # the median: 900 MiB
    why = "in 7 of 7 pairs each framework's trials span less than 0.5 % of their median peak"
    assert visible(section(page, "tab-memory-comparisons")).text.startswith(
        f"No memory comparison: {why}")
    assert f"PyTorch against TensorFlow in memory: {why}" in \
        visible(section(page, "unmeasured-list")).text


def test_the_heatmap_colours_the_time_ratio_on_a_log_scale(tmp_path):
    import matplotlib.colors
    from matplotlib.figure import Figure as MplFigure

    from fwbench.report.figures.speed import _draw_heatmap
    from fwbench.report.figures.style import FRAMEWORK_COLOURS

    pairs = pd.DataFrame({"pair_id": ["a", "b", "c"], "model": ["m1", "m1", "m2"],
                          "batch_size": [1, 8, 1], "ratio": [0.5, 2.0, None],
                          "verdict": ["pytorch_faster", "tensorflow_faster", None]})
    ax = MplFigure().add_subplot()
    image = _draw_heatmap(ax, pairs, ["m1", "m2"], np.log(4), {"c": "PyTorch oom in 3 trials"})
    grid = image.get_array()   # log of PyTorch time / TensorFlow time: below 0, PyTorch faster
    assert grid[0, 0] == pytest.approx(-np.log(2)) and grid[0, 1] == pytest.approx(np.log(2))
    assert grid.mask[1, 0] and grid.mask[1, 1]
    assert image.cmap(image.norm(-np.log(4))) == matplotlib.colors.to_rgba(
        FRAMEWORK_COLOURS["pytorch"])
    assert [t.get_text() for t in ax.texts] == ["0.50", "2.0", "OOM"]
