"""results/index.html (``fwbench index``): every run under a results folder, each with a link to
its report, the machine it ran on, when, the framework versions and its headline, and every
comparison of two runs (``fwbench compare``) with its counts. Reads each run's tables and
statistics (or its trial files, when it was never rebuilt); decides nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from fwbench import __version__
from fwbench.analysis.claims.wording import join, label, outcome, unique
from fwbench.analysis.run_folder import is_run, load_run
from fwbench.files import write_atomic
from fwbench.report.render import REPORT_DIR

__all__ = ["write_index", "run_entry", "INDEX"]

INDEX = "index.html"
TEMPLATE = "index.html.j2"


def run_entry(run_dir: Path, index_dir: Path) -> dict:
    """One run as the index lists it; links are relative to ``index_dir``."""
    run = load_run(run_dir)
    trials = run.trials
    started = pd.to_datetime(trials["started_at"], utc=True)
    report = run_dir / "report" / "report.html"
    versions = [f"{label(f)} {join(unique(g, 'framework_version'))}"
                for f, g in trials.groupby("framework", sort=True)]
    return {
        "name": run.name,
        "report": _link(report, index_dir) if report.is_file() else None,
        "rebuild": f"fwbench rebuild {run_dir.as_posix()}",
        "machine": _machine(trials),
        "date": (f"{started.min():%Y-%m-%d}" if started.min().date() == started.max().date()
                 else f"{started.min():%Y-%m-%d} to {started.max():%Y-%m-%d}"),
        "versions": ", ".join(versions),
        "trials": f"{len(trials)} trials, {int((trials['status'] == 'ok').sum())} ok",
        "headline": _headline(run_dir / "stats" / "comparisons.csv"),
    }


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
    comparisons = pd.read_csv(path)
    if comparisons.empty:
        return "no matched pair was compared"
    kinds = [outcome(r) for _, r in comparisons.iterrows()]
    origins = comparisons["run"].nunique() if "run" in comparisons else 1
    per = f" (one per origin and pair, {origins} origins)" if origins > 1 else ""
    return (f"PyTorch faster in {kinds.count('pytorch_faster')} of {len(kinds)} comparisons{per}, "
            f"TensorFlow in {kinds.count('tensorflow_faster')}, equivalent in "
            f"{kinds.count('equivalent')}, inconclusive in {kinds.count('inconclusive')}")


def _comparison_entry(folder: Path, index_dir: Path) -> dict:
    cells = pd.read_csv(folder / "compare.csv")
    counts = cells["verdict"].value_counts()
    return {"name": folder.name, "page": _link(folder / "compare.html", index_dir),
            "counts": ", ".join(f"{v} {int(counts.get(v, 0))}"
                                for v in ("slower", "faster", "same", "inconclusive"))}


def _link(path: Path, index_dir: Path) -> str:
    return Path(os.path.relpath(path, index_dir)).as_posix()


def write_index(results: str | Path = "results", out: str | Path | None = None) -> Path:
    """Write the index of every run and comparison under ``results`` (default
    ``results``/index.html) and return its path."""
    import jinja2

    results = Path(results)
    out = Path(out) if out else results / INDEX
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
    write_atomic(out, html)
    return out
