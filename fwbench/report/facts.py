"""Facts of the run every section reads: counts, axes and dates, the software and settings each
framework recorded, why a pair is incomplete, and where each trial ran (natively, or in which
image, pinned or not)."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims.wording import join, label, missing, unique
from fwbench.environment.images import DIGEST
from fwbench.measure.telemetry.machine import CPU_COLUMNS, GPU_COLUMNS
from fwbench.report.formatting import count, span
from fwbench.report.inputs import Inputs


def failure_reasons(trials: pd.DataFrame) -> dict:
    """pair id -> why the pair is incomplete, from its failed trials."""
    if trials.empty or "status" not in trials:
        return {}
    failed = trials[trials["status"] != "ok"]
    reasons = {}
    for pair_id, group in failed.groupby("pair_id", sort=True):
        parts = []
        for (framework, status), sub in group.groupby(["framework", "status"], sort=True):
            message = first_message(sub)
            parts.append(f"{label(framework)} {status} in {count(len(sub), 'trial')}"
                         + (f" ({message})" if message else ""))
        reasons[str(pair_id)] = "; ".join(parts)
    return reasons


def first_message(group: pd.DataFrame) -> str:
    for message in group.get("message", []):
        if not missing(message) and str(message).strip():
            return " ".join(str(message).split())[:120]
    return ""


def run_facts(data: Inputs, run: str, epoch: int) -> dict:
    trials, cells = data.trials, data.cells
    n_ok = int((trials["status"] == "ok").sum()) if "status" in trials else 0
    every = data.every_trial
    started = pd.to_datetime(every.get("started_at", pd.Series(dtype=object)), utc=True,
                             errors="coerce").dropna()
    return {
        "run": run,
        "n_trials": len(trials),
        "n_ok": n_ok,
        "n_failed": len(trials) - n_ok,
        "n_cells": int(trials["cell_id"].nunique()) if "cell_id" in trials else len(cells),
        "n_pairs": int(trials["pair_id"].nunique()) if "pair_id" in trials else 0,
        "frameworks": [label(f) for f in unique(trials, "framework")],
        "models": unique(trials, "model"),
        "phases": unique(trials, "phase"),
        "devices": unique(trials, "device"),
        "experiments": unique(trials, "experiment"),
        "batch_sizes": [str(b) for b in sorted({int(b) for b in trials.get("batch_size", [])})],
        "precisions": unique(trials, "precision"),
        "modes": unique(trials, "mode"),
        "profiles": unique(trials, "profile"),
        "started": _iso(started.min()) if len(started) else "no trial started",
        "ended": _iso(pd.Timestamp(epoch, unit="s", tz="UTC")) if epoch else "no trial ended",
        "commits": [c[:12] for c in unique(trials, "git_commit")],
    }


def _iso(stamp) -> str:
    return stamp.strftime("%Y-%m-%d %H:%M UTC")


def software(trials: pd.DataFrame) -> list[dict]:
    """Per framework: versions, threads and settings in force, as recorded by each trial."""
    rows = []
    for framework in unique(trials, "framework"):
        part = trials[trials["framework"].astype(str) == framework]
        ok = part[part["status"] == "ok"] if "status" in part else part
        rows.append({
            "framework": framework,
            "label": label(framework),
            "version": join(unique(part, "framework_version")) or "not recorded",
            "threads_intra": join(unique(part, "threads_intra")) or "not recorded",
            "threads_inter": join(unique(part, "threads_inter")) or "not recorded",
            "threads_requested": join(unique(part, "threads_requested")) or "not recorded",
            "mode": join(unique(part, "framework_mode")) or "not recorded",
            "layout": join(_layouts(part)) or "not recorded",
            "trials": len(part),
            "iterations": span(ok.get("n_iterations", [])),
            "warmup": span(ok.get("warmup_iterations", [])),
        })
        row = rows[-1]
        row["sentence"] = (
            f"{row['label']} {row['version']} ran with {row['threads_intra']} intra-op and "
            f"{count(row['threads_inter'], 'inter-op thread')} ({row['threads_requested']} "
            f"requested), in {row['mode']} mode, layout {row['layout']}.")
    return rows


def _layouts(trials: pd.DataFrame) -> list[str]:
    """Each layout a framework ran, with the reason its trials recorded."""
    if "layout_reason" not in trials:
        return unique(trials, "layout")
    pairs = trials[["layout", "layout_reason"]].dropna(subset=["layout"]).drop_duplicates()
    return [f"{row.layout} ({row.layout_reason})" if not missing(row.layout_reason)
            else str(row.layout) for row in pairs.sort_values("layout").itertuples()]


def machine_columns(trials: pd.DataFrame) -> list[str]:
    """The machine-state columns that apply: CPU settings always, GPU settings with a GPU."""
    gpu = "device" in trials and trials["device"].astype(str).eq("cuda").any()
    return [*CPU_COLUMNS, *(GPU_COLUMNS if gpu else ())]


def is_native(container) -> bool:
    return not missing(container) and str(container) == "none"


def pinned(digest) -> bool:
    return not missing(digest) and bool(DIGEST.match(str(digest)))


def rows_where(frame: pd.DataFrame, keep: list[bool]) -> pd.DataFrame:
    """The rows of ``frame`` where ``keep`` is true (an empty list keeps no row)."""
    return frame.loc[pd.Series(keep, index=frame.index, dtype=bool)]


def column_or_none(frame: pd.DataFrame, column: str) -> pd.Series:
    """``frame[column]``, or a column of None where the table has none."""
    if column in frame:
        return frame[column]
    return pd.Series([None] * len(frame), index=frame.index, dtype=object)
