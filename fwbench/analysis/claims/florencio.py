"""florencio2019's claims, judged on the statistics' replications of its tests: the time samples
are not normal (``normality``), and a telemetry value differs between the frameworks
(``telemetry``)."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims.kinds import register
from fwbench.analysis.claims.rows import comparisons_hint, on_selected
from fwbench.analysis.claims.wording import join, sig, unique
from fwbench.plan.frameworks import COMPARED, opposite, per_side

NORMALITY_TESTS = (("Kolmogorov-Smirnov", "as published"), ("Lilliefors", ""),
                   ("Shapiro-Wilk", ""))

# Per-trial telemetry columns of the trials table (fwbench.analysis.tables.TELEMETRY_COLUMNS).
TELEMETRY_LABELS = {
    "power_w_mean": "mean GPU power (W)",
    "energy_per_sample_j": "energy per sample (J)",
    "gpu_temp_c_max": "highest GPU temperature (°C)",
    "cpu_temp_c_max": "highest CPU temperature (°C)",
    "gpu_util_mean": "mean GPU utilization (%)",
    "cpu_util_mean": "mean CPU utilization (%)",
}
TELEMETRY_SOURCES = {"power_w_mean": "NVML on an NVIDIA GPU",
                     "energy_per_sample_j": "NVML on an NVIDIA GPU",
                     "gpu_temp_c_max": "NVML on an NVIDIA GPU",
                     "gpu_util_mean": "NVML on an NVIDIA GPU",
                     "cpu_temp_c_max": "psutil, where the machine exposes a sensor",
                     "cpu_util_mean": "psutil"}


def telemetry_absent(trials: pd.DataFrame, column: str) -> str:
    """Why a telemetry figure or claim has no data: no column, or no trial with a value."""
    label, source = TELEMETRY_LABELS[column], TELEMETRY_SOURCES[column]
    if column not in trials:
        return (f"the trials table has no `{column}` column: this run recorded no telemetry "
                f"({label} comes from {source})")
    devices = join(unique(trials, "device")) or "no device"
    return (f"no trial recorded its {label} ({source}; this run measured on {devices})")


def judge_normality(pairs: pd.DataFrame, tests: pd.DataFrame | None) -> tuple[str, str]:
    """florencio2019's "not normal": the statistics' normality tests of the selected pairs.

    The verdict follows Shapiro-Wilk (a sound test); the KS test as published (parameters
    estimated from the same sample) and Lilliefors are reported beside it.
    """
    needed = {"source", "test", "variant", "scope", "decision"}
    if tests is None or not needed <= set(tests.columns):
        return "not measured", "not measured in this run: the statistics ran no normality test"
    scopes = tests["scope"].astype(str).str.split(" ").str[0]
    rows = tests[(tests["source"] == "florencio2019") & scopes.isin(set(pairs["pair_id"]))]
    counts, verdict = [], "not measured"
    for name, variant in NORMALITY_TESTS:
        part = rows[(rows["test"] == name)
                    & rows["variant"].astype(str).str.contains(variant, regex=False)
                    & (rows["decision"] != "skipped")]
        if part.empty:
            continue
        rejected = int((part["decision"] == "reject H0").sum())
        counts.append(f"{name}{' as published' if variant else ''} rejects normality in "
                      f"{rejected} of {len(part)}")
        if name == "Shapiro-Wilk":
            verdict = ("confirmed" if rejected == len(part) else
                       "contradicted" if rejected == 0 else "inconclusive")
    if not counts:
        return "not measured", "not measured in this run: no normality test of these cells"
    return verdict, "; ".join(counts) + " samples"


def judge_telemetry(pairs: pd.DataFrame, claim: dict, trials: pd.DataFrame | None,
                    tests: pd.DataFrame | None) -> tuple[str, str]:
    """A florencio2019 telemetry claim: per pair, the frameworks' medians of one per-trial value
    and the statistics' Mann-Whitney test over trials (florencio2019 rows, unpaired, sound)."""
    test = claim["test"]
    column, expect = test["metric"], test["expect"]
    trials = trials if trials is not None else pd.DataFrame()
    values = trials[trials["pair_id"].astype(str).isin(set(pairs["pair_id"]))] \
        if "pair_id" in trials else trials
    if column not in values or values[column].notna().sum() == 0:
        return "not measured", f"not measured in this run: {telemetry_absent(values, column)}"
    decided = {}
    if tests is not None and {"scope", "metric", "variant", "decision"} <= set(tests.columns):
        sound = tests[(tests["metric"] == column)
                      & (tests["variant"] == "unpaired, trials (sound)")]
        decided = dict(zip(sound["scope"].astype(str), sound["decision"]))
    outcomes, texts = _telemetry_outcomes(values, column, decided)
    if not outcomes:
        return "not measured", ("not measured in this run: no pair has the value for both "
                                "frameworks")
    n, agree = len(outcomes), outcomes.count(expect)
    if expect == "no_difference":
        verdict = "contradicted" if agree < n else "inconclusive"
    else:
        verdict = ("confirmed" if agree == n else "contradicted"
                   if outcomes.count(opposite(expect)) and not agree else "inconclusive")
    label = TELEMETRY_LABELS.get(column, column)
    return verdict, f"{label}, medians over trials: " + "; ".join(texts)


