"""Statistics over the tidy tables: per-cell summaries, PyTorch-against-TensorFlow comparisons, and
the tests the source papers used, replicated as published and beside them the sound alternative.

Framework-free: numpy, pandas, scipy and statsmodels only. The unit of replication is the trial (a
fresh process) summarized by its median iteration time; iterations are never pooled as if they were
independent, except in the rows that replicate a paper which did so, and those say it.

summarize(trials, iterations) -> {"cells", "comparisons", "tests"}
 ├── trial_statistics      one row per ok trial: median, mean, spread, Tukey outliers, drift
 ├── cell_summaries        cells.csv: median of trial medians, its interval, throughput, warnings
 ├── compare_pairs         comparisons.csv: ratio of medians with its interval, Mann-Whitney U,
 │                         Cliff's delta, verdict, Holm and Benjamini-Hochberg per family
 └── tests table           tests.csv: one row per test
      ├── comparison_tests     the Mann-Whitney and blocked Wilcoxon tests behind comparisons.csv
      ├── florencio2019_tests  Kolmogorov-Smirnov + paired Wilcoxon as published, and alternatives
      ├── patel2023_tests      Jonckheere-Terpstra trend, plateau batch size, power TOST
      └── geometric_mean_tests geometric mean of ratios per family, with its bootstrap interval

Written here because neither scipy nor statsmodels has them: Cliff's delta, the Hodges-Lehmann
shift with its distribution-free interval, the Jonckheere-Terpstra test, and the interpolated
order-statistic interval of a median. docs/statistics.md describes every column and method.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.special import ndtr, ndtri

from fwbench.analysis.tables import AXES, AXIS_DEFAULTS
from fwbench.analysis.trial_quality import (
    adjacency_recorded,
    adjacent,
    count_false,
    count_true,
    exploratory_reasons,
    recorded_drift,
    usable,
)

__all__ = [
    "summarize", "trial_statistics", "cell_summaries", "compare_pairs", "comparison_tests",
    "florencio2019_tests", "patel2023_tests", "geometric_mean_tests", "geometric_mean_ratio",
    "cliffs_delta", "cliffs_magnitude", "hodges_lehmann", "jonckheere_terpstra", "median_ci",
    "hierarchical_bootstrap_mean_ci", "mann_whitney_pmf", "mann_whitney_test", "compare_samples",
    "family_level", "wilcoxon_floor_p", "tukey_outliers",
    "holm", "benjamini_hochberg", "verdict", "Interval", "ShiftEstimate", "TrendResult",
    "FLORENCIO_PUBLISHED_FLOOR_P", "TELEMETRY_METRICS", "CELL_COLUMNS", "COMPARISON_COLUMNS",
    "TEST_COLUMNS",
]

# --- thresholds, each with the reason for its value ---------------------------------------

# "Standard deviation at least 10% of the mean" marks a cell unstable (issue 7).
UNSTABLE_CV = 0.10
# A trial drifts when its iteration times trend (Kendall's tau, p below this; iterations are
# autocorrelated, so the level is strict) *and* the last third differs from the first third by at
# least DRIFT_CHANGE of the median: significance alone flags harmless trends in long trials.
DRIFT_P = 0.01
DRIFT_CHANGE = 0.05
DRIFT_MIN_ITERATIONS = 8
# Romano, Kromrey, Coraggio & Skowronek (2006): |delta| < .147 negligible, .33 small, .474 medium.
CLIFF_THRESHOLDS = ((0.147, "negligible"), (0.33, "small"), (0.474, "medium"), (math.inf, "large"))
# The exact Mann-Whitney null distribution is used for the Hodges-Lehmann interval up to this m*n.
EXACT_MW_LIMIT = 2500
# Trials with more iterations than this resample their mean from a normal law (the CLT is exact
# enough there) instead of drawing every iteration, to bound memory.
BOOTSTRAP_INNER_NORMAL_ABOVE = 1000
# Random re-pairings that show the paired Wilcoxon p of florencio2019 depends on the pairing.
N_REPAIRINGS = 200

# The paired Wilcoxon p printed five times in florencio2019: the normal-approximation floor, n=100.
FLORENCIO_PUBLISHED_FLOOR_P = 3.896559845095909e-18

# Telemetry metrics a later issue adds to the trials table; the first column present is used.
TELEMETRY_METRICS = {
    "gpu_temperature": ("GPU temperature (°C)", ("gpu_temp_c_mean", "gpu_temp_c_max")),
    "cpu_temperature": ("CPU temperature (°C)", ("cpu_temp_c_mean", "cpu_temp_c_max")),
    "gpu_utilization": ("GPU utilization (%)", ("gpu_util_mean",)),
    "cpu_utilization": ("CPU utilization (%)", ("cpu_util_mean",)),
    "power": ("GPU power (W)", ("power_w_mean",)),
}
# florencio2019's hypotheses H1..H5 (H1 is execution time, measured by the harness itself).
FLORENCIO_HYPOTHESES = (("H1", "time"), ("H2", "gpu_temperature"), ("H3", "cpu_temperature"),
                        ("H4", "gpu_utilization"), ("H5", "cpu_utilization"))

FAMILY_AXES = ["experiment", "device", "phase"]
KEY = ["run", "cell_id"]

CELL_COLUMNS = [
    "run", "cell_id", "pair_id", *AXES,
    "n_trials", "n_ok", "statuses", "n_iterations",
    "median_ns", "ci_low_ns", "ci_high_ns", "ci_level", "ci_method",
    "mean_ns", "mean_ci_low_ns", "mean_ci_high_ns", "sd_ns", "iqr_ns", "min_ns", "max_ns",
    "cv", "cv_within", "iteration_min_ns", "iteration_max_ns", "cold_start_median_ns",
    "samples_per_iteration", "throughput_sps", "throughput_ci_low_sps", "throughput_ci_high_sps",
    "throughput_source",
    "outliers", "outlier_trials", "drift", "drift_trials", "warmup_unsteady_trials",
    "order_trend_p", "unstable", "warnings",
]
COMPARISON_COLUMNS = [
    "run", "pair_id", *[a for a in AXES if a != "framework"], "family",
    "n_pytorch", "n_tensorflow", "median_pytorch_ns", "median_tensorflow_ns",
    "ratio", "ratio_ci_low", "ratio_ci_high", "ratio_ci_level", "ratio_ci_family_level",
    "ratio_hl", "ratio_method", "family_size", "mannwhitney_u", "mannwhitney_p",
    "mannwhitney_method", "p_adjusted", "cliffs_delta", "cliffs_magnitude",
    "n_pairs", "n_pairs_adjacent", "n_blocks", "blocks_wilcoxon_p", "unsteady_trials",
    "drift_trials", "rope_low", "rope_high", "verdict", "exploratory",
    "exploratory_reason", "verdict_note",
]
TEST_COLUMNS = [
    "family", "source", "hypothesis", "test", "variant", "scope", "phase", "metric", "n",
    "statistic", "estimate", "ci_low", "ci_high", "p", "p_corrected", "correction", "decision",
    "exploratory", "note",
]


# --- small results -------------------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    """A point estimate with a confidence interval; ``level`` is the coverage actually attained."""

    estimate: float
    low: float
    high: float
    level: float
    method: str


@dataclass(frozen=True)
class ShiftEstimate:
    """Hodges-Lehmann shift of x against y with its distribution-free interval.

    ``level`` is the exact coverage of the interval (at least the nominal one when attainable);
    ``attained`` is False when the samples are too small to reach the nominal level, in which case
    the widest interval, from the smallest to the largest difference, is given with its level.
    """

    estimate: float
    low: float
    high: float
    level: float
    attained: bool
    method: str


@dataclass(frozen=True)
class TrendResult:
    """Jonckheere-Terpstra statistic J, its standardized value z, and the p-value."""

    statistic: float
    z: float
    pvalue: float
    method: str
    alternative: str


def _quietly(fn, *args, **kwargs):
    """Call a scipy/statsmodels function; return (result, notes) with any warning as a note.

    Preconditions are checked before each call so that warnings should not arise; if one does, it
    is recorded in the row's note instead of leaking (pytest turns warnings into errors).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args, **kwargs)
    return result, [str(w.message) for w in caught]


# --- hand-written estimators and tests -----------------------------------------------------

def cliffs_delta(x, y) -> float:
    """Cliff's delta: P(X > Y) - P(X < Y) over all pairs (Cliff 1993), in [-1, 1].

    Positive when x tends to be larger. For run times with x = PyTorch and y = TensorFlow, a
    positive delta means PyTorch tends to be slower. Usage::

        cliffs_delta([10, 20, 30], [5, 15, 25])   # 0.333...
    """
    x = np.asarray(x, dtype=float)
    y = np.sort(np.asarray(y, dtype=float))
    if x.size == 0 or y.size == 0:
        return math.nan
    below = np.searchsorted(y, x, side="left")          # y < x
    above = y.size - np.searchsorted(y, x, side="right")  # y > x
    return float((below.sum() - above.sum()) / (x.size * y.size))


