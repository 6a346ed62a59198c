"""A run folder rebuilt from its cell files alone: the rules a rebuild may run, the config it
is planned by (the one the run saved), and the measured files' times restored from the results
themselves, so that a copied run resumes and rebuilds as measured."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path

import yaml

from fwbench.errors import FwbenchError, ResultError

# The rules that read cell files and write tables, statistics, audit and report: rebuilding a
# run allows only these, so a missing cell file is an error rather than a new measurement.
HOST_RULES = ("collect_tables", "collect_controls", "collect_profiles",
              "collect_telemetry_trace", "audit_versions", "summarise_results",
              "summarise_ablation", "summarise_distributed", "summarise_flops",
              "summarise_controls", "check_gate", "build_report", "all")
# The first host steps; everything after them reruns because its inputs are then newer. The
# A/A controls' collection joins them only in a run that has controls: --forcerun runs a rule
# even where nothing asks for its output.
COLLECT_RULES = ("collect_tables", "collect_profiles", "collect_telemetry_trace",
                 "audit_versions")



# The resolved config a run measured with, in its folder (fwbench.plan.config.save, when the
# run starts): what rebuilds it, and what the commands over several runs read.
RUN_CONFIG = "config.yaml"


def rebuild_arguments(run_dir: str | os.PathLike, snakefile: str | os.PathLike) -> list[str]:
    """Snakemake's arguments that rebuild results/<run>/ from its cell files alone, planned by
    the config the run saved (its RUN_CONFIG) and nothing else: not the config.yaml of the
    folder it runs in, which may have changed since."""
    run_dir = Path(run_dir).resolve()
    if run_dir.parent.name != "results":
        raise ValueError(f"{run_dir} is not a run folder: expected results/<run>")
    if not (run_dir / RUN_CONFIG).is_file():
        raise FwbenchError(
            f"{run_dir / RUN_CONFIG} is missing: a run saves the config it measured with when "
            "it starts, and rebuilds from it; copy that config there (its `run` may differ)")
    saved = yaml.safe_load((run_dir / RUN_CONFIG).read_text()) or {}
    collect = [*COLLECT_RULES, *(["collect_controls"] if saved.get("controls") else [])]
    return ["--snakefile", str(snakefile), "--directory", str(run_dir.parent.parent),
            "--cores", str(_trial_cores(saved)),
            "--configfile", str(run_dir / RUN_CONFIG), "--replace-workflow-config",
            "--config", f"run={run_dir.name}", "--forcerun", *collect,
            "--allowed-rules", *HOST_RULES]


def _trial_cores(config: dict) -> int:
    """The most cores a trial of the run took (threads per process, times the processes of a
    distributed cell, as fwbench.plan.sweep.Plan.threads counts them): the workflow refuses to
    plan trials on fewer, though a rebuild runs none."""
    processes = [1]
    if config.get("experiment") == "distributed":
        processes = config.get("distributed", {}).get("world_sizes") or processes
    return config.get("threads", 1) * max(processes)



def restore_times(run_dir: str | os.PathLike) -> int:
    """Give every measured file of a run the modification time of its measurement, read from
    the results themselves (``ended_at``), and return how many files were set. A git clone or
    a copy without ``-p`` stamps files with the time of the copy, in any order; Snakemake's
    mtime trigger then takes warm-up records and first members of pairs for newer than the
    trials after them, and a resume re-measures finished trials. The run's environment
    records (idle baseline, data) come before all of them; a cell's warm-up record and profile
    come right after what they are made from (its last calibration, its last trial)."""
    run_dir = Path(run_dir)
    set_count = 0
    stamps = {}
    for result in run_dir.glob("cells/*/*/*/*/*/*.json"):
        stem = result.name.removesuffix(".json")
        if re.fullmatch(r"calibration(-\d+)?|trial-\d+", stem):
            stamp = _ended_at(result)
            if stamp is not None:
                stamps[result.parent, stem] = stamp
    step = 0.001
    last, calibrated = {}, {}
    for (cell, stem), stamp in stamps.items():
        for path in cell.glob(f"{stem}.*"):
            set_count += _set_mtime(path, stamp)
        if stem.startswith("calibration"):
            calibrated[cell] = max(stamp, calibrated.get(cell, stamp))
        last[cell] = max(stamp, last.get(cell, stamp))
    for cell, stamp in calibrated.items():
        set_count += _set_mtime(cell / "warmup.json", stamp + step)
    for cell, stamp in last.items():
        set_count += _set_mtime(cell / "profile.json", stamp + step)
    if stamps:
        first = min(stamps.values()) - 1
        for path in (run_dir / "environment").glob("*.json"):
            set_count += _set_mtime(path, first)
    return set_count


def _ended_at(result: Path) -> float | None:
    """When a result says its measurement ended (seconds since the epoch), None if it does
    not say; a result that does not read is refused before any file's time is set."""
    try:
        data = json.loads(result.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultError(f"cannot read {result}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:  # as fwbench.measure.results.read_json says it
        why = ("the file is empty" if not exc.doc.strip() else
               f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): the "
               "file is truncated or damaged")
        raise ResultError(f"cannot read {result}: {why}") from exc
    except UnicodeDecodeError as exc:
        raise ResultError(f"cannot read {result}: not UTF-8 text ({exc.reason})") from exc
    if not isinstance(data, dict):
        raise ResultError(f"cannot read {result}: it holds a JSON {type(data).__name__}, not "
                          "a result")
    ended = data.get("ended_at")
    try:
        return datetime.fromisoformat(ended).timestamp() if ended else None
    except (TypeError, ValueError):
        raise ResultError(f"{result}: ended_at {ended!r} is not an ISO 8601 time") from None


def _set_mtime(path: Path, stamp: float) -> int:
    if not path.is_file():
        return 0
    os.utime(path, (stamp, stamp))
    return 1
