"""patel2023's batch-size claims: time per sample falls as the batch grows (``batch_trend``),
and power does not change with it (``power_batch``)."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims.wording import fmt_duration, fmt_p, join, label, missing


def patel_tests(tests: pd.DataFrame, prefix: str) -> pd.DataFrame:
    """The statistics' patel2023 tests whose name starts with ``prefix`` that were not skipped."""
    return tests[(tests["source"] == "patel2023")
                 & tests["test"].astype(str).str.startswith(prefix)
                 & (tests["decision"] != "skipped")]


def judge_power(tests: pd.DataFrame | None) -> dict:
    """patel2023's "batch size does not affect power": the statistics' TOST equivalence rows."""
    rows = pd.DataFrame()
    if tests is not None and {"source", "test", "decision"} <= set(tests.columns):
        rows = patel_tests(tests, "TOST")
    if rows.empty:
        return {"verdict": "not measured", "notes": [],
                "ours": "not measured in this run: no inference cell has GPU power values at "
                        "two batch sizes or more (NVML on an NVIDIA GPU)"}
    shown = int((rows["decision"] == "equivalent").sum())
    verdict = "confirmed" if shown == len(rows) else "inconclusive"
    return {"verdict": verdict, "notes": [],
            "ours": f"TOST equivalence of power across batch sizes (±rope): shown in {shown} of "
                    f"{len(rows)} model and framework series"}


def trend_from_tests(tests: pd.DataFrame) -> dict | None:
    """The batch-size claim judged by the statistics' decreasing-trend tests, if they ran."""
    if not {"source", "test", "decision"} <= set(tests.columns):
        return None
    trend = patel_tests(tests, "Jonckheere")
    if trend.empty:
        return None
    rejected = int((trend["decision"] == "reject H0").sum())
    n = len(trend)
    verdict = "confirmed" if rejected == n else "inconclusive"
    p = ", ".join(fmt_p(v) for v in trend.get("p_corrected", pd.Series(dtype=float))
                  if not missing(v))
    return {"verdict": verdict, "notes": [],
            "ours": f"Jonckheere-Terpstra test for a decreasing time per sample: {rejected} of "
                    f"{n} model and framework series decrease significantly"
                    + (f" (Holm-corrected p: {p})" if p else "")}


def judge_batch_trend(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    """Without the trend tests: per series, the largest batch's interval of time per sample
    against the smallest batch's."""
    needed = {"median_ns", "ci_low_ns", "ci_high_ns", "batch_size"}
    if not needed <= set(rows.columns):
        return "not measured", ("not measured in this run: the cell statistics lack "
                                + join(sorted(needed - set(rows.columns))))
    rows = rows[[not missing(v) for v in rows["median_ns"]]]
    keys = [k for k in ("device", "model", "framework", "input_shape", "mode", "profile")
            if k in rows]
    falls, rises, series = 0, 0, []
    for key, group in rows.groupby(keys, sort=True):
        if group["batch_size"].nunique() < 2:
            continue
        small = group.loc[group["batch_size"].idxmin()]
        large = group.loc[group["batch_size"].idxmax()]
        b_small, b_large = int(small["batch_size"]), int(large["batch_size"])
        if large["ci_high_ns"] / b_large < small["ci_low_ns"] / b_small:
            falls += 1
        elif large["ci_low_ns"] / b_large > small["ci_high_ns"] / b_small:
            rises += 1
        series.append(f"{key[1]} {label(key[2])}: {fmt_duration(small['median_ns'] / b_small)}"
                      f" → {fmt_duration(large['median_ns'] / b_large)}")
    if not series:
        return "not measured", ("not measured in this run: no model has two batch sizes "
                                "with a measured inference time")
    n = len(series)
    verdict = ("confirmed" if falls == n else "contradicted" if rises > n / 2
               else "inconclusive")
    return verdict, (f"time per sample, smallest → largest batch: {'; '.join(series)} "
                     f"({falls} of {n} fall, {rises} rise)")
