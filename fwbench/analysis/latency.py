"""Latency the way inference users read it: p50, p90 and p99 of a cell's kept iterations, each
with an interval that resamples trials. Framework-free; reads the trials and iterations tables.

A percentile describes the distribution of single iterations a user of the cell would see, so
the ok trials' kept iterations are pooled for it (each iteration is one batch, timed alone).
Its interval respects the unit of replication: a percentile bootstrap that draws whole trials
with replacement, keeping each trial's iterations together, so a trial that ran slow widens it
as it should. p99 needs about 100 iterations to be more than the largest one; fewer say so.

latency_summaries(trials, iterations) -> stats/latency.csv: one row per cell with ok trials
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fwbench.analysis.tables import AXES, AXIS_DEFAULTS

PERCENTILES = (50, 90, 99)
# Replicates are drawn in chunks so memory stays bounded for trials of many iterations.
CHUNK = 64
LATENCY_COLUMNS = [
    "run", "cell_id", "pair_id", *AXES, "n_trials", "n_iterations",
    *[f"p{q}_{part}" for q in PERCENTILES for part in ("ns", "ci_low_ns", "ci_high_ns")],
    "ci_level", "ci_method", "note",
]
CI_METHOD = ("percentile bootstrap over trials (each trial's iterations kept together); "
             "percentiles as the inverted empirical distribution")


def _weighted_percentiles(values: np.ndarray, labels: np.ndarray, counts: np.ndarray,
                          qs) -> np.ndarray:
    """For each row of ``counts`` (how often each trial was drawn), the smallest pooled value
    whose weighted cumulative share reaches q/100; ``values`` sorted, ``labels`` their trial."""
    out = np.empty((counts.shape[0], len(qs)))
    for start in range(0, counts.shape[0], CHUNK):
        weights = counts[start:start + CHUNK][:, labels]
        cumulative = np.cumsum(weights, axis=1)
        total = cumulative[:, -1:]
        for k, q in enumerate(qs):
            first = (cumulative < q / 100.0 * total - 1e-9).sum(axis=1)
            out[start:start + CHUNK, k] = values[np.minimum(first, values.size - 1)]
    return out


def percentiles_with_intervals(samples, *, qs=PERCENTILES, confidence: float = 0.95,
                               n_boot: int = 1000, rng: np.random.Generator | None = None):
    """(estimates, lows, highs) of the ``qs`` percentiles of the pooled ``samples`` (one array of
    iteration times per trial), with percentile-bootstrap intervals over trials. Usage::

        est, low, high = percentiles_with_intervals([trial_1_times, trial_2_times])
    """
    rng = np.random.default_rng(0) if rng is None else rng
    samples = [np.asarray(s, dtype=float) for s in samples if len(s)]
    values = np.concatenate(samples)
    labels = np.repeat(np.arange(len(samples)), [s.size for s in samples])
    order = np.argsort(values, kind="stable")
    values, labels = values[order], labels[order]
    estimates = _weighted_percentiles(values, labels, np.ones((1, len(samples))), qs)[0]
    if len(samples) < 2:
        return estimates, np.full(len(qs), np.nan), np.full(len(qs), np.nan)
    draws = rng.integers(len(samples), size=(n_boot, len(samples)))
    counts = np.zeros((n_boot, len(samples)))
    np.add.at(counts, (np.arange(n_boot)[:, None], draws), 1)
    reps = _weighted_percentiles(values, labels, counts, qs)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(reps, [tail, 100 - tail], axis=0)
    return estimates, low, high


def _note(n_trials: int, n_iterations: int) -> str:
    notes = []
    if n_iterations < 100:
        notes.append(f"p99 of {n_iterations} iterations is their largest or next to it")
    if n_trials < 2:
        notes.append("one trial: no interval")
    elif n_trials < 6:
        notes.append(f"{n_trials} trials: the interval is rough")
    return "; ".join(notes)


def latency_summaries(trials: pd.DataFrame, iterations: pd.DataFrame, *,
                      confidence: float = 0.95, n_boot: int = 1000,
                      seed: int = 0) -> pd.DataFrame:
    """stats/latency.csv: per cell with ok trials, p50, p90 and p99 of its kept iterations
    (ns per iteration, one batch) with bootstrap intervals over trials. Usage::

        latency_summaries(tables["trials"], tables["iterations"]).set_index("cell_id")["p99_ns"]
    """
    if trials.empty or iterations is None or iterations.empty:
        return pd.DataFrame(columns=LATENCY_COLUMNS)
    ok = trials[trials["status"] == "ok"][["run", "cell_id", "trial"]]
    kept = iterations.merge(ok, on=["run", "cell_id", "trial"])
    info = trials.assign(**{k: trials[k].fillna(v) if k in trials else v
                            for k, v in AXIS_DEFAULTS.items()}).drop_duplicates(["run",
                                                                                 "cell_id"])
    info = info.set_index(["run", "cell_id"])
    rng = np.random.default_rng(seed)
    rows = []
    for (run, cell_id), group in kept.groupby(["run", "cell_id"], sort=True):
        samples = [g["time_ns"].to_numpy(dtype=float)
                   for _, g in group.sort_values("iteration").groupby("trial", sort=True)]
        estimates, lows, highs = percentiles_with_intervals(
            samples, confidence=confidence, n_boot=n_boot, rng=rng)
        first = info.loc[(run, cell_id)]
        row = {"run": run, "cell_id": cell_id, "pair_id": first["pair_id"],
               **{a: first[a] for a in AXES}, "n_trials": len(samples),
               "n_iterations": int(sum(s.size for s in samples)), "ci_level": confidence,
               "ci_method": CI_METHOD}
        for q, est, low, high in zip(PERCENTILES, estimates, lows, highs):
            row.update({f"p{q}_ns": est, f"p{q}_ci_low_ns": low, f"p{q}_ci_high_ns": high})
        row["note"] = _note(row["n_trials"], row["n_iterations"])
        rows.append(row)
    return pd.DataFrame(rows, columns=LATENCY_COLUMNS)
