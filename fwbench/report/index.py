"""results/index.html (``fwbench index``): every run under a results folder, each with a link to
its report, the machine it ran on, when, the framework versions and its headline, and every
comparison of two runs (``fwbench compare``) with its counts. Reads each run's tables and
statistics (a shipped run's recorded ones where it was not rebuilt here, its trial files when
it has no table); decides nothing. A run or comparison that does not read is listed as
unreadable, with why, and the others are indexed."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from fwbench import __version__
from fwbench.analysis.claims.wording import count, join, label, outcome, unique
from fwbench.analysis.export import read_table
from fwbench.analysis.gate import failures, passes
from fwbench.analysis.run_folder import is_run, tables_folder, trial_files
from fwbench.errors import FwbenchError, ResultError
from fwbench.files import write_atomic
from fwbench.plan.frameworks import FASTER
from fwbench.report.render import REPORT_DIR

__all__ = ["write_index", "run_entry", "INDEX"]

INDEX = "index.html"
TEMPLATE = "index.html.j2"
# The trials table's columns no entry can be made without (the others may be missing).
TRIAL_COLUMNS = ("run", "started_at", "framework", "status")


def run_entry(run_dir: Path, index_dir: Path) -> dict:
    """One run as the index lists it; links are relative to ``index_dir``. A run that does not
    read gets ``unreadable`` (why) and its headline says so."""
    report = run_dir / "report" / "report.html"
    entry = {"name": run_dir.name,
             "report": _link(report, index_dir) if report.is_file() else None,
             "rebuild": f"fwbench rebuild {run_dir.as_posix()}"}
    try:
        return {**entry, **_facts(run_dir)}
    except FwbenchError as exc:
        why = " ".join(str(exc).split())
        return {**entry, "machine": "—", "date": "—", "versions": "—", "trials": "—",
                "headline": f"unreadable: {why}", "unreadable": why}


def _facts(run_dir: Path) -> dict:
    trials = _trials(run_dir)
    started = pd.to_datetime(trials["started_at"], utc=True)
    versions = [f"{label(f)} {join(unique(g, 'framework_version'))}"
                for f, g in trials.groupby("framework", sort=True)]
    return {
        "machine": _machine(trials),
        "date": (f"{started.min():%Y-%m-%d}" if started.min().date() == started.max().date()
                 else f"{started.min():%Y-%m-%d} to {started.max():%Y-%m-%d}"),
        "versions": ", ".join(versions),
        "trials": f"{len(trials)} trials, {int((trials['status'] == 'ok').sum())} ok",
        "headline": _preliminary(tables_folder(run_dir) / "stats" / "gate.csv")
        + _headline(tables_folder(run_dir) / "stats" / "comparisons.csv"),
    }


def _trials(run_dir: Path) -> pd.DataFrame:
    """The trials table: rebuilt or recorded, else collected from the trial files (slower)."""
    table = tables_folder(run_dir) / "tables" / "trials.parquet"
    if table.is_file():
        return read_table(table, TRIAL_COLUMNS)
    from fwbench.analysis.tables import collect_tables

    files = trial_files(run_dir)
    if not files:
        raise ResultError(f"{run_dir}/cells holds no trial result (trial-<k>.json)")
    return collect_tables(files)["trials"]


def _machine(trials: pd.DataFrame) -> str:
    """Host, CPU model and cores, and the GPU where there is one; each origin of a merged
    run in turn."""
    parts = []
    for _, group in trials.groupby("run", sort=False):
        cpu = f"{join(unique(group, 'cpu_model'))} ({join(unique(group, 'cpu_count'))} cores)"
        gpu = unique(group, "device_name")
        parts.append(f"{join(unique(group, 'hostname'))}: {cpu}"
                     + (f", {join(gpu)}" if gpu else ""))
    return "; ".join(parts)


def _headline(path: Path) -> str:
    """How PyTorch and TensorFlow compared, counted over the run's matched pairs."""
    if not path.is_file():
        return "no statistics yet: rebuild the run"
    comparisons = read_table(path)
    if comparisons.empty:
        return "no matched pair was compared"
    kinds = [outcome(r) for _, r in comparisons.iterrows()]
    origins = comparisons["run"].nunique() if "run" in comparisons else 1
    per = f" (one per origin and pair, {origins} origins)" if origins > 1 else ""
    return (f"PyTorch faster in {kinds.count(FASTER[0])} of {len(kinds)} comparisons{per}, "
            f"TensorFlow in {kinds.count(FASTER[1])}, equivalent in "
            f"{kinds.count('equivalent')}, inconclusive in {kinds.count('inconclusive')}")


def _preliminary(path: Path) -> str:
    """"preliminary" before the headline of a run that failed the shipping gate
    (fwbench.analysis.gate): its comparisons are listed, its claims count nowhere."""
    if not path.is_file() or passes(gate := read_table(path, ("check", "passed", "reason"))):
        return ""
    return (f"preliminary, {count(len(failures(gate)), 'reason')} in its README (it failed the "
            "gate a run passes before it ships; its claim verdicts count toward no finding): ")


def _comparison_entry(folder: Path, index_dir: Path) -> dict:
    entry = {"name": folder.name, "page": _link(folder / "compare.html", index_dir)}
    try:
        counts = read_table(folder / "compare.csv", ("verdict",))["verdict"].value_counts()
    except FwbenchError as exc:
        why = " ".join(str(exc).split())
        return {**entry, "counts": f"unreadable: {why}", "unreadable": why}
    return {**entry, "counts": ", ".join(f"{v} {int(counts.get(v, 0))}"
                                         for v in ("slower", "faster", "same", "inconclusive"))}


def _link(path: Path, index_dir: Path) -> str:
    return Path(os.path.relpath(path, index_dir)).as_posix()


def write_index(results: str | Path = "results",
                out: str | Path | None = None) -> tuple[Path, dict[str, str]]:
    """Write the index of every run and comparison under ``results`` (default
    ``results``/index.html); return its path and why each unreadable one is, by name."""
    import jinja2

    results = Path(results)
    if not results.is_dir():
        why = "it does not exist" if not results.exists() else "it is a file"
        raise FwbenchError(f"{results} is not a folder of runs ({why}); give the results "
                           "folder, e.g. results")
    out = Path(out) if out else results / INDEX
    if out.is_dir():
        raise FwbenchError(f"{out} is a folder; give the file to write, e.g. {out / INDEX}")
    folders = sorted(p for p in results.iterdir() if p.is_dir())
    runs = [run_entry(p, out.parent) for p in folders if is_run(p)]
    comparisons = [_comparison_entry(p, out.parent) for p in folders
                   if (p / "compare.csv").is_file() and (p / "compare.html").is_file()]
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(REPORT_DIR / "templates"),
                                     autoescape=True, undefined=jinja2.StrictUndefined,
                                     lstrip_blocks=True, trim_blocks=True)
    html = environment.get_template(TEMPLATE).render(
        runs=runs, comparisons=comparisons, generator=f"fwbench {__version__}",
        css=(REPORT_DIR / "style.css").read_text())
    try:
        write_atomic(out, html)
    except OSError as exc:
        raise FwbenchError(f"cannot write {out}: {exc.strerror} ({exc.filename})") from None
    return out, {e["name"]: e["unreadable"] for e in runs + comparisons if "unreadable" in e}
