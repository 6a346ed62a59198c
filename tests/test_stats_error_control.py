"""One error control for every verdict of comparisons.csv, checked by simulation.

Trial medians are drawn from known distributions (lognormal: skewed like run times, and a pure
shift on the log scale, which is what the Hodges-Lehmann interval estimates), many families at
once, and passed through ``fwbench.analysis.comparisons.compare_pairs`` as the workflow does. Each
family has six comparisons, like the default sweep's three batch sizes by two models per phase.
The bounds allow three Monte-Carlo standard errors; every draw is seeded, so the rates are fixed
numbers (docs/statistics.md quotes them).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from fwbench.analysis.comparisons import compare_pairs, compare_samples
from fwbench.analysis.tables import AXIS_DEFAULTS

ALPHA = 0.05
FAMILIES = 400
SLACK = 3 * math.sqrt(ALPHA * (1 - ALPHA) / FAMILIES)   # three Monte-Carlo standard errors


def simulated_families(ratios, *, trials: int, sigma: float, families: int = FAMILIES,
                       seed: int = 0) -> pd.DataFrame:
    """Per-trial medians (``trial_statistics``'s columns) of ``families`` families, each with one
    pair per true PyTorch/TensorFlow ratio; a family is one device (experiment x device x phase)."""
    rng = np.random.default_rng(seed)
    ratios = np.asarray(ratios, dtype=float)
    shape = (families, ratios.size, trials)
    family, pair, trial = (a.ravel() for a in np.indices(shape))
    parts = []
    for framework, centre in (("pytorch", np.log(ratios)[None, :, None]), ("tensorflow", 0.0)):
        parts.append(pd.DataFrame({
            "framework": framework, "device": [f"sim{f:04d}" for f in family],
            "batch_size": pair + 1, "trial": trial + 1,
            "trial_median_ns": 1e6 * rng.lognormal(centre, sigma, size=shape).ravel()}))
    frame = pd.concat(parts, ignore_index=True).assign(
        run="sim", experiment="throughput", model="sim", phase="infer", input_shape="3x32x32",
        precision="fp32", mode="eager", profile="matched", **AXIS_DEFAULTS)
    frame["pair_id"] = frame["device"] + "/b" + frame["batch_size"].astype(str)
    return frame


def per_family(comparisons: pd.DataFrame, column: pd.Series):
    return column.groupby(comparisons["device"]).all(), column.groupby(comparisons["device"]).any()


def test_intervals_of_a_family_cover_every_true_ratio_together():
    ratios = [0.8, 0.95, 1.0, 1.0, 1.05, 1.3]
    c = compare_pairs(simulated_families(ratios, trials=8, sigma=0.1, seed=1))
    truth = np.asarray(ratios)[c["batch_size"].to_numpy() - 1]
    covered = (c["ratio_ci_low"] <= truth) & (truth <= c["ratio_ci_high"])
    together, _ = per_family(c, covered)
    print(f"8 vs 8, 6 per family: each interval covers {covered.mean():.4f}, "
          f"a family's six together {together.mean():.4f}")
    assert together.mean() >= 1 - ALPHA - SLACK
    assert (c["ratio_ci_family_level"] >= 1 - ALPHA).all()


def test_family_wise_rate_of_a_false_faster_is_at_most_alpha():
    # 10 per side: above the 8 where scipy's Mann-Whitney leaves its exact law.
    c = compare_pairs(simulated_families([1.0] * 6, trials=10, sigma=0.1, seed=2))
    faster = c["verdict"].isin(["pytorch_faster", "tensorflow_faster"])
    _, any_faster = per_family(c, faster)
    print(f"null, 10 vs 10: a family with a false 'faster' {any_faster.mean():.4f}")
    assert any_faster.mean() <= ALPHA + SLACK
    assert (faster == (c["p_adjusted"] <= ALPHA)).all()   # verdict and adjusted p agree


@pytest.mark.parametrize("margin", [1.05, 1 / 1.05])
def test_equivalence_is_declared_at_most_alpha_on_the_margin(margin):
    # Narrow trial noise: the intervals are short enough to fit inside [1/1.05, 1.05] often,
    # so only the error control keeps equivalence from being declared for a 5% difference.
    c = compare_pairs(simulated_families([margin] * 6, trials=10, sigma=0.02, seed=3))
    _, any_equivalent = per_family(c, c["verdict"] == "equivalent")
    print(f"true ratio {margin:.4f} on the margin: a family declaring equivalence "
          f"{any_equivalent.mean():.4f}")
    assert any_equivalent.mean() <= ALPHA + SLACK


@pytest.mark.parametrize("m,n", [(9, 9), (12, 7), (20, 20)])
def test_p_value_is_exact_where_the_interval_is_and_decides_as_it_does(m, n):
    ratios = [1.0, 1.08, 1.2]
    frame = simulated_families(ratios, trials=max(m, n), sigma=0.1, families=1, seed=m + n)
    frame = frame[frame["trial"] <= np.where(frame["framework"] == "pytorch", m, n)]
    c = compare_pairs(frame)
    for row in c.itertuples():
        pair = frame[frame["pair_id"] == row.pair_id]
        a, b = (pair[pair["framework"] == fw]["trial_median_ns"] for fw in ("pytorch",
                                                                             "tensorflow"))
        exact = sps.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue
        assert row.mannwhitney_p == pytest.approx(exact, rel=1e-9)
        assert row.mannwhitney_method == "exact Mann-Whitney null distribution"
        assert row.p_adjusted == pytest.approx(min(1.0, len(ratios) * exact), rel=1e-9)
        faster = row.verdict in ("pytorch_faster", "tensorflow_faster")
        assert faster == (row.p_adjusted <= ALPHA)
        assert row.ratio_ci_level >= 1 - ALPHA / len(ratios)


def test_large_samples_use_one_normal_law_for_the_interval_and_the_p_value():
    rng = np.random.default_rng(7)
    for shift in np.linspace(0.0, 0.06, 13):   # from no difference to a clear one
        a, b = rng.lognormal(shift, 0.1, 60), rng.lognormal(0.0, 0.1, 60)
        row = compare_samples(a, b, family_size=3)
        assert row["mannwhitney_method"].startswith("normal approximation")
        scipy_p = sps.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue
        assert row["mannwhitney_p"] == pytest.approx(scipy_p, rel=1e-6)   # no ties
        assert (row["verdict"] != "inconclusive" or row["ratio_ci_low"] <= 1
                <= row["ratio_ci_high"])
        assert (row["ratio_ci_low"] > 1 or row["ratio_ci_high"] < 1) == \
            (row["p_adjusted"] <= ALPHA)
