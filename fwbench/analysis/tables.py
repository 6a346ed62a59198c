"""The tidy tables, one row per iteration, trial, cell, epoch and class pair, built from the
trial result files (docs/export.md describes every column). Framework-free."""

from __future__ import annotations

import statistics
from pathlib import Path

from fwbench.analysis import columns
from fwbench.analysis.steady_state import classify
from fwbench.files import write_atomic
from fwbench.measure.results import load_trial, read_json, samples_per_iteration
from fwbench.measure.telemetry.machine import trial_machine_columns
from fwbench.measure.telemetry.outside import outside_busy

AXES = columns.AXES

# A cell without a strategy (not distributed) or an optimizer (not real data) has "none" there,
# never null: grouping drops null keys.
AXIS_DEFAULTS = {"strategy": "none", "world_size": 1, "optimizer": "none"}


def _axes(result: dict) -> dict:
    cell = result["cell"]
    row = {k: cell.get(k) for k in AXES}
    row.update({k: v for k, v in AXIS_DEFAULTS.items() if row[k] is None})
    row["input_shape"] = "x".join(map(str, cell["input_shape"]))
    if cell.get("control"):  # an A/A control's slot: only its own tables have the column
        row["control"] = cell["control"]
    return {"run": result["run"], "cell_id": result["cell_id"], "pair_id": result["pair_id"], **row}


def trial_row(result: dict) -> dict:
    times = result["iteration_ns"]
    in_force = result["settings"]["in_force"]
    return {
        **_axes(result),
        "trial": result["trial"],
        "group_position": result["group_position"],
        "status": result["status"],
        "message": result["message"],
        "cold_start_ns": result["cold_start_ns"],
        "warmup_iterations": len(result["warmup_ns"]),
        "warmup_steady": result["warmup_steady"],
        "n_iterations": len(times),
        "samples_per_iteration": samples_per_iteration(result["cell"], result["details"]),
        "stop_reason": result["stop_reason"],
        "block_ns_per_iteration": (statistics.median(result["block_ns"]) / result["block_size"]
                                   if result["block_ns"] else None),
        "block_mean_ns_per_iteration": (statistics.fmean(result["block_ns"])
                                        / result["block_size"] if result["block_ns"] else None),
        "median_ns": statistics.median(times) if times else None,
        "steady_state_class": classify(times) if times else None,
        "analysis_plan": result["settings"]["requested"].get("analysis_plan"),
        "threads_requested": result["settings"]["requested"]["threads"],
        "threads_intra": in_force.get("threads_intra"),
        "threads_inter": in_force.get("threads_inter"),
        "framework_mode": in_force.get("mode"),
        "layout": in_force.get("layout"),
        "layout_reason": in_force.get("layout_reason"),
        "sync_ns": result["details"].get("sync_ns"),
        "framework_version": result["versions"].get("framework_version"),
        "peak_rss_bytes": result["peak_rss_bytes"],
        "device_peak_bytes": (result.get("peak_memory") or {}).get("device_peak_bytes"),
        "started_at": result["started_at"],
        "ended_at": result["ended_at"],
        "git_commit": result["workflow"]["git_commit"],
        "git_dirty": result["workflow"]["git_dirty"],
        "measuring_code": result["workflow"].get("measuring_code"),  # None before it was kept
        "session": result["workflow"]["session"],
        "fwbench_version": result.get("fwbench_version"),  # None in results from before it was kept
        **real_data_columns(result["details"]),
        **_telemetry_columns(result.get("telemetry")),
        **environment_columns(result.get("environment")),
        **trial_machine_columns(result),
    }


# --- the real-data experiments (docs/data.md): accuracy per trial, records per epoch ------

# Trials-table columns taken as they are from an `epoch` or `convergence` trial's details.
ACCURACY_COLUMNS = ["final_accuracy", "best_accuracy", "target_accuracy", "epochs_to_accuracy",
                    "time_to_accuracy_ns", "time_to_accuracy_with_validation_ns",
                    "test_accuracy"]
# One row of the epochs table per record of a convergence trial's details["epochs"].
EPOCH_FIELDS = ["epoch", "learning_rate", "train_loss", "val_accuracy", "epoch_ns", "train_ns",
                "val_ns", "steps"]


def real_data_columns(details: dict) -> dict:
    """What the report needs of a real-data trial, flat for the trials table (null for the
    other experiments): accuracy, time to the target and the median test-set pass (epoch: the
    timed passes; convergence: the validations after the first epoch). The optimizer is an
    axis (``AXES``), not a detail."""
    inference = details.get("inference_ns") or []
    return {
        "data_source": details.get("data_source"),
        "n_epochs": len(details.get("epochs") or []) or None,
        **{k: details.get(k) for k in ACCURACY_COLUMNS},
        "inference_median_ns": statistics.median(inference) if inference else None,
    }


