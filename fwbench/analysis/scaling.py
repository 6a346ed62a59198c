"""Scaling efficiency of data-parallel training, and the two strategies of a framework against
each other, over the trials table: stats/scaling.csv and stats/strategies.csv."""

from __future__ import annotations

import math

from fwbench.analysis.columns import CELL_AXES
from fwbench.plan.strategies import STRATEGY_PAIRS, strategy_pair

# patel2023 calls DDP's speed-up "near-linear" without a number. We read it as a scaling efficiency
# of at least 0.9: linear would be 1.0, and 0.9 is the usual bar for "near" in scaling studies.
NEAR_LINEAR = 0.9

GROUP_AXES = ["run", *CELL_AXES]

EFFICIENCY_COLUMNS = [
    *GROUP_AXES, "strategy", "world_size", "n_baseline", "n_trials",
    "throughput_baseline_sps", "throughput_sps", "speedup", "efficiency", "efficiency_hl",
    "efficiency_ci_low", "efficiency_ci_high", "ci_level", "ci_attained", "ci_method",
    "near_linear_threshold", "verdict", "note",
]
COMPARISON_COLUMNS = [
    *GROUP_AXES, "world_size", "single_process", "multi_process", "n_single", "n_multi",
    "throughput_single_sps", "throughput_multi_sps", "ratio", "ratio_hl", "ratio_ci_low",
    "ratio_ci_high", "ci_level", "ci_attained", "ci_method", "faster", "note",
]


def _ok_throughputs(rows, world_size: int):
    """Per ok trial: global samples per second from its median iteration time."""
    import numpy as np

    ok = rows[(rows["world_size"] == world_size) & (rows["status"] == "ok")
              & rows["median_ns"].notna()]
    return np.asarray(ok["batch_size"] * world_size / (ok["median_ns"] * 1e-9), dtype=float)


def _failure_note(rows, world_size: int) -> str:
    bad = rows[(rows["world_size"] == world_size) & (rows["status"] != "ok")]
    if bad.empty:
        return ""
    first = bad.iloc[0]
    return f"world size {world_size}: {len(bad)} trial(s) {first['status']}: {first['message']}"


def _table(trials):
    import pandas as pd

    frame = pd.DataFrame(trials).copy()
    for column in GROUP_AXES:
        if column not in frame:
            frame[column] = ""
    if "message" not in frame:
        frame["message"] = ""
    frame["world_size"] = frame["world_size"].astype(int)
    frame["pair"] = frame["strategy"].map(strategy_pair)
    return frame


def scaling_efficiency(trials, *, confidence: float = 0.95,
                       near_linear: float = NEAR_LINEAR):
    """Scaling efficiency of every strategy at every world size N > 1 against N = 1.

    ``trials`` is the trials table (a DataFrame or its rows as dicts) of distributed cells: the
    cell axes plus ``strategy``, ``world_size``, ``status``, ``message`` and ``median_ns`` (one ok
    trial's median iteration time). A trial's throughput is its global batch
    (batch_size × world_size) over its median step time; efficiency(N) = throughput(N) /
    (N × throughput(1)), where the world-size-1 cells of the same strategy are the baseline.

    ``efficiency`` is that ratio on the medians of the trials' throughputs; its interval is the
    Hodges-Lehmann shift of log(throughput(N) / N) against log(throughput(1)) with the
    distribution-free interval of fwbench.analysis.estimators.hodges_lehmann, exponentiated
    (``efficiency_hl`` is its point estimate). ``verdict`` judges patel2023's claim of near-linear
    scaling at ``near_linear``: ``near-linear`` when the whole interval is at or above it,
    ``sub-linear`` when the whole interval is below it, else ``inconclusive``; ``not measured``
    without ok trials.

    Usage::

        rows = scaling_efficiency(tables["trials"].query("experiment == 'distributed'"))
    """
    import numpy as np
    import pandas as pd

    from fwbench.analysis.estimators import hodges_lehmann

    frame = _table(trials)
    rows = []
    for key, group in frame.groupby([*GROUP_AXES, "strategy"], sort=True, dropna=False):
        base = _ok_throughputs(group, 1)
        for n in sorted(w for w in group["world_size"].unique() if w > 1):
            at_n = _ok_throughputs(group, n)
            row = {**dict(zip([*GROUP_AXES, "strategy"], key)), "world_size": int(n),
                   "n_baseline": base.size, "n_trials": at_n.size,
                   "near_linear_threshold": near_linear}
            notes = [x for x in (_failure_note(group, 1), _failure_note(group, n)) if x]
            if base.size == 0 or at_n.size == 0:
                missing = "world size 1" if base.size == 0 else f"world size {n}"
                rows.append({**row, "verdict": "not measured",
                             "note": "; ".join([f"no ok trial at {missing}", *notes])})
                continue
            hl = hodges_lehmann(np.log(at_n / n), np.log(base), confidence)
            low, high = math.exp(hl.low), math.exp(hl.high)
            if not hl.attained:
                verdict = "inconclusive"
                notes.append(f"too few trials for a {confidence:.0%} interval; "
                             f"the range shown covers {hl.level:.0%}")
            elif low >= near_linear:
                verdict = "near-linear"
            elif high < near_linear:
                verdict = "sub-linear"
            else:
                verdict = "inconclusive"
            thr1, thr_n = float(np.median(base)), float(np.median(at_n))
            rows.append({**row, "throughput_baseline_sps": thr1, "throughput_sps": thr_n,
                         "speedup": thr_n / thr1, "efficiency": thr_n / (n * thr1),
                         "efficiency_hl": math.exp(hl.estimate), "efficiency_ci_low": low,
                         "efficiency_ci_high": high, "ci_level": hl.level,
                         "ci_attained": hl.attained, "ci_method": f"Hodges-Lehmann, {hl.method}",
                         "verdict": verdict, "note": "; ".join(notes)})
    return pd.DataFrame(rows, columns=EFFICIENCY_COLUMNS)


