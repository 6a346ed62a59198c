"""Tests for the statistics: fwbench/analysis/stats.py and the modules it builds on (estimators,
trial_stats, comparisons, tests_table, paper_tests).

Hand-written statistics (Cliff's delta, Hodges-Lehmann, Jonckheere-Terpstra, the interpolated
median interval) are checked against published worked examples; everything taken from scipy or
statsmodels is checked by calling them independently on fixed data; a simulation checks that the
95% intervals cover the truth 93-97% of the time.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from fwbench.analysis import (
    comparisons,
    estimators as est,
    paper_tests,
    stats as st,
    tests_table,
    trial_stats,
)
from fwbench.analysis.trial_quality import QUALITY_COLUMNS
from fwbench.plan.analysis_plan import plan_hash

# --- fixed synthetic tables shaped like fwbench.analysis.tables.collect_tables -------------------

AXES_FIXED = dict(experiment="throughput", device="cpu", precision="fp32", mode="idiomatic",
                  profile="matched", input_shape="1x28x28")
START = pd.Timestamp(2024, 1, 1)


def make_tables(*, trials=7, iterations=20, models=("lenet5",), phases=("train", "infer"),
                batches=(1, 16, 64), time_ns=None, status=None, extra=None, seed=0,
                experiment="throughput"):
    """Trials and iterations tables; ``time_ns(fw, model, phase, batch, k, rng)`` gives one
    trial's iteration times, ``status(...)`` its status, ``extra(...)`` extra trial columns."""
    rng = np.random.default_rng(seed)
    time_ns = time_ns or (lambda fw, m, p, b, k, rng:
                          1e6 * b ** 0.5 * rng.lognormal(0, 0.05, iterations))
    trial_rows, iteration_rows = [], []
    order = 0
    for model, phase, batch in itertools.product(models, phases, batches):
        name = f"{phase}-b{batch}-1x28x28-fp32-idiomatic-matched"
        for k in range(1, trials + 1):
            fws = ("pytorch", "tensorflow") if k % 2 else ("tensorflow", "pytorch")
            for fw in fws:
                state = status(fw, model, phase, batch, k) if status else "ok"
                ok = state == "ok"
                times = np.asarray(time_ns(fw, model, phase, batch, k, rng)) if ok else []
                cell = f"{experiment}/cpu/{fw}/{model}/{name}"
                pair = f"{experiment}/cpu/{model}/{name}"
                axes = dict(AXES_FIXED, experiment=experiment, framework=fw, model=model,
                            phase=phase, batch_size=batch)
                row = dict(run="test", cell_id=cell, pair_id=pair, **axes, trial=k,
                           group_position=order, status=state, message="" if state == "ok" else "x",
                           cold_start_ns=5e7, warmup_iterations=3, warmup_steady=True,
                           n_iterations=len(times),
                           median_ns=float(np.median(times)) if len(times) else None,
                           threads_requested=1, threads_intra=1, threads_inter=1,
                           framework_mode="eager", layout="NCHW", framework_version="0",
                           peak_rss_bytes=1,
                           started_at=START + pd.Timedelta(seconds=order),
                           ended_at=START + pd.Timedelta(seconds=order + 1),
                           git_commit="0" * 40, git_dirty=False, run_order=order)
                if extra:
                    row.update(extra(fw, model, phase, batch, k, rng))
                trial_rows.append(row)
                order += 1
                iteration_rows += [dict(run="test", cell_id=cell, pair_id=pair, **axes, trial=k,
                                        iteration=i, time_ns=int(t)) for i, t in enumerate(times)]
    return pd.DataFrame(trial_rows), pd.DataFrame(iteration_rows)


def shifted(factor, sd=0.03, within=0.05, iterations=20):
    """PyTorch ``factor`` times TensorFlow; trial-level lognormal noise ``sd``."""
    def time_ns(fw, model, phase, batch, k, rng):
        level = 1e6 * batch ** 0.5 * (factor if fw == "pytorch" else 1.0) * rng.lognormal(0, sd)
        return level * rng.lognormal(0, within, iterations)
    return time_ns


@pytest.fixture(scope="module")
def slower_pytorch():
    trials, iterations = make_tables(trials=10, time_ns=shifted(1.3))
    return trials, iterations, st.summarize(trials, iterations, n_boot=500)


@pytest.fixture(scope="module")
def slower_pytorch_epochs():
    """The same in florencio2019's experiment, where its tests are replicated."""
    trials, iterations = make_tables(trials=10, time_ns=shifted(1.3), experiment="epoch")
    return trials, iterations, st.summarize(trials, iterations, n_boot=200)


# --- Cliff's delta ----------------------------------------------------------------------------

def test_cliffs_delta_reproduces_published_examples():
    # Published in the R package effsize (Torchiano, CRAN), ?cliff.delta and its tests:
    # "delta estimate: -0.25 (small)" and -0.06666 (negligible).
    treatment = [10, 10, 20, 20, 20, 30, 30, 30, 40, 50]
    control = [10, 20, 30, 40, 40, 50]
    assert est.cliffs_delta(treatment, control) == pytest.approx(-0.25)
    assert est.cliffs_magnitude(-0.25) == "small"
    x1 = [10, 20, 20, 20, 30, 30, 30, 40, 50, 100]
    assert est.cliffs_delta(x1, control) == pytest.approx(-0.06666, abs=1e-5)
    assert est.cliffs_magnitude(est.cliffs_delta(x1, control)) == "negligible"
    assert est.cliffs_magnitude(est.cliffs_delta(x1, np.array(control) + 110)) == "large"


