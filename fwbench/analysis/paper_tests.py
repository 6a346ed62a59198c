"""The source papers' tests replicated as published, and beside each the sound alternative.

florencio2019 compared the frameworks with a Kolmogorov-Smirnov normality test and a paired
Wilcoxon test over pooled iterations; the replication runs both as published, shows why their
p-values say little (estimated parameters, arbitrary pairing, the p floor the paper hit five
times) and adds Lilliefors, Shapiro-Wilk, random re-pairings and the unpaired tests over trials.
patel2023 read a trend of time per sample with batch size and "batch size does not affect
power": here a Jonckheere-Terpstra trend test, the plateau batch size, and an equivalence test.
Every row goes to tests.csv (``tests_table``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sps

from fwbench.analysis.estimators import (
    jonckheere_terpstra,
    mann_whitney_test,
    quietly,
    signed_rank_test,
    wilcoxon_floor_p,
)
from fwbench.analysis.tables import AXES, AXIS_DEFAULTS
from fwbench.analysis.tests_table import result_row
from fwbench.analysis.trial_quality import adjacency_recorded, adjacent
from fwbench.analysis.trial_stats import iteration_groups
from fwbench.plan.frameworks import COMPARED

__all__ = ["florencio2019_tests", "patel2023_tests", "FLORENCIO_PUBLISHED_FLOOR_P",
           "TELEMETRY_METRICS"]

# The scope of a paper's family of tests: experiment x device x phase.
SCOPE_AXES = ["experiment", "device", "phase"]
# florencio2019's experiment: its tests are replicated only where this experiment ran.
FLORENCIO_EXPERIMENT = "epoch"

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


def _mannwhitney(a: np.ndarray, b: np.ndarray) -> tuple[float, float, list[str]]:
    """scipy's Mann-Whitney test on the samples the paper paired, guarded for empty or constant
    input."""
    if a.size == 0 or b.size == 0:
        return math.nan, math.nan, []
    if np.ptp(np.concatenate([a, b])) == 0:
        return a.size * b.size / 2.0, 1.0, ["all values equal"]
    res, notes = quietly(sps.mannwhitneyu, a, b, alternative="two-sided", method="auto")
    return float(res.statistic), float(res.pvalue), notes


def _arms(per_trial: pd.DataFrame):
    """Yield (run, pair_id, pytorch rows, tensorflow rows) for pairs with ok trials on each side."""
    for (run, pair_id), group in per_trial.groupby(["run", "pair_id"], sort=True):
        pt, tf = (group[group["framework"] == f].sort_values("trial") for f in COMPARED)
        if len(pt) and len(tf):
            yield run, pair_id, pt, tf


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
            rows.append(result_row(**common, test="normality", variant=variant,
                                   decision="skipped", note=reason))
        return rows
    mu, sd = x.mean(), x.std(ddof=1)
    ks, notes = quietly(sps.kstest, x, "norm", args=(mu, sd))
    rows.append(result_row(
        **common, test="Kolmogorov-Smirnov",
        variant="KS, parameters from the same sample (as published)",
        statistic=float(ks.statistic), p=float(ks.pvalue),
        note="unsound: with mean and sd estimated from the same data the KS null distribution does "
             "not hold and the p-value is far too large (Lilliefors 1967)"
             + ("; " + "; ".join(notes) if notes else "")))
    raw, notes = quietly(sps.kstest, x, "norm")
    rows.append(result_row(
        **common, test="Kolmogorov-Smirnov",
        variant="KS against N(0, 1), raw values (a guess at the published computation)",
        statistic=float(raw.statistic), p=float(raw.pvalue),
        note="what scipy.stats.kstest(x, 'norm') computes when the data are not standardized: it "
             "rejects any sample not centred on 0 with sd 1, which would explain the published "
             "p < 1e-10 for every variable; it says nothing about the shape"
             + ("; " + "; ".join(notes) if notes else "")))
    from statsmodels.stats.diagnostic import lilliefors

    (stat, p), notes = quietly(lilliefors, x, dist="norm", pvalmethod="table")
    rows.append(result_row(**common, test="Lilliefors", variant="Lilliefors (KS with estimated "
                           "parameters, corrected null)", statistic=float(stat), p=float(p),
                           correction="holm",
                           note="; ".join(notes)))
    if n > 5000:
        rows.append(result_row(**common, test="Shapiro-Wilk", variant="Shapiro-Wilk",
                               decision="skipped", note="Shapiro-Wilk is defined for n <= 5000"))
    else:
        sw, notes = quietly(sps.shapiro, x)
        rows.append(result_row(**common, test="Shapiro-Wilk", variant="Shapiro-Wilk",
                               statistic=float(sw.statistic), p=float(sw.pvalue),
                               correction="holm",
                               note="; ".join(notes)))
    return rows


def _florencio_battery(a, b, *, base: dict, label: str, rng, trial_level: bool,
                       trial_medians=None, blocks=None) -> list[dict]:
    """The published tests on samples a (PyTorch) and b (TensorFlow), and the sound ones beside."""
    rows = []
    for fw, x in zip(COMPARED, (a, b)):
        rows += _normality_rows(x, base=dict(base, scope=f"{base['scope']} [{fw}]"),
                                label=f"{label}, {fw}")
    n = min(a.size, b.size)
    hyp = f"H0: PyTorch and TensorFlow do not differ in {label}"
    rows.append(_published_wilcoxon_row(a, b, base=dict(base, hypothesis=hyp)))
    if n >= 2 and np.any(a[:n] - b[:n] != 0):
        rows.append(_repairings_row(a[:n], b[:n], base=dict(base, hypothesis=hyp), rng=rng))
    return rows + _sound_rows(a, b, base=dict(base, hypothesis=hyp), trial_level=trial_level,
                              trial_medians=trial_medians, blocks=blocks)


def _published_wilcoxon_row(a, b, *, base: dict) -> dict:
    """The paired Wilcoxon test as published: the i-th value of one framework against the i-th
    of the other, normal approximation, no continuity correction; noted when it hits its floor."""
    n = min(a.size, b.size)
    d = a[:n] - b[:n]
    stat, p, notes = signed_rank_test(d, method="asymptotic", correction=False)
    floor = wilcoxon_floor_p(int(np.count_nonzero(d))) if n else math.nan
    note = ("as published: pairs the i-th value of one framework with the i-th of the other, "
            "normal approximation, no continuity correction")
    if a.size != b.size:
        note += f"; truncated to the common length {n}"
    if np.isfinite(p) and math.isclose(p, floor, rel_tol=1e-9):
        note += (f"; p equals the floor {floor:.4g} for n={int(np.count_nonzero(d))}: every "
                 "difference has the same sign, the test is saturated")
    return result_row(**base, test="Wilcoxon signed-rank", variant="paired (as published)",
                      n=str(n), statistic=stat, p=p, note="; ".join([note, *notes]))


def _repairings_row(a, b, *, base: dict, rng) -> dict:
    """The paired p over N_REPAIRINGS random pairings of the same values: the runs are
    independent, so the published pairing is one arbitrary choice among them."""
    n = a.size
    perm = np.argsort(rng.random((N_REPAIRINGS, n)), axis=1)
    dd = a[None, :] - b[perm]
    keep = np.any(dd != 0, axis=1)
    res, _ = quietly(sps.wilcoxon, dd[keep], axis=1, method="asymptotic", correction=False)
    ps = np.asarray(res.pvalue, dtype=float)
    lo, mid, hi = np.percentile(ps, [2.5, 50, 97.5]) if ps.size else (math.nan,) * 3
    return result_row(
        **base, test="Wilcoxon signed-rank",
        variant=f"paired, {N_REPAIRINGS} random re-pairings", n=str(n), estimate=mid,
        ci_low=lo, ci_high=hi, decision="p depends on the pairing",
        note="estimate: median p over random re-pairings of the same values; ci: its 2.5-97.5 "
             "percentiles. The runs of the two frameworks are independent, so any pairing is "
             "arbitrary and so is the paired p-value")


def _sound_rows(a, b, *, base: dict, trial_level: bool, trial_medians, blocks) -> list[dict]:
    """The tests the independent runs call for: unpaired on the same samples, unpaired on trial
    medians (the unit of replication), and paired only over interleaved blocks."""
    u, p_u, notes = _mannwhitney(a, b)
    rows = [result_row(
        **base, test="Mann-Whitney U, two-sided",
        variant="unpaired, same samples" if not trial_level else "unpaired, trials (sound)",
        n=f"{a.size}+{b.size}", statistic=u, p=p_u, correction="holm",
        note=("the unpaired test the independent runs call for" + (
            "; still treats iterations of one process as independent, which they are not"
            if not trial_level else "") + ("; " + "; ".join(notes) if notes else "")))]
    if trial_medians is not None:
        ta, tb = trial_medians
        u, p_t, method = mann_whitney_test(ta, tb)
        rows.append(result_row(
            **base, test="Mann-Whitney U, two-sided",
            variant="unpaired, trial medians (sound)", n=f"{ta.size}+{tb.size}", statistic=u,
            p=p_t, correction="holm",
            note=f"unit of replication: the trial (a fresh process); {method}"))
    if blocks is not None and len(blocks):
        stat, p_b, notes = signed_rank_test(blocks)
        rows.append(result_row(
            **base, test="Wilcoxon signed-rank",
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
    test, the test over trial medians and the test over interleaved blocks. Plus the p floor.
    Only where the paper's experiment (``epoch``) ran: elsewhere its tests answer a question
    nobody asked (a normality test of a throughput trial's steps)."""
    if "experiment" not in trials:
        return []
    per_trial = per_trial[per_trial["experiment"] == FLORENCIO_EXPERIMENT]
    trials = trials[trials["experiment"] == FLORENCIO_EXPERIMENT]
    if trials.empty:
        return []
    rng = np.random.default_rng(seed)
    groups = iteration_groups(iterations)
    rows = [result_row(
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
    scopes = trials[SCOPE_AXES].drop_duplicates().itertuples(index=False) if len(trials) else []
    scopes = list(scopes)
    for hyp, metric in FLORENCIO_HYPOTHESES[1:]:
        label, candidates = TELEMETRY_METRICS[metric]
        if _present(trials, candidates) is not None:
            continue
        for experiment, device, phase in scopes:
            rows.append(result_row(
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
            rows.append(result_row(**base, family=fam + "/trend", hypothesis="trend",
                                   test="Jonckheere-Terpstra", decision="skipped",
                                   note=f"only batch size {batches} has ok trials"))
            continue
        jt = jonckheere_terpstra([by_batch[b] for b in batches], alternative="decreasing")
        rows.append(result_row(
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
        rows.append(result_row(
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
        scopes = per_trial[SCOPE_AXES].drop_duplicates() if len(per_trial) else pd.DataFrame()
        return [result_row(family=f"patel2023/{s.experiment}/{s.device}/power", source="patel2023",
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
            rows.append(result_row(**base, decision="skipped",
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
            res, w = quietly(ttost_ind, x, ref, 1.0 / (1.0 + rope), 1.0 + rope,
                             usevar="unequal", transform=np.log)
            ps.append(float(res[0]))
            notes += w
        p = max(ps)
        ratio = float(np.median(by_batch[batches[-1]]) / np.median(ref))
        rows.append(result_row(
            **base, variant="intersection-union over batch sizes against the smallest",
            n="+".join(str(by_batch[b].size) for b in batches), estimate=ratio, p=p,
            correction="holm",
            note="p: largest TOST p over batch sizes; estimate: median power at the largest "
                 "batch over the smallest" + ("; " + "; ".join(notes) if notes else "")))
    return rows