def cliffs_magnitude(delta: float) -> str:
    """Label |delta| with the thresholds of Romano et al. (2006): negligible/small/medium/large."""
    if not np.isfinite(delta):
        return ""
    for bound, label in CLIFF_THRESHOLDS:
        if abs(delta) < bound:
            return label
    return "large"


@lru_cache(maxsize=512)
def _mw_pmf_cached(m: int, n: int) -> tuple[float, ...]:
    size = m * n + 1
    c = [0] * size
    c[0] = 1
    for i in range(1, m + 1):
        s = n + i
        for k in range(size - 1, s - 1, -1):   # multiply by (1 - q^(n+i))
            c[k] -= c[k - s]
        for k in range(i, size):               # divide by (1 - q^i)
            c[k] += c[k - i]
    total = math.comb(m + n, m)
    return tuple(v / total for v in c)


def mann_whitney_pmf(m: int, n: int) -> np.ndarray:
    """Exact null distribution P(U = u), u = 0..m*n, of the Mann-Whitney U without ties.

    The counts are the coefficients of the Gaussian binomial [m+n choose m]_q, computed in exact
    integers as the product over i = 1..m of (1 - q^(n+i)) / (1 - q^i).
    """
    m, n = sorted((int(m), int(n)))
    return np.array(_mw_pmf_cached(m, n))