def test_cliffs_delta_equals_rescaled_mann_whitney_u_from_scipy():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 8, 13).astype(float)   # ties on purpose
    y = rng.integers(2, 10, 9).astype(float)
    u = sps.mannwhitneyu(x, y).statistic      # scipy's U of x: #(x > y) + ties/2
    assert est.cliffs_delta(x, y) == pytest.approx(2 * u / (x.size * y.size) - 1)
    assert est.cliffs_delta(y, x) == pytest.approx(-est.cliffs_delta(x, y))


@pytest.mark.parametrize("delta,label", [(0.0, "negligible"), (0.146, "negligible"),
                                         (-0.2, "small"), (0.4, "medium"), (-0.474, "large")])
def test_cliffs_magnitude_uses_romano_thresholds(delta, label):
    assert est.cliffs_magnitude(delta) == label


# --- Hodges-Lehmann ---------------------------------------------------------------------------

def test_hodges_lehmann_reproduces_hollander_wolfe_chicken_example():
    # Hollander, Wolfe & Chicken (2014), Nonparametric Statistical Methods, 3rd ed., Examples
    # 4.1-4.3, permeability constants of the human chorioamnion (also R's ?wilcox.test data):
    # shift estimate -0.305 and the exact 96.0% interval (-0.76, 0.15) (R's wilcox.test(y, x,
    # conf.int = TRUE) prints the same interval).
    at_term = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46]
    weeks_12_26 = [1.15, 0.88, 0.90, 0.74, 1.21]
    hl = est.hodges_lehmann(weeks_12_26, at_term, confidence=0.95)
    assert hl.estimate == pytest.approx(-0.305)
    assert (hl.low, hl.high) == pytest.approx((-0.76, 0.15))
    assert hl.level == pytest.approx(0.960, abs=5e-4)
    assert hl.attained


@pytest.mark.parametrize("m,n", [(3, 4), (5, 5), (7, 9), (10, 12)])
def test_mann_whitney_null_distribution_matches_scipy_exact(m, n):
    rng = np.random.default_rng(m * 100 + n)
    cdf = np.cumsum(est.mann_whitney_pmf(m, n))
    for _ in range(5):
        x, y = rng.normal(size=m), rng.normal(0.5, size=n)
        res = sps.mannwhitneyu(x, y, alternative="less", method="exact")
        assert cdf[int(res.statistic)] == pytest.approx(res.pvalue, rel=1e-9)


def test_hodges_lehmann_interval_is_inverted_mann_whitney_test():
    # A shift inside the interval is not rejected by scipy's exact test at 1 - level; outside it is.
    rng = np.random.default_rng(11)
    x, y = rng.normal(1, size=8), rng.normal(size=9)
    hl = est.hodges_lehmann(x, y, confidence=0.95)
    alpha = 1 - hl.level
    for shift, rejected in [(hl.low - 1e-9, True), (hl.low + 1e-6, False),
                            (hl.high - 1e-6, False), (hl.high + 1e-9, True)]:
        p = sps.mannwhitneyu(x - shift, y, method="exact").pvalue
        assert (p <= alpha + 1e-12) == rejected


def test_hodges_lehmann_normal_approximation_for_large_samples_is_one_step_conservative():
    rng = np.random.default_rng(12)
    x, y = rng.normal(size=51), rng.normal(size=51)          # m*n above the exact limit
    approx = est.hodges_lehmann(x, y)
    assert approx.method.startswith("normal approximation")
    d = np.sort(np.subtract.outer(x, y).ravel())
    cdf = np.cumsum(est.mann_whitney_pmf(51, 51))
    k = int(np.flatnonzero(cdf <= 0.025)[-1]) + 1              # the exact choice
    assert (approx.low, approx.high) in {(d[k - 1], d[-k]), (d[k - 2], d[-k + 1])}


def test_public_names_exist():
    for module in (st, est, trial_stats, comparisons, tests_table, paper_tests):
        assert all(hasattr(module, name) for name in module.__all__), module.__name__