def _telemetry_outcomes(values: pd.DataFrame, column: str,
                        decided: dict) -> tuple[list[str], list[str]]:
    """Per pair with the value on both sides: which framework is higher where the test rejected
    (else no_difference), and the medians as text."""
    outcomes, texts = [], []
    for pair_id, group in values[values[column].notna()].groupby("pair_id", sort=True):
        medians = group.groupby("framework")[column].median()
        if not set(COMPARED) <= set(medians.index):
            continue
        pt, tf = (float(medians[f]) for f in COMPARED)
        significant = decided.get(str(pair_id)) == "reject H0"
        higher = per_side("{}_higher")[0 if pt > tf else 1]
        outcomes.append(higher if significant else "no_difference")
        texts.append(f"PyTorch {sig(pt)} against TensorFlow {sig(tf)} "
                     f"({'different' if significant else 'no significant difference'})")
    return outcomes, texts


# florencio2019's paired Wilcoxon test as fwbench.analysis.paper_tests replicates it: at the
# paper's unit (its 100 samples: pooled iterations for a time, one value per trial for
# telemetry), and per trial beside it (trial k of both frameworks, run next to each other).
PAIRED_AT = (("paired (as published)", "as published"),
             ("paired over interleaved blocks (sound)", "per trial"))
UNITS = {"pooled iterations": "pooled iteration", "pairs of trials": "pair of trials",
         "trials": "trial"}


def paired_tests(tests: pd.DataFrame, phase: str, metric: str) -> list[dict]:
    """The paired Wilcoxon tests of ``phase`` and ``metric`` ("time" for a time) on this run,
    as published and per trial, each {"at", "unit", "units", "n", "p"}: a published p reads
    only against a test at its own unit, and the trial is the unit of replication."""
    needed = {"source", "variant", "phase", "metric", "n", "p"}
    if tests is None or tests.empty or not needed <= set(tests.columns):
        return []
    rows = tests[(tests["source"] == "florencio2019") & (tests["phase"].astype(str) == phase)
                 & (tests["metric"].astype(str) == metric) & tests["p"].notna()]
    out = []
    for variant, at in PAIRED_AT:
        for _, row in rows[rows["variant"] == variant].iterrows():
            units = ("pooled iterations" if at == "as published" and metric == "time"
                     else "pairs of trials" if at == "per trial" else "trials")
            out.append({"at": at, "unit": UNITS[units], "units": units,
                        "n": int(float(row["n"])), "p": float(row["p"])})
    return out


register("normality", on_selected(
    "comparisons", lambda rows, _, tables, __: judge_normality(rows, tables.tests)),
    comparisons_hint)
register("telemetry", on_selected(
    "comparisons",
    lambda rows, claim, tables, _: judge_telemetry(rows, claim, tables.trials, tables.tests)),
    comparisons_hint)