def _real_data_head(result: dict) -> dict:
    return {**_axes(result), "trial": result["trial"]}


def _epoch_rows(result: dict) -> list[dict]:
    if result["cell"]["experiment"] != "convergence":
        return []
    head = _real_data_head(result)
    return [{**head, **{k: record.get(k) for k in EPOCH_FIELDS}}
            for record in result["details"].get("epochs") or []]


def _confusion_rows(result: dict) -> list[dict]:
    """The confusion matrix a real-data trial recorded (convergence: its last validation;
    epoch: the test set after training), one row per (true, predicted) class."""
    matrix = result["details"].get("confusion_matrix") or []
    classes = (result["details"].get("data") or {}).get("classes") or []
    head = _real_data_head(result)

    def label(k: int) -> str:
        return str(classes[k]) if k < len(classes) else str(k)

    return [{**head, "true_class": i, "predicted_class": j, "count": count,
             "true_label": label(i), "predicted_label": label(j)}
            for i, row in enumerate(matrix) for j, count in enumerate(row)]


# Trials-table column <- key of the measure phase's telemetry summary.
TELEMETRY_COLUMNS = {
    "power_w_mean": "power_mean_w",
    "power_w_max": "power_max_w",
    "energy_j": "energy_j",
    "energy_source": "energy_source",
    "energy_per_sample_j": "energy_per_sample_j",
    "gpu_util_mean": "gpu_util_mean_pct",
    "gpu_temp_c_start": "gpu_temp_start_c",
    "gpu_temp_c_max": "gpu_temp_max_c",
    "cpu_util_mean": "cpu_util_mean_pct",
    "cpu_temp_c_start": "cpu_temp_start_c",
    "cpu_temp_c_max": "cpu_temp_max_c",
}


def _telemetry_columns(summary: dict | None) -> dict:
    measure = ((summary or {}).get("phases") or {}).get("measure") or {}
    return {column: measure.get(key) for column, key in TELEMETRY_COLUMNS.items()}


def outside_columns(result: dict, path) -> dict:
    """How busy the processors outside the trial's own were while it was timed, read from its
    telemetry side file beside ``path`` (fwbench.measure.telemetry.outside), and how."""
    cell, settings = result["cell"], result["settings"]
    measure = ((result.get("telemetry") or {}).get("phases") or {}).get("measure") or {}
    busy, how = outside_busy(
        Path(path).with_suffix(".telemetry.csv"), result.get("markers_ns") or {},
        threads=settings["requested"]["threads"] * (cell.get("world_size") or 1),
        processors=(result.get("environment") or {}).get("cpu_count"),
        own_cpus=settings["in_force"].get("cpus"), util_mean=measure.get("cpu_util_mean_pct"))
    return {"outside_busy_pct": busy, "outside_busy_method": how}


def _with_environment(result: dict, path) -> dict:
    """The result with the machine facts of its trial-<k>.env.json beside it, when present."""
    env_path = Path(path).with_suffix(".env.json")
    if env_path.exists():
        result["environment"] = read_json(env_path, "trial provenance")
    return result


def environment_columns(env: dict | None) -> dict:
    """The provenance a reader needs beside each number, flat for the trials table."""
    env = env or {}
    gpus = (env.get("gpus") or {}).get("devices") or []
    container = env.get("container")
    image = container if isinstance(container, dict) else {}
    return {
        "hostname": env.get("hostname"),
        "platform": env.get("platform"),
        "python": env.get("python"),
        "cpu_model": env.get("cpu_model"),
        "cpu_kind": (env.get("cpu") or {}).get("kind"),
        "cpu_count": env.get("cpu_count"),
        "container": image.get("reference") or image.get("image_file") if image else container,
        "image_digest": image.get("digest"),
        "device_name": gpus[0].get("name") if gpus else None,
        "driver": (env.get("gpus") or {}).get("driver"),
        "cuda": env.get("cuda"),
        "cudnn": env.get("cudnn"),
    }


