"""The estimators and tests the statistics are built from, and the one verdict rule.

Written here because neither scipy nor statsmodels has them: Cliff's delta, the Hodges-Lehmann
shift with its distribution-free interval, the exact Mann-Whitney law and the test that interval
inverts, the exact sign-flip test of paired differences, the Jonckheere-Terpstra test, the
interpolated order-statistic interval of a median, and the bootstraps (trials, then iterations;
the geometric mean of ratios). Beside them, thin guards around scipy and statsmodels (the t
interval of a mean, Wilcoxon signed-rank, Brunner-Munzel, Fisher's exact test, Holm,
Benjamini-Hochberg) and ``verdict``,
which every PyTorch-against-TensorFlow ratio in the statistics is decided by. They take arrays and
return numbers, no tables: the table builders (trial_stats, comparisons, tests_table,
paper_tests) and the report share them. docs/statistics.md describes every method.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as sps
from scipy.special import ndtr, ndtri, stdtr, stdtrit

from fwbench.plan.frameworks import FASTER

__all__ = [
    "cliffs_delta", "cliffs_magnitude", "hodges_lehmann", "jonckheere_terpstra", "median_ci",
    "hierarchical_bootstrap_mean_ci", "geometric_mean_ratio", "mann_whitney_pmf",
    "mann_whitney_test", "signed_rank_test", "wilcoxon_floor_p", "tukey_outliers", "holm",
    "benjamini_hochberg", "verdict", "quietly", "Interval", "ShiftEstimate", "TrendResult",
    "t_interval", "t_test", "sign_flip_test", "brunner_munzel", "fisher_exact",
]

# Romano, Kromrey, Coraggio & Skowronek (2006): |delta| < .147 negligible, .33 small, .474 medium.
CLIFF_THRESHOLDS = ((0.147, "negligible"), (0.33, "small"), (0.474, "medium"), (math.inf, "large"))
# The exact Mann-Whitney null distribution is used for the Hodges-Lehmann interval up to this m*n.
EXACT_MW_LIMIT = 2500
# Up to this many pairs the sign-flip test enumerates all 2^n sign vectors; beyond, it draws
# SIGN_FLIP_DRAWS of them (seeded).
SIGN_FLIP_EXACT_MAX = 16
SIGN_FLIP_DRAWS = 20_000
# Trials with more iterations than this resample their mean from a normal law (the CLT is exact
# enough there) instead of drawing every iteration, to bound memory.
BOOTSTRAP_INNER_NORMAL_ABOVE = 1000


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


def quietly(fn, *args, **kwargs):
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

    scipy's ``mannwhitneyu``: U counts pairs with x > y, ties as one half. The p-value comes
    from the null law the interval reads (``mann_whitney_pmf``): exact up to m*n = 2500,
    whatever the sample sizes (scipy's "auto" turns to the normal law above 8 per side), else
    the normal law with a continuity correction. So, without ties, the 1 - a interval excludes
    a zero shift exactly when p <= a; with ties scipy's p is the larger (its exact law counts a
    half-integer U as the next whole one, its normal law corrects the variance for ties).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    m, n = x.size, y.size
    if m == 0 or n == 0:
        return math.nan, math.nan, "no data"
    exact = m * n <= EXACT_MW_LIMIT
    res = sps.mannwhitneyu(x, y, alternative="two-sided",
                           method="exact" if exact else "asymptotic")
    method = ("exact Mann-Whitney null distribution" if exact
              else "normal approximation to the Mann-Whitney null distribution")
    return float(res.statistic), min(1.0, float(res.pvalue)), method


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


def t_interval(x, confidence: float = 0.95) -> Interval:
    """Student's t interval of the mean of ``x`` (n - 1 degrees of freedom). Fewer than two
    values: no interval (NaN). Usage, a ratio from paired log ratios::

        ci = t_interval(np.log(pytorch) - np.log(tensorflow), 1 - 0.05 / 8)
        ratio, low, high = np.exp([ci.estimate, ci.low, ci.high])
    """
    x = np.asarray(x, dtype=float)
    n = x.size
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, math.nan, "no data")
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, math.nan, "one value: no interval")
    half = float(stdtrit(n - 1, 0.5 + confidence / 2)) * float(x.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, confidence, f"t interval, {n - 1} df")


def t_test(x, null: float = 0.0, alternative: str = "two-sided") -> tuple[float, float]:
    """(t, p) of the one-sample t test of mean ``null`` ("two-sided", "less" or "greater");
    NaN with fewer than two values or no spread."""
    x = np.asarray(x, dtype=float)
    if x.size < 2 or not np.ptp(x) > 0:
        return math.nan, math.nan
    t = (float(x.mean()) - null) / (float(x.std(ddof=1)) / math.sqrt(x.size))
    df = x.size - 1
    p = {"two-sided": 2.0 * float(stdtr(df, -abs(t))), "less": float(stdtr(df, t)),
         "greater": float(stdtr(df, -t))}[alternative]
    return t, min(1.0, p)


def sign_flip_test(d, *, seed: int = 0) -> tuple[float, str]:
    """(two-sided p, method) of the sign-flip permutation test that paired differences ``d``
    are centred on 0: under that null each difference is as likely negative as positive, so
    the mean is compared with its value under every one of the 2^n sign vectors (scipy's
    ``permutation_test`` of one sample; exact up to SIGN_FLIP_EXACT_MAX pairs, else
    SIGN_FLIP_DRAWS draws from ``seed``, p = (1 + hits) / (1 + draws)). Its smallest p is
    2 / 2^n: 8 pairs cannot go below 0.0078."""
    d = np.asarray(d, dtype=float)
    n = d.size
    if n == 0:
        return math.nan, "no pairs"
    if n == 1:  # its two sign vectors have the same |mean| (scipy asks for two values)
        return 1.0, "exact, all 2 sign vectors"
    exact = n <= SIGN_FLIP_EXACT_MAX
    res = sps.permutation_test((d,), np.mean, permutation_type="samples", vectorized=True,
                               n_resamples=np.inf if exact else SIGN_FLIP_DRAWS,
                               alternative="two-sided", rng=seed)
    return float(res.pvalue), (f"exact, all {2 ** n} sign vectors" if exact
                               else f"{SIGN_FLIP_DRAWS} random sign vectors")


def brunner_munzel(x, y) -> tuple[float, float, str]:
    """(statistic, two-sided p, note) of the Brunner-Munzel test of P(X > Y) + P(X = Y)/2 = 1/2
    (scipy, t distribution): unlike Mann-Whitney it allows the two spreads to differ. When every
    x lies on one side of every y the variance estimate is 0 and scipy's p is undefined; the p
    is then that of the exact permutation bound 2/C(m+n, m), and the note says so."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.size < 2 or y.size < 2:
        return math.nan, math.nan, "fewer than two values on a side"
    if x.min() > y.max() or x.max() < y.min():
        p = 2.0 / math.comb(x.size + y.size, x.size)
        return (math.inf if x.min() > y.max() else -math.inf), p, (
            "complete separation: p is the exact permutation bound 2/C(m+n, m)")
    res, notes = quietly(sps.brunnermunzel, x, y)
    return float(res.statistic), float(res.pvalue), "; ".join(notes)


