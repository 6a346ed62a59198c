"""One trial's telemetry time series as a table, for the report, which reads tables only.

The trial shown is the longest ok one (ended − started: the most samples in every phase), on a
GPU when the run has an ok GPU trial (only those have power readings), ties broken by cell id
and trial number. Its side file (trial-<k>.telemetry.csv) becomes one row per sample and device,
on seconds from the cold-start marker, beside one row per harness marker (``source`` "marker")
from its result's ``markers_ns``, so the figure can shade the phases.

Usage (rules/tables.smk, collect_telemetry_trace)::

    trace = trace_table(tables["trials"], trial_result_paths)
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fwbench.analysis.tables import AXES
from fwbench.errors import ResultError
from fwbench.measure.results import load_trial
from fwbench.measure.telemetry.summary import _power_field, load_samples

__all__ = ["CHOICE", "TRACE_COLUMNS", "choose_trial", "trace_rows", "trace_table"]

CHOICE = ("the longest ok trial of the run (the most samples in every phase), on a GPU when the "
          "run has one, since only GPU trials have power readings")
TRIAL_COLUMNS = ["run", "cell_id", "pair_id", *AXES, "trial", "device_name"]
# Side-file columns the trace keeps as they are; power is kept in W, from the column the
# summaries use (fwbench.measure.telemetry.summary: the instant reading where every row has it).
SERIES = ["cpu_util_pct", "cpu_temp_c", "gpu_util_pct", "gpu_temp_c"]
TRACE_COLUMNS = [*TRIAL_COLUMNS, "source", "gpu_index", "marker", "t_s", *SERIES,
                 "gpu_power_w", "power_field"]


def choose_trial(trials: pd.DataFrame) -> pd.Series | None:
    """The trial whose telemetry the report draws (see CHOICE), or None without an ok trial."""
    if trials.empty or "status" not in trials:
        return None
    ok = trials[trials["status"] == "ok"].copy()
    if ok.empty:
        return None
    if (ok["device"] == "cuda").any():
        ok = ok[ok["device"] == "cuda"]
    ok["_length"] = pd.to_datetime(ok["ended_at"]) - pd.to_datetime(ok["started_at"])
    ok = ok.sort_values(["_length", "cell_id", "trial"], ascending=[False, True, True],
                        kind="stable")
    return ok.iloc[0].drop("_length")


def trace_rows(samples, markers_ns: dict, trial: dict) -> pd.DataFrame:
    """The trace of one trial: its side file's samples (a path, DataFrame or rows) and its
    markers, every row carrying the trial's columns in ``trial``."""
    rows = load_samples(samples)
    zero = markers_ns.get("cold_start", min((r["t_ns"] for r in rows), default=0))
    field = _power_field([r for r in rows if r["device"] == "gpu"])
    ident = {c: trial.get(c) for c in TRIAL_COLUMNS}
    out = [{**ident, "source": "marker", "marker": name, "t_s": (t - zero) / 1e9}
           for name, t in sorted(markers_ns.items(), key=lambda item: item[1])]
    for r in rows:
        row = {**ident, "source": r["device"], "gpu_index": r.get("gpu_index"),
               "t_s": (r["t_ns"] - zero) / 1e9,
               **{column: r.get(column) for column in SERIES}}
        if r["device"] == "gpu" and field and r.get(field) is not None:
            row.update(gpu_power_w=r[field] / 1000, power_field=field)
        out.append(row)
    return pd.DataFrame(out, columns=TRACE_COLUMNS)


def trace_table(trials: pd.DataFrame, result_paths) -> pd.DataFrame:
    """tables/telemetry_trace.parquet: the trace of the trial ``choose_trial`` picks, read from
    its result (markers) and its side file beside it; empty, with its columns, without one."""
    chosen = choose_trial(trials)
    if chosen is None:
        return pd.DataFrame(columns=TRACE_COLUMNS)
    suffix = f"{chosen['cell_id']}/trial-{int(chosen['trial'])}.json"
    paths = [Path(p) for p in map(str, result_paths) if p.endswith(suffix)]
    if not paths:
        raise ResultError(f"the trials table names {suffix}, but no result path given ends so")
    result = load_trial(paths[0])
    return trace_rows(paths[0].with_suffix(".telemetry.csv"), result["markers_ns"],
                      chosen.to_dict())