def collect_tables(paths) -> dict:
    """Iterations, trials and cells tables (pandas DataFrames) from trial result files, and the
    real-data experiments' epochs (one row per convergence trial and epoch) and confusion
    (one row per trial and class pair) tables, empty with their columns when none ran."""
    import pandas as pd

    paths = list(paths)
    results = [_with_environment(load_trial(p), p) for p in paths]
    iterations = pd.DataFrame(
        [{**_axes(r), "trial": r["trial"], "iteration": i, "time_ns": t}
         for r in results for i, t in enumerate(r["iteration_ns"])],
        columns=[*_axes_columns(), "trial", "iteration", "time_ns"],
    )
    trials = pd.DataFrame([{**trial_row(r), **outside_columns(r, p)}
                           for r, p in zip(results, paths)])
    trials["started_at"] = pd.to_datetime(trials["started_at"])
    trials["ended_at"] = pd.to_datetime(trials["ended_at"])
    trials = trials.sort_values("started_at", kind="stable").reset_index(drop=True)
    trials["run_order"] = range(len(trials))
    trials["measured_together"] = _measured_together(trials)
    trials = trials.join(_pair_gaps(trials))
    # A CUDA build of TensorFlow reports cuDNN as text ("9", its build info), PyTorch as a
    # number (92400): where both appear, the column is text (Parquet takes one type a column).
    if "cudnn" in trials and len({type(v) for v in trials["cudnn"].dropna()}) > 1:
        trials["cudnn"] = [None if pd.isna(v) else str(v) for v in trials["cudnn"]]
    head = [*_axes_columns(), "trial"]
    epochs = pd.DataFrame([row for r in results for row in _epoch_rows(r)],
                          columns=[*head, *EPOCH_FIELDS])
    confusion = pd.DataFrame([row for r in results for row in _confusion_rows(r)],
                             columns=[*head, "true_class", "predicted_class", "count",
                                      "true_label", "predicted_label"])
    return {"iterations": iterations, "trials": trials, "cells": _cells_table(trials),
            "epochs": epochs, "confusion": confusion}


def _measured_together(trials) -> list[bool]:
    """Per trial row: did its cell group's trials run in one workflow session, in the planned
    order? A merged run (fwbench merge) keeps each origin's trials under its own ``run``, so a
    group is judged within each origin, never across machines.

    A partial rerun breaks this (one side re-measured later); the report lists such groups.
    """
    together = {}
    for key, group in trials.groupby(["run", "pair_id"]):
        in_order = list(group["group_position"]) == sorted(group["group_position"])
        together[key] = in_order and group["session"].nunique(dropna=False) == 1
    return [together[key] for key in zip(trials["run"], trials["pair_id"])]


def _pair_gaps(trials):
    """Per trial, how its pair (trial k of both frameworks of one cell) really ran, from the
    recorded times of every trial of its run (``trials`` sorted by start; in a merged run, of
    its origin, the machine that ran it): ``pair_gap_trials`` other trials started between the
    two members' starts, ``pair_gap_s`` seconds from the end of the first to the start of the
    second, ``pair_adjacent`` when no other trial came between them. A trial without its
    partner: not adjacent, no gap."""
    import pandas as pd

    adjacent, between, seconds = {}, {}, {}
    order = trials.groupby("run", sort=False).cumcount().to_numpy()  # start order in its run
    for members in trials.groupby(["run", "pair_id", "trial"], sort=False).indices.values():
        if len(members) != 2:
            continue
        first, second = sorted(members)  # positions in start order
        gap = int(order[second] - order[first] - 1)
        gap_s = (trials["started_at"].iat[second] - trials["ended_at"].iat[first]).total_seconds()
        for member in (first, second):
            adjacent[member], between[member], seconds[member] = gap == 0, gap, gap_s
    positions = range(len(trials))
    return pd.DataFrame({
        "pair_adjacent": [adjacent.get(i, False) for i in positions],
        "pair_gap_trials": pd.array([between.get(i) for i in positions], dtype="Int64"),
        "pair_gap_s": [seconds.get(i, float("nan")) for i in positions],
    }, index=trials.index)


def _axes_columns() -> list[str]:
    return ["run", "cell_id", "pair_id", *AXES]


def _cells_table(trials):
    def summarize(group):
        failed = group[group["status"] != "ok"]
        return {
            "n_trials": len(group),
            "n_ok": int((group["status"] == "ok").sum()),
            "status": "ok" if failed.empty else failed["status"].iloc[0],
            "message": "" if failed.empty else failed["message"].iloc[0],
        }

    rows = []
    for _cell_id, group in trials.groupby("cell_id", sort=True):
        rows.append({**group.iloc[0][_axes_columns()].to_dict(), **summarize(group)})
    import pandas as pd

    return pd.DataFrame(rows)


def write_tables(tables: dict, outputs: dict) -> None:
    """Write each table to its parquet path atomically, every value as it is: the tables hold
    measurements and plain arithmetic on them (medians, differences of times), which gives the
    same bits on every machine; the statistics, which go through linear algebra, are the CSVs
    that round (fwbench.files.write_csv)."""
    for name, path in outputs.items():  # those asked for (the A/A controls': two of them)
        write_atomic(path, tables[name].to_parquet(index=False))
