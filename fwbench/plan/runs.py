"""What `fwbench run` and `fwbench audit` ask Snakemake. A new run starts from one config (the
workflow's config.yaml, a preset, or a file) and never writes into a shipped run: results/<run>/
with the checksums of its rebuild (rebuild.sha256). A clone gives every committed file the
time of the clone, so Snakemake would take finished trials for out of date and measure them
again over the shipped ones; the run goes to results/<run>-2/ (or -3, ...) instead. The audit
reuses the rebuild's arguments, limited to the audit's rules: it measures nothing."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fwbench import SOURCE_DIR
from fwbench.errors import FwbenchError
from fwbench.plan.config import load
from fwbench.plan.sweep import Plan
from fwbench.workflow.manifest import MANIFEST
from fwbench.workflow.rebuild import rebuild_arguments

RESULTS = "results"
# The rules of rules/audit.smk, and the trials table they read (made from the cell files).
AUDIT_RULES = ("collect_tables", "audit_versions", "audit_diff", "audit")
CONTAINER_FLAGS = ("--use-singularity", "--use-apptainer")


@dataclass(frozen=True)
class NewRun:
    config: Path           # the config file the run plans from
    asked: str             # the run its config (or --config run=) names
    run: str               # the run it writes: `asked`, unless that is a shipped run
    arguments: list[str]   # Snakemake's
    groups: int = 0        # with --groups: the cell groups this sitting measures, then stops
    groups_left: int = 0   # and those still unmeasured after them

    @property
    def folder(self) -> str:
        return f"{RESULTS}/{self.run}/"


def is_shipped(run_dir: str | os.PathLike) -> bool:
    return Path(run_dir, MANIFEST).is_file()


def free_run(name: str, results: str | os.PathLike = RESULTS) -> str:
    """``name``, or the first of <name>-2, <name>-3, ... whose folder holds no shipped run (the
    same one each time, so running the command again resumes it)."""
    candidate, n = name, 1
    while is_shipped(Path(results, candidate)):
        n += 1
        candidate = f"{name}-{n}"
    return candidate


def config_file(preset: str | None = None, configfile: str | None = None) -> Path:
    """The config a run plans from: a file, presets/<preset>.yaml, or the workflow's
    config.yaml (this folder's, as `snakemake` reads it, else the one fwbench carries)."""
    if configfile:
        return Path(configfile)
    if not preset:
        return next(p for p in (Path("config.yaml"), SOURCE_DIR / "config.yaml") if p.is_file())
    for folder in (Path("presets"), SOURCE_DIR / "presets"):
        if (folder / f"{preset}.yaml").is_file():
            return folder / f"{preset}.yaml"
    names = sorted(p.stem for p in (SOURCE_DIR / "presets").glob("*.yaml"))
    raise FwbenchError(f"no preset {preset!r}; presets: {', '.join(names) or 'none here'}")


def _config_items(args: list[str]) -> tuple[int, int] | None:
    """Where the KEY=VALUE items of the last --config (-C) lie in ``args``: Snakemake keeps
    only the last one."""
    starts = [i for i, a in enumerate(args) if a in ("--config", "-C")]
    if not starts:
        return None
    end = starts[-1] + 1
    while end < len(args) and not args[end].startswith("-"):
        end += 1
    return starts[-1] + 1, end


def asked_run(config: dict, snakemake_args: list[str]) -> str:
    """The run Snakemake would write: a `run=` of --config, else the config's."""
    span = _config_items(snakemake_args)
    items = snakemake_args[span[0]:span[1]] if span else []
    return next((i.removeprefix("run=") for i in items if i.startswith("run=")), config["run"])


def with_run(snakemake_args: list[str], run: str) -> list[str]:
    """``snakemake_args`` with run=<run> among their --config items, in place of any other."""
    span = _config_items(snakemake_args)
    if span is None:
        return [*snakemake_args, "--config", f"run={run}"]
    start, end = span
    kept = [i for i in snakemake_args[start:end] if not i.startswith("run=")]
    return [*snakemake_args[:start], *kept, f"run={run}", *snakemake_args[end:]]


def uses_containers(snakemake_args: list[str]) -> bool:
    sdm = [snakemake_args[i + 1] for i, a in enumerate(snakemake_args[:-1])
           if a in ("--sdm", "--software-deployment-method")]
    return bool(set(CONTAINER_FLAGS) & set(snakemake_args)) or "apptainer" in sdm


def unmeasured_groups(plan: Plan, run: str) -> list[list[str]]:
    """The trial files of every cell group of ``plan`` with one still missing under
    results/<run>/ here, in the planned order."""
    groups: dict[str, list[str]] = {}
    for trial in sorted(plan.trials, key=lambda t: t.position):
        groups.setdefault(trial.cell.pair_id, []).append(trial.path(run))
    return [paths for paths in groups.values() if not all(map(os.path.exists, paths))]


def new_run(preset: str | None = None, configfile: str | None = None,
            snakemake_args: Sequence[str] = (), dry_run: bool = False,
            groups: int | None = None) -> NewRun:
    """Snakemake's arguments for a run of one config, resumed where an interrupted one stopped
    (--rerun-incomplete), on the cores its largest trial takes (a distributed cell's processes
    together: the README's --cores 2), and never in a shipped run's folder. Arguments given
    after them (``snakemake_args``) override them. ``groups``: measure only the next that many
    cell groups still unmeasured, then stop, so a run split over sittings never splits a group
    (its trials are measured together, fwbench.analysis.tables); once none is left, the whole
    run with its report."""
    path = config_file(preset, configfile)
    with warnings.catch_warnings():   # Snakemake says them, reading the same config
        warnings.simplefilter("ignore")
        config = load(path)
    plan = Plan.from_config(config)
    asked = asked_run(config, list(snakemake_args))
    run = free_run(asked)
    extra = with_run(list(snakemake_args), run) if run != asked else list(snakemake_args)
    left = unmeasured_groups(plan, run) if groups else []
    # Targets before the user's arguments, which may end in --config items.
    targets = [p for paths in left[:groups] for p in paths]
    arguments = ["--snakefile", str(SOURCE_DIR / "Snakefile"),
                 "--cores", str(max(plan.threads(t) for t in plan.trials)),
                 "--configfile", str(path), "--replace-workflow-config", "--rerun-incomplete",
                 *(["--dry-run"] if dry_run else []), *targets, *extra]
    return NewRun(path, asked, run, arguments, len(left[:groups]), len(left[groups or 0:]))


def audit_arguments(run_dir: str | os.PathLike, snakefile: str | os.PathLike) -> list[str]:
    """Snakemake's arguments that write a run's version audit (rules/audit.smk: the versions
    table, and its diff against every other audited run beside it) from its trial files alone,
    planned by the config the run saved, as a rebuild is."""
    try:
        arguments = rebuild_arguments(run_dir, snakefile)
    except ValueError as exc:
        raise FwbenchError(f"{exc}; move or link the run folder under a results/ folder") from None
    planned = arguments[:arguments.index("--forcerun")]
    return ["audit", *planned, "--forcerun", "audit_versions", "--allowed-rules", *AUDIT_RULES]