def fisher_exact(table) -> float:
    """Fisher's exact p that the rows and columns of a contingency table of counts are
    independent (scipy: 2x2 two-sided and exact; a larger table by Monte Carlo over 9,999
    tables with its margins, drawn from a fixed seed: scipy's default draws from a fresh one,
    so each rebuild gave another p); 1 when a row or column is empty, as nothing can differ."""
    table = np.asarray(table, dtype=int)
    table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    if table.shape[0] < 2 or table.shape[1] < 2:
        return 1.0
    if table.shape == (2, 2):
        return float(sps.fisher_exact(table).pvalue)
    return float(sps.fisher_exact(table, method=sps.MonteCarloMethod(rng=0)).pvalue)


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


def signed_rank_test(d: np.ndarray, **kwargs) -> tuple[float, float, list[str]]:
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
    res, notes = quietly(sps.wilcoxon, d, **kwargs)
    return float(res.statistic), float(res.pvalue), notes


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
            names=FASTER,
            equivalence: tuple[float, float] | None = None) -> tuple[str, str]:
    """Verdict on a PyTorch/TensorFlow ratio from its interval (already at the level that
    controls the family's error: ``compare_samples``, ``comparisons.compare_paired``).

    The region of practical equivalence is [1/(1+rope), 1+rope], symmetric on the log scale so
    that swapping the frameworks gives the same verdict. ``equivalence``: the interval the
    equivalence is read from when it is not (low, high) (TOST: the 1 - 2 alpha interval).
    Returns (verdict, note):
    - "equivalent": the equivalence interval lies inside the region (even if it excludes 1);
    - ``names[0]`` / ``names[1]`` ("pytorch_faster" / "tensorflow_faster" for times): the
      interval lies below / above 1;
    - "inconclusive": anything else, including an interval whose level is not attainable.
    """
    lo_b, hi_b = 1.0 / (1.0 + rope), 1.0 + rope
    if not (np.isfinite(low) and np.isfinite(high)):
        return "inconclusive", "no interval"
    if not attained:
        return "inconclusive", "too few trials for an interval at the family's level"
    eq_low, eq_high = equivalence if equivalence is not None else (low, high)
    if lo_b <= eq_low and eq_high <= hi_b:
        note = "inside the equivalence region"
        if high < 1 or low > 1:
            note += " although the interval excludes 1 (a difference too small to matter)"
        return "equivalent", note
    if high < 1 or low > 1:
        return (names[0] if high < 1 else names[1]), "interval excludes 1"
    return "inconclusive", "interval contains 1 and reaches outside the equivalence region"


def geometric_mean_ratio(pairs, *, confidence: float = 0.95, n_boot: int = 2000,
                         seed: int = 0) -> Interval:
    """Geometric mean over cells of the PyTorch/TensorFlow ratio, with an interval.

    ``pairs``: a sequence of (pytorch trial values, tensorflow trial values); each cell's ratio
    is that of the geometric means of its trials (the comparisons' quantity). The interval is a
    percentile bootstrap that resamples trials within each arm of each pair: it covers trial-to-
    trial noise for this fixed set of cells, not a population of cells. Usage::

        geometric_mean_ratio([(pt_a, tf_a), (pt_b, tf_b)]).estimate
    """
    pairs = [(np.log(np.asarray(a, float)), np.log(np.asarray(b, float)))
             for a, b in pairs if len(a) and len(b)]
    if not pairs:
        return Interval(math.nan, math.nan, math.nan, math.nan, "no pairs")
    rng = np.random.default_rng(seed)
    logs = np.array([a.mean() - b.mean() for a, b in pairs])
    reps = np.zeros(n_boot)
    for a, b in pairs:
        reps += (a[rng.integers(a.size, size=(n_boot, a.size))].mean(axis=1)
                 - b[rng.integers(b.size, size=(n_boot, b.size))].mean(axis=1))
    reps /= len(pairs)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.exp(np.percentile(reps, [tail, 100 - tail]))
    return Interval(float(np.exp(logs.mean())), float(low), float(high), confidence,
                    "percentile bootstrap over trials within each arm")
