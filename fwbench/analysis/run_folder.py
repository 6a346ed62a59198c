"""A finished run's folder as the commands over several runs read it (compare, merge, index):
its saved config and analysis plan, its trials and iterations tables, and its version audit.

A rebuilt run has tables/*.parquet and audit/versions.csv; a run that was only measured (or
copied from another machine as cells/) has its trial files, and the same tables are collected
from them here, so no command needs a rebuild first. The trial files are what a run says: tables
older than a trial file, or listing other trials, are stale and the trial files are read instead
(``Run.stale`` says why). Framework-free.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from fwbench.errors import ConfigError, ConfigWarning, FwbenchError
from fwbench.workflow.manifest import MANIFEST, RECORDED

__all__ = ["Run", "load_run", "trial_files", "saved_config", "is_run", "tables_folder"]

TRIAL_FILE = re.compile(r"trial-(\d+)\.json")
CONTROL_CELL = re.compile(r"-aa-[ab]$")  # fwbench.plan.cells.Cell.name of an A/A control


@dataclass
class Run:
    """One run: its folder, saved config, analysis plan, tables."""

    path: Path
    config: dict
    statistics: dict
    trials: pd.DataFrame
    iterations: pd.DataFrame
    versions: list[dict] = field(default_factory=list)
    stale: str = ""  # why its tables/ were stale and not read, or ""

    @property
    def name(self) -> str:
        return self.path.name


def is_run(path: str | Path) -> bool:
    path = Path(path)
    return (path / "cells").is_dir() or (path / "tables" / "trials.parquet").is_file()


def trial_files(run_dir: str | Path, *, controls: bool | None = False) -> list[Path]:
    """Every trial result of the sweep under ``run_dir``/cells (not its env, telemetry or
    profile files); with ``controls`` True only its A/A controls' (cells ``…-aa-a``, ``-aa-b``,
    the run's check of itself, which no comparison of the sweep reads), with None both."""
    return sorted(p for p in Path(run_dir, "cells").rglob("trial-*.json")
                  if TRIAL_FILE.fullmatch(p.name)
                  and (controls is None or bool(CONTROL_CELL.search(p.parent.name)) == controls))


def saved_config(run_dir: str | Path) -> dict:
    """The config the run was measured with (``run_dir``/config.yaml), validated. A run without
    one is refused rather than read under a default plan it may never have had. Read quietly:
    a ConfigWarning warns whoever plans a run, and this one has been measured."""
    from fwbench.plan.config import load

    path = Path(run_dir, "config.yaml")
    if not path.exists():
        raise ConfigError(f"{path} is missing: a run keeps the config it was measured with, its "
                          "analysis plan included, from when it starts; copy that config there")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigWarning)
        return load(path)


def tables_folder(run_dir: str | Path) -> Path:
    """The folder holding a run's tables/ and stats/: the run's own once rebuilt here, else,
    for a shipped run (one with rebuild.sha256), the copy of its recorded tables it keeps
    (recorded/), which is all a fresh clone has: git ignores the rebuilt folders. Never a mix
    of the two."""
    path = Path(run_dir)
    rebuilt = (path / "tables").is_dir() or (path / "stats").is_dir()
    if not rebuilt and (path / MANIFEST).is_file() and (path / RECORDED).is_dir():
        return path / RECORDED
    return path


def load_run(run_dir: str | Path) -> Run:
    """Read a run folder; an error names what is missing. Usage::

        run = load_run("results/reference")
        run.trials, run.iterations, run.statistics["rope"]
    """
    path = Path(run_dir)
    if not is_run(path):
        raise FwbenchError(f"{run_dir} is not a run folder: it has neither cells/ (trial "
                           "results) nor tables/trials.parquet; give results/<run>")
    config = saved_config(path)
    trials, iterations, stale = _tables(path)
    return Run(path, config, config["statistics"], trials, iterations, _versions(path), stale)


def _tables(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The trials and iterations tables, and why the saved ones were stale ("" if they were
    read, or there were none)."""
    files = trial_files(path)
    saved = [tables_folder(path) / "tables" / f"{name}.parquet"
             for name in ("trials", "iterations")]
    stale = ""
    if all(p.is_file() for p in saved):
        trials = pd.read_parquet(saved[0])
        stale = _stale(path, trials, saved, files)
        if not stale:
            return trials, pd.read_parquet(saved[1]), ""
    if not files:
        raise FwbenchError(f"{path}/cells holds no trial result (trial-<k>.json)")
    from fwbench.analysis.tables import collect_tables

    collected = collect_tables(files)
    return collected["trials"], collected["iterations"], stale


def _stale(path: Path, trials: pd.DataFrame, saved: list[Path], files: list[Path]) -> str:
    """Why the saved tables no longer say what the trial files say ("" when they do, or when
    there are no trial files to check them against)."""
    if not files:
        return ""
    reading = (f"reading the run's {len(files)} trial files instead (`fwbench rebuild {path}` "
               "updates the tables)")
    newest = max(files, key=lambda f: f.stat().st_mtime_ns)
    if newest.stat().st_mtime_ns > min(p.stat().st_mtime_ns for p in saved):
        return f"{saved[0].parent} is older than the trial file {newest}; {reading}"
    listed = set(zip(trials["cell_id"].astype(str), trials["trial"].astype(int)))
    found = {(f.parent.relative_to(path / "cells").as_posix(),
              int(TRIAL_FILE.fullmatch(f.name)[1])) for f in files}
    if listed != found:
        return (f"{saved[0].parent} lists {len(listed)} trials, {len(listed & found)} of them "
                f"among the {len(found)} trial files; {reading}")
    return ""


def _versions(path: Path) -> list[dict]:
    """The version audit: audit/versions.csv, else made from the trials' env.json files."""
    from fwbench.analysis.versions import read_csv, versions_table

    audit = path / "audit" / "versions.csv"
    if audit.is_file():
        return read_csv(audit)
    pairs = []
    for result in trial_files(path):
        env = result.with_suffix(".env.json")
        if env.is_file():
            framework = result.parents[2].name  # cells/<exp>/<device>/<framework>/<model>/<cell>
            pairs.append((framework, json.loads(env.read_text())))
    return versions_table(pairs)
