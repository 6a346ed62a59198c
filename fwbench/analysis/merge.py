"""One run from several (``fwbench merge``): the same config measured on other machines or in
other sessions, combined into one run folder that rebuilds like any other.

Every trial keeps its origin. Trial k of source i becomes trial offset_i + k of the merged run
(offset_i: the trials of the sources before it), so the trials of both frameworks that ran as a
pair stay a pair; its result file's ``run`` becomes the origin's name (the source folder's,
with the host when two share a name) and ``origin`` records where it came from (source folder,
run, trial number, host). The trials table's ``run`` column is therefore the origin, and the
statistics, keyed by run and cell, treat it as a level: cells.csv and comparisons.csv have one
row per origin (fwbench.analysis.origins pools them only where that is valid).

The merged folder holds the trials (with their env and telemetry files; a cell's other files,
its profiled run or calibration, from the first run that has them), the first
source's environment/ (the plan names its idle baseline), every source's config and
environment under origins/<origin>/, origins.csv, and config.yaml: the shared config with
``run`` set to the merged run's name and ``trials`` to the sum, which plans exactly the trials
copied, so ``fwbench rebuild`` remakes its tables, statistics and report from them. The
sources' A/A controls stay behind (``controls`` is emptied): each checked its own sitting, and
their pairs, sized for one sitting, do not add up as the sweep's do.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import yaml

from fwbench.analysis.run_folder import TRIAL_FILE, saved_config, trial_files
from fwbench.errors import FwbenchError
from fwbench.files import staged_directory, write_atomic
from fwbench.measure.results import load_trial, read_json
from fwbench.plan.config import read

__all__ = ["merge_runs", "ORIGINS", "MAY_DIFFER"]

ORIGINS = "origins.csv"
# Config keys the merged runs may disagree on: their names, how many trials each measured and
# the seed of their order. Any other key changes what a trial measures or how it is judged.
MAY_DIFFER = ("run", "trials", "seed")
ORIGIN_FIELDS = ["origin", "source", "source_run", "trials", "hostname", "cpu_model",
                 "started", "ended"]


@dataclass
class _Source:
    path: Path
    config: dict
    results: dict[Path, dict]  # each trial file and its result, read and validated once
    offset: int = 0
    label: str = ""

    @cached_property
    def environment(self) -> dict:
        """The first trial's env.json: the machine it ran on."""
        for result in self.results:
            env = result.with_suffix(".env.json")
            if env.is_file():
                return read_json(env, "trial environment")
        return {}


def merge_runs(sources: list[str | Path], into: str | Path) -> list[dict]:
    """Merge the runs ``sources`` into the new run folder ``into``; returns origins.csv's rows.

    Refuses, before writing anything, when ``into`` exists, when a source kept no config.yaml
    or holds a result that does not read, when the configs differ beyond ``MAY_DIFFER``, or
    when two sources hold the same trials. Usage::

        merge_runs(["results/epyc", "results/xeon"], "results/both")
    """
    into = Path(into)
    if into.exists():
        raise FwbenchError(f"{into} exists already; merge into a new run folder")
    if len(sources) < 2:
        raise FwbenchError("merge needs two runs or more")
    runs = [_source(Path(s)) for s in sources]
    _check_configs(runs)
    _check_distinct(runs)
    _name_origins(runs)
    offset = 0
    for run in runs:
        run.offset, offset = offset, offset + run.config["trials"]
    config = {**read(runs[0].path / "config.yaml"), "run": into.name, "trials": offset,
              "controls": []}
    _check_plan(config, runs, into.name)
    origins = [_origin_row(run) for run in runs]
    try:
        with staged_directory(into) as stage:
            for run in runs:
                _copy_trials(run, stage)
                origin = stage / "origins" / run.label
                _copy_tree(run.path / "environment", origin / "environment")
                shutil.copy2(run.path / "config.yaml", origin / "config.yaml")
            _copy_tree(runs[0].path / "environment", stage / "environment")
            header = "# Merged by `fwbench merge` from " + ", ".join(str(r.path) for r in runs)
            text = yaml.safe_dump(config, sort_keys=False)
            write_atomic(stage / "config.yaml", f"{header}\n{text}")
            _write_origins(origins, stage / ORIGINS)
            _same_mtime(stage)
    except OSError as exc:  # the stage is gone: nothing was written
        raise FwbenchError(f"cannot write {into}: {exc.strerror} ({exc.filename})") from None
    return origins


def _source(path: Path) -> _Source:
    files = trial_files(path)
    if not files:
        raise FwbenchError(f"{path} holds no trial result under cells/; give results/<run>")
    return _Source(path, saved_config(path), {f: load_trial(f) for f in files})