def hodges_lehmann(x, y, confidence: float = 0.95) -> ShiftEstimate:
    """Hodges-Lehmann shift of x relative to y and its distribution-free confidence interval.

    The estimate is the median of the m*n differences x_i - y_j. The interval (Moses 1953;
    Bauer 1972; Hollander, Wolfe & Chicken 2014, §4.3) is (D_(k), D_(mn+1-k)) of the sorted
    differences, k the largest integer with P(U <= k-1) <= (1-confidence)/2 under the exact
    Mann-Whitney null distribution (normal approximation when m*n > 2500). Ratios: pass logarithms
    and exponentiate. Usage::

        hl = hodges_lehmann(np.log(pytorch), np.log(tensorflow))
        ratio_low, ratio_high = np.exp(hl.low), np.exp(hl.high)
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    m, n = x.size, y.size
    if m == 0 or n == 0:
        return ShiftEstimate(math.nan, math.nan, math.nan, math.nan, False, "no data")
    d = np.sort(np.subtract.outer(x, y).ravel())
    N = d.size
    estimate = float(np.median(d))
    alpha = 1.0 - confidence
    if N <= EXACT_MW_LIMIT:
        cdf = np.cumsum(mann_whitney_pmf(m, n))
        ok = np.flatnonzero(cdf <= alpha / 2 + 1e-12)
        k = int(ok[-1]) + 1 if ok.size else 1
        level = float(1.0 - 2.0 * cdf[k - 1]) if ok.size else float(1.0 - 2.0 * cdf[0])
        attained = bool(ok.size)
        method = "exact Mann-Whitney null distribution"
    else:
        # k - 1: the largest u with P(U <= u) <= alpha/2 under the continuity-corrected normal
        # law, the one mann_whitney_test uses, so the interval and the p-value agree.
        z = ndtri(1.0 - alpha / 2)
        k = int(math.floor(N / 2 + 0.5 - z * math.sqrt(m * n * (m + n + 1) / 12.0)))
        k = max(k, 1)
        attained = True
        level = confidence
        method = "normal approximation to the Mann-Whitney null distribution"
    k = min(k, (N + 1) // 2)
    return ShiftEstimate(estimate, float(d[k - 1]), float(d[N - k]), level, attained, method)


def mann_whitney_test(x, y) -> tuple[float, float, str]:
    """(U of x, two-sided p, method): the Mann-Whitney test that ``hodges_lehmann`` inverts.

    U counts pairs with x > y, ties as one half (scipy's convention). The p-value comes from the
    same null law as the interval: exact (``mann_whitney_pmf``) up to m*n = 2500, whatever the
    sample sizes (scipy switches to the normal law above 8 per side), else the normal law with
    a continuity correction. So the 1 - a interval excludes a zero shift exactly when p <= a.
    Ties are scored as halves; the exact law then ignores them, as scipy's exact method does.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    m, n = x.size, y.size
    if m == 0 or n == 0:
        return math.nan, math.nan, "no data"
    ys = np.sort(y)
    below = np.searchsorted(ys, x, side="left")
    equal = np.searchsorted(ys, x, side="right") - below
    u = float(below.sum() + 0.5 * equal.sum())
    tail = min(u, m * n - u)
    if m * n <= EXACT_MW_LIMIT:
        cdf = np.cumsum(mann_whitney_pmf(m, n))
        p = 2.0 * float(cdf[int(math.floor(tail + 1e-9))])
        method = "exact Mann-Whitney null distribution"
    else:
        sd = math.sqrt(m * n * (m + n + 1) / 12.0)
        p = 2.0 * float(ndtr((tail + 0.5 - m * n / 2.0) / sd))
        method = "normal approximation to the Mann-Whitney null distribution"
    return u, min(1.0, p), method


def _jt_statistic(groups) -> float:
    total = 0.0
    for i in range(len(groups)):
        for j in range(i + 1, len(groups)):
            gj = np.sort(groups[j])
            less = gj.size - np.searchsorted(gj, groups[i], side="right")  # x_i < y
            ties = np.searchsorted(gj, groups[i], side="right") - np.searchsorted(gj, groups[i])
            total += less.sum() + 0.5 * ties.sum()
    return float(total)


def jonckheere_terpstra(groups, alternative: str = "increasing",
                        method: str = "auto") -> TrendResult:
    """Jonckheere-Terpstra test of an ordered trend across groups given in hypothesised order.

    J = sum over i < j of #(x in group i < y in group j) + half the ties (Jonckheere 1954;
    Terpstra 1952). ``alternative``: "increasing" (values grow along the order), "decreasing" or
    "two-sided". ``method``: "exact" (no ties: the null law of J is the convolution of the
    Mann-Whitney laws of each group against all earlier ones), "asymptotic" (normal, with the
    tie-corrected variance of Hollander, Wolfe & Chicken 2014, §6.2), or "auto" (exact without ties
    and N <= 60). Usage::

        jonckheere_terpstra([t_b1, t_b8, t_b64], alternative="decreasing").pvalue
    """
    if alternative not in ("increasing", "decreasing", "two-sided"):
        raise ValueError(f"alternative must be 'increasing', 'decreasing' or 'two-sided', "
                         f"got {alternative!r}")
    groups = [np.asarray(g, dtype=float) for g in groups]
    groups = [g for g in groups if g.size]
    if len(groups) < 2:
        return TrendResult(math.nan, math.nan, math.nan, "too few groups", alternative)
    sizes = np.array([g.size for g in groups])
    N = int(sizes.sum())
    J = _jt_statistic(groups)
    mean = (N ** 2 - np.sum(sizes ** 2)) / 4.0
    pooled = np.concatenate(groups)
    _, tie_counts = np.unique(pooled, return_counts=True)
    has_ties = bool(np.any(tie_counts > 1))
    if method == "auto":
        method = "exact" if not has_ties and N <= 60 else "asymptotic"
    if method == "exact":
        if has_ties:
            raise ValueError("the exact Jonckheere-Terpstra distribution assumes no ties; "
                             "use method='asymptotic'")
        pmf = np.array([1.0])
        before = int(sizes[0])
        for size in sizes[1:]:
            pmf = np.convolve(pmf, mann_whitney_pmf(before, int(size)))
            before += int(size)
        j = int(round(J))
        upper = float(pmf[j:].sum())
        lower = float(pmf[: j + 1].sum())
        var = (N ** 2 * (2 * N + 3) - np.sum(sizes ** 2 * (2 * sizes + 3))) / 72.0
        z = (J - mean) / math.sqrt(var)
    elif method == "asymptotic":
        t = tie_counts.astype(float)
        n = sizes.astype(float)
        var = ((N * (N - 1) * (2 * N + 5) - np.sum(n * (n - 1) * (2 * n + 5))
                - np.sum(t * (t - 1) * (2 * t + 5))) / 72.0
               + np.sum(n * (n - 1) * (n - 2)) * np.sum(t * (t - 1) * (t - 2))
               / (36.0 * N * (N - 1) * (N - 2))
               + np.sum(n * (n - 1)) * np.sum(t * (t - 1)) / (8.0 * N * (N - 1)))
        if var <= 0:
            return TrendResult(J, math.nan, 1.0, "asymptotic (all values tied)", alternative)
        z = (J - mean) / math.sqrt(var)
        upper, lower = float(ndtr(-z)), float(ndtr(z))
    else:
        raise ValueError(f"method must be 'auto', 'exact' or 'asymptotic', got {method!r}")
    p = {"increasing": upper, "decreasing": lower,
         "two-sided": min(1.0, 2.0 * min(upper, lower))}[alternative]
    return TrendResult(J, float(z), min(1.0, p), method, alternative)


@lru_cache(maxsize=1024)
def _order_statistic_plan(n: int, confidence: float, interpolate: bool):
    """(d, lambda, level, method) for the median interval of n values; d is 1-based."""
    d = np.arange(1, n // 2 + 1)
    coverage = 1.0 - 2.0 * sps.binom.cdf(d - 1, n, 0.5)
    ok = np.flatnonzero(coverage >= confidence - 1e-12)
    if not ok.size:
        return 1, 0.0, float(coverage[0]), "order statistics (range; nominal level not attainable)"
    d_ = int(d[ok[-1]])
    g_d = float(coverage[ok[-1]])
    if not interpolate or g_d <= confidence + 1e-12 or 2 * d_ >= n:
        return d_, 0.0, g_d, "order statistics"
    g_next = float(1.0 - 2.0 * sps.binom.cdf(d_, n, 0.5))
    I = (g_d - confidence) / (g_d - g_next)
    lam = (n - d_) * I / (d_ + (n - 2 * d_) * I)
    method = "interpolated order statistics (Hettmansperger-Sheather 1986)"
    return d_, float(lam), confidence, method


def median_ci(x, confidence: float = 0.95, *, interpolate: bool = True) -> Interval:
    """Distribution-free confidence interval of a median from order statistics.

    With B ~ Binomial(n, 1/2), (X_(d), X_(n-d+1)) covers the median with probability
    g(d) = P(d <= B <= n-d). The largest d with g(d) >= confidence is taken and, unless
    ``interpolate`` is False, interpolated towards d+1 as Hettmansperger & Sheather (1986) propose,
    which brings the coverage close to the nominal level instead of the binomial step above it.
    With n <= 5 the nominal 95% cannot be reached: the range (min, max) is returned with its exact
    level. ``x`` may be 2-D (one sample per row): the fields are then arrays, one per row.
    """
    x = np.sort(np.asarray(x, dtype=float), axis=-1)
    n = x.shape[-1]
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, math.nan, "no data")
    estimate = np.median(x, axis=-1)
    if n == 1:
        return Interval(estimate if x.ndim > 1 else float(estimate), math.nan, math.nan,
                        math.nan, "one value: no interval")
    d, lam, level, method = _order_statistic_plan(n, float(confidence), bool(interpolate))
    low = (1 - lam) * x[..., d - 1] + lam * x[..., d]
    high = (1 - lam) * x[..., n - d] + lam * x[..., n - d - 1]
    if x.ndim == 1:
        estimate, low, high = float(estimate), float(low), float(high)
    return Interval(estimate, low, high, level, method)


def hierarchical_bootstrap_mean_ci(samples, *, confidence: float = 0.95, n_boot: int = 2000,
                                   rng: np.random.Generator | None = None) -> Interval:
    """Percentile interval of the mean of trial means, resampling trials, then iterations in them.

    ``samples`` is one array of iteration times per trial. Each replicate draws as many trials as
    there are, with replacement, and for each drawn trial resamples its iterations with replacement
    (a trial of more than 1000 iterations draws its mean from the normal law of the mean instead).
    """
    rng = np.random.default_rng(0) if rng is None else rng
    samples = [np.asarray(s, dtype=float) for s in samples if len(s)]
    T = len(samples)
    if T == 0:
        return Interval(math.nan, math.nan, math.nan, math.nan, "no data")
    estimate = float(np.mean([s.mean() for s in samples]))
    if T == 1 and samples[0].size == 1:
        return Interval(estimate, math.nan, math.nan, math.nan, "one value: no interval")
    pick = rng.integers(T, size=(n_boot, T))
    means = np.empty((n_boot, T))
    for t, s in enumerate(samples):
        mask = pick == t
        k = int(mask.sum())
        if not k:
            continue
        if s.size > BOOTSTRAP_INNER_NORMAL_ABOVE:
            means[mask] = rng.normal(s.mean(), s.std(ddof=1) / math.sqrt(s.size), size=k)
        else:
            means[mask] = s[rng.integers(s.size, size=(k, s.size))].mean(axis=1)
    reps = means.mean(axis=1)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(reps, [tail, 100 - tail])
    return Interval(estimate, float(low), float(high), confidence,
                    "hierarchical bootstrap (trials, then iterations), percentile")


def wilcoxon_floor_p(n: int) -> float:
    """Smallest two-sided p the paired Wilcoxon test can return for n pairs, normal approximation.

    Reached when every difference has the same sign (T = 0) and the |differences| are distinct: as
    scipy computed it in 2019 (no continuity correction). n = 100 gives 3.896559845095909e-18, the
    p-value florencio2019 reports for five of its ten hypotheses. The exact test gives 2 / 2**n.
    """
    if n < 1:
        return 1.0
    mean = n * (n + 1) / 4.0
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
    return float(2.0 * ndtr(-mean / sd))


def tukey_outliers(x) -> int:
    """Number of values outside Tukey's fences, [Q1 - 1.5 IQR, Q3 + 1.5 IQR]."""
    x = np.asarray(x, dtype=float)
    if x.size < 4:
        return 0
    q1, q3 = np.percentile(x, [25, 75])
    fence = 1.5 * (q3 - q1)
    return int(np.sum((x < q1 - fence) | (x > q3 + fence)))


def holm(p) -> np.ndarray:
    """Holm-adjusted p-values (statsmodels), NaN kept as NaN."""
    return _adjust(p, "holm")


def benjamini_hochberg(p) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (statsmodels), NaN kept as NaN."""
    return _adjust(p, "fdr_bh")


def _adjust(p, method: str) -> np.ndarray:
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    finite = np.isfinite(p)
    if finite.any():
        out[finite] = multipletests(p[finite], method=method)[1]
    return out


def verdict(low: float, high: float, *, attained: bool = True, rope: float = 0.05,
            names=("pytorch_faster", "tensorflow_faster")) -> tuple[str, str]:
    """Verdict on a PyTorch/TensorFlow ratio from its interval alone (already at the level that
    controls the family's error: ``compare_samples``).

    The region of practical equivalence is [1/(1+rope), 1+rope], symmetric on the log scale so
    that swapping the frameworks gives the same verdict. Returns (verdict, note):
    - "equivalent": the interval lies inside the region (even if it excludes 1);
    - ``names[0]`` / ``names[1]`` ("pytorch_faster" / "tensorflow_faster" for times): the
      interval lies below / above 1;
    - "inconclusive": anything else, including an interval whose level is not attainable.
    """
    lo_b, hi_b = 1.0 / (1.0 + rope), 1.0 + rope
    if not (np.isfinite(low) and np.isfinite(high)):
        return "inconclusive", "no interval"
    if not attained:
        return "inconclusive", "too few trials for an interval at the family's level"
    if lo_b <= low and high <= hi_b:
        note = "inside the equivalence region"
        if high < 1 or low > 1:
            note += " although the interval excludes 1 (a difference too small to matter)"
        return "equivalent", note
    if high < 1 or low > 1:
        return (names[0] if high < 1 else names[1]), "interval excludes 1"
    return "inconclusive", "interval contains 1 and reaches outside the equivalence region"


# --- trials ---------------------------------------------------------------------------------

def _iteration_groups(iterations) -> dict:
    """{(run, cell_id, trial): iteration times in iteration order}; a dict passes through."""
    if isinstance(iterations, dict):
        return iterations
    if iterations is None or iterations.empty:
        return {}
    it = iterations.sort_values(["run", "cell_id", "trial", "iteration"], kind="stable")
    values = it["time_ns"].to_numpy(dtype=float)
    positions = it.groupby(["run", "cell_id", "trial"], sort=False).indices
    return {key: values[idx] for key, idx in positions.items()}


def _drift(t: np.ndarray) -> tuple[bool, float]:
    """(drifting, relative change of the last third against the first third)."""
    n = t.size
    if n < DRIFT_MIN_ITERATIONS or np.ptp(t) == 0:
        return False, 0.0
    third = n // 3
    change = (np.median(t[-third:]) - np.median(t[:third])) / np.median(t)
    tau = sps.kendalltau(np.arange(n), t)
    return bool(tau.pvalue < DRIFT_P and abs(change) >= DRIFT_CHANGE), float(change)


def trial_statistics(trials: pd.DataFrame, iterations: pd.DataFrame) -> pd.DataFrame:
    """One row per ok trial: its iteration median (the unit of replication), mean, standard
    deviation, number of iterations, Tukey outliers among its iterations, and drift (the
    trial's own ``drift_detected`` where the harness recorded it, else ``_drift`` of its
    timed iterations)."""
    ok = trials[trials["status"] == "ok"].copy()
    groups = _iteration_groups(iterations)
    recorded = recorded_drift(ok)
    rows = []
    for rec, harness_drift in zip(ok.itertuples(index=False), recorded):
        t = groups.get((rec.run, rec.cell_id, rec.trial))
        if t is None or t.size == 0:
            median = float(rec.median_ns) if pd.notna(rec.median_ns) else math.nan
            rows.append((median, math.nan, math.nan, 0, 0,
                         False if harness_drift is pd.NA else bool(harness_drift), 0.0))
            continue
        drifting, change = _drift(t)
        if harness_drift is not pd.NA:  # the harness's own test, where it recorded one
            drifting = bool(harness_drift)
        rows.append((float(np.median(t)), float(t.mean()),
                     float(t.std(ddof=1)) if t.size > 1 else math.nan,
                     int(t.size), tukey_outliers(t), drifting, change))
    stats_cols = ["trial_median_ns", "trial_mean_ns", "trial_sd_ns", "trial_n", "trial_outliers",
                  "trial_drift", "trial_drift_change"]
    extra = pd.DataFrame(rows, columns=stats_cols, index=ok.index)
    out = pd.concat([ok, extra], axis=1)
    out = out[np.isfinite(out["trial_median_ns"].astype(float))]
    return out.reset_index(drop=True)


# --- cells ----------------------------------------------------------------------------------

def _samples_per_iteration(row) -> float:
    if "samples_per_iteration" in row and pd.notna(row["samples_per_iteration"]):
        return float(row["samples_per_iteration"])
    if row["experiment"] == "throughput":
        return float(row["batch_size"])
    return math.nan


def _statuses(group: pd.DataFrame) -> str:
    counts = group["status"].value_counts()
    return ", ".join(f"{k}={int(v)}" for k, v in sorted(counts.items()))


def cell_summaries(trials: pd.DataFrame, per_trial: pd.DataFrame, iterations: pd.DataFrame, *,
                   confidence: float = 0.95, min_trials_for_verdict: int = 7,
                   n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """cells.csv: one row per cell, including cells with no ok trial (their statistics NaN)."""
    if trials.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    groups = _iteration_groups(iterations)
    by_cell = {k: g for k, g in per_trial.groupby(KEY, sort=False)}
    rng = np.random.default_rng(seed)
    rows = []
    for key, group in trials.groupby(KEY, sort=True):
        first = group.iloc[0]
        row = {c: first[c] for c in ["run", "cell_id", "pair_id", *AXES]}
        row.update(n_trials=len(group), n_ok=int((group["status"] == "ok").sum()),
                   statuses=_statuses(group))
        pt = by_cell.get(key)
        row.update(_cell_stats(pt, groups, first, confidence, min_trials_for_verdict,
                               n_boot, rng, group))
        rows.append(row)
    cells = pd.DataFrame(rows, columns=CELL_COLUMNS)
    counts = ["n_iterations", "outliers", "outlier_trials", "drift_trials",
              "warmup_unsteady_trials"]
    cells[counts] = cells[counts].astype("Int64")
    return cells


def _throughput(pt, spi: float, single, confidence: float) -> dict:
    """Samples per second from the trials' blocks (many steps, one synchronization: a device
    that runs ahead is kept busy, as in training) where every trial timed blocks; else from the
    single steps, whose median is the latency."""
    blocks = pd.to_numeric(pt["block_ns_per_iteration"], errors="coerce") \
        if "block_ns_per_iteration" in pt else pd.Series(dtype=float)
    from_blocks = bool(len(blocks)) and bool(blocks.notna().all())
    ci = median_ci(blocks.to_numpy(dtype=float), confidence) if from_blocks else single
    return {"throughput_sps": spi / ci.estimate * 1e9,
            "throughput_ci_low_sps": spi / ci.high * 1e9,
            "throughput_ci_high_sps": spi / ci.low * 1e9,
            "throughput_source": "blocks" if from_blocks else "single steps"}


def _cell_stats(pt, groups, first, confidence, min_trials, n_boot, rng, group) -> dict:
    warn = []
    failed = group[group["status"] != "ok"]
    if len(failed):
        warn.append(f"{len(failed)} of {len(group)} trials not ok ({_statuses(failed)})")
    spi = _samples_per_iteration(first)
    if pt is None or pt.empty:
        warn.append("no ok trial: nothing measured")
        return {"n_iterations": 0, "samples_per_iteration": spi, "drift": False,
                "unstable": False, "warnings": "; ".join(warn)}
    pt = pt.sort_values("run_order")
    med = pt["trial_median_ns"].to_numpy(dtype=float)
    n = med.size
    ci = median_ci(med, confidence)
    samples = [groups.get((r, c, t), np.array([]))
               for r, c, t in zip(pt["run"], pt["cell_id"], pt["trial"])]
    mean_ci = hierarchical_bootstrap_mean_ci(samples, confidence=confidence, n_boot=n_boot,
                                             rng=rng)
    iters = np.concatenate(samples) if any(len(s) for s in samples) else np.array([])
    mean_med = med.mean()
    sd = float(med.std(ddof=1)) if n > 1 else math.nan
    cv = sd / mean_med if n > 1 and mean_med > 0 else math.nan
    within = (pt["trial_sd_ns"] / pt["trial_mean_ns"]).to_numpy(dtype=float)
    cv_within = float(np.nanmedian(within)) if np.isfinite(within).any() else math.nan
    drift_trials = int(pt["trial_drift"].sum())
    unsteady = int((pt["warmup_steady"] == False).sum())  # noqa: E712 (None is not unsteady)
    order_p = math.nan
    if n >= 5 and np.ptp(med) > 0:
        order_p = float(sps.kendalltau(pt["run_order"].to_numpy(), med).pvalue)
    unstable = bool((np.isfinite(cv) and cv >= UNSTABLE_CV)
                    or (np.isfinite(cv_within) and cv_within >= UNSTABLE_CV))
    if n < min_trials:
        warn.append(f"too few trials for a verdict ({n} ok < {min_trials})")
    if np.isfinite(cv) and cv >= UNSTABLE_CV:
        warn.append(f"unstable between trials: sd is {cv:.0%} of the mean")
    if np.isfinite(cv_within) and cv_within >= UNSTABLE_CV:
        warn.append(f"unstable within trials: median sd is {cv_within:.0%} of the mean")
    if drift_trials:
        warn.append(f"drift after warm-up in {drift_trials} of {n} trials")
    if unsteady:
        warn.append(f"warm-up did not reach a steady state in {unsteady} of {n} trials")
    if np.isfinite(order_p) and order_p < 0.05:
        warn.append(f"trial medians trend with run order (Kendall p={order_p:.3g})")
    if ci.level < confidence - 1e-9:
        warn.append(f"interval of the median only reaches {ci.level:.1%} with {n} trials")
    if not np.isfinite(spi):
        warn.append(f"no throughput: samples per iteration unknown for experiment "
                    f"{first['experiment']!r} (no samples_per_iteration column)")
    cold = pd.to_numeric(pt["cold_start_ns"], errors="coerce").to_numpy(dtype=float)
    q1, q3 = np.percentile(med, [25, 75])
    return {
        "n_iterations": int(pt["trial_n"].sum()),
        "median_ns": ci.estimate, "ci_low_ns": ci.low, "ci_high_ns": ci.high,
        "ci_level": ci.level, "ci_method": ci.method,
        "mean_ns": mean_ci.estimate if np.isfinite(mean_ci.estimate) else float(mean_med),
        "mean_ci_low_ns": mean_ci.low, "mean_ci_high_ns": mean_ci.high,
        "sd_ns": sd, "iqr_ns": float(q3 - q1), "min_ns": float(med.min()),
        "max_ns": float(med.max()), "cv": cv, "cv_within": cv_within,
        "iteration_min_ns": float(iters.min()) if iters.size else math.nan,
        "iteration_max_ns": float(iters.max()) if iters.size else math.nan,
        "cold_start_median_ns": float(np.nanmedian(cold)) if np.isfinite(cold).any() else math.nan,
        "samples_per_iteration": spi,
        **_throughput(pt, spi, ci, confidence),
        "outliers": int(pt["trial_outliers"].sum()),
        "outlier_trials": tukey_outliers(med),
        "drift": bool(drift_trials > 0), "drift_trials": drift_trials,
        "warmup_unsteady_trials": unsteady, "order_trend_p": order_p,
        "unstable": unstable, "warnings": "; ".join(warn),
    }


# --- comparisons -----------------------------------------------------------------------------

def _family(row) -> str:
    return "/".join(str(row[a]) for a in FAMILY_AXES)


def _mannwhitney(a: np.ndarray, b: np.ndarray) -> tuple[float, float, list[str]]:
    if a.size == 0 or b.size == 0:
        return math.nan, math.nan, []
    if np.ptp(np.concatenate([a, b])) == 0:
        return a.size * b.size / 2.0, 1.0, ["all values equal"]
    res, notes = _quietly(sps.mannwhitneyu, a, b, alternative="two-sided", method="auto")
    return float(res.statistic), float(res.pvalue), notes


def _signed_rank(d: np.ndarray, **kwargs) -> tuple[float, float, list[str]]:
    """scipy's Wilcoxon signed-rank test on differences, guarded for tiny or all-zero input."""
    d = np.asarray(d, dtype=float)
    if d.size == 0:
        return math.nan, math.nan, ["no pairs"]
    if not np.any(d != 0):
        return 0.0, 1.0, ["all differences are zero"]
    if "method" not in kwargs:
        nonzero = d[d != 0]
        exact_ok = nonzero.size == d.size and np.unique(np.abs(nonzero)).size == nonzero.size
        kwargs["method"] = "exact" if exact_ok and d.size <= 50 else "asymptotic"
    res, notes = _quietly(sps.wilcoxon, d, **kwargs)
    return float(res.statistic), float(res.pvalue), notes


def _arms(per_trial: pd.DataFrame):
    """Yield (run, pair_id, pytorch rows, tensorflow rows) for pairs with ok trials on each side."""
    for (run, pair_id), group in per_trial.groupby(["run", "pair_id"], sort=True):
        pt = group[group["framework"] == "pytorch"].sort_values("trial")
        tf = group[group["framework"] == "tensorflow"].sort_values("trial")
        if len(pt) and len(tf):
            yield run, pair_id, pt, tf


def compare_samples(a, b, *, family_size: int = 1, confidence: float = 0.95,
                    rope: float = 0.05, names=("pytorch_faster", "tensorflow_faster")) -> dict:
    """The ratio of two samples of positive per-trial values (a over b), decided by one interval.

    One error control for every verdict of a family of ``family_size`` comparisons: the
    Hodges-Lehmann interval of the log values is taken at the Bonferroni level
    1 - alpha/family_size, so that all intervals of the family cover their true ratios together
    with probability >= 1 - alpha. "Faster" (the interval excludes 1) and "equivalent" (it lies
    inside the region of practical equivalence) both read this interval, so the chance of any
    false verdict in the family is at most alpha. The p-value is the Mann-Whitney test the
    interval inverts (exact where the interval is), and ``p_adjusted`` = min(1, m p) is at most
    alpha exactly when the interval excludes 1. ``names``: the verdicts for a below and above b.
    Usage::

        compare_samples(pytorch_medians, tensorflow_medians, family_size=6)["verdict"]
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    alpha = 1.0 - confidence
    hl = hodges_lehmann(np.log(a), np.log(b), 1.0 - alpha / family_size)
    u, p, test_method = mann_whitney_test(a, b)
    low, high = math.exp(hl.low), math.exp(hl.high)
    decided, note = verdict(low, high, attained=hl.attained, rope=rope, names=names)
    return {
        "ratio": float(np.median(a) / np.median(b)),
        "ratio_ci_low": low, "ratio_ci_high": high, "ratio_ci_level": hl.level,
        "ratio_ci_attained": hl.attained, "ratio_hl": math.exp(hl.estimate),
        "ratio_method": (f"Hodges-Lehmann interval of the log trial values, {hl.method}, "
                         "Bonferroni level within the family, exponentiated"),
        "family_size": int(family_size), "mannwhitney_u": u, "mannwhitney_p": p,
        "mannwhitney_method": test_method, "p_adjusted": min(1.0, family_size * p),
        "rope_low": 1.0 / (1.0 + rope), "rope_high": 1.0 + rope,
        "verdict": decided, "verdict_note": note,
    }


def family_level(levels) -> float:
    """The level at which a family's intervals hold together (Bonferroni: 1 - sum of misses),
    from the coverage each interval attains; never below 0."""
    return max(0.0, 1.0 - float(np.sum(1.0 - np.asarray(levels, dtype=float))))


def _arm_arrays(per_trial: pd.DataFrame, columns: list[str]):
    """Yield (run, pair_id, the pair's axes, PyTorch's and TensorFlow's ``columns`` as arrays in
    trial order) for pairs with ok trials on both sides. Arrays, not frames: a large sweep (or
    the error-rate simulation in the tests) compares thousands of pairs."""
    if per_trial.empty:
        return
    frame = per_trial.sort_values(["run", "pair_id", "trial"], kind="stable")
    axes = [a for a in AXES if a != "framework"]
    values = {c: frame[c].to_numpy() for c in {*columns, *axes, "trial"} if c in frame}
    framework = frame["framework"].to_numpy()
    for (run, pair_id), idx in frame.groupby(["run", "pair_id"], sort=True).indices.items():
        pt, tf = idx[framework[idx] == "pytorch"], idx[framework[idx] == "tensorflow"]
        if len(pt) and len(tf):
            yield (run, pair_id, {a: values[a][pt[0]] for a in axes},
                   {c: v[pt] for c, v in values.items()}, {c: v[tf] for c, v in values.items()})


_VERDICT_COLUMNS = ["trial_median_ns", "warmup_steady", "trial_drift"]


def _usable_trials(arm: dict) -> tuple[dict, int]:
    """One framework's arm without its unsteady or drifting trials, and how many are left (all
    of them are kept where none would be: the comparison is then a hint from every ok trial)."""
    keep = usable(arm.get("warmup_steady", [None] * len(arm["trial"])),
                  arm.get("trial_drift", [None] * len(arm["trial"])))
    return ({c: v[keep] for c, v in arm.items()} if keep.any() else arm), int(keep.sum())


def compare_pairs(per_trial: pd.DataFrame, *, confidence: float = 0.95, rope: float = 0.05,
                  min_trials_for_verdict: int = 7) -> pd.DataFrame:
    """comparisons.csv: one row per matched pair with ok trials on both sides, each decided by
    its interval at the family's Bonferroni level (``compare_samples``) from the trials that
    reached a steady warm-up and do not drift (``trial_quality.usable``)."""
    arms = list(_arm_arrays(per_trial, [*_VERDICT_COLUMNS, "pair_adjacent"]))
    recorded = adjacency_recorded(per_trial)
    families = [_family(axes) for _, _, axes, _, _ in arms]
    sizes = {f: families.count(f) for f in set(families)}
    rows = []
    for (run, pair_id, axes, pt, tf), family in zip(arms, families):
        flags = {c: np.concatenate([pt[c], tf[c]]) if c in pt else []
                 for c in ("warmup_steady", "trial_drift")}
        (pt, n_pt), (tf, n_tf) = _usable_trials(pt), _usable_trials(tf)
        a = pt["trial_median_ns"].astype(float)
        b = tf["trial_median_ns"].astype(float)
        row = {"run": run, "pair_id": pair_id, **axes, "family": family}
        row.update(compare_samples(a, b, family_size=sizes[family], confidence=confidence,
                                   rope=rope))
        _, i, j = np.intersect1d(pt["trial"], tf["trial"], return_indices=True)
        n_adjacent = math.nan
        if recorded:  # pair only the trials that really ran back to back
            keep = adjacent(pt["pair_adjacent"][i], tf["pair_adjacent"][j])
            n_adjacent = int(keep.sum())
            i, j = i[keep], j[keep]
        _, p_blocks, _ = _signed_rank(np.log(a[i]) - np.log(b[j]))
        delta = cliffs_delta(a, b)
        reasons = exploratory_reasons(n_pt, n_tf, min_trials_for_verdict,
                                      unsteady=count_false(flags["warmup_steady"]),
                                      drifting=count_true(flags["trial_drift"]))
        row.update(
            n_pytorch=a.size, n_tensorflow=b.size,
            median_pytorch_ns=float(np.median(a)), median_tensorflow_ns=float(np.median(b)),
            cliffs_delta=delta, cliffs_magnitude=cliffs_magnitude(delta),
            n_pairs=int(np.intersect1d(pt["trial"], tf["trial"]).size),
            n_pairs_adjacent=n_adjacent, n_blocks=len(i), blocks_wilcoxon_p=p_blocks,
            unsteady_trials=count_false(flags["warmup_steady"]),
            drift_trials=count_true(flags["trial_drift"]),
            exploratory=bool(reasons), exploratory_reason="; ".join(reasons),
        )
        rows.append(row)
    if not rows:
        return pd.DataFrame(columns=COMPARISON_COLUMNS)
    out = pd.DataFrame(rows)
    out["n_pairs_adjacent"] = out["n_pairs_adjacent"].astype("Int64")
    out["ratio_ci_family_level"] = out.groupby("family")["ratio_ci_level"].transform(family_level)
    out["verdict_note"] = [_comparison_note(r, confidence) for r in out.itertuples()]
    return out[COMPARISON_COLUMNS]


def _comparison_note(r, confidence: float) -> str:
    note = r.verdict_note
    if r.exploratory:
        note = f"exploratory ({r.exploratory_reason}): a hint, not a verdict; " + note
    if r.family_size > 1:
        note += (f"; interval at {r.ratio_ci_level:.2%} (Bonferroni over the family's "
                 f"{r.family_size} comparisons: together at least {r.ratio_ci_family_level:.1%})")
    elif r.ratio_ci_level < confidence - 1e-9:
        note += f"; interval level {r.ratio_ci_level:.1%}"
    if not r.ratio_ci_low <= r.ratio <= r.ratio_ci_high:
        note += ("; the ratio of medians lies outside the Hodges-Lehmann interval (skewed or "
                 "bimodal trial medians: read ratio_hl)")
    return note


# --- the tests table ---------------------------------------------------------------------------

def _test_row(**kw) -> dict:
    row = dict.fromkeys(TEST_COLUMNS)
    row.update(correction="none", note="")
    row.update(kw)
    return row


def comparison_tests(comparisons: pd.DataFrame, confidence: float = 0.95) -> list[dict]:
    """The Mann-Whitney test over trial medians behind each comparison (Bonferroni within the
    family: the test its interval inverts, so it rejects exactly when the verdict says faster),
    and the paired Wilcoxon over interleaved blocks (trial k of one framework with trial k of the
    other)."""
    rows = []
    alpha = 1.0 - confidence
    for r in comparisons.itertuples(index=False):
        rows.append(_test_row(
            family=f"comparison/{r.family}", source="fwbench",
            hypothesis="PyTorch and TensorFlow trial medians come from the same distribution",
            test="Mann-Whitney U, two-sided", variant=f"trial medians (unit: trial), "
                                                      f"{r.mannwhitney_method}",
            scope=r.pair_id, phase=r.phase, metric="time", n=f"{r.n_pytorch}+{r.n_tensorflow}",
            statistic=r.mannwhitney_u, estimate=r.ratio, ci_low=r.ratio_ci_low,
            ci_high=r.ratio_ci_high, p=r.mannwhitney_p, correction="bonferroni",
            decision="reject H0" if r.p_adjusted <= alpha else "do not reject H0",
            exploratory=r.exploratory,
            note=f"estimate: ratio of medians; interval: the verdict's (Bonferroni level); "
                 f"verdict {r.verdict}"))
        rows.append(_test_row(
            family=f"comparison-blocks/{r.family}", source="fwbench",
            hypothesis="within interleaved blocks the PyTorch/TensorFlow log ratio is centred on 0",
            test="Wilcoxon signed-rank, two-sided", variant="paired over blocks (trial k with k)",
            scope=r.pair_id, phase=r.phase, metric="time", n=str(r.n_blocks),
            p=r.blocks_wilcoxon_p, correction="holm", exploratory=r.exploratory,
            note=_blocks_note(r.n_pairs, r.n_pairs_adjacent)))
    return rows


def _blocks_note(pairs: int, adjacent_pairs) -> str:
    if pd.isna(adjacent_pairs):
        return (f"pairs trial k of both frameworks, planned back to back; this run did not "
                f"record whether they were, so all {pairs} pairs are used")
    return (f"pairs trial k of both frameworks where they ran back to back: {adjacent_pairs} "
            f"of {pairs} pairs did, only those are used")


def _normality_rows(x, *, base: dict, label: str) -> list[dict]:
    rows = []
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    n = x.size
    common = dict(base, n=str(n), hypothesis=f"{label} is normally distributed",
                  family=base["family"] + "/normality")
    if n < 5 or np.ptp(x) == 0:
        reason = "fewer than 5 values" if n < 5 else "all values equal"
        for variant in ("KS, parameters from the same sample (as published)",
                        "KS against N(0, 1), raw values (a guess at the published computation)",
                        "Lilliefors (KS with estimated parameters, corrected null)",
                        "Shapiro-Wilk"):
            rows.append(_test_row(**common, test="normality", variant=variant,
                                  decision="skipped", note=reason))
        return rows
    mu, sd = x.mean(), x.std(ddof=1)
    ks, notes = _quietly(sps.kstest, x, "norm", args=(mu, sd))
    rows.append(_test_row(
        **common, test="Kolmogorov-Smirnov",
        variant="KS, parameters from the same sample (as published)",
        statistic=float(ks.statistic), p=float(ks.pvalue),
        note="unsound: with mean and sd estimated from the same data the KS null distribution does "
             "not hold and the p-value is far too large (Lilliefors 1967)"
             + ("; " + "; ".join(notes) if notes else "")))
    raw, notes = _quietly(sps.kstest, x, "norm")
    rows.append(_test_row(
        **common, test="Kolmogorov-Smirnov",
        variant="KS against N(0, 1), raw values (a guess at the published computation)",
        statistic=float(raw.statistic), p=float(raw.pvalue),
        note="what scipy.stats.kstest(x, 'norm') computes when the data are not standardized: it "
             "rejects any sample not centred on 0 with sd 1, which would explain the published "
             "p < 1e-10 for every variable; it says nothing about the shape"
             + ("; " + "; ".join(notes) if notes else "")))
    from statsmodels.stats.diagnostic import lilliefors

    (stat, p), notes = _quietly(lilliefors, x, dist="norm", pvalmethod="table")
    rows.append(_test_row(**common, test="Lilliefors", variant="Lilliefors (KS with estimated "
                          "parameters, corrected null)", statistic=float(stat), p=float(p),
                          correction="holm",
                          note="; ".join(notes)))
    if n > 5000:
        rows.append(_test_row(**common, test="Shapiro-Wilk", variant="Shapiro-Wilk",
                              decision="skipped", note="Shapiro-Wilk is defined for n <= 5000"))
    else:
        sw, notes = _quietly(sps.shapiro, x)
        rows.append(_test_row(**common, test="Shapiro-Wilk", variant="Shapiro-Wilk",
                              statistic=float(sw.statistic), p=float(sw.pvalue),
                              correction="holm",
                              note="; ".join(notes)))
    return rows


def _florencio_battery(a, b, *, base: dict, label: str, rng, trial_level: bool,
                       trial_medians=None, blocks=None) -> list[dict]:
    """The published tests on samples a (PyTorch) and b (TensorFlow), and the sound ones beside."""
    rows = []
    for fw, x in (("pytorch", a), ("tensorflow", b)):
        rows += _normality_rows(x, base=dict(base, scope=f"{base['scope']} [{fw}]"),
                                label=f"{label}, {fw}")
    n = min(a.size, b.size)
    d = a[:n] - b[:n]
    hyp = f"H0: PyTorch and TensorFlow do not differ in {label}"
    stat, p, notes = _signed_rank(d, method="asymptotic", correction=False)
    floor = wilcoxon_floor_p(int(np.count_nonzero(d))) if n else math.nan
    note = ("as published: pairs the i-th value of one framework with the i-th of the other, "
            "normal approximation, no continuity correction")
    if a.size != b.size:
        note += f"; truncated to the common length {n}"
    if np.isfinite(p) and math.isclose(p, floor, rel_tol=1e-9):
        note += (f"; p equals the floor {floor:.4g} for n={int(np.count_nonzero(d))}: every "
                 "difference has the same sign, the test is saturated")
    rows.append(_test_row(**base, hypothesis=hyp, test="Wilcoxon signed-rank",
                          variant="paired (as published)", n=str(n), statistic=stat, p=p,
                          note="; ".join([note, *notes])))
    if n >= 2 and np.any(d != 0):
        perm = np.argsort(rng.random((N_REPAIRINGS, n)), axis=1)
        dd = a[:n][None, :] - b[:n][perm]
        keep = np.any(dd != 0, axis=1)
        res, _ = _quietly(sps.wilcoxon, dd[keep], axis=1, method="asymptotic",
                          correction=False)
        ps = np.asarray(res.pvalue, dtype=float)
        lo, mid, hi = np.percentile(ps, [2.5, 50, 97.5]) if ps.size else (math.nan,) * 3
        rows.append(_test_row(
            **base, hypothesis=hyp, test="Wilcoxon signed-rank",
            variant=f"paired, {N_REPAIRINGS} random re-pairings", n=str(n), estimate=mid,
            ci_low=lo, ci_high=hi, decision="p depends on the pairing",
            note="estimate: median p over random re-pairings of the same values; ci: its 2.5-97.5 "
                 "percentiles. The runs of the two frameworks are independent, so any pairing is "
                 "arbitrary and so is the paired p-value"))
    u, p_u, notes = _mannwhitney(a, b)
    rows.append(_test_row(
        **base, hypothesis=hyp, test="Mann-Whitney U, two-sided",
        variant="unpaired, same samples" if not trial_level else "unpaired, trials (sound)",
        n=f"{a.size}+{b.size}", statistic=u, p=p_u, correction="holm",
        note=("the unpaired test the independent runs call for" + (
            "; still treats iterations of one process as independent, which they are not"
            if not trial_level else "") + ("; " + "; ".join(notes) if notes else ""))))
    if trial_medians is not None:
        ta, tb = trial_medians
        u, p_t, method = mann_whitney_test(ta, tb)
        rows.append(_test_row(
            **base, hypothesis=hyp, test="Mann-Whitney U, two-sided",
            variant="unpaired, trial medians (sound)", n=f"{ta.size}+{tb.size}", statistic=u,
            p=p_t, correction="holm",
            note=f"unit of replication: the trial (a fresh process); {method}"))
    if blocks is not None and len(blocks):
        stat, p_b, notes = _signed_rank(blocks)
        rows.append(_test_row(
            **base, hypothesis=hyp, test="Wilcoxon signed-rank",
            variant="paired over interleaved blocks (sound)", n=str(len(blocks)), statistic=stat,
            p=p_b, correction="holm",
            note="pairs trial k of both frameworks, which ran next to each other in time"
                 + ("; " + "; ".join(notes) if notes else "")))
    return rows


def _adjacent_blocks(pt: pd.DataFrame, tf: pd.DataFrame,
                     column: str = "trial_median_ns") -> pd.DataFrame:
    """Trial k of both frameworks side by side (``column`` suffixed _pt and _tf): the pairs that
    ran back to back where the run recorded it (``pair_adjacent``), else every pair present on
    both sides."""
    columns = ["trial", column, *(["pair_adjacent"] if "pair_adjacent" in pt else [])]
    blocks = pd.merge(pt[columns], tf[columns], on="trial", suffixes=("_pt", "_tf"))
    if adjacency_recorded(pt) or adjacency_recorded(tf):
        blocks = blocks[adjacent(blocks["pair_adjacent_pt"], blocks["pair_adjacent_tf"])]
    return blocks


def _present(trials: pd.DataFrame, columns) -> str | None:
    for c in columns:
        if c in trials.columns and trials[c].notna().any():
            return c
    return None


def florencio2019_tests(trials: pd.DataFrame, per_trial: pd.DataFrame,
                        iterations: pd.DataFrame, *, seed: int = 0) -> list[dict]:
    """florencio2019 replicated per matched pair: KS normality and the paired Wilcoxon test as
    published, for execution time (H1) and, when telemetry columns exist, GPU/CPU temperature and
    utilization (H2-H5); beside them Lilliefors, Shapiro-Wilk, random re-pairings, the unpaired
    test, the test over trial medians and the test over interleaved blocks. Plus the p floor."""
    rng = np.random.default_rng(seed)
    groups = _iteration_groups(iterations)
    rows = [_test_row(
        family="florencio2019/floor", source="florencio2019",
        hypothesis="smallest p the published paired Wilcoxon test can return for n = 100",
        test="Wilcoxon signed-rank", variant="normal approximation, T = 0", n="100",
        statistic=0.0, estimate=wilcoxon_floor_p(100), p=wilcoxon_floor_p(100),
        decision="floor reached",
        note=(f"the paper reports p = {FLORENCIO_PUBLISHED_FLOOR_P!r} for five of ten hypotheses "
              f"(training and inference time, GPU temperature in training, GPU utilization in "
              f"both phases): exactly this floor, so in each all 100 paired differences had the "
              f"same sign and the p-value says nothing more; the exact test gives 2/2^100 = "
              f"{2.0 ** -99:.3g}"))]
    for _run, pair_id, pt, tf in _arms(per_trial):
        first = pt.iloc[0]
        fam = f"florencio2019/{first['experiment']}/{first['device']}"
        base = dict(family=fam, source="florencio2019", scope=pair_id, phase=first["phase"])

        def pooled(rows_):
            parts = [groups.get((r, c, t), np.array([]))
                     for r, c, t in zip(rows_["run"], rows_["cell_id"], rows_["trial"])]
            return np.concatenate(parts) if parts else np.array([])

        blocks = _adjacent_blocks(pt, tf)
        rows += _florencio_battery(
            pooled(pt), pooled(tf), base=dict(base, metric="time"),
            label=f"execution time ({first['phase']}, pooled iterations)", rng=rng,
            trial_level=False,
            trial_medians=(pt["trial_median_ns"].to_numpy(float),
                           tf["trial_median_ns"].to_numpy(float)),
            blocks=np.log(blocks["trial_median_ns_pt"].to_numpy(float))
            - np.log(blocks["trial_median_ns_tf"].to_numpy(float)))
        for _, metric in FLORENCIO_HYPOTHESES[1:]:
            label, candidates = TELEMETRY_METRICS[metric]
            column = _present(per_trial, candidates)
            if column is None:
                continue
            a = pt[column].to_numpy(float)
            b = tf[column].to_numpy(float)
            merged = _adjacent_blocks(pt, tf, column)
            rows += _florencio_battery(
                a[np.isfinite(a)], b[np.isfinite(b)], base=dict(base, metric=column),
                label=f"{label} ({first['phase']}, one value per trial)", rng=rng,
                trial_level=True,
                blocks=(merged[f"{column}_pt"] - merged[f"{column}_tf"]).dropna().to_numpy(float))
    rows += _not_measured_rows(trials, "florencio2019")
    return rows


def _not_measured_rows(trials: pd.DataFrame, source: str) -> list[dict]:
    rows = []
    scopes = trials[FAMILY_AXES].drop_duplicates().itertuples(index=False) if len(trials) else []
    scopes = list(scopes)
    for hyp, metric in FLORENCIO_HYPOTHESES[1:]:
        label, candidates = TELEMETRY_METRICS[metric]
        if _present(trials, candidates) is not None:
            continue
        for experiment, device, phase in scopes:
            rows.append(_test_row(
                family=f"{source}/{experiment}/{device}", source=source,
                hypothesis=f"{hyp}: PyTorch and TensorFlow do not differ in {label}",
                test="Wilcoxon signed-rank", variant="paired (as published)",
                scope=f"{experiment}/{device}", phase=phase, metric=metric,
                decision="not measured",
                note=f"the trials table has no {' or '.join(candidates)} column: telemetry was "
                     f"not collected in this run"))
    return rows


def _trend_groups(per_trial: pd.DataFrame, phase: str | None = "infer"):
    keys = ["run", *[a for a in AXES if a != "batch_size"]]
    frame = per_trial if phase is None else per_trial[per_trial["phase"] == phase]
    for key, group in frame.groupby(keys, sort=True):
        yield dict(zip(keys, key)), group


def _scope(k: dict) -> str:
    scope = (f"{k['experiment']}/{k['device']}/{k['framework']}/{k['model']}/{k['phase']}-"
             f"{k['input_shape']}-{k['precision']}-{k['mode']}-{k['profile']}")
    return scope if k["optimizer"] == AXIS_DEFAULTS["optimizer"] else f"{scope}-{k['optimizer']}"


def patel2023_tests(per_trial: pd.DataFrame, *, confidence: float = 0.95,
                    rope: float = 0.05, min_trials_for_verdict: int = 7) -> list[dict]:
    """patel2023: inference time per sample against batch size (Jonckheere-Terpstra, decreasing),
    the batch size past which it stops improving, and "batch size does not affect power" as an
    equivalence test (TOST on the power ratio to the smallest batch, intersection-union). A
    series with fewer than ``min_trials_for_verdict`` trials at some batch size is exploratory."""
    rows = []
    for k, group in _trend_groups(per_trial, "infer"):
        fam = f"patel2023/{k['experiment']}/{k['device']}"
        by_batch = {int(b): (g["trial_median_ns"].to_numpy(float) / int(b))
                    for b, g in group.groupby("batch_size")}
        fewest = min(v.size for v in by_batch.values())
        base = dict(source="patel2023", scope=_scope(k), phase="infer",
                    metric="time per sample", exploratory=fewest < min_trials_for_verdict)
        batches = sorted(by_batch)
        if len(batches) < 2:
            rows.append(_test_row(**base, family=fam + "/trend", hypothesis="trend",
                                  test="Jonckheere-Terpstra", decision="skipped",
                                  note=f"only batch size {batches} has ok trials"))
            continue
        jt = jonckheere_terpstra([by_batch[b] for b in batches], alternative="decreasing")
        rows.append(_test_row(
            **base, family=fam + "/trend",
            hypothesis="inference time per sample does not decrease with batch size",
            test="Jonckheere-Terpstra, decreasing", variant=jt.method,
            n="+".join(str(by_batch[b].size) for b in batches), statistic=jt.statistic,
            estimate=jt.z, p=jt.pvalue, correction="holm",
            note=f"batch sizes {batches}; estimate: standardized J"))
        medians = [float(np.median(by_batch[b])) for b in batches]
        plateau = next(b for i, b in enumerate(batches)
                       if all(m >= (1 - rope) * medians[i] for m in medians[i + 1:]))
        last = plateau == batches[-1]
        rows.append(_test_row(
            **base, family=fam + "/plateau",
            hypothesis="the batch size past which time per sample stops improving",
            test="plateau", variant=f"no larger batch better by more than {rope:.0%}",
            n=str(len(batches)), statistic=float(plateau), estimate=float(plateau),
            decision=("no plateau within the tested batch sizes" if last
                      else f"plateau at {plateau}"),
            note="median time per sample (ns) by batch size: " + ", ".join(
                f"{b}: {m:.4g}" for b, m in zip(batches, medians))))
    rows += _power_rows(per_trial, confidence=confidence, rope=rope,
                        min_trials=min_trials_for_verdict)
    return rows


def _power_rows(per_trial: pd.DataFrame, *, confidence: float, rope: float,
                min_trials: int = 7) -> list[dict]:
    label, candidates = TELEMETRY_METRICS["power"]
    column = _present(per_trial, candidates)
    hyp = f"batch size does not affect power: every batch within ±{rope:.0%} of the smallest"
    if column is None:
        scopes = per_trial[FAMILY_AXES].drop_duplicates() if len(per_trial) else pd.DataFrame()
        return [_test_row(family=f"patel2023/{s.experiment}/{s.device}/power", source="patel2023",
                          hypothesis=hyp, test="TOST equivalence",
                          scope=f"{s.experiment}/{s.device}",
                          phase=s.phase, metric="power", decision="skipped",
                          note=f"not measured: the trials table has no {' or '.join(candidates)} "
                               f"column (telemetry was not collected in this run)")
                for s in scopes.itertuples(index=False)]
    from statsmodels.stats.weightstats import ttost_ind

    rows = []
    for k, group in _trend_groups(per_trial, None):
        base = dict(family=f"patel2023/{k['experiment']}/{k['device']}/power", source="patel2023",
                    scope=_scope(k), phase=k["phase"], metric=column, hypothesis=hyp,
                    test="TOST equivalence (Welch, log scale)")
        by_batch = {int(b): g[column].dropna().to_numpy(float)
                    for b, g in group.groupby("batch_size")}
        by_batch = {b: v for b, v in by_batch.items() if v.size}
        batches = sorted(by_batch)
        base["exploratory"] = bool(by_batch) and min(v.size for v in by_batch.values()) < min_trials
        if len(batches) < 2 or any(by_batch[b].size < 2 for b in batches):
            rows.append(_test_row(**base, decision="skipped",
                                  note="needs two or more batch sizes with two or more trials"))
            continue
        ref = by_batch[batches[0]]
        ps, notes = [], []
        for b in batches[1:]:
            x = by_batch[b]
            if np.ptp(x) == 0 and np.ptp(ref) == 0:
                ratio = x[0] / ref[0]
                ps.append(0.0 if 1 / (1 + rope) < ratio < 1 + rope else 1.0)
                notes.append(f"{b}: constant values")
                continue
            res, w = _quietly(ttost_ind, x, ref, 1.0 / (1.0 + rope), 1.0 + rope,
                              usevar="unequal", transform=np.log)
            ps.append(float(res[0]))
            notes += w
        p = max(ps)
        ratio = float(np.median(by_batch[batches[-1]]) / np.median(ref))
        rows.append(_test_row(
            **base, variant="intersection-union over batch sizes against the smallest",
            n="+".join(str(by_batch[b].size) for b in batches), estimate=ratio, p=p,
            correction="holm",
            note="p: largest TOST p over batch sizes; estimate: median power at the largest "
                 "batch over the smallest" + ("; " + "; ".join(notes) if notes else "")))
    return rows


def geometric_mean_ratio(pairs, *, confidence: float = 0.95, n_boot: int = 2000,
                         seed: int = 0) -> Interval:
    """Geometric mean over cells of the PyTorch/TensorFlow ratio of medians, with an interval.

    ``pairs``: a sequence of (pytorch trial medians, tensorflow trial medians). The interval is a
    percentile bootstrap that resamples trials within each arm of each pair: it covers trial-to-
    trial noise for this fixed set of cells, not a population of cells. Usage::

        geometric_mean_ratio([(pt_a, tf_a), (pt_b, tf_b)]).estimate
    """
    pairs = [(np.asarray(a, float), np.asarray(b, float)) for a, b in pairs if len(a) and len(b)]
    if not pairs:
        return Interval(math.nan, math.nan, math.nan, math.nan, "no pairs")
    rng = np.random.default_rng(seed)
    logs = np.array([math.log(np.median(a) / np.median(b)) for a, b in pairs])
    reps = np.zeros(n_boot)
    for a, b in pairs:
        ra = np.median(a[rng.integers(a.size, size=(n_boot, a.size))], axis=1)
        rb = np.median(b[rng.integers(b.size, size=(n_boot, b.size))], axis=1)
        reps += np.log(ra / rb)
    reps /= len(pairs)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.exp(np.percentile(reps, [tail, 100 - tail]))
    return Interval(float(np.exp(logs.mean())), float(low), float(high), confidence,
                    "percentile bootstrap over trials within each arm")


def geometric_mean_tests(per_trial: pd.DataFrame, *, confidence: float = 0.95,
                         rope: float = 0.05, n_boot: int = 2000, seed: int = 0,
                         comparisons: pd.DataFrame | None = None) -> list[dict]:
    """One row per family (experiment×device×phase): geometric mean of the ratios of medians.

    Exploratory when any of its comparisons is (``comparisons``: compare_pairs' table), since
    a mean of hints is a hint."""
    by_family: dict = {}
    for _run, _pair_id, axes, pt, tf in _arm_arrays(per_trial, _VERDICT_COLUMNS):
        (pt, _), (tf, _) = _usable_trials(pt), _usable_trials(tf)  # as compare_pairs does
        by_family.setdefault(_family(axes), []).append(
            (pt["trial_median_ns"].astype(float), tf["trial_median_ns"].astype(float)))
    hints = (comparisons[comparisons["exploratory"].astype(bool)]
             if comparisons is not None and len(comparisons) else pd.DataFrame(columns=["family"]))
    rows = []
    for fam, pairs in sorted(by_family.items()):
        gm = geometric_mean_ratio(pairs, confidence=confidence, n_boot=n_boot, seed=seed)
        decision, note = verdict(gm.low, gm.high, rope=rope)
        n_hints = int((hints["family"] == fam).sum())
        if n_hints:
            note = (f"exploratory: {n_hints} of its {len(pairs)} comparisons are exploratory; "
                    + note)
        rows.append(_test_row(exploratory=bool(n_hints),
            family=f"geomean/{fam}", source="fwbench",
            hypothesis="across these cells, PyTorch and TensorFlow take the same time",
            test="geometric mean of ratios", variant=gm.method, scope=fam,
            phase=fam.split("/")[-1], metric="time", n=str(len(pairs)), estimate=gm.estimate,
            ci_low=gm.low, ci_high=gm.high, decision=decision,
            note=f"{note}; >1 means PyTorch slower; the interval covers trial noise for these "
                 f"{len(pairs)} cells, not other configurations"))
    return rows


def _finish_tests(rows: list[dict], alpha: float) -> pd.DataFrame:
    tests = pd.DataFrame(rows, columns=TEST_COLUMNS)
    if tests.empty:
        return tests
    tests["p"] = tests["p"].astype(float)
    tests["p_corrected"] = tests["p"]
    holm_rows = tests["correction"] == "holm"
    for _, idx in tests[holm_rows].groupby("family").groups.items():
        tests.loc[idx, "p_corrected"] = holm(tests.loc[idx, "p"])
    bonferroni_rows = tests["correction"] == "bonferroni"
    for _, idx in tests[bonferroni_rows].groupby("family").groups.items():
        tests.loc[idx, "p_corrected"] = np.minimum(1.0, tests.loc[idx, "p"] * len(idx))
    undecided = tests["decision"].isna() & tests["p_corrected"].notna()
    tests.loc[undecided, "decision"] = np.where(
        tests.loc[undecided, "p_corrected"] < alpha, "reject H0", "do not reject H0")
    power = undecided & tests["test"].str.startswith("TOST")
    tests.loc[power, "decision"] = np.where(
        tests.loc[power, "p_corrected"] < alpha, "equivalent", "not shown equivalent")
    tests["decision"] = tests["decision"].fillna("")
    tests["exploratory"] = tests["exploratory"].fillna(False).astype(bool)
    return tests


# --- entry point ---------------------------------------------------------------------------------

def with_default_axes(frame: pd.DataFrame) -> pd.DataFrame:
    """Tables written before an axis existed: give its rows the value of a cell without it, so
    grouping never drops a row on a missing key (such a trials table has ``optimizer`` from
    the trials' details, null outside the real-data experiments)."""
    return frame.assign(**{k: frame[k].fillna(v) if k in frame else v
                           for k, v in AXIS_DEFAULTS.items()})


def summarize(trials: pd.DataFrame, iterations: pd.DataFrame, *, confidence: float = 0.95,
              rope: float = 0.05, min_trials_for_verdict: int = 7, seed: int = 0,
              n_boot: int = 2000) -> dict[str, pd.DataFrame]:
    """cells.csv, comparisons.csv and tests.csv from the trials and iterations tables.

    ``confidence``: level of every interval (alpha = 1 - confidence for every test);
    ``rope``: half-width of the region of practical equivalence on the ratio (±5%: 1/1.05..1.05);
    ``min_trials_for_verdict``: fewer ok trials on either side marks a comparison exploratory;
    ``seed`` and ``n_boot``: the bootstrap and the random re-pairings. Usage::

        frames = summarize(tables["trials"], tables["iterations"], seed=0)
        frames["comparisons"].to_csv("results/default/stats/comparisons.csv", index=False)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    if rope <= 0:
        raise ValueError(f"rope must be positive (e.g. 0.05 for ±5%), got {rope!r}")
    trials = with_default_axes(trials)
    iterations = _iteration_groups(with_default_axes(iterations))  # index once, shared below
    per_trial = trial_statistics(trials, iterations)
    cells = cell_summaries(trials, per_trial, iterations, confidence=confidence,
                           min_trials_for_verdict=min_trials_for_verdict, n_boot=n_boot,
                           seed=seed)
    comparisons = compare_pairs(per_trial, confidence=confidence, rope=rope,
                                min_trials_for_verdict=min_trials_for_verdict)
    rows = (comparison_tests(comparisons, confidence)
            + florencio2019_tests(trials, per_trial, iterations, seed=seed)
            + patel2023_tests(per_trial, confidence=confidence, rope=rope,
                              min_trials_for_verdict=min_trials_for_verdict)
            + geometric_mean_tests(per_trial, confidence=confidence, rope=rope, n_boot=n_boot,
                                   seed=seed, comparisons=comparisons))
    return {"cells": cells, "comparisons": comparisons,
            "tests": _finish_tests(rows, 1.0 - confidence)}
