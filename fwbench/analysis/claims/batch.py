"""patel2023's batch-size claims: time per sample falls as the batch grows (``batch_trend``),
and power does not change with it (``power_batch``)."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims.kinds import Tables, register
from fwbench.analysis.claims.rows import claim_rows, fewest, on_selected
from fwbench.analysis.claims.wording import flag, fmt_duration, fmt_p, join, label, missing


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


# Without the trend tests: the cells' intervals.
_trend_from_cells = on_selected("cell_stats",
                                lambda rows, claim, *_: judge_batch_trend(rows, claim))


def _judge_trend(claim: dict, tables: Tables, margin: float) -> dict:
    """The trend tests where the statistics ran them, else the cells' intervals."""
    from_tests = trend_from_tests(tables.tests) if tables.tests is not None else None
    return from_tests or _trend_from_cells(claim, tables, margin)


def _tests_hint(tests: pd.DataFrame | None, prefix: str, least: int) -> str | None:
    """How many of the series a patel2023 test (``prefix``) ran on had too few trials; None
    when the statistics ran no such test."""
    if tests is None or "exploratory" not in tests:
        return None
    rows = patel_tests(tests, prefix)
    if rows.empty:
        return None
    hints = int(sum(flag(v) for v in rows["exploratory"]))
    return (f"{hints} of {len(rows)} series have fewer than {least} trials at some batch size"
            if hints else "")


def _trend_hint(claim: dict, tables: Tables, least: int) -> str:
    said = _tests_hint(tables.tests, "Jonckheere", least)
    if said is not None:
        return said
    rows = claim_rows(tables.cell_stats, claim["test"].get("select", {})).rows
    return fewest(rows, ["n_ok"], "trials in a cell", least)


register("batch_trend", _judge_trend, _trend_hint)
register("power_batch", lambda _, tables, __: judge_power(tables.tests),
         lambda _, tables, least: _tests_hint(tables.tests, "TOST", least) or "")
