"""One error control for every verdict of comparisons.csv, checked by simulation under the
scenarios benchmarks/error_rates.py prints at full size: the lognormal shift with equal spreads,
unequal spreads between trials (1% against 22%), bimodal trials, drift during the timed steps
and unequal trial counts. Each family has six comparisons, every one with 8 pairs of trials run
back to back, passed through ``fwbench.analysis.comparisons.compare_pairs`` as the workflow
does. The bounds allow three Monte-Carlo standard errors; every draw is seeded, so the rates are
fixed numbers (docs/statistics.md quotes them at full size).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from benchmarks.error_rates import SCENARIOS, family_rate, simulated_families
from fwbench.analysis.comparisons import compare_pairs, compare_samples

ALPHA = 0.05
FAMILIES = 150
SLACK = 3 * math.sqrt(ALPHA * (1 - ALPHA) / FAMILIES)   # three Monte-Carlo standard errors
FASTER = ("pytorch_faster", "tensorflow_faster")


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_family_wise_rate_of_a_false_faster_is_at_most_alpha(scenario):
    c = compare_pairs(simulated_families([1.0] * 6, trials=8, scenario=scenario,
                                         families=FAMILIES, seed=2))
    rate = family_rate(c, FASTER)
    print(f"{scenario}: a family with a false 'faster' {rate:.4f}")
    assert rate <= ALPHA + SLACK
    faster = c["verdict"].isin(FASTER)
    assert (faster == (c["p_adjusted"] <= ALPHA)).all()   # verdict and adjusted p agree


@pytest.mark.parametrize("scenario", ["lognormal shift, equal spreads",
                                      "unequal spreads (1% vs 22%)"])
@pytest.mark.parametrize("margin", [1.05, 1 / 1.05])
def test_equivalence_is_declared_at_most_alpha_on_the_margin(scenario, margin):
    # Tight noise: the intervals fit inside [1/1.05, 1.05] often, so only the TOST at the
    # family's level keeps a 5% difference from being called equivalent.
    c = compare_pairs(simulated_families([margin] * 6, trials=8, scenario=scenario,
                                         families=FAMILIES, seed=3, scale=0.2))
    rate = family_rate(c, ["equivalent"])
    print(f"{scenario}, true ratio {margin:.4f}: a family declaring equivalence {rate:.4f}")
    assert rate <= ALPHA + SLACK


def test_intervals_of_a_family_cover_every_true_ratio_together():
    ratios = [0.8, 0.95, 1.0, 1.0, 1.05, 1.3]
    c = compare_pairs(simulated_families(ratios, trials=8, families=FAMILIES, seed=1,
                                         scenario="lognormal shift, equal spreads"))
    truth = np.asarray(ratios)[c["batch_size"].to_numpy() - 1]
    covered = (c["ratio_ci_low"] <= truth) & (truth <= c["ratio_ci_high"])
    together = covered.groupby(c["experiment"]).all().mean()
    assert together >= 1 - ALPHA - SLACK
    assert (c["ratio_ci_family_level"] >= 1 - ALPHA - 1e-12).all()


def test_a_clear_difference_is_found_with_eight_pairs():
    # Power: a true ratio of 0.8 at 10% between-trial noise is decided in most comparisons;
    # an analysis that lost the pairing, or the trials, would fall well below.
    c = compare_pairs(simulated_families([0.8] * 6, trials=8, families=50, seed=4,
                                         scenario="lognormal shift, equal spreads"))
    assert (c["verdict"] == "pytorch_faster").mean() >= 0.6
    assert not c["verdict"].eq("tensorflow_faster").any()


def test_the_pairing_removes_what_both_members_of_a_pair_share():
    # Drift shared by trial k of both frameworks (sd 20%) hides a 10% difference from an
    # unpaired analysis; the per-pair log ratios cancel it.
    frame = simulated_families([0.9] * 6, trials=8, families=20, seed=5,
                               scenario="lognormal shift, equal spreads", scale=0.1)
    shared = np.random.default_rng(6).lognormal(0.0, 0.2, frame["trial"].max() + 1)
    frame["trial_step_ns"] *= shared[frame["trial"]]
    c = compare_pairs(frame)
    assert (c["verdict"] == "pytorch_faster").all()
    assert (c["ratio_hl_ci_high"] > 1).mean() > 0.5     # the unpaired interval cannot decide


def test_large_samples_use_one_normal_law_for_the_interval_and_the_p_value():
    # The unpaired comparison the memory peaks use.
    rng = np.random.default_rng(7)
    for shift in np.linspace(0.0, 0.06, 13):   # from no difference to a clear one
        a, b = rng.lognormal(shift, 0.1, 60), rng.lognormal(0.0, 0.1, 60)
        row = compare_samples(a, b, family_size=3)
        assert row["mannwhitney_method"].startswith("normal approximation")
        scipy_p = sps.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue
        assert row["mannwhitney_p"] == pytest.approx(scipy_p, rel=1e-6)   # no ties
        assert (row["ratio_ci_low"] > 1 or row["ratio_ci_high"] < 1) == \
            (row["p_adjusted"] <= ALPHA)
