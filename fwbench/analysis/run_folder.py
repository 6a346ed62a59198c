"""A finished run's folder as the commands over several runs read it (compare, merge, index):
its saved config and analysis plan, its trials and iterations tables, and its version audit.

A rebuilt run has tables/*.parquet and audit/versions.csv; a run that was only measured (or
copied from another machine as cells/) has its trial files, and the same tables are collected
from them here, so no command needs a rebuild first. Framework-free.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from fwbench.errors import FwbenchError

__all__ = ["Run", "load_run", "trial_files", "saved_config", "is_run"]

TRIAL_FILE = re.compile(r"trial-(\d+)\.json")


@dataclass
class Run:
    """One run: its folder, saved config (None when it kept none), analysis plan, tables."""

    path: Path
    config: dict | None
    statistics: dict
    trials: pd.DataFrame
    iterations: pd.DataFrame
    versions: list[dict] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name


def is_run(path: str | Path) -> bool:
    path = Path(path)
    return (path / "cells").is_dir() or (path / "tables" / "trials.parquet").is_file()


def trial_files(run_dir: str | Path) -> list[Path]:
    """Every trial result under ``run_dir``/cells (not its env, telemetry or profile files)."""
    return sorted(p for p in Path(run_dir, "cells").rglob("trial-*.json")
                  if TRIAL_FILE.fullmatch(p.name))


def saved_config(run_dir: str | Path) -> dict | None:
    """The config the run was measured with (``run_dir``/config.yaml), validated, or None."""
    from fwbench.plan.config import load

    path = Path(run_dir, "config.yaml")
    return load(path) if path.is_file() else None


def _default_statistics() -> dict:
    from fwbench.plan.config import load_schema

    spec = load_schema()["properties"]["statistics"]["properties"]
    return {key: value["default"] for key, value in spec.items() if "default" in value}


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
    statistics = config["statistics"] if config else _default_statistics()
    trials, iterations = _tables(path)
    return Run(path, config, statistics, trials, iterations, _versions(path))


def _tables(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    tables = path / "tables"
    if (tables / "trials.parquet").is_file() and (tables / "iterations.parquet").is_file():
        return (pd.read_parquet(tables / "trials.parquet"),
                pd.read_parquet(tables / "iterations.parquet"))
    from fwbench.analysis.tables import collect_tables

    files = trial_files(path)
    if not files:
        raise FwbenchError(f"{path}/cells holds no trial result (trial-<k>.json)")
    collected = collect_tables(files)
    return collected["trials"], collected["iterations"]


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