def _check_configs(runs: list[_Source]) -> None:
    first = runs[0]
    for run in runs[1:]:
        keys = sorted(k for k in first.config.keys() | run.config.keys()
                      if k not in MAY_DIFFER and first.config.get(k) != run.config.get(k))
        if keys:
            shown = "; ".join(f"{k}: {first.config.get(k)!r} in {first.path}, "
                              f"{run.config.get(k)!r} in {run.path}" for k in keys)
            raise FwbenchError(f"the runs were measured with different configs ({shown}); a "
                               "merged run is one config measured in several places (only "
                               f"{', '.join(MAY_DIFFER)} may differ); compare them instead "
                               "(fwbench compare)")


def _check_distinct(runs: list[_Source]) -> None:
    """One measurement passed twice (a folder given twice, or a copy of it) would count twice,
    as if a second machine had agreed with the first: a trial is its cell, number and start."""
    seen = {}
    for run in runs:
        for path, result in run.results.items():
            key = (result["cell_id"], result["trial"], result["started_at"])
            first = seen.setdefault(key, run)
            if first is not run:
                raise FwbenchError(
                    f"{run.path} and {first.path} hold the same trials (first: "
                    f"{path.relative_to(run.path)}, started {result['started_at']}): one "
                    "measurement would count twice; merge each run once")


def _name_origins(runs: list[_Source]) -> None:
    """Each origin's name: its folder's, with its host when two folders share a name."""
    names = [r.path.name for r in runs]
    for run in runs:
        host = run.environment.get("hostname", "unknown-host")
        run.label = run.path.name if names.count(run.path.name) == 1 else f"{run.path.name}@{host}"
    labels = [r.label for r in runs]
    if len(set(labels)) < len(labels):
        raise FwbenchError(f"two of the runs have the same folder name and host ({labels}); "
                           "rename one folder, the name its trials keep as their origin")


def _target(run: _Source, result: Path, stage: Path) -> Path:
    k = int(TRIAL_FILE.fullmatch(result.name).group(1))
    cell = result.parent.relative_to(run.path)
    return stage / cell / f"trial-{run.offset + k}.json"


def _check_plan(config: dict, runs: list[_Source], name: str) -> None:
    """The merged config must plan exactly the trials copied, or rebuild would stop on a
    missing one (or leave one out)."""
    from fwbench.plan.config import validate
    from fwbench.plan.sweep import Plan

    prefix = f"results/{name}/"
    planned = {p.removeprefix(prefix) for p in Plan.from_config(validate(config)).trial_paths()}
    copied = {_target(run, f, Path()).as_posix() for run in runs for f in run.results}
    missing, extra = sorted(planned - copied), sorted(copied - planned)
    if missing or extra:
        parts = ([f"{len(missing)} trials the merged plan needs are in no run (first: "
                  f"{missing[0]})"] if missing else []) + (
            [f"{len(extra)} trials are outside the plan (first: {extra[0]})"] if extra else [])
        raise FwbenchError("the runs do not cover the same cells with their planned trials: "
                           f"{'; '.join(parts)}; merge complete runs of one config")


def _copy_trials(run: _Source, stage: Path) -> None:
    for path, result in run.results.items():
        k = int(TRIAL_FILE.fullmatch(path.name).group(1))
        target = _target(run, path, stage)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = {**result, "run": run.label, "trial": run.offset + k,
                "origin": {"origin": run.label, "source": str(run.path), "run": result["run"],
                           "trial": k, "hostname": run.environment.get("hostname")}}
        target.write_text(json.dumps(data, indent=1))
        for side in path.parent.glob(f"trial-{k}.*"):
            if side != path:
                shutil.copy2(side, target.with_name(f"trial-{run.offset + k}" +
                                                    side.name.removeprefix(f"trial-{k}")))
        for other in path.parent.iterdir():  # the cell's own files (profile, calibration)
            if not other.name.startswith("trial-") and not target.with_name(other.name).exists():
                shutil.copy2(other, target.with_name(other.name))


def _copy_tree(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target)


def _origin_row(run: _Source) -> dict:
    env = run.environment
    stamps = sorted(result["started_at"] for result in run.results.values())
    first = next(iter(run.results.values()))
    return {"origin": run.label, "source": str(run.path), "source_run": first["run"],
            "trials": f"{run.offset + 1}-{run.offset + run.config['trials']}",
            "hostname": env.get("hostname"), "cpu_model": env.get("cpu_model"),
            "started": stamps[0], "ended": stamps[-1]}


def _write_origins(rows: list[dict], path: Path) -> None:
    import csv
    import io

    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=ORIGIN_FIELDS)
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, text.getvalue())


def _same_mtime(folder: Path) -> None:
    """Every file one modification time: no trial looks newer than the one it waits for, so
    Snakemake plans no trial again when the merged run is rebuilt."""
    now = time.time()
    for path in folder.rglob("*"):
        os.utime(path, (now, now))