def strategy_comparisons(trials, *, confidence: float = 0.95):
    """Within each framework: the multi-process strategy's throughput over the single-process
    one's at the same world size and cell (DistributedDataParallel / DataParallel,
    MultiWorkerMirroredStrategy / MirroredStrategy).

    ``ratio`` is the ratio of the medians of the trials' throughputs; its interval is the
    Hodges-Lehmann shift of the log throughputs, exponentiated. ``faster`` names the strategy whose
    throughput is higher when the interval excludes 1, else ``neither``.
    """
    import numpy as np
    import pandas as pd

    from fwbench.analysis.estimators import hodges_lehmann

    frame = _table(trials)
    rows = []
    for key, group in frame.groupby([*GROUP_AXES, "world_size"], sort=True, dropna=False):
        n = int(key[-1])
        arms = {pair: group[group["pair"] == pair] for pair in STRATEGY_PAIRS}
        if any(arm.empty for arm in arms.values()):
            continue
        framework = key[GROUP_AXES.index("framework")]
        single, multi = (STRATEGY_PAIRS[p].get(framework, p) for p in STRATEGY_PAIRS)
        a = _ok_throughputs(arms["single_process"], n)
        b = _ok_throughputs(arms["multi_process"], n)
        row = {**dict(zip([*GROUP_AXES, "world_size"], key)), "single_process": single,
               "multi_process": multi, "n_single": a.size, "n_multi": b.size}
        notes = [x for x in (_failure_note(arms["single_process"], n),
                             _failure_note(arms["multi_process"], n)) if x]
        if a.size == 0 or b.size == 0:
            rows.append({**row, "faster": "not measured", "note": "; ".join(notes)})
            continue
        hl = hodges_lehmann(np.log(b), np.log(a), confidence)
        low, high = math.exp(hl.low), math.exp(hl.high)
        faster = "neither"
        if hl.attained and low > 1:
            faster = multi
        elif hl.attained and high < 1:
            faster = single
        rows.append({**row, "throughput_single_sps": float(np.median(a)),
                     "throughput_multi_sps": float(np.median(b)),
                     "ratio": float(np.median(b) / np.median(a)), "ratio_hl": math.exp(hl.estimate),
                     "ratio_ci_low": low, "ratio_ci_high": high, "ci_level": hl.level,
                     "ci_attained": hl.attained, "ci_method": f"Hodges-Lehmann, {hl.method}",
                     "faster": faster, "note": "; ".join(notes)})
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def summarize_distributed(trials, *, confidence: float = 0.95) -> dict:
    """stats/scaling.csv and stats/strategies.csv from the trials table: scaling_efficiency and
    strategy_comparisons over its distributed trials (rules/statistics.smk, summarise_distributed).

    A run without distributed trials gets both tables empty, with their columns, so the report
    can say the experiment did not run.
    """
    import pandas as pd

    rows = trials[trials["experiment"] == "distributed"] if "experiment" in trials else trials[:0]
    if rows.empty:
        return {"scaling": pd.DataFrame(columns=EFFICIENCY_COLUMNS),
                "strategies": pd.DataFrame(columns=COMPARISON_COLUMNS)}
    return {"scaling": scaling_efficiency(rows, confidence=confidence),
            "strategies": strategy_comparisons(rows, confidence=confidence)}