def test_hodges_lehmann_too_few_values_reports_attained_level():
    hl = est.hodges_lehmann([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert not hl.attained
    assert hl.level == pytest.approx(1 - 2 / math.comb(6, 3))     # 0.90
    assert (hl.low, hl.high) == (-5.0, -1.0)


# --- Jonckheere-Terpstra ----------------------------------------------------------------------

def test_jonckheere_terpstra_reproduces_bewick_cheek_ball_example():
    # Bewick, Cheek & Ball (2004), Statistics review 10: further nonparametric methods,
    # Critical Care 8(3):196-199, Table 1 (ICU length of stay): J = 77, P = 0.005 (one-sided,
    # normal approximation). Our variance corrects for the ties in the data, which moves the
    # third decimal of z only.
    cardiothoracic = [7, 1, 2, 6, 11, 8]
    medical = [4, 7, 16, 11, 21]
    neurosurgical = [20, 25, 13, 9, 14, 11]
    res = est.jonckheere_terpstra([cardiothoracic, medical, neurosurgical], "increasing")
    assert res.statistic == 77
    assert round(res.pvalue, 3) == 0.005
    assert res.method == "asymptotic"
    down = est.jonckheere_terpstra([neurosurgical, medical, cardiothoracic], "decreasing")
    assert down.pvalue == pytest.approx(res.pvalue)


def test_jonckheere_terpstra_exact_matches_full_enumeration():
    groups = [[1.2, 3.4], [2.2, 5.1], [4.4, 6.0, 0.3]]
    observed = est.jonckheere_terpstra(groups, "increasing", method="exact")
    values = np.concatenate(groups)
    sizes = [len(g) for g in groups]
    js = []
    for perm in set(itertools.permutations(range(len(values)))):
        parts = np.split(values[list(perm)], np.cumsum(sizes)[:-1])
        js.append(est._jt_statistic(parts))
    js = np.array(js)
    assert observed.pvalue == pytest.approx(np.mean(js >= observed.statistic - 1e-9))


def test_jonckheere_terpstra_of_two_groups_is_mann_whitney():
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=6), rng.normal(0.8, size=8)
    res = est.jonckheere_terpstra([x, y], "increasing", method="exact")
    assert res.pvalue == pytest.approx(sps.mannwhitneyu(x, y, alternative="less",
                                                        method="exact").pvalue, rel=1e-9)
    asym = est.jonckheere_terpstra([x, y], "increasing", method="asymptotic")
    assert asym.pvalue == pytest.approx(sps.mannwhitneyu(
        x, y, alternative="less", method="asymptotic", use_continuity=False).pvalue, rel=1e-9)


def test_jonckheere_terpstra_rejects_bad_arguments():
    with pytest.raises(ValueError, match="alternative"):
        est.jonckheere_terpstra([[1], [2]], "up")
    with pytest.raises(ValueError, match="no ties"):
        est.jonckheere_terpstra([[1, 2], [2, 3]], method="exact")


# --- median interval ----------------------------------------------------------------------------

@pytest.mark.parametrize("n", [6, 9, 20, 31])
def test_median_ci_without_interpolation_matches_scipy_quantile_test(n):
    x = np.random.default_rng(n).lognormal(size=n)
    ours = est.median_ci(x, 0.95, interpolate=False)
    ci = sps.quantile_test(x, q=np.median(x), p=0.5).confidence_interval(0.95)
    assert (ours.low, ours.high) == pytest.approx((ci.low, ci.high))
    assert ours.level >= 0.95


def test_median_ci_too_few_values_returns_range_with_its_level():
    ci = est.median_ci([3.0, 1.0, 2.0])
    assert (ci.low, ci.high, ci.estimate) == (1.0, 3.0, 2.0)
    assert ci.level == pytest.approx(0.75)


# --- coverage simulation ------------------------------------------------------------------------

def test_intervals_cover_the_truth_at_the_nominal_rate():
    """20,000 draws per median case (vectorized), 2,000 per ratio case; lognormal trial medians
    (skewed, like run times)."""
    rng = np.random.default_rng(2024)
    draws = 20000
    coverage = {}
    for n in (7, 10, 20):   # median of trial medians, interpolated order statistics
        x = rng.lognormal(mean=2.0, sigma=0.3, size=(draws, n))
        ci = est.median_ci(x, 0.95)
        coverage[f"median n={n}"] = np.mean((ci.low <= math.exp(2.0)) & (math.exp(2.0) <= ci.high))
    for n in (7, 10):       # ratio of medians: Hodges-Lehmann interval on log trial medians
        a = rng.lognormal(mean=math.log(1.1), sigma=0.1, size=(2000, n))
        b = rng.lognormal(mean=0.0, sigma=0.1, size=(2000, n))
        hits = 0
        for i in range(2000):
            hl = est.hodges_lehmann(np.log(a[i]), np.log(b[i]))
            hits += math.exp(hl.low) <= 1.1 <= math.exp(hl.high)
        coverage[f"ratio {n} vs {n}"] = hits / 2000
    print("coverage of 95% intervals:", {k: round(v, 4) for k, v in coverage.items()})
    for name, rate in coverage.items():
        assert 0.93 <= rate <= 0.97, f"{name}: coverage {rate:.3f}"


# --- the florencio2019 floor --------------------------------------------------------------------

def test_wilcoxon_floor_is_the_published_p_value():
    assert est.wilcoxon_floor_p(100) == pytest.approx(3.896559845095909e-18, rel=1e-12)
    assert paper_tests.FLORENCIO_PUBLISHED_FLOOR_P == pytest.approx(est.wilcoxon_floor_p(100),
                                                                    rel=1e-12)
    same_sign = np.arange(1, 101, dtype=float)
    scipy_p = sps.wilcoxon(same_sign, method="asymptotic", correction=False).pvalue
    assert scipy_p == pytest.approx(est.wilcoxon_floor_p(100), rel=1e-12)
    exact = sps.wilcoxon(same_sign, method="exact").pvalue
    assert exact == pytest.approx(2.0 ** -99, rel=1e-9)


# --- small helpers ------------------------------------------------------------------------------

def test_holm_and_bh_match_statsmodels_and_keep_nan():
    p = np.array([0.01, np.nan, 0.04, 0.03, 0.2])
    finite = p[np.isfinite(p)]
    assert est.holm(p)[np.isfinite(p)] == pytest.approx(multipletests(finite, method="holm")[1])
    assert est.benjamini_hochberg(p)[np.isfinite(p)] == pytest.approx(
        multipletests(finite, method="fdr_bh")[1])
    assert np.isnan(est.holm(p)[1])


def test_tukey_outliers_counts_values_beyond_the_fences():
    x = np.r_[np.linspace(10, 11, 20), 30.0, -5.0]
    q1, q3 = np.percentile(x, [25, 75])
    expected = np.sum((x < q1 - 1.5 * (q3 - q1)) | (x > q3 + 1.5 * (q3 - q1)))
    assert est.tukey_outliers(x) == expected == 2


@pytest.mark.parametrize("low,high,attained,expected", [
    (0.97, 1.03, True, "equivalent"),
    (1.01, 1.04, True, "equivalent"),
    (0.70, 0.90, True, "pytorch_faster"),
    (1.10, 1.30, True, "tensorflow_faster"),
    (1.10, 1.30, False, "inconclusive"),
    (0.90, 1.20, True, "inconclusive"),
])
def test_verdict(low, high, attained, expected):
    assert est.verdict(low, high, attained=attained)[0] == expected


def test_verdict_is_symmetric_under_swapping_frameworks():
    for low, high in [(1 / 1.05, 1.05), (0.96, 1.04), (1.02, 1.2)]:
        a = est.verdict(low, high)[0]
        b = est.verdict(1 / high, 1 / low)[0]
        swap = {"pytorch_faster": "tensorflow_faster", "tensorflow_faster": "pytorch_faster"}
        assert swap.get(a, a) == b


def test_geometric_mean_ratio_matches_scipy_gmean():
    rng = np.random.default_rng(8)
    pairs = [(rng.lognormal(0.1, 0.05, 9), rng.lognormal(0, 0.05, 9)) for _ in range(5)]
    gm = est.geometric_mean_ratio(pairs, n_boot=500, seed=1)
    ratios = [sps.gmean(a) / sps.gmean(b) for a, b in pairs]   # each cell's time per step
    assert gm.estimate == pytest.approx(sps.gmean(ratios))
    assert gm.low < gm.estimate < gm.high
    assert gm == est.geometric_mean_ratio(pairs, n_boot=500, seed=1)


def test_hierarchical_bootstrap_is_reproducible_and_brackets_the_mean():
    rng = np.random.default_rng(9)
    samples = [rng.normal(100 + rng.normal(0, 3), 5, 50) for _ in range(8)]
    a = est.hierarchical_bootstrap_mean_ci(samples, n_boot=800, rng=np.random.default_rng(1))
    b = est.hierarchical_bootstrap_mean_ci(samples, n_boot=800, rng=np.random.default_rng(1))
    assert a == b
    assert a.estimate == pytest.approx(np.mean([s.mean() for s in samples]))
    assert a.low < a.estimate < a.high
    # Resampling trials carries the between-trial spread: wider than pooling iterations would be.
    pooled_se = np.concatenate(samples).std(ddof=1) / math.sqrt(400)
    assert a.high - a.low > 2 * 1.96 * pooled_se


# --- summarize: cells ---------------------------------------------------------------------------

def test_summarize_returns_the_three_tables_with_their_columns(slower_pytorch):
    _, _, frames = slower_pytorch
    assert set(frames) == {"cells", "comparisons", "sensitivity", "quality", "tests", "plan"}
    assert list(frames["cells"].columns) == trial_stats.CELL_COLUMNS
    assert list(frames["comparisons"].columns) == comparisons.COMPARISON_COLUMNS
    assert list(frames["sensitivity"].columns) == comparisons.SENSITIVITY_COLUMNS
    assert list(frames["quality"].columns) == QUALITY_COLUMNS
    assert list(frames["tests"].columns) == tests_table.TEST_COLUMNS
    assert list(frames["plan"].columns) == st.PLAN_COLUMNS


def test_cells_summarize_trial_medians(slower_pytorch):
    trials, iterations, frames = slower_pytorch
    cells = frames["cells"].set_index("cell_id")
    for cell_id, its in iterations.groupby("cell_id"):
        medians = its.groupby("trial")["time_ns"].median().to_numpy(float)
        row = cells.loc[cell_id]
        assert row["n_ok"] == row["n_trials"] == 10
        assert row["n_iterations"] == len(its)
        assert row["median_ns"] == pytest.approx(np.median(medians))
        assert row["min_ns"] == pytest.approx(medians.min())
        assert row["max_ns"] == pytest.approx(medians.max())
        q1, q3 = np.percentile(medians, [25, 75])
        assert row["iqr_ns"] == pytest.approx(q3 - q1)
        assert row["cv"] == pytest.approx(medians.std(ddof=1) / medians.mean())
        assert row["mean_ns"] == pytest.approx(its.groupby("trial")["time_ns"].mean().mean())
        assert row["ci_low_ns"] <= row["median_ns"] <= row["ci_high_ns"]
        steps = np.log(its.groupby("trial")["time_ns"].mean().to_numpy(float))  # no blocks
        assert row["step_ns"] == pytest.approx(np.exp(steps.mean()))
        low, high = sps.t.interval(0.95, steps.size - 1, steps.mean(), sps.sem(steps))
        assert (row["step_ci_low_ns"], row["step_ci_high_ns"]) == pytest.approx(
            (np.exp(low), np.exp(high)))
        assert row["step_source"] == row["throughput_source"] == "single steps"
        assert row["throughput_sps"] == pytest.approx(row["batch_size"] / row["step_ns"] * 1e9)
        low, high = row["throughput_ci_low_sps"], row["throughput_ci_high_sps"]
        assert low <= row["throughput_sps"] <= high
        outliers = sum(est.tukey_outliers(g["time_ns"]) for _, g in its.groupby("trial"))
        assert row["outliers"] == outliers


def test_throughput_comes_from_blocks_where_every_trial_timed_them():
    # A device that runs ahead: a block of steps with one synchronization costs 0.8 of the
    # single steps per step; latency stays the single steps', throughput reads the blocks.
    trials, iterations = make_tables(trials=7, phases=("train",), batches=(4,),
                                     extra=lambda fw, m, p, b, k, rng: {})
    trials["block_mean_ns_per_iteration"] = trials["median_ns"] * 0.8
    cells = st.summarize(trials, iterations, n_boot=100)["cells"]
    for _, row in cells.iterrows():
        blocks = trials.loc[trials["cell_id"] == row["cell_id"], "block_mean_ns_per_iteration"]
        assert row["throughput_source"] == "blocks"
        assert row["step_ns"] == pytest.approx(sps.gmean(blocks))
        assert row["throughput_sps"] == pytest.approx(4 / row["step_ns"] * 1e9)
    trials.loc[0, "block_mean_ns_per_iteration"] = None  # one trial without blocks
    cells = st.summarize(trials, iterations, n_boot=100)["cells"].set_index("cell_id")
    assert cells.loc[trials.loc[0, "cell_id"], "throughput_source"] == "blocks and single steps"


def test_cells_keep_failed_cells_and_warn():
    trials, iterations = make_tables(
        trials=3, phases=("train",), batches=(64,),
        status=lambda fw, m, p, b, k: "oom" if fw == "tensorflow" else "ok")
    frames = st.summarize(trials, iterations, n_boot=200)
    cells = frames["cells"].set_index("framework")
    tf = cells.loc["tensorflow"]
    assert tf["n_ok"] == 0 and tf["statuses"] == "oom=3" and np.isnan(tf["median_ns"])
    assert "no ok trial" in tf["warnings"]
    pt = cells.loc["pytorch"]
    assert "too few trials" in pt["warnings"]
    assert pt["ci_level"] == pytest.approx(0.75)
    assert frames["comparisons"].empty


def test_cells_flag_drift_instability_and_unsteady_warmup():
    def time_ns(fw, model, phase, batch, k, rng):
        if fw == "pytorch" and k == 1:
            return 1e6 * np.linspace(1.0, 1.3, 40)            # drifts upward by 30%
        spread = 0.3 if fw == "tensorflow" else 0.01           # TensorFlow unstable within trials
        return 1e6 * rng.lognormal(0, spread, 40)

    trials, iterations = make_tables(trials=7, phases=("infer",), batches=(1,), time_ns=time_ns)
    trials.loc[(trials["framework"] == "pytorch") & (trials["trial"] == 2), "warmup_steady"] = False
    cells = st.summarize(trials, iterations, n_boot=200)["cells"].set_index("framework")
    assert cells.loc["pytorch", "drift"] and cells.loc["pytorch", "drift_trials"] == 1
    assert "timed steps not flat in 1 of 7" in cells.loc["pytorch", "warnings"]
    assert cells.loc["pytorch", "warmup_unsteady_trials"] == 1
    assert not cells.loc["tensorflow", "drift"]
    assert cells.loc["tensorflow", "unstable"]
    assert "unstable within trials" in cells.loc["tensorflow", "warnings"]


# --- summarize: comparisons ---------------------------------------------------------------------

def test_shifted_sample_is_detected(slower_pytorch):
    _, _, frames = slower_pytorch
    comparisons = frames["comparisons"]
    assert len(comparisons) == 6
    assert (comparisons["verdict"] == "tensorflow_faster").all()
    # 10 pairs, every ok trial used
    assert not comparisons["exploratory"].any()
    assert (comparisons["n_pairs_used"] == 10).all()
    assert (comparisons["family"] == "throughput").all() and \
        (comparisons["family_size"] == 6).all()
    assert (comparisons["ratio_ci_low"] > 1).all()
    assert comparisons["ratio"].between(1.15, 1.45).all()
    assert (comparisons["cliffs_delta"] > 0.9).all()
    assert (comparisons["cliffs_magnitude"] == "large").all()


def test_faster_pytorch_is_detected():
    trials, iterations = make_tables(trials=8, phases=("infer",), batches=(1,),
                                     time_ns=shifted(0.7))
    comparison = st.summarize(trials, iterations, n_boot=200)["comparisons"].iloc[0]
    assert comparison["verdict"] == "pytorch_faster"
    assert comparison["ratio_ci_high"] < 1


def test_identical_samples_give_no_difference():
    def time_ns(fw, model, phase, batch, k, rng):
        return 1e6 * (1 + 0.001 * k) * np.linspace(0.99, 1.01, 20)   # same for both frameworks

    trials, iterations = make_tables(trials=8, phases=("infer",), batches=(1,), time_ns=time_ns)
    frames = st.summarize(trials, iterations, n_boot=200)
    c = frames["comparisons"].iloc[0]
    assert c["ratio"] == 1.0 and c["ratio_hl"] == 1.0
    assert c["cliffs_delta"] == 0 and c["cliffs_magnitude"] == "negligible"
    assert c["mannwhitney_p"] == pytest.approx(1.0)
    assert c["blocks_wilcoxon_p"] == 1.0
    assert c["verdict"] == "equivalent"


def test_comparison_statistics_match_scipy_and_statsmodels(slower_pytorch):
    trials, iterations, frames = slower_pytorch
    comparisons = frames["comparisons"].set_index("pair_id")
    per_trial = trial_stats.trial_statistics(trials, iterations)
    steps = {key: g.set_index("trial")["trial_step_ns"]
             for key, g in per_trial.groupby(["pair_id", "framework"])}
    m = len(comparisons)
    for pair_id, row in comparisons.iterrows():
        pt, tf = steps[(pair_id, "pytorch")], steps[(pair_id, "tensorflow")]
        a, b = pt.to_numpy(float), tf.to_numpy(float)
        d = np.log(pt) - np.log(tf)          # trial k with trial k
        assert row["ratio"] == pytest.approx(np.exp(d.mean()))
        assert row["ratio"] == pytest.approx(row["step_pytorch_ns"] / row["step_tensorflow_ns"])
        low, high = sps.t.interval(1 - 0.05 / m, d.size - 1, d.mean(), sps.sem(d))
        assert (row["ratio_ci_low"], row["ratio_ci_high"]) == pytest.approx(
            (np.exp(low), np.exp(high)))
        low, high = sps.t.interval(1 - 0.1 / m, d.size - 1, d.mean(), sps.sem(d))
        assert (row["equivalence_ci_low"], row["equivalence_ci_high"]) == pytest.approx(
            (np.exp(low), np.exp(high)))
        assert row["paired_p"] == pytest.approx(sps.ttest_rel(np.log(a), np.log(b)).pvalue)
        flip = sps.permutation_test((d.to_numpy(),), np.mean, permutation_type="samples",
                                    n_resamples=np.inf)
        assert row["signflip_p"] == pytest.approx(flip.pvalue)
        res = sps.mannwhitneyu(a, b, alternative="two-sided", method="exact")  # up to 10 vs 10
        assert row["mannwhitney_u"] == res.statistic
        assert row["mannwhitney_p"] == pytest.approx(res.pvalue)
        if a.min() > b.max():   # separated: scipy's variance is 0, the exact bound is used
            assert row["brunner_munzel_p"] == pytest.approx(2 / math.comb(a.size + b.size,
                                                                          a.size))
        else:
            assert row["brunner_munzel_p"] == pytest.approx(
                sps.brunnermunzel(np.log(a), np.log(b)).pvalue)
        assert row["blocks_wilcoxon_p"] == pytest.approx(sps.wilcoxon(d).pvalue)
    assert frames["comparisons"]["p_adjusted"].to_numpy() == pytest.approx(
        multipletests(frames["comparisons"]["paired_p"], method="bonferroni")[1])


def test_three_pairs_are_exploratory():
    trials, iterations = make_tables(trials=3, phases=("infer",), batches=(1,),
                                     time_ns=shifted(2.0))
    c = st.summarize(trials, iterations, n_boot=200)["comparisons"].iloc[0]
    assert c["exploratory"] and c["exploratory_reason"] == "3 pairs of trials, fewer than 7"
    assert c["signflip_p"] == pytest.approx(0.25)   # the smallest p 3 pairs can reach
    assert "exploratory" in c["verdict_note"]


def test_equivalence_is_the_tost_of_the_narrower_interval():
    # A 2% difference measured tightly: the 1 - 2 alpha interval lies within ±5%.
    trials, iterations = make_tables(trials=10, phases=("infer",), batches=(1,),
                                     time_ns=shifted(1.02, sd=0.005, within=0.005))
    c = st.summarize(trials, iterations, n_boot=100)["comparisons"].iloc[0]
    assert c["verdict"] == "equivalent" and c["tost_p"] < 0.05
    assert c["ratio_ci_low"] < c["equivalence_ci_low"] < c["equivalence_ci_high"] < \
        c["ratio_ci_high"]


def test_plan_record_says_whether_the_trials_were_measured_under_it():
    trials, iterations = make_tables(trials=2, phases=("infer",), batches=(1,))
    plan = dict(confidence=0.95, rope=0.05, min_trials_for_verdict=7, family=["experiment"],
                pairs="all", sensitivity_leaves_out=["warmup", "slowdown", "switching",
                                                     "no_steady_state", "unsteady_warmup"])
    record = st.summarize(trials, iterations, n_boot=20)["plan"].iloc[0]
    assert record["status"] == "not recorded by the trials"
    assert record["plan_hash"] == plan_hash(plan)
    same = st.summarize(trials.assign(analysis_plan=plan_hash(plan)), iterations,
                        n_boot=20)["plan"].iloc[0]
    assert same["status"] == "fixed before measuring" and same["trials_same_plan"] == 4
    other = st.summarize(trials.assign(analysis_plan=plan_hash(plan)), iterations, rope=0.1,
                         n_boot=20)["plan"].iloc[0]
    assert other["status"] == "changed after the data were measured"
    assert other["recorded_plans"] == plan_hash(plan) != other["plan_hash"]


def test_rope_is_configurable():
    trials, iterations = make_tables(trials=10, phases=("infer",), batches=(1,),
                                     time_ns=shifted(1.08, sd=0.005, within=0.005))
    narrow = st.summarize(trials, iterations, n_boot=200)["comparisons"].iloc[0]
    wide = st.summarize(trials, iterations, rope=0.2, n_boot=200)["comparisons"].iloc[0]
    assert narrow["verdict"] == "tensorflow_faster"
    assert wide["verdict"] == "equivalent"
    assert wide["rope_high"] == pytest.approx(1.2)


# --- summarize: tests table ---------------------------------------------------------------------

def test_tests_table_has_one_row_per_test_with_corrections(slower_pytorch):
    _, _, frames = slower_pytorch
    tests = frames["tests"]
    primary = tests[tests["family"].str.startswith("comparison/")]
    assert len(primary) == len(frames["comparisons"])
    merged = primary.merge(frames["comparisons"], left_on="scope", right_on="pair_id")
    assert merged["p"].to_numpy() == pytest.approx(merged["paired_p"].to_numpy())
    assert merged["p_corrected"].to_numpy() == pytest.approx(merged["p_adjusted"].to_numpy())
    assert set(tests["decision"]) <= {"reject H0", "do not reject H0", "not measured", "skipped",
                                      "p depends on the pairing", "floor reached",
                                      "equivalent", "not shown equivalent", "tensorflow_faster",
                                      "pytorch_faster", "inconclusive", "plateau at 16",
                                      "plateau at 64", "plateau at 1",
                                      "no plateau within the tested batch sizes"}
    assert tests["p"].dropna().between(0, 1).all()


def test_florencio_rows_only_where_its_experiment_ran(slower_pytorch):
    assert not (slower_pytorch[2]["tests"]["source"] == "florencio2019").any()


def test_florencio_rows_replicate_and_correct(slower_pytorch_epochs):
    trials, iterations, frames = slower_pytorch_epochs
    tests = frames["tests"]
    floor = tests[tests["family"] == "florencio2019/floor"].iloc[0]
    assert floor["p"] == pytest.approx(3.896559845095909e-18, rel=1e-12)
    pair = "epoch/cpu/lenet5/train-b16-1x28x28-fp32-idiomatic-matched"
    rows = tests[(tests["source"] == "florencio2019") & (tests["scope"].str.startswith(pair))]
    variants = set(rows["variant"])
    assert {"paired (as published)", "paired, 200 random re-pairings", "unpaired, same samples",
            "unpaired, trial medians (sound)", "paired over interleaved blocks (sound)",
            "KS, parameters from the same sample (as published)", "Shapiro-Wilk"} <= variants
    its = iterations[iterations["pair_id"] == pair].sort_values(["trial", "iteration"])
    a = its[its["framework"] == "pytorch"]["time_ns"].to_numpy(float)
    b = its[its["framework"] == "tensorflow"]["time_ns"].to_numpy(float)
    published = rows[rows["variant"] == "paired (as published)"].iloc[0]
    expected = sps.wilcoxon(a - b, method="asymptotic", correction=False).pvalue
    assert published["p"] == pytest.approx(expected)
    assert published["correction"] == "none"
    ks = rows[(rows["variant"].str.startswith("KS")) & rows["scope"].str.endswith("[pytorch]")]
    assert ks.iloc[0]["p"] == pytest.approx(
        sps.kstest(a, "norm", args=(a.mean(), a.std(ddof=1))).pvalue)
    raw = rows[(rows["variant"].str.startswith("KS against N(0, 1)"))
               & rows["scope"].str.endswith("[pytorch]")]
    assert raw.iloc[0]["p"] == pytest.approx(sps.kstest(a, "norm").pvalue)
    assert raw.iloc[0]["p"] < 1e-10   # how the published "p < 1e-10 for every variable" arises
    sw = rows[(rows["variant"] == "Shapiro-Wilk") & rows["scope"].str.endswith("[pytorch]")]
    assert sw.iloc[0]["p"] == pytest.approx(sps.shapiro(a).pvalue)
    from statsmodels.stats.diagnostic import lilliefors
    lf = rows[(rows["test"] == "Lilliefors") & rows["scope"].str.endswith("[pytorch]")]
    assert lf.iloc[0]["p"] == pytest.approx(lilliefors(a, dist="norm", pvalmethod="table")[1])
    unpaired = rows[rows["variant"] == "unpaired, same samples"].iloc[0]
    assert unpaired["p"] == pytest.approx(sps.mannwhitneyu(a, b).pvalue)
    not_measured = tests[tests["decision"] == "not measured"]
    assert set(not_measured["metric"]) == {"gpu_temperature", "cpu_temperature",
                                           "gpu_utilization", "cpu_utilization"}


def test_florencio_saturated_published_test_is_named():
    def time_ns(fw, model, phase, batch, k, rng):
        base = np.linspace(1.0, 1.5, 100) * 1e6
        return base * (1.5 if fw == "tensorflow" else 1.0)   # every paired difference negative

    trials, iterations = make_tables(trials=1, phases=("train",), batches=(1,), time_ns=time_ns,
                                     experiment="epoch")
    tests = st.summarize(trials, iterations, n_boot=100)["tests"]
    row = tests[tests["variant"] == "paired (as published)"].iloc[0]
    assert row["p"] == pytest.approx(paper_tests.FLORENCIO_PUBLISHED_FLOOR_P, rel=1e-9)
    assert "saturated" in row["note"]


def test_florencio_uses_telemetry_columns_when_present():
    def extra(fw, model, phase, batch, k, rng):
        return {"gpu_temp_c_mean": 60 + (5 if fw == "tensorflow" else 0) + rng.normal(0, 0.5),
                "cpu_util_mean": 50 + rng.normal(0, 1)}

    trials, iterations = make_tables(trials=8, phases=("train",), batches=(1,), extra=extra,
                                     experiment="epoch")
    tests = st.summarize(trials, iterations, n_boot=100)["tests"]
    gpu = tests[tests["metric"] == "gpu_temp_c_mean"]
    sound = gpu[gpu["variant"] == "unpaired, trials (sound)"].iloc[0]
    pt = trials[trials["framework"] == "pytorch"]["gpu_temp_c_mean"]
    tf = trials[trials["framework"] == "tensorflow"]["gpu_temp_c_mean"]
    assert sound["p"] == pytest.approx(sps.mannwhitneyu(pt, tf).pvalue)
    assert sound["decision"] == "reject H0"
    assert len(tests[tests["metric"] == "cpu_util_mean"])
    missing = tests[tests["decision"] == "not measured"]
    assert set(missing["metric"]) == {"cpu_temperature", "gpu_utilization"}


def test_patel_trend_plateau_and_missing_power():
    def time_ns(fw, model, phase, batch, k, rng):
        per_sample = {1: 10.0, 4: 5.0, 16: 3.0, 64: 2.95}[batch]   # stops improving past 16
        return 1e5 * batch * per_sample * rng.lognormal(0, 0.02, 10)

    trials, iterations = make_tables(trials=5, phases=("infer",), batches=(1, 4, 16, 64),
                                     time_ns=time_ns)
    tests = st.summarize(trials, iterations, n_boot=100)["tests"]
    trend = tests[tests["family"] == "patel2023/throughput/cpu/trend"]
    assert len(trend) == 2 and (trend["decision"] == "reject H0").all()
    plateau = tests[tests["family"] == "patel2023/throughput/cpu/plateau"]
    assert (plateau["estimate"] == 16).all()
    assert (plateau["decision"] == "plateau at 16").all()
    power = tests[tests["family"] == "patel2023/throughput/cpu/power"]
    assert (power["decision"] == "skipped").all()
    assert power["note"].str.contains("not measured").all()


def test_patel_power_equivalence_when_measured():
    def extra(fw, model, phase, batch, k, rng):
        growth = 1.0 if fw == "pytorch" else 1 + 0.1 * np.log2(batch)   # TensorFlow power grows
        return {"power_w_mean": 100 * growth * rng.lognormal(0, 0.005)}

    trials, iterations = make_tables(trials=6, phases=("infer",), batches=(1, 4, 16), extra=extra)
    tests = st.summarize(trials, iterations, n_boot=100)["tests"]
    power = tests[tests["family"] == "patel2023/throughput/cpu/power"].set_index("scope")
    pt = power[power.index.str.contains("/pytorch/")].iloc[0]
    tf = power[power.index.str.contains("/tensorflow/")].iloc[0]
    assert pt["decision"] == "equivalent"
    assert tf["decision"] == "not shown equivalent"
    from statsmodels.stats.weightstats import ttost_ind
    sel = trials[trials["framework"] == "pytorch"]
    by = {b: g["power_w_mean"].to_numpy() for b, g in sel.groupby("batch_size")}
    expected = max(ttost_ind(by[b], by[1], 1 / 1.05, 1.05, usevar="unequal",
                             transform=np.log)[0] for b in (4, 16))
    assert pt["p"] == pytest.approx(expected)


def test_geometric_mean_rows_per_family(slower_pytorch):
    _, _, frames = slower_pytorch
    tests = frames["tests"]
    gm = tests[tests["family"].str.startswith("geomean/")].set_index("scope")
    assert set(gm.index) == {"throughput"}   # the family: every comparison of the experiment
    comparisons = frames["comparisons"]
    for scope, row in gm.iterrows():
        ratios = comparisons[comparisons["family"] == scope]["ratio"]
        assert row["estimate"] == pytest.approx(sps.gmean(ratios))
        assert row["decision"] == "tensorflow_faster"


# --- robustness ---------------------------------------------------------------------------------

def test_tiny_and_degenerate_inputs_raise_no_warnings():
    # pyproject turns warnings into errors: scipy's small-sample warnings must not leak.
    def time_ns(fw, model, phase, batch, k, rng):
        return [1e6]                                  # one iteration, identical everywhere

    trials, iterations = make_tables(trials=1, phases=("infer",), batches=(1, 2), time_ns=time_ns)
    frames = st.summarize(trials, iterations, n_boot=50)
    assert len(frames["cells"]) == 4
    assert (frames["comparisons"]["verdict"] == "inconclusive").all()
    empty = st.summarize(trials.iloc[0:0], iterations.iloc[0:0])
    assert empty["cells"].empty and empty["comparisons"].empty
    assert empty["tests"].empty
    assert list(empty["cells"].columns) == trial_stats.CELL_COLUMNS


def test_summarize_rejects_bad_parameters():
    trials, iterations = make_tables(trials=1, phases=("infer",), batches=(1,))
    with pytest.raises(ValueError, match="confidence"):
        st.summarize(trials, iterations, confidence=95)
    with pytest.raises(ValueError, match="rope"):
        st.summarize(trials, iterations, rope=0)


def test_stats_imports_no_framework():
    code = ("import sys, fwbench.analysis.stats; "
            "assert not {'torch', 'tensorflow'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)
