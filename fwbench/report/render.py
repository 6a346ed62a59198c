"""The paper: one Jinja2 template renders the HTML; WeasyPrint renders the PDF from that HTML.

Framework-free. Reads the tidy tables and the statistics only, never cell files. The template
computes nothing: this module turns the tables into plain dicts of formatted text (a value that
was not measured becomes ``NotMeasured`` with its reason, never "nan" or "None"), and the
template lays them out.

Usage::

    build_report({"iterations": ..., "trials": ..., "cells": ..., "cell_stats": ...,
                  "comparisons": ..., "tests": ...,
                  "versions": "results/default/audit/versions.csv"},  # optional
                 html="results/default/report/report.html",
                 pdf="results/default/report/report.pdf",
                 figures="results/default/report/figures", run="default")
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from fwbench import SOURCE_DIR, __version__
from fwbench.analysis.claims import (
    MIN_TRIALS_FOR_VERDICT,
    VERDICTS,
    evaluate_claim,
    load_claims,
)
from fwbench.analysis.claims.distributed import (
    DISTRIBUTED_ABSENT,
    NO_SCALING,
    NO_STRATEGIES,
    distributed_absent as _distributed_absent,
    faster_text as _faster_text,
    shortfall as _shortfall,
)
from fwbench.analysis.claims.florencio import TELEMETRY_LABELS, telemetry_absent
from fwbench.analysis.claims.real_data import (
    metric_format as _metric_format,
    no_real_data as _no_real_data,
    real_data_trials,
)
from fwbench.analysis.claims.wording import (
    fmt_duration,
    fmt_interval,
    fmt_p,
    join as _join,
    label as _label,
    percent as _percent,
    sig,
    text as _text,
    unique as _unique,
    with_level,
)
from fwbench.analysis.estimators import median_ci
from fwbench.analysis.telemetry_trace import CHOICE
from fwbench.analysis.trial_quality import adjacency_summary, steadiness_summary
from fwbench.environment.images import DIGEST
from fwbench.measure.telemetry.machine import CPU_COLUMNS, GPU_COLUMNS
from fwbench.plan.cells import REAL_DATA
from fwbench.report.figures import (
    convergence,
    flops,
    papers,
    scaling,
    speed,
    style,
    telemetry,
    usage as usage_figures,
    why,
)
from fwbench.report.figures.style import missing, outcome

if TYPE_CHECKING:  # imported where used, like jinja2
    import markupsafe

REPORT_DIR = SOURCE_DIR / "report"
TEMPLATE = "report.html.j2"
# Provenance columns the trials table may carry; each one absent is named in the version audit.
AUDIT_COLUMNS = {
    "framework_version": "framework version",
    "python": "Python",
    "cuda": "CUDA (framework build)",
    "cudnn": "cuDNN (framework build)",
    "driver": "NVIDIA driver",
    "device_name": "device name",
    "cpu_model": "CPU model",
    "cpu_count": "CPU count",
    "platform": "platform",
    "hostname": "host",
    "container": "container",
    "image_digest": "image digest",
    "git_commit": "workflow commit",
    "git_dirty": "uncommitted changes",
}
HARDWARE_COLUMNS = ["cpu_model", "cpu_count", "device_name", "driver", "platform", "hostname"]
# --- inputs -----------------------------------------------------------------------------------

@dataclass
class Inputs:
    """The report's tables; ``problems`` says why a table is empty when it is."""

    trials: pd.DataFrame
    cells: pd.DataFrame
    cell_stats: pd.DataFrame
    comparisons: pd.DataFrame
    tests: pd.DataFrame
    problems: dict = field(default_factory=dict)
    # The "why" section's inputs (fwbench.plan.ablation, fwbench.measure.profiling); empty when
    # not run.
    ablation: pd.DataFrame = field(default_factory=pd.DataFrame)
    gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    profiles: pd.DataFrame = field(default_factory=pd.DataFrame)
    # Beyond one device (fwbench.measure.distributed), achieved FLOP/s (fwbench.analysis.flops)
    # and one trial's telemetry over time (fwbench.analysis.telemetry_trace); empty when not
    # passed.
    scaling: pd.DataFrame = field(default_factory=pd.DataFrame)
    strategies: pd.DataFrame = field(default_factory=pd.DataFrame)
    flops: pd.DataFrame = field(default_factory=pd.DataFrame)
    telemetry_trace: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The real-data experiments' records (fwbench.measure.results): per epoch, and confusion
    # matrices.
    epochs: pd.DataFrame = field(default_factory=pd.DataFrame)
    confusion: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The version audit (rules/audit.smk): versions.csv, and each diff-<other>.csv beside it.
    versions: pd.DataFrame = field(default_factory=pd.DataFrame)
    diffs: dict = field(default_factory=dict)
    versions_path: str | None = None
    # What a framework costs its user (fwbench.analysis.memory, fwbench.analysis.latency), and
    # the iterations the latency distribution is drawn from; empty when not passed.
    memory: pd.DataFrame = field(default_factory=pd.DataFrame)
    memory_comparisons: pd.DataFrame = field(default_factory=pd.DataFrame)
    latency: pd.DataFrame = field(default_factory=pd.DataFrame)
    iterations: pd.DataFrame = field(default_factory=pd.DataFrame)


def load_inputs(inputs: dict) -> Inputs:
    """Read the tables named by the workflow; a missing or empty one becomes an empty frame.

    Of the iterations table only what the latency distribution draws is read.
    """
    frames, problems = {}, {}
    for name in ("trials", "cells", "cell_stats", "comparisons", "tests"):
        frames[name], problem = _read_table(inputs.get(name), name)
        if problem:
            problems[name] = problem
    for name in ("cell_stats", "comparisons"):
        frames[name] = _normalize_axes(frames[name])
    pairs = frames["cells"] if not frames["cells"].empty else frames["trials"]
    frames["comparisons"] = _with_unmeasured_pairs(frames["comparisons"], pairs)
    for name in ("ablation", "gaps", "profiles", "scaling", "strategies", "flops",
                 "telemetry_trace", "epochs", "confusion", "memory", "memory_comparisons",
                 "latency"):  # optional, e.g. no ablation
        if inputs.get(name) is not None:
            frames[name], problem = _read_table(inputs[name], name)
            if problem:
                problems[name] = problem
            frames[name] = _normalize_axes(frames[name])
    for name in ("memory", "memory_comparisons", "latency"):
        if inputs.get(name) is None:
            problems[name] = (f"the workflow passed no {name} table (stats/{name}.csv, rule "
                              "summarise_results)")
    frames["iterations"] = _read_iterations(inputs.get("iterations"))
    frames["versions"], frames["diffs"], problem = _read_audit(inputs.get("versions"))
    if problem:
        problems["versions"] = problem
    if inputs.get("versions") is not None:
        frames["versions_path"] = str(inputs["versions"])
    return Inputs(**frames, problems=problems)


ITERATION_COLUMNS = ["run", "cell_id", "pair_id", "framework", "trial", "iteration", "time_ns"]


def _read_iterations(path) -> pd.DataFrame:
    """The iteration times, with the cell's axes from the trials table when drawn."""
    if path is None or not Path(path).exists():
        return pd.DataFrame()
    import pyarrow.parquet as pq

    have = set(pq.read_schema(path).names)
    columns = [c for c in ITERATION_COLUMNS + style.PAIR_AXES if c in have]
    return _normalize_axes(pd.read_parquet(path, columns=columns))


def _read_audit(path) -> tuple[pd.DataFrame, dict, str | None]:
    """The version audit's versions.csv and every diff-<other>.csv beside it, all as text.

    Optional: the report says how to produce the audit when it is absent.
    """
    if path is None:
        return pd.DataFrame(), {}, "the workflow passed no versions table"
    path = Path(path)
    diffs = {}
    for diff in sorted(path.parent.glob("diff-*.csv")) if path.parent.is_dir() else []:
        diffs[diff.stem.removeprefix("diff-")] = _read_text_csv(diff)
    if not path.exists():
        return pd.DataFrame(), diffs, f"{path.name} does not exist"
    frame = _read_text_csv(path)
    return frame, diffs, None if len(frame) else f"{path.name} has no rows"


def _read_text_csv(path: Path) -> pd.DataFrame:
    """A CSV with every value kept as written ("" where nothing was recorded)."""
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def _with_unmeasured_pairs(comparisons: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Comparisons plus a row without a ratio for every pair the statistics could not compare.

    The statistics compare a pair only when both frameworks have ok trials; a pair that failed
    stays in the report (patel2023 dropped its out-of-memory points; we show each one).
    """
    if cells.empty or "pair_id" not in cells:
        return comparisons
    known = set(comparisons["pair_id"]) if "pair_id" in comparisons else set()
    axes = [a for a in style.PAIR_AXES if a in cells]
    extra = (cells[~cells["pair_id"].astype(str).isin(known)]
             .drop_duplicates("pair_id")[["pair_id", *axes]])
    if extra.empty:
        return comparisons
    return _normalize_axes(pd.concat([comparisons, extra], ignore_index=True))


def _read_table(path, name: str) -> tuple[pd.DataFrame, str | None]:
    if path is None:
        return pd.DataFrame(), f"the workflow passed no {name} table"
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(), f"{path.name} does not exist"
    try:
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame(), f"{path.name} is empty"
    if frame.empty:
        return frame, f"{path.name} has no rows"
    return frame, None


def _normalize_axes(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    if "batch_size" in frame:
        frame["batch_size"] = pd.to_numeric(frame["batch_size"], errors="coerce").astype("Int64")
    for axis in style.PAIR_AXES + ["framework", "pair_id", "cell_id"]:
        if axis in frame and axis != "batch_size":
            frame[axis] = frame[axis].astype(str)
    return frame


def source_date_epoch(trials: pd.DataFrame) -> int:
    """The report's date: when the last trial ended (0 when no trial ran); never the clock."""
    if trials.empty or "ended_at" not in trials:
        return 0
    ended = pd.to_datetime(trials["ended_at"], utc=True, errors="coerce").dropna()
    return int(ended.max().timestamp()) if len(ended) else 0


# --- formatting -------------------------------------------------------------------------------

@dataclass(frozen=True)
class NotMeasured:
    """A value that was not measured; ``note`` numbers its reason in the table's notes."""

    reason: str
    note: int

    def __str__(self) -> str:
        return "not measured"


class Notes:
    """The reasons behind a table's ``not measured`` entries, each numbered once."""

    def __init__(self):
        self.reasons: list[str] = []

    def missing(self, reason: str) -> NotMeasured:
        if reason not in self.reasons:
            self.reasons.append(reason)
        return NotMeasured(reason, self.reasons.index(reason) + 1)


def _get(row, column: str, notes: Notes, reason: str, fmt=str):
    """The formatted value of ``row[column]``, or NotMeasured with ``reason``."""
    if column not in row.index:
        return notes.missing(f"the statistics have no column `{column}`")
    value = row[column]
    return notes.missing(reason) if missing(value) else fmt(value)


def _interval(row, low: str, high: str, notes: Notes, reason: str, fmt=sig):
    for column in (low, high):
        if column not in row.index:
            return notes.missing(f"the statistics have no column `{column}`")
    if missing(row[low]) or missing(row[high]):
        return notes.missing(reason)
    return fmt_interval(row[low], row[high], fmt)


def _span(values) -> str:
    """A count or range of counts as text: "3" or "2–3"."""
    values = sorted({int(v) for v in values if not missing(v)})
    if not values:
        return "none"
    return str(values[0]) if len(values) == 1 else f"{values[0]}–{values[-1]}"


# --- numbering: figures and tables in document order ------------------------------------------

class Numbering:
    """Numbers figures and tables in the order the template shows them."""

    def __init__(self):
        self.count = {"figure": 0, "table": 0}

    def next(self, kind: str) -> int:
        self.count[kind] += 1
        return self.count[kind]


class Legend:
    """Long remarks shared by many rows, each written once under the table and cited by label."""

    def __init__(self, prefix: str):
        self.prefix, self.texts = prefix, []

    def cite(self, texts) -> str:
        labels = []
        for text in texts:
            if text not in self.texts:
                self.texts.append(text)
            labels.append(f"{self.prefix}{self.texts.index(text) + 1}")
        return ", ".join(labels)

    def entries(self) -> list[tuple[str, str]]:
        return [(f"{self.prefix}{i}", text) for i, text in enumerate(self.texts, 1)]


def _table(numbering: Numbering, key: str, caption: str, columns: list[str], rows: list,
           notes: Notes, empty: str, wide: bool = True, classes: list[str] | None = None,
           legend: Legend | None = None) -> dict:
    """A numbered table; a row is a list of values, or {"group": title} to head a group."""
    return {"key": key, "number": numbering.next("table") if rows else None, "caption": caption,
            "columns": columns, "rows": rows, "notes": notes.reasons, "empty": empty,
            "wide": wide, "classes": classes or ["" for _ in columns],
            "legend": legend.entries() if legend else []}


def _figure(numbering: Numbering, figure: style.Figure, href: str) -> dict:
    return {"key": figure.key, "title": figure.title, "caption": figure.caption,
            "source": figure.source, "reason": figure.reason,
            "src": f"{href}/{figure.file}" if figure.file else None,
            "number": numbering.next("figure") if figure.file else None,
            "narrow": figure.narrow}


# --- facts of the run ---------------------------------------------------------------------------

def failure_reasons(trials: pd.DataFrame) -> dict:
    """pair id -> why the pair is incomplete, from its failed trials."""
    if trials.empty or "status" not in trials:
        return {}
    failed = trials[trials["status"] != "ok"]
    reasons = {}
    for pair_id, group in failed.groupby("pair_id", sort=True):
        parts = []
        for (framework, status), sub in group.groupby(["framework", "status"], sort=True):
            message = _first_message(sub)
            parts.append(f"{_label(framework)} {status} in {len(sub)} trial(s)"
                         + (f" ({message})" if message else ""))
        reasons[str(pair_id)] = "; ".join(parts)
    return reasons


def _first_message(group: pd.DataFrame) -> str:
    for message in group.get("message", []):
        if not missing(message) and str(message).strip():
            return " ".join(str(message).split())[:120]
    return ""


def run_facts(data: Inputs, run: str, epoch: int) -> dict:
    trials, cells = data.trials, data.cells
    n_ok = int((trials["status"] == "ok").sum()) if "status" in trials else 0
    started = pd.to_datetime(trials.get("started_at", pd.Series(dtype=object)), utc=True,
                             errors="coerce").dropna()
    return {
        "run": run,
        "n_trials": len(trials),
        "n_ok": n_ok,
        "n_failed": len(trials) - n_ok,
        "n_cells": int(trials["cell_id"].nunique()) if "cell_id" in trials else len(cells),
        "n_pairs": int(trials["pair_id"].nunique()) if "pair_id" in trials else 0,
        "frameworks": [_label(f) for f in _unique(trials, "framework")],
        "models": _unique(trials, "model"),
        "phases": _unique(trials, "phase"),
        "devices": _unique(trials, "device"),
        "experiments": _unique(trials, "experiment"),
        "batch_sizes": [str(b) for b in sorted({int(b) for b in trials.get("batch_size", [])})],
        "precisions": _unique(trials, "precision"),
        "modes": _unique(trials, "mode"),
        "profiles": _unique(trials, "profile"),
        "started": _iso(started.min()) if len(started) else "no trial started",
        "ended": _iso(pd.Timestamp(epoch, unit="s", tz="UTC")) if epoch else "no trial ended",
        "commits": [c[:12] for c in _unique(trials, "git_commit")],
    }


def _iso(stamp) -> str:
    return stamp.strftime("%Y-%m-%d %H:%M UTC")


def software(trials: pd.DataFrame) -> list[dict]:
    """Per framework: versions, threads and settings in force, as recorded by each trial."""
    rows = []
    for framework in _unique(trials, "framework"):
        part = trials[trials["framework"].astype(str) == framework]
        ok = part[part["status"] == "ok"] if "status" in part else part
        rows.append({
            "framework": framework,
            "label": _label(framework),
            "version": _join(_unique(part, "framework_version")) or "not recorded",
            "threads_intra": _join(_unique(part, "threads_intra")) or "not recorded",
            "threads_inter": _join(_unique(part, "threads_inter")) or "not recorded",
            "threads_requested": _join(_unique(part, "threads_requested")) or "not recorded",
            "mode": _join(_unique(part, "framework_mode")) or "not recorded",
            "layout": _join(_layouts(part)) or "not recorded",
            "trials": len(part),
            "iterations": _span(ok.get("n_iterations", [])),
            "warmup": _span(ok.get("warmup_iterations", [])),
        })
    return rows


def _machine_columns(trials: pd.DataFrame) -> list[str]:
    """The machine-state columns that apply: CPU settings always, GPU settings with a GPU."""
    gpu = "device" in trials and trials["device"].astype(str).eq("cuda").any()
    return [*CPU_COLUMNS, *(GPU_COLUMNS if gpu else ())]


def machine_warnings(trials: pd.DataFrame) -> list[str]:
    """Clock, turbo, power-limit or similar settings that changed between the trials of one
    comparison: the two frameworks did not run on the same machine state."""
    out = []
    for column in _machine_columns(trials):
        if column not in trials or "pair_id" not in trials:
            continue
        values = trials[["pair_id", column]].dropna().astype(str)
        differs = values.groupby("pair_id")[column].nunique()
        groups = sorted(differs[differs > 1].index)
        if groups:
            out.append(f"The machine's {column.replace('_', ' ')} changed between trials of "
                       f"{len(groups)} cell group(s) ({_join(_unique(values, column))}), e.g. "
                       f"`{groups[0]}`: its frameworks did not run on the same machine state.")
    if "machine_note" in trials and trials["machine_note"].notna().any():
        out.append("Some trials ran on devices whose settings differ: "
                   + _join(_unique(trials, "machine_note")) + ".")
    return out


def _layouts(trials: pd.DataFrame) -> list[str]:
    """Each layout a framework ran, with the reason its trials recorded."""
    if "layout_reason" not in trials:
        return _unique(trials, "layout")
    pairs = trials[["layout", "layout_reason"]].dropna(subset=["layout"]).drop_duplicates()
    return [f"{row.layout} ({row.layout_reason})" if not missing(row.layout_reason)
            else str(row.layout) for row in pairs.sort_values("layout").itertuples()]


def warnings(data: Inputs, soft: list[dict]) -> list[str]:
    """What a reader must know before trusting the numbers."""
    trials, out = data.trials, []
    commits = trials["git_commit"].dropna().astype(str) if "git_commit" in trials else []
    if len(set(commits)) > 1:
        counts = pd.Series(commits).value_counts().sort_index()
        listed = _join(f"{c[:12]} ({n} trials)" for c, n in counts.items())
        out.append(f"This run mixes workflow commits: {listed}. Trials measured by different "
                   "code are compared as if they were one run; re-run the older trials.")
    if "git_commit" in trials and trials["git_commit"].isna().any():
        out.append(f"{int(trials['git_commit'].isna().sum())} trial(s) recorded no workflow "
                   "commit (git could not tell).")
    if "git_dirty" in trials and trials["git_dirty"].fillna(False).astype(bool).any():
        n = int(trials["git_dirty"].fillna(False).astype(bool).sum())
        out.append(f"{n} trial(s) ran from a work tree with uncommitted changes: their commit "
                   "does not identify the code that measured them.")
    if "measured_together" in trials and "pair_id" in trials:
        apart = trials[trials["measured_together"].eq(False)]["pair_id"].dropna().unique()
        if len(apart):
            out.append(f"{len(apart)} cell group(s) were not measured together (a partial "
                       "re-run measured one side later, or out of the planned order), so drift "
                       "can favour one framework: " + _join(f"`{p}`" for p in sorted(apart)[:5])
                       + (" …" if len(apart) > 5 else "") + ".")
    threads = {s["threads_intra"] for s in soft}
    if len(threads) > 1:
        out.append("The frameworks ran with different intra-op thread counts ("
                   + _join(f"{s['label']} {s['threads_intra']}" for s in soft) + ").")
    for s in soft:
        if " and " in s["version"]:
            out.append(f"{s['label']} ran in several versions in this run: {s['version']}.")
    versions = _unique(trials, "fwbench_version")
    if len(versions) > 1:
        out.append(f"This run mixes fwbench versions ({_join(versions)}): trials measured by "
                   "different releases are compared as one run.")
    out += machine_warnings(trials)
    out += unpinned_warnings(trials)
    out += [f"The {name.replace('_', ' ')} table is missing: {why}." for name, why in
            sorted(data.problems.items()) if name in ("trials", "cell_stats", "comparisons")]
    return out


# --- the stack each framework ran on, and whether its image was pinned ---------------------------

# Trials-table columns (fwbench.analysis.tables.environment_columns) that make up a framework's
# stack.
STACK_ITEMS = {
    "cuda": "CUDA (framework build)",
    "cudnn": "cuDNN (framework build)",
    "python": "Python",
    "platform": "OS/platform",
    "container": "container image",
    "image_digest": "image digest",
}
# Columns a trial fills from its env.json: one of them set means the trial recorded its environment.
ENVIRONMENT_COLUMNS = ("hostname", "platform", "python", "cpu_model", "container")
NATIVE = "none (native)"


def _is_native(container) -> bool:
    return not missing(container) and str(container) == "none"


def _pinned(digest) -> bool:
    return not missing(digest) and bool(DIGEST.match(str(digest)))


def _where(frame: pd.DataFrame, keep: list[bool]) -> pd.DataFrame:
    """The rows of ``frame`` where ``keep`` is true (an empty list keeps no row)."""
    return frame.loc[pd.Series(keep, index=frame.index, dtype=bool)]


def _column(frame: pd.DataFrame, column: str) -> pd.Series:
    """``frame[column]``, or a column of None where the table has none."""
    if column in frame:
        return frame[column]
    return pd.Series([None] * len(frame), index=frame.index, dtype=object)


def _recorded(row) -> bool:
    return any(not missing(row.get(c)) for c in ENVIRONMENT_COLUMNS)


def _stack_value(row, column: str) -> str | None:
    """One trial's value of a stack item as text; None where the trial recorded no environment."""
    if column in ("container", "image_digest"):
        container = row.get("container")
        if missing(container):
            return None
        if _is_native(container):
            return NATIVE
        if column == "container":
            return str(container)
        digest = row.get("image_digest")
        return str(digest) if _pinned(digest) else "none (unpinned)"
    value = row.get(column)
    if not missing(value) and str(value).strip():
        return _text(value)
    if column in ("cuda", "cudnn") and _recorded(row):
        return "none (not in this build)"
    return None


def stack_differences(numbering: Numbering, trials: pd.DataFrame) -> dict:
    """Per framework: CUDA and cuDNN of its build, Python, OS, image and digest, from the trials
    table; which are the same in both environments and which differ; where each was measured."""
    frameworks = _unique(trials, "framework")
    notes, rows = Notes(), []
    status: dict[str, list[str]] = {"same": [], "differ": [], "unknown": []}
    has_any = any(c in trials for c in STACK_ITEMS)
    for column, title in (STACK_ITEMS.items() if has_any and frameworks else []):
        source = "container" if column == "image_digest" else column
        values = []
        for framework in frameworks:
            part = trials[trials["framework"].astype(str) == framework]
            if source not in trials:
                values.append(notes.missing(f"the trials table has no `{source}` column"))
                continue
            found = [_stack_value(row, column) for _, row in part.iterrows()]
            known = sorted({v for v in found if v is not None})
            if not known:
                values.append(notes.missing("no trial of this framework recorded its environment "
                                            "(no env.json beside its result)"))
                continue
            unrecorded = found.count(None)
            values.append(_join(known) + (f" ({unrecorded} of {len(found)} trials recorded none)"
                                          if unrecorded else ""))
        compared = []
        if len(frameworks) > 1:
            if any(isinstance(v, NotMeasured) for v in values):
                kind = "unknown"
            else:
                kind = "same" if len(set(values)) == 1 else "differ"
            status[kind].append(title)
            compared = [{"same": "same", "differ": "differs", "unknown": "unknown"}[kind]]
        rows.append([title, *values, *compared])
    labels = [_label(f) for f in frameworks]
    table = _table(
        numbering, "stack", "Stack of each framework environment, from the environment every "
        "trial recorded (its env.json): the CUDA and cuDNN versions the framework was built "
        "against, Python, the operating system, and the container image with its digest. The "
        "libraries actually loaded, the compiler and every package are in the version audit "
        "(Appendix A).",
        ["Item", *labels] + (["In both"] if len(frameworks) > 1 else []), rows, notes,
        "No stack can be listed: the trials table has none of the columns "
        + _join(f"`{c}`" for c in STACK_ITEMS) + " (fwbench.measure.results reads them from each "
        "trial's env.json).", classes=["", *["id"] * len(labels), ""])
    return {"table": table, "frameworks": labels, **status,
            "where": [s for f in frameworks for s in _where_measured(trials, f)]}


def _where_measured(trials: pd.DataFrame, framework: str) -> list[str]:
    """Sentences saying where one framework's trials ran: natively, or in which image."""
    if "container" not in trials:
        return []
    part = trials[trials["framework"].astype(str) == framework]
    label, total, out = _label(framework), len(part), []

    def count(n: int) -> str:
        if n == total:
            return f"all {n} trials" if n > 1 else "its one trial"
        return f"{n} of {total} trials"

    native = _where(part, [_is_native(c) for c in part["container"]])
    if len(native):
        out.append(f"{label}: {count(len(native))} measured natively, no container image "
                   "(container: none).")
    digests = _column(part, "image_digest")
    contained = _where(part, [not missing(c) and not _is_native(c) for c in part["container"]])
    for image, group in contained.groupby(contained["container"].astype(str), sort=True):
        pinned = sorted({str(d) for d in digests[group.index] if _pinned(d)})
        n_unpinned = sum(not _pinned(d) for d in digests[group.index])
        if pinned:
            out.append(f"{label}: {count(len(group) - n_unpinned)} ran in the image `{image}`, "
                       f"pinned by its digest {_join(f'`{d}`' for d in pinned)}.")
        if n_unpinned:
            out.append(f"{label}: {count(n_unpinned)} ran in the image `{image}` with no sha256 "
                       "digest on record: unpinned.")
    unknown = int(part["container"].isna().sum())
    if unknown:
        out.append(f"{label}: {count(unknown)} recorded no environment, so where they ran is "
                   "unknown.")
    return out


def unpinned_warnings(trials: pd.DataFrame) -> list[str]:
    """A trial in a container image without a sha256 digest, or with no environment record."""
    if "container" not in trials or "framework" not in trials:
        return []
    out = []
    unpinned = _where(trials, [not missing(c) and not _is_native(c) and not _pinned(d) for c, d
                               in zip(trials["container"], _column(trials, "image_digest"))])
    keys = [unpinned["framework"].astype(str), unpinned["container"].astype(str)]
    for (framework, image), group in unpinned.groupby(keys, sort=True):
        out.append(f"{len(group)} {_label(framework)} trial(s) ran in the unpinned image "
                   f"`{image}`: no sha256 digest is on record, so the image that measured them "
                   "cannot be identified. Pin it (`make pin-images`), commit "
                   "containers/images.lock and re-run these trials.")
    unknown = int(trials["container"].isna().sum())
    if unknown:
        out.append(f"{unknown} trial(s) recorded no environment (no env.json beside the "
                   "result): whether they ran natively or in a pinned image is unknown.")
    return out


# --- tables -------------------------------------------------------------------------------------

def _varying(frame: pd.DataFrame, axes: list[str]) -> list[str]:
    return [a for a in axes if a in frame and frame[a].astype(str).nunique() > 1]


def _constant(frame: pd.DataFrame, axes: list[str]) -> str:
    return "; ".join(f"{a.replace('_', ' ')} {value}"
                     for a, value in style.constant_axes(frame, axes).items())


def _axis_header(axis: str) -> str:
    return {"batch_size": "Batch", "input_shape": "Shape"}.get(axis, axis.capitalize())


def _sorted(frame: pd.DataFrame, extra: list[str] = ()) -> pd.DataFrame:
    keys = [a for a in style.PAIR_AXES + list(extra) if a in frame]
    return frame.sort_values(keys, kind="stable") if keys else frame


def settings_table(numbering: Numbering, soft: list[dict]) -> dict:
    rows = [[s["label"], s["version"], s["threads_intra"], s["threads_inter"],
             s["threads_requested"], s["mode"], s["layout"], str(s["trials"]), s["iterations"],
             s["warmup"]] for s in soft]
    return _table(numbering, "settings", "Settings in force, as each trial recorded them.",
                  ["Framework", "Version", "Intra-op threads", "Inter-op threads",
                   "Threads requested", "Execution mode", "Layout", "Trials",
                   "Timed iterations per trial", "Warm-up iterations"],
                  rows, Notes(), "No trial recorded its settings.")


def comparison_table(numbering: Numbering, data: Inputs, failures: dict) -> dict:
    frame, notes = _sorted(data.comparisons), Notes()
    axes = _varying(frame, style.PAIR_AXES) or ["model"]
    problem = data.problems.get("comparisons")
    no_ratio = (f"no statistics ({problem})" if problem else
                "the statistics computed no ratio (both frameworks need ok trials)")
    methods = _unique(frame, "ratio_method")
    level_column = ("ratio_ci_family_level" if "ratio_ci_family_level" in frame
                    else "ratio_ci_level")
    uniform = _uniform_level(frame, level_column)
    per_row_method = len(methods) > 1  # one method for all: said once, in the caption
    rows = []
    for _, row in frame.iterrows():
        cells = [str(row.get(a, "")) for a in axes]
        if "ratio" not in row.index or missing(row["ratio"]):
            # no ratio: one reason (the failed trials) stands for every column of the pair
            reason = notes.missing(failures.get(row.get("pair_id"), no_ratio))
            rows.append(cells + [reason] * (7 if per_row_method else 6))
            continue
        method = [_get(row, "ratio_method", notes, "no interval method recorded")]
        level = row.get(level_column)  # said only when the family falls short of 95 %
        level = level if not missing(level) and float(level) < 0.95 - 1e-9 else None
        interval = _interval(row, "ratio_ci_low", "ratio_ci_high", notes, "no interval computed")
        if level is not None and float(level) <= 0 and not isinstance(interval, NotMeasured):
            interval, level = f"{interval} (no joint coverage)", None
        rows.append(cells + [
            _get(row, "ratio", notes, no_ratio, sig),
            _with_level(interval, level, uniform),
            *(method if per_row_method else []),
            _get(row, "mannwhitney_p", notes, "too few trials for a test", fmt_p),
            _get(row, "p_adjusted", notes, "no adjusted p (no test)", fmt_p),
            _cliffs(row, notes),
            _verdict_text(row, notes),
        ])
    interval = (f" Interval: {methods[0]}." if len(methods) == 1 else
                "" if methods else " No interval method was recorded.")
    caption = ("PyTorch/TensorFlow ratio of median times per matched pair, with its interval, "
               "the Mann-Whitney U test on the trials' medians (raw, and Bonferroni-adjusted "
               "within the family: at most 0.05 exactly when the interval excludes 1) and "
               "Cliff's delta (above 0: PyTorch slower). The intervals of one family (experiment, "
               "device, phase) hold together at 95 % unless stated, each at 1 − 0.05/m for the "
               f"family's m comparisons; the verdict reads the interval alone.{interval}"
               f"{_family_level_sentence(uniform)} "
               f"{_constant(frame, style.PAIR_AXES)}.")
    why = data.problems.get("comparisons", "no matched pair was compared")
    return _table(numbering, "comparisons", caption,
                  [_axis_header(a) for a in axes] + ["Ratio", "Interval"]
                  + (["Method"] if per_row_method else []) + ["p", "p (Bonferroni)",
                                                              "Cliff's δ", "Verdict"],
                  rows, notes, f"No comparison: {why}.",
                  classes=[""] * len(axes) + ["num", "num"] + ([""] if per_row_method else [])
                  + ["num", "num", "", ""])


def _family_level_sentence(level) -> str:
    if level is None or level > 0.95 - 1e-9:
        return ""
    together = (f"hold together at only {_percent(level)}" if level > 0 else
                "have no guaranteed joint coverage")
    return (f" With so few trials 95 % cannot be reached: each family's intervals {together}, "
            "and none decides a verdict.")


def _uniform_level(frame: pd.DataFrame, column: str):
    """The one interval level every row has, or None when they differ or are unknown."""
    levels = {round(float(v), 6) for v in frame.get(column, []) if not missing(v)}
    return levels.pop() if len(levels) == 1 else None


def _level_sentence(level) -> str:
    if level is None or abs(level - 0.95) < 1e-9:
        return ""
    return (f" Every interval here has {_percent(level)} coverage: with so few trials "
            "95 % cannot be reached.")


def _with_level(interval, level, uniform=None):
    """An interval, with its coverage when that is not the nominal 95 % nor said in the caption."""
    return interval if isinstance(interval, NotMeasured) else with_level(interval, level, uniform)


def _cliffs(row, notes: Notes):
    delta = _get(row, "cliffs_delta", notes, "too few trials for an effect size", sig)
    if isinstance(delta, NotMeasured) or missing(row.get("cliffs_magnitude")):
        return delta
    return f"{delta} ({row['cliffs_magnitude']})"


def _verdict_text(row, notes: Notes):
    verdict = _get(row, "verdict", notes, "no verdict recorded")
    exploratory = row.get("exploratory")
    if not isinstance(verdict, NotMeasured) and not missing(exploratory) and bool(exploratory):
        return f"{verdict} (exploratory)"
    return verdict


def cell_table(numbering: Numbering, data: Inputs, failures: dict) -> dict:
    frame, notes = data.cell_stats, Notes()
    if frame.empty:
        frame = data.cells
    frame = _sorted(frame, ["framework"])
    axes = _varying(frame, style.PAIR_AXES) or ["model"]
    status = _cell_status(data.trials)
    shared, legend = _shared_warnings(frame), Legend("W")
    uniform = _uniform_level(frame, "ci_level")
    rows = []
    for _, row in frame.iterrows():
        failed = status.get(str(row.get("cell_id")), "no ok trial")
        rows.append([str(row.get(a, "")) for a in axes] + [_label(row.get("framework")),
            _trial_count(row, notes),
            _get(row, "median_ns", notes, failed, fmt_duration),
            _with_level(_interval(row, "ci_low_ns", "ci_high_ns", notes, failed, fmt_duration),
                        row.get("ci_level"), uniform),
            _get(row, "iqr_ns", notes, failed, fmt_duration),
            _get(row, "cv", notes, "needs two ok trials", sig),
            _get(row, "throughput_sps", notes, failed, sig),
            _get(row, "cold_start_median_ns", notes, failed, fmt_duration),
            legend.cite(_cell_remarks(row, shared)),
        ])
    caption = ("Every cell: trials ended ok of those run; median of the trials' median "
               "iteration times with its confidence interval (95 % unless stated), "
               "interquartile range and coefficient of variation between trials; throughput "
               "(samples/s); median cold-start iteration. "
               f"{_constant(frame, style.PAIR_AXES)}.{_level_sentence(uniform)}"
               + (f" Every cell: {'; '.join(shared)}." if shared else ""))
    why = data.problems.get("cell_stats", "no cell was summarized")
    return _table(numbering, "cells", caption,
                  [_axis_header(a) for a in axes] + ["Framework", "Ok/trials", "Median",
                                                     "Interval", "IQR", "CV", "Samples/s",
                                                     "Cold start", "Remarks"],
                  rows, notes, f"No cell statistics: {why}.",
                  classes=[""] * (len(axes) + 1) + ["num"] * 7 + [""], legend=legend)


def _warning_list(value) -> list[str]:
    return [] if missing(value) else [w.strip() for w in str(value).split(";") if w.strip()]


def _shared_warnings(frame: pd.DataFrame) -> list[str]:
    """Warnings every cell carries: said once in the caption rather than in every row."""
    if "warnings" not in frame or len(frame) < 2:
        return []
    lists = [_warning_list(v) for v in frame["warnings"]]
    return [w for w in lists[0] if all(w in other for other in lists[1:])]


def _cell_status(trials: pd.DataFrame) -> dict:
    if trials.empty or "status" not in trials:
        return {}
    failed = trials[trials["status"] != "ok"]
    return {str(cell): f"{_join(sorted(set(g['status'])))}: {_first_message(g) or 'no message'}"
            for cell, g in failed.groupby("cell_id", sort=True)}


def _trial_count(row, notes: Notes):
    if missing(row.get("n_ok")) or missing(row.get("n_trials")):
        return notes.missing("the statistics have no trial counts")
    return f"{int(row['n_ok'])}/{int(row['n_trials'])}"


def _cell_remarks(row, shared: list[str]) -> list[str]:
    parts = [w for w in _warning_list(row.get("warnings")) if w not in shared]
    if not missing(row.get("status")) and str(row["status"]) != "ok":
        parts.append(f"{row['status']}: {row.get('message', '')}".strip(": "))
    return parts


TEST_DETAIL = ["scope", "hypothesis", "test", "variant", "n", "estimate", "p", "p_corrected",
               "decision"]


def tests_summary_table(numbering: Numbering, data: Inputs, appendix: str) -> dict:
    """How many tests of each kind ran and what they decided; the appendix lists each."""
    frame = data.tests
    keys = [k for k in ("source", "test", "variant") if k in frame]
    rows = []
    if keys and "decision" in frame:
        for key, group in frame.fillna({k: "" for k in keys}).groupby(keys, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            decisions = group["decision"].fillna("").replace("", "no decision").value_counts()
            rows.append([*map(str, key), str(len(group)),
                         "; ".join(f"{n} {d}" for d, n in sorted(decisions.items()))])
    why = data.problems.get("tests", "the statistics ran no test")
    return _table(numbering, "tests", "Hypothesis tests by source, test and variant, with what "
                  f"they decided; {appendix} lists every test with its p-values and notes.",
                  [k.capitalize() for k in keys] + ["Tests", "Decisions"], rows, Notes(),
                  f"No test: {why}.", classes=[""] * len(keys) + ["num", ""])


def tests_table(numbering: Numbering, data: Inputs) -> dict:
    frame, notes, legend = data.tests, Notes(), Legend("N")
    columns = [c for c in TEST_DETAIL if c in frame] or list(frame.columns)
    has_note = "note" in frame
    groups = frame.groupby("family", sort=False) if "family" in frame else [(None, frame)]
    rows = []
    for family, group in groups:
        if family is not None:
            rows.append({"group": str(family)})
        for _, row in group.iterrows():
            note = row["note"] if has_note and not missing(row["note"]) else ""
            rows.append([_test_value(row, c, notes) for c in columns]
                        + ([legend.cite([note] if note else [])] if has_note else []))
    why = data.problems.get("tests", "the statistics ran no test")
    return _table(numbering, "tests-all", "Every hypothesis test, as the statistics wrote it "
                  "(tests.csv), grouped by the family its p-values are corrected in; — where "
                  "the test gives no such value.",
                  [c.replace("_", " ") for c in columns] + (["Note"] if has_note else []),
                  rows, notes, f"No test: {why}.",
                  classes=["num" if c in ("n", "estimate", "p", "p_corrected") else
                           "id" if c == "scope" else "" for c in columns] + [""], legend=legend)


def _test_value(row, column: str, notes: Notes):
    value = row[column]
    if column == "decision" and not missing(value) and style.is_exploratory(row):
        return f"{value} (exploratory)"
    if missing(value):
        return "" if column in ("note", "variant") else "—"
    if isinstance(value, float):
        return fmt_p(value) if column.lower().startswith("p") or column.endswith("_p") \
            else sig(value)
    return str(value)


def failure_table(numbering: Numbering, data: Inputs) -> dict:
    trials = data.trials
    failed = trials[trials["status"] != "ok"] if "status" in trials else trials.iloc[0:0]
    failed = failed.sort_values([c for c in ("cell_id", "trial") if c in failed], kind="stable")
    rows = [[str(r["cell_id"]), str(r.get("trial", "")), str(r["status"]),
             " ".join(str(r.get("message", "")).split()) or "no message was recorded"]
            for _, r in failed.iterrows()]
    caption = ("Every trial that did not end ok, with its reason. Unlike patel2023, which drops "
               "its out-of-memory points, a failure here is a result: it stays in the tables "
               "and the figures mark its cell as not measured.")
    return _table(numbering, "failures", caption, ["Cell", "Trial", "Status", "Reason"], rows,
                  Notes(), f"Every one of the {len(trials)} trials ended ok.",
                  classes=["id", "num", "", "msg"])


def audit_table(numbering: Numbering, data: Inputs) -> dict:
    trials, notes, rows = data.trials, Notes(), []
    for column, title in AUDIT_COLUMNS.items():
        for framework in _unique(trials, "framework") or [""]:
            if column not in trials:
                value = notes.missing(f"the trials table has no `{column}` column; the trial's "
                                      "env.json side file may hold it")
            else:
                part = trials[trials["framework"].astype(str) == framework]
                value = _join(_audit_values(part[column])) or notes.missing(
                    f"no trial recorded its {title}")
            rows.append([title, _label(framework), value])
    for name, version in builder_versions().items():
        rows.append([name, "report builder", version])
    return _table(numbering, "audit", "Version audit: every provenance value the trials "
                  "recorded, per framework, and the software that built this report.",
                  ["Item", "Recorded by", "Value"], rows, notes, "No trial recorded provenance.",
                  classes=["", "", "id"])


def _audit_values(series: pd.Series) -> list[str]:
    return sorted({str(v) for v in series if not missing(v)})


# The versions table's items (fwbench.analysis.versions.audit_items), grouped for reading, in order.
AUDIT_IMAGE_ITEMS = ("container", "image digest", "image tag", "image base", "image built")
AUDIT_GROUPS = ["Image", "Python and framework build", "Libraries loaded (mapped shared objects)",
                "Machine and workflow", "Environment variables that change behaviour",
                "Installed packages"]


def _audit_group(item: str) -> int:
    if item in AUDIT_IMAGE_ITEMS or item.startswith("image "):
        return 0
    if item == "python" or item.startswith("framework "):
        return 1
    for index, prefix in ((2, "loaded "), (4, "env "), (5, "package ")):
        if item.startswith(prefix):
            return index
    return 3


def versions_table(numbering: Numbering, data: Inputs) -> dict:
    """The audit's versions table (results/<run>/audit/versions.csv): one column per framework
    environment, one row per item; an item with several values in one environment gives each
    with its trial count."""
    frame, notes, legend, rows = data.versions, Notes(), Legend("E"), []
    needed = {"framework", "environment", "item", "value"}
    environments = []
    if not frame.empty and needed <= set(frame.columns):
        environments = sorted(set(zip(frame["framework"], frame["environment"])))
    columns = [f"{_label(f)} ({legend.cite([f'`{e}`'])})" for f, e in environments]
    if environments:
        first_seen = {item: i for i, item in reversed(list(enumerate(frame["item"])))}
        items = sorted(first_seen, key=lambda item: (_audit_group(item), first_seen[item]))
        cells = {}
        for (framework, environment, item), group in frame.groupby(
                ["framework", "environment", "item"], sort=False):
            cells[(framework, environment, item)] = _audit_cell(group)
        group_index = None
        for item in items:
            if _audit_group(item) != group_index:
                group_index = _audit_group(item)
                rows.append({"group": AUDIT_GROUPS[group_index]})
            values = [cells.get((f, e, item), "—") for f, e in environments]
            same = ([] if len(environments) < 2 else
                    ["same" if "—" not in values and len(set(values)) == 1 else "differs"])
            rows.append([item, *values, *same])
    caption = ("Versions per framework environment, from the version audit (versions.csv, one "
               "row per item as every trial's env.json recorded it); where the trials of one "
               "environment disagree, each value is given with its number of trials; — where "
               "an environment did not record the item. The environments are listed below the "
               "table.")
    return _table(numbering, "versions", caption,
                  ["Item", *columns] + (["In all"] if len(environments) > 1 else []), rows,
                  notes, "The versions table has no rows: no trial's env.json was audited.",
                  classes=["id", *["id"] * len(columns), ""], legend=legend)


def _audit_cell(group: pd.DataFrame) -> str:
    def text(value: str) -> str:
        return value if value.strip() else "not recorded"

    if len(group) == 1:
        return text(group["value"].iloc[0])
    counts = group.get("trials", pd.Series([""] * len(group), index=group.index))
    return "; ".join(f"{text(v)} ({n} trial{'' if str(n).strip() == '1' else 's'})"
                     if str(n).strip() else text(v) for v, n in zip(group["value"], counts))


def diff_tables(numbering: Numbering, data: Inputs) -> list[dict]:
    """One table per diff-<other>.csv of the audit: what differs from another run."""
    tables = []
    for other, frame in sorted(data.diffs.items()):
        rows = []
        if {"framework", "item", "change"} <= set(frame.columns):
            for _, row in frame.iterrows():
                rows.append([_label(row["framework"]), row["item"], row["change"],
                             row.get("this_run") or "—", row.get("other_run") or "—"])
        tables.append(_table(
            numbering, f"audit-diff-{other}", f"What differs between this run's versions "
            f"table and run {other}'s (diff-{other}.csv), per framework and item; — where a "
            "run has no value for the item.",
            ["Framework", "Item", "Change", "This run", f"Run {other}"], rows, Notes(),
            f"No difference from run {other}: every item of both versions tables has the same "
            "values.", classes=["", "id", "", "id", "id"]))
    return tables


def audit_appendix(numbering: Numbering, data: Inputs, run: str) -> dict:
    """Appendix A beyond the trials' provenance: the versions table and the diffs, or how to
    produce them."""
    path = data.versions_path or f"results/{run}/audit/versions.csv"
    absent = None
    if data.versions.empty:
        why = data.problems.get("versions", "versions.csv has no rows")
        absent = (f"The version audit of this run is not available ({why}). "
                  f"`snakemake --cores 1 audit` writes it to `{path}` from every trial's "
                  "env.json, one versions table per framework environment, and a diff against "
                  "every other audited run under results/; build the report again after it.")
    return {
        "versions": versions_table(numbering, data),
        "versions_absent": absent,
        "diffs": diff_tables(numbering, data),
        "no_diffs": ("No diff against another run is present. `snakemake --cores 1 audit` "
                     "writes one (`diff-<other>.csv` beside versions.csv) against every other "
                     "run under results/ whose version audit exists."),
    }


def builder_versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"fwbench": __version__, "Python": sys.version.split()[0]}
    for package in ("pandas", "matplotlib", "jinja2", "weasyprint"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "not installed"
    return out


# --- claims: the verdicts (fwbench.analysis.claims) ----------------------------------------

def claims_section(numbering: Numbering, data: Inputs) -> dict:
    catalog = load_claims()
    rows, per_paper, counts = [], {}, {v: 0 for v in VERDICTS}
    hints = {v: 0 for v in VERDICTS}
    for claim in catalog["claims"]:
        result = evaluate_claim(claim, data.comparisons, data.cell_stats, data.tests,
                                data.trials, data.gaps, data.scaling, data.strategies)
        counts[result["verdict"]] += 1
        hints[result["verdict"]] += bool(result["exploratory"])
        row = {**claim, **result, "verdict_class": result["verdict"].replace(" ", "-"),
               "differences": " ".join([*result["notes"], claim["differences"]]).strip()}
        rows.append(row)
        tally = per_paper.setdefault(claim["paper"], {v: [0, 0] for v in VERDICTS})
        tally[result["verdict"]][0] += 1
        tally[result["verdict"]][1] += bool(result["exploratory"])
    table = {"key": "claims", "number": numbering.next("table"),
             "caption": "Every quantitative claim of the five papers: the paper's words and where "
                        "they stand, what was published, what this run measured, the verdict, "
                        "and what may explain a difference. A verdict marked exploratory was "
                        "drawn from comparisons or trials too few, unsteady or drifting to "
                        "confirm anything: it is a hint for the next run, not a finding."}
    per_paper = {paper: ", ".join(_tally(v, n, hint) for v, (n, hint) in tally.items() if n)
                 for paper, tally in per_paper.items()}
    return {"table": table, "rows": rows, "counts": counts, "exploratory": hints,
            "papers": catalog["papers"], "per_paper": per_paper}


def _tally(verdict: str, n: int, exploratory: int) -> str:
    if not exploratory:
        return f"{n} {verdict}"
    return f"{n} {verdict} ({'all' if exploratory == n else exploratory} exploratory)"



# --- why: the ablation, where the time goes, patel2023's explanation tested ---------------------

def why_section(numbering: Numbering, data: Inputs) -> dict:
    """The "why" section: one generated paragraph per ablation group, the decomposition table,
    the counterfactual mode tests (patel2023's explanation), and a summary of those tests."""
    from fwbench.report.why import explain
    paragraphs = explain(data.ablation, data.gaps, data.profiles)
    experiments = _unique(data.ablation, "experiment")
    by_experiment = [{"experiment": e, "paragraphs": [p for p in paragraphs
                                                      if str(p["key"].get("experiment")) == e]}
                     for e in experiments]
    return {
        "experiments": by_experiment,
        "absent": (None if paragraphs else
                   "This run has no ablation (config key `ablation`): no factor was varied from "
                   "each framework's defaults towards matched settings, so the gap is not "
                   "decomposed." + (f" ({data.problems['ablation']}.)"
                                    if "ablation" in data.problems else "")),
        "decomposition": decomposition_table(numbering, data),
        "gaps": gap_table(numbering, data),
        "patel": patel_gap_summary(data.gaps),
        "profiled": int(data.profiles["cell_id"].nunique()) if "cell_id" in data.profiles else 0,
    }


def _log_interval(row, low: str, high: str, notes: Notes, reason: str) -> object:
    return _interval(row, low, high, notes, reason, fmt=lambda v: f"{float(v):+.3f}")


def decomposition_table(numbering: Numbering, data: Inputs) -> dict:
    frame, notes, rows = data.ablation, Notes(), []
    if "row" in frame:
        keys = [k for k in ("run", "experiment", "device", "model", "phase", "batch_size",
                            "input_shape") if k in frame]
        for _key, group in frame.groupby(keys, sort=True):
            first = group.iloc[0]
            rows.append({"group": f"{first['model']} {first['phase']}, batch "
                                  f"{_text(first['batch_size'])}, {first['input_shape']}, "
                                  f"{first['device']} ({first['method']})"})
            for _, r in group.sort_values("step", kind="stable").iterrows():
                why = r["reason"] if not missing(r.get("reason")) and r["reason"] else \
                    f"{r['status']}"
                reason = f"{r['status']}: {why}" if r["status"] != "measured" else why
                if r["status"] == "unsupported":
                    rows.append([str(r["factor"]), _text(r["profile"]), _text(r["mode"]),
                                 "—", "—", "—", "—", f"cannot vary here: {why}"])
                    continue
                rows.append([
                    {"total": "gap at defaults", "residual": "residual"}.get(
                        r["row"], str(r["factor"])),
                    _text(r["profile"]) if not missing(r.get("profile")) else "—",
                    _text(r["mode"]) if not missing(r.get("mode")) else "—",
                    _get(r, "ratio", notes, reason, sig),
                    _get(r, "contribution", notes, reason, lambda v: f"{float(v):+.3f}"),
                    _log_interval(r, "contribution_ci_low", "contribution_ci_high", notes,
                                  reason),
                    _get(r, "share", notes, "the gap at defaults is not established (its "
                         "interval contains 0), or the step was not measured",
                         lambda v: f"{float(v):.0%}"),
                    _text(r["note"]) if not missing(r.get("note")) else "",
                ])
    return _table(
        numbering, "decomposition",
        "The PyTorch/TensorFlow gap decomposed: the ratio of median times with each framework's "
        "defaults, after each factor is matched, and what remains (residual). Contributions are "
        "on log time, so they add up: contributions + residual = the gap at defaults; > 0 means "
        "matching the factor lowered PyTorch's time relative to TensorFlow's. Intervals: "
        "percentile bootstrap over trials within each arm.",
        ["Step", "Profile", "Mode pair", "Ratio after", "Contribution", "Interval",
         "Share of the gap", "Remark"], rows, notes,
        "No decomposition: this run has no ablation.",
        classes=["", "", "", "num", "num", "num", "num", ""])


def gap_table(numbering: Numbering, data: Inputs) -> dict:
    frame, notes, rows = data.gaps, Notes(), []
    if "counterfactual" in frame:
        keys = [k for k in ("device", "model", "phase", "batch_size", "input_shape",
                            "precision", "profile") if k in frame]
        for _key, group in frame.groupby(keys, sort=True):
            first = group.iloc[0]
            interval = fmt_interval(first["baseline_ci_low"], first["baseline_ci_high"])
            rows.append({"group": f"{first['model']} {first['phase']}, batch "
                                  f"{_text(first['batch_size'])}, {first['device']}, "
                                  f"{first['precision']}, {first['profile']}: baseline PyTorch "
                                  f"eager / TensorFlow tf.function {sig(first['baseline_ratio'])} "
                                  f"{interval}"})
            for _, r in group.iterrows():
                rows.append([
                    r["counterfactual"], f"{r['pytorch_mode']} / {r['tensorflow_mode']}",
                    sig(r["ratio"]),
                    _interval(r, "ratio_ci_low", "ratio_ci_high", notes, "no interval"),
                    f"{float(r['gap_closed']):.0%}",
                    _interval(r, "gap_closed_ci_low", "gap_closed_ci_high", notes,
                              "no interval", fmt=lambda v: f"{float(v):.0%}"),
                    "yes" if str(r["interleaved"]) == "True" else "no",
                    r["verdict"],
                ])
    return _table(
        numbering, "gap_tests",
        "patel2023's explanation tested: from the idiomatic baseline (PyTorch eager against "
        "TensorFlow tf.function), each counterfactual's PyTorch/TensorFlow ratio with its "
        "Hodges-Lehmann interval, and the share of the baseline gap it closes on log time (1: "
        "closed, 0: unchanged, < 0: widened; bootstrap interval). Interleaved: whether the two "
        "arms were measured as one alternating cell pair.",
        ["Counterfactual", "PyTorch / TensorFlow mode", "Ratio", "Interval", "Gap closed",
         "Interval", "Interleaved", "Verdict"], rows, notes,
        "No counterfactual was measured: the run needs the `idiomatic` mode pair and at least "
        "one of `eager` and `compiled` on the same cells.",
        classes=["", "", "num", "num", "num", "num", "", ""])


def patel_gap_summary(gaps: pd.DataFrame) -> list[str]:
    """Sentences answering patel2023: does switching TensorFlow to eager, or PyTorch to
    torch.compile, close TensorFlow's CPU advantage?"""
    if gaps is None or gaps.empty or "counterfactual" not in gaps:
        return ["Not tested in this run: it needs PyTorch eager against TensorFlow tf.function "
                "and at least one counterfactual mode pair (`eager`, `compiled`) on CPU cells."]
    cpu = gaps[gaps["device"].astype(str) == "cpu"]
    if cpu.empty:
        return ["Not tested in this run: no CPU cell has the counterfactual modes."]
    out = []
    advantage = cpu[cpu["verdict"] != "no TensorFlow advantage to explain"]
    cells = cpu.drop_duplicates(["model", "phase", "batch_size", "input_shape", "precision",
                                 "profile"])
    adv_cells = advantage.drop_duplicates(["model", "phase", "batch_size", "input_shape",
                                           "precision", "profile"])
    out.append(f"TensorFlow (tf.function) was shown faster than PyTorch (eager) in "
               f"{len(adv_cells)} of {len(cells)} CPU cells with the counterfactual modes "
               f"(baseline ratios {_span_ratio(cells['baseline_ratio'])}).")
    for name in ("TensorFlow eager", "PyTorch torch.compile", "TensorFlow XLA"):
        part = advantage[advantage["counterfactual"] == name]
        if part.empty:
            continue
        tally = part["verdict"].value_counts()
        out.append(f"{name}: " + _join(f"{n} {v}" for v, n in tally.items())
                   + f" (gap closed {_span_pct(part['gap_closed'])}).")
    if len(out) == 1 and not advantage.empty:
        out.append("No counterfactual was measured on those cells.")
    if advantage.empty:
        out.append("With no TensorFlow advantage on the CPU, there is nothing for the static "
                   "graph or XLA to explain in this run.")
    return out


def _span_ratio(values) -> str:
    values = sorted(float(v) for v in values if not missing(v))
    if not values:
        return "none"
    return sig(values[0]) if len(values) == 1 else f"{sig(values[0])} to {sig(values[-1])}"


def _span_pct(values) -> str:
    values = sorted(float(v) for v in values if not missing(v))
    if not values:
        return "unknown"
    if len(values) == 1:
        return f"{values[0]:.0%}"
    return f"{values[0]:.0%} to {values[-1]:.0%}"

# --- the real-data experiments: accuracy, convergence, epoch times (tian2020, sumanjali2024) ----

# The groups of the accuracy table and the time bars: the training axes, then the framework.
TRAINING_KEYS = [*convergence.TRAINING_AXES, "framework"]
# tian2020's three times per trial (trials-table columns; see fwbench.measure.results), by
# panel title.
EPOCH_TIMES = {"median_ns": "training per epoch", "inference_median_ns": "inference",
               "cold_start_ns": "first epoch"}
def _of_ok_trials(frame: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """The rows of a per-trial table (epochs, confusion) that belong to an ok trial."""
    ok = real_data_trials(trials)
    keys = ["run", "cell_id", "trial"]
    if frame.empty or ok.empty or not set(keys) <= set(frame.columns):
        return frame.iloc[0:0]
    wanted = set(map(tuple, ok[keys].astype(str).to_numpy()))
    return frame[[tuple(key) in wanted for key in frame[keys].astype(str).to_numpy()]]


def _median_interval(values) -> dict:
    """The median over trials with its distribution-free interval
    (fwbench.analysis.estimators.median_ci)."""
    values = [float(v) for v in values if not missing(v)]
    ci = median_ci(values)
    return {"n": len(values), "median": ci.estimate, "low": ci.low, "high": ci.high,
            "level": ci.level}


def _groups(frame: pd.DataFrame):
    """(axis values, trials) per training group and framework, in order."""
    if frame.empty:
        return
    keys = [k for k in TRAINING_KEYS if k in frame]
    for key, group in frame.groupby(keys, sort=True, dropna=False):
        yield dict(zip(keys, key)), group


def epoch_time_summary(trials: pd.DataFrame) -> pd.DataFrame:
    """Per convergence cell and framework, the median over trials of each of tian2020's times,
    with its interval: the data of the time bars."""
    frame = real_data_trials(trials, "convergence")
    return pd.DataFrame([{**key, "measure": measure, **_median_interval(group[column])}
                         for key, group in _groups(frame)
                         for column, measure in EPOCH_TIMES.items()])


def _tian_figures(data: Inputs, folder: Path) -> dict[str, style.Figure]:
    """tian2020's figures from the convergence experiment, each left out with the reason."""
    absent = _no_real_data(data.trials)
    summary = epoch_time_summary(data.trials)
    counts = _span(summary["n"]) if len(summary) else "no"
    confusion = style.select_rows(_of_ok_trials(data.confusion, data.trials),
                                 {"experiment": "convergence"})
    chosen, which = _confusion_cell(confusion)
    return {
        "tian_times": convergence.epoch_times(
            summary, folder, key="tian2020_times", title="Training, inference and first-epoch "
            "times", source="tian2020 Figures 2–4 and 6–8", absent=absent,
            note="Training per epoch: the epochs after the first, validation excluded; "
                 "inference: one pass over the test set (the validations after the first "
                 "epoch); first epoch: its training time, tracing and autotuning included. "
                 f"Trials per bar: {counts}. Data: {_data_sources(data.trials)}."),
        "tian_accuracy": convergence.accuracy_curves(
            _of_ok_trials(data.epochs, data.trials), folder, key="tian2020_accuracy",
            title="Validation accuracy per epoch", source="tian2020 Figures 1 and 5",
            absent=absent),
        "tian_confusion": convergence.confusion_matrices(
            chosen, folder, key="tian2020_confusion", title="Confusion matrix of the last "
            "epoch", which=which, absent=absent),
    }


def _confusion_cell(confusion: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One cell pair's matrices, and a sentence naming it: the paper's ResNet18 where the run
    has it, on the device, mode and profile the papers used when present, else the first."""
    if confusion.empty:
        return confusion, ""
    frame = _preferred(confusion, {"model": "resnet18"} if "resnet18" in
                       set(confusion["model"].astype(str)) else {})
    keys = [k for k in convergence.TRAINING_AXES if k in frame]
    first = frame.sort_values(keys, kind="stable").iloc[0]
    frame = frame[(frame[keys].astype(str) == first[keys].astype(str)).all(axis=1)]
    cell = ", ".join(f"{k.replace('_', ' ')} {_text(first[k])}" for k in keys
                     if not missing(first[k]))
    return frame, (f"the cell {cell}, after its last validation on the test set, chosen as "
                   "the paper's ResNet18 (else the first cell) on the GPU, idiomatic mode and "
                   "defaults profile where the run has them")


def _data_sources(trials: pd.DataFrame) -> str:
    frame = real_data_trials(trials)
    return _join(_unique(frame, "data_source")) or "not recorded"


# The accuracy table's columns per experiment: (trials-table column, header).
ACCURACY_TABLE = {
    "convergence": [("final_accuracy", "Final accuracy (%)"), ("best_accuracy",
                    "Best accuracy (%)"), ("epochs_to_accuracy", "Epochs to target"),
                    ("time_to_accuracy_ns", "Time to target")],
    "epoch": [("test_accuracy", "Test accuracy (%)")],
}


def _median_text(values, column: str, notes: Notes, reason: str, uniform=None):
    """The median over trials with its interval (and coverage when not 95 %), as text."""
    fmt = _metric_format(column)
    m = _median_interval(values)
    if not m["n"]:
        return notes.missing(reason)
    if m["n"] == 1:
        return f"{fmt(m['median'])} (one trial: no interval)"
    return f"{fmt(m['median'])} " + _with_level(fmt_interval(m["low"], m["high"], fmt),
                                                m["level"], uniform)


def _to_target(group: pd.DataFrame, column: str, notes: Notes, uniform):
    """Epochs or time to the target accuracy, over the trials that reached it."""
    targets = _unique(group, "target_accuracy")
    if not targets:
        return notes.missing("no target accuracy was set (`data.target_accuracy`)")
    reached = group[column].dropna()
    if reached.empty:
        return notes.missing(f"no trial reached the target accuracy {_join(targets)} in its "
                             f"{_span(group.get('n_epochs', []))} epochs")
    text = _median_text(reached, column, notes, "", uniform)
    if len(reached) < len(group):
        text += f" ({len(reached)} of {len(group)} trials reached it)"
    return text


def accuracy_table(numbering: Numbering, data: Inputs) -> dict:
    """Accuracy per cell, optimizer and framework: tian2020's and sumanjali2024's final and best
    validation accuracy, epochs and training time to the target, florencio2019's test
    accuracy after its epoch; each the median over trials with its interval."""
    frame, notes = real_data_trials(data.trials), Notes()
    columns = [c for e in REAL_DATA if e in _unique(frame, "experiment") for c in
               ACCURACY_TABLE[e]]
    axes = _varying(frame, convergence.TRAINING_AXES) or ["model"]
    levels = {round(m["level"], 6) for _, g in _groups(frame) for c, _ in columns
              for m in [_median_interval(g[c])] if m["n"] > 1}
    uniform = levels.pop() if len(levels) == 1 else None
    rows = []
    for key, group in _groups(frame):
        values = []
        for column, header in columns:
            if (column, header) not in ACCURACY_TABLE[key["experiment"]]:
                values.append("—")
            elif column in ("epochs_to_accuracy", "time_to_accuracy_ns"):
                values.append(_to_target(group, column, notes, uniform))
            else:
                values.append(_median_text(group[column], column, notes,
                                           "no trial recorded it", uniform))
        rows.append([_text(key[a]) for a in axes] + [_label(key["framework"]), str(len(group)),
                                                     *values])
    caption = ("Accuracy of the real-data experiments per cell and framework, from the same "
               "initial weights and batch order in both: the median over trials of the "
               "validation accuracy on the test set after the last epoch (final) and at the "
               "best epoch (best), the epochs and the training time (validation passes "
               "excluded, as tian2020 subtracts them) to the target accuracy "
               f"{_join(_unique(frame, 'target_accuracy')) or '(none set)'} over the trials "
               "that reached it, and the epoch experiment's test accuracy after training; "
               "each with the distribution-free interval of the median over trials (95 % "
               "unless stated; — where the experiment does not measure it)."
               f"{_level_sentence(uniform)} Epochs per trial: "
               f"{_span(frame.get('n_epochs', []))}. Data: {_data_sources(data.trials)}. "
               f"{_constant(frame, convergence.TRAINING_AXES)}.")
    return _table(numbering, "accuracy", caption,
                  [_axis_header(a) for a in axes] + ["Framework", "Trials"]
                  + [header for _, header in columns], rows, notes,
                  f"No accuracy was measured: {_no_real_data(data.trials)}.",
                  classes=[""] * (len(axes) + 1) + ["num"] * (1 + len(columns)))


# --- beyond one device: scaling, and the strategies compared -------------------------------------

def _strategy_name(strategy, framework) -> str:
    from fwbench.plan.strategies import STRATEGY_LABELS, resolve_strategy
    return STRATEGY_LABELS[resolve_strategy(str(strategy), str(framework))]


def _fixed(frame: pd.DataFrame) -> str:
    """The axes every row of a distributed table shares, as a sentence ("" when none)."""
    fixed = _constant(frame, scaling.DISTRIBUTED_AXES)
    return f" {fixed}." if fixed else ""


def distributed_section(numbering: Numbering, data: Inputs) -> dict:
    """Section 3.8: every strategy's scaling efficiency, and the two strategies of each
    framework compared (stats/scaling.csv and stats/strategies.csv, fwbench.measure.distributed)."""
    return {"scaling": scaling_table(numbering, data),
            "strategies": strategy_table(numbering, data)}


def scaling_table(numbering: Numbering, data: Inputs) -> dict:
    frame, notes, legend = _sorted(data.scaling, ["framework", "strategy", "world_size"]), \
        Notes(), Legend("S")
    axes = _varying(frame, scaling.DISTRIBUTED_AXES)
    rows = []
    for _, r in frame.iterrows():
        note = "" if missing(r.get("note")) else str(r["note"])
        measured = not missing(r.get("efficiency"))
        reason = note or "no ok trial"
        rows.append([*(_text(r[a]) for a in axes), _label(r["framework"]),
                     _strategy_name(r["strategy"], r["framework"]), _text(r["world_size"]),
                     _get(r, "speedup", notes, reason, sig),
                     _get(r, "efficiency", notes, reason, sig),
                     _with_level(_interval(r, "efficiency_ci_low", "efficiency_ci_high", notes,
                                           reason), _shortfall(r)),
                     str(r["verdict"]), legend.cite([note] if note and measured else [])])
    threshold = _unique(frame, "near_linear_threshold")
    caption = ("Scaling efficiency of every strategy at N devices or processes against one: "
               "E(N) = X(N) / (N × X(1)), where X is a trial's throughput (per-device batch × N "
               "/ median step time: weak scaling), with the Hodges-Lehmann interval of E (at "
               "least 95 % unless stated); speed-up X(N) / X(1). Verdict: near-linear when the "
               f"whole interval is at or above {_join(threshold) or 'the threshold'}, "
               "sub-linear when it is below, else inconclusive." + _fixed(frame))
    return _table(numbering, "scaling", caption,
                  [_axis_header(a) for a in axes] + ["Framework", "Strategy", "Devices",
                                                     "Speed-up", "Efficiency", "Interval",
                                                     "Verdict", "Remarks"],
                  rows, notes, "No scaling efficiency: "
                  f"{_absent(data, 'scaling', _distributed_absent(data.trials, NO_SCALING))}.",
                  classes=[""] * (len(axes) + 2) + ["num"] * 4 + ["", ""], legend=legend)


def strategy_table(numbering: Numbering, data: Inputs) -> dict:
    frame, notes = _sorted(data.strategies, ["framework", "world_size"]), Notes()
    axes = _varying(frame, scaling.DISTRIBUTED_AXES)
    rows = []
    for _, r in frame.iterrows():
        reason = ("" if missing(r.get("note")) else str(r["note"])) or "no ok trial"
        rows.append([*(_text(r[a]) for a in axes), _label(r["framework"]),
                     _text(r["world_size"]),
                     f"{_strategy_name(r['multi_process'], r['framework'])} / "
                     f"{_strategy_name(r['single_process'], r['framework'])}",
                     _get(r, "throughput_multi_sps", notes, reason, sig),
                     _get(r, "throughput_single_sps", notes, reason, sig),
                     _get(r, "ratio", notes, reason, sig),
                     _with_level(_interval(r, "ratio_ci_low", "ratio_ci_high", notes, reason),
                                 _shortfall(r)),
                     # _get calls the lambda at once, on this row (bugbear cannot tell).
                     _get(r, "ratio", notes, reason, lambda _: _faster_text(r["faster"]))])  # noqa: B023
    caption = ("The two strategies of each framework at the same number of devices: the "
               "multi-process strategy's throughput (samples/s, median over trials) over the "
               "single-process one's, with the Hodges-Lehmann interval of the ratio (at least "
               "95 % unless stated); above 1: the multi-process strategy is faster. A strategy "
               "is named faster only when the interval excludes 1 at the nominal level."
               + _fixed(frame))
    absent = _absent(data, "strategies", _distributed_absent(data.trials, NO_STRATEGIES))
    return _table(numbering, "strategies", caption,
                  [_axis_header(a) for a in axes] + ["Framework", "Devices",
                                                     "Multi / single process",
                                                     "Samples/s, multi", "Samples/s, single",
                                                     "Ratio", "Interval", "Faster"],
                  rows, notes, f"No strategy comparison: {absent}.",
                  classes=[""] * (len(axes) + 1) + ["num", ""] + ["num"] * 4 + [""])


# --- figures ------------------------------------------------------------------------------------

TRACE_ABSENT = ("the tables hold no telemetry trace: no trial ended ok, or the rule "
                "collect_telemetry_trace did not run (tables/telemetry_trace.parquet)")


def _absent(data: Inputs, name: str, default: str) -> str:
    """Why an optional table is empty: how reading it failed, else ``default`` (what an empty
    table means)."""
    problem = data.problems.get(name)
    return problem if problem and not problem.endswith("has no rows") else default


def make_figures(data: Inputs, folder: Path, failures: dict) -> dict[str, style.Figure]:
    """Every figure of the report, in document order, drawn into ``folder`` or left out."""
    comparisons, stats, trials = data.comparisons, data.cell_stats, data.trials

    out = {
        "relative_time": speed.relative_time(comparisons, failures, folder, title="Relative time",
                                            absent="the statistics hold no matched pair"),
        "speedup_heatmap": speed.speedup_heatmap(comparisons, failures, folder),
        "throughput": speed.throughput(stats, folder),
        "inference_vs_batch": speed.time_vs_batch(stats, folder, source="patel2023 Fig. 4"),
        "energy": telemetry.per_cell_metric(
            trials, folder, key="energy_per_sample", title="Energy per sample",
            column="energy_per_sample_j", label=TELEMETRY_LABELS["energy_per_sample_j"],
            absent=telemetry_absent(trials, "energy_per_sample_j")),
        "flops": flops.achieved_flops(data.flops, folder, absent=_absent(
            data, "flops", "the statistics computed no achieved FLOP/s (stats/flops.csv, rule "
                           "summarise_flops)")),
        "telemetry": telemetry.telemetry_trace(data.telemetry_trace, folder, chosen=CHOICE,
                                          absent=_absent(data, "telemetry_trace", TRACE_ABSENT)),
    }
    out["ablation_waterfall"] = why.waterfall(data.ablation, folder)
    out["time_breakdown"] = why.time_breakdown(data.profiles, folder,
                                                cell_stats=data.cell_stats)
    out["scaling"] = scaling.scaling(data.cell_stats, data.scaling, folder,
                                  absent=DISTRIBUTED_ABSENT)
    out["memory"] = usage_figures.memory_vs_batch(data.memory, folder, absent=_absent(
        data, "memory", "the trials recorded no peak memory (peak_rss_bytes)"))
    out["latency"] = usage_figures.latency_ecdf(data.iterations, data.trials, folder)
    out.update(_patel_figures(data, folder, failures))
    out.update(_florencio_figures(data, folder))
    out.update(_tian_figures(data, folder))
    return out


# The figures each paper section shows, in order (patel2023 Fig. 4 is the results' figure).
PAPER_FIGURES = {
    "patel2023": ["patel_fig1", "patel_fig2", "patel_fig3", "patel_fig5"],
    "dai2022": [],
    "florencio2019": [f"florencio_fig{n}" for n in range(4, 14)],
    "tian2020": ["tian_times", "tian_accuracy", "tian_confusion"],
    "sumanjali2024": [],
}


def _left_out(figures: dict, keys: list[str]) -> list[dict]:
    """The figures of ``keys`` that were not drawn, those sharing a reason said once."""
    groups: dict[str, list[style.Figure]] = {}
    for key in keys:
        if figures[key].file is None:
            groups.setdefault(figures[key].reason, []).append(figures[key])
    return [{"titles": "; ".join(f"{f.title} ({f.source})" if f.source else f.title
                                 for f in group), "reason": reason}
            for reason, group in groups.items()]


def _preferred(trials: pd.DataFrame, select: dict) -> pd.DataFrame:
    """The selected trials on one device, mode and profile: the paper's when the run has them.

    The papers ran on a GPU, each framework with its defaults and idiomatic mode.
    """
    frame = style.select_rows(trials, select)
    for axis, wanted in (("device", "cuda"), ("mode", "idiomatic"), ("profile", "defaults")):
        if axis in frame and not frame.empty:
            values = _unique(frame, axis)
            keep = wanted if wanted in values else values[0]
            frame = frame[frame[axis].astype(str) == keep]
    return frame


def _patel_figures(data: Inputs, folder: Path, failures: dict) -> dict[str, style.Figure]:
    comparisons, trials = data.comparisons, data.trials
    devices = _join(_unique(trials, "device")) or "no device"

    def relative(number: int, phase: str, device: str, title: str) -> style.Figure:
        where = "a GPU" if device == "cuda" else "the CPU"
        return speed.relative_time(
            comparisons, failures, folder, key=f"patel2023_fig{number}", title=title,
            source=f"patel2023 Fig. {number}", select={"phase": phase, "device": device},
            absent=f"this run has no {phase} pair on {where} (it measured {devices})")

    infer = _preferred(trials, {"phase": "infer"})
    power = "power_w_mean"
    return {
        "patel_fig1": relative(1, "train", "cuda", "Relative training time on the GPU"),
        "patel_fig2": relative(2, "infer", "cuda", "Relative inference time on the GPU"),
        "patel_fig3": relative(3, "infer", "cpu", "Relative inference time on the CPU"),
        "patel_fig5": papers.metric_vs_batch(
            infer, folder, key="patel2023_fig5", title="GPU power against batch size",
            column=power, label=TELEMETRY_LABELS[power], select={}, source="patel2023 Fig. 5",
            absent=(telemetry_absent(infer, power) if power not in infer or
                    infer[power].notna().sum() == 0 else
                    "it needs inference trials at two batch sizes or more with a power value")),
    }


def _florencio_figures(data: Inputs, folder: Path) -> dict[str, style.Figure]:
    lenet = _preferred(data.trials, {"model": "lenet5", "batch_size": "100"})
    absent = ("this run has no LeNet-5 cell at batch 100 (presets/florencio2019.yaml "
              "measures them: 600 steps of batch 100 per trial, 100 trials)")
    time_note = ("The paper timed whole epochs of 600 steps over MNIST; these are median step "
                 "times (600 steps per trial in the preset) on synthetic data of MNIST's shape, "
                 "so data loading is left out.")
    panels = [(4, "train", "median_ns", "LeNet-5 training step time"),
              (5, "infer", "median_ns", "LeNet-5 inference batch time")]
    for first, column, what in ((6, "gpu_temp_c_max", "GPU temperature"),
                                (8, "cpu_temp_c_max", "CPU temperature"),
                                (10, "gpu_util_mean", "GPU utilization"),
                                (12, "cpu_util_mean", "CPU utilization")):
        panels += [(first, "train", column, f"{what} while training LeNet-5"),
                   (first + 1, "infer", column, f"{what} during LeNet-5 inference")]
    out = {}
    for number, phase, column, title in panels:
        telemetry = column != "median_ns"
        reason = absent
        if telemetry and not lenet.empty:
            reason = telemetry_absent(lenet, column)
        note = (time_note if not telemetry else
                "The paper sampled averages during the phase; we show the trial's "
                + TELEMETRY_LABELS[column] + " over its timed iterations.")
        out[f"florencio_fig{number}"] = papers.trial_boxplots(
            lenet, folder, key=f"florencio2019_fig{number}", title=title,
            select={"phase": phase}, source=f"florencio2019 Fig. {number}", absent=reason,
            note=note, column=column, label=TELEMETRY_LABELS.get(column))
    return out


# --- the document -------------------------------------------------------------------------------

def build_context(data: Inputs, *, run: str, figures: dict, href: str, epoch: int) -> dict:
    """Everything the template shows, as plain dicts of text, numbered in document order."""
    numbering = Numbering()
    failures = failure_reasons(data.trials)
    soft = software(data.trials)
    facts = run_facts(data, run, epoch)
    context = {"facts": facts, "software": soft, "warnings": warnings(data, soft)}
    context["tables"] = {"settings": settings_table(numbering, soft)}
    context["stack"] = stack_differences(numbering, data.trials)
    context["tables"].update({
        "comparisons": comparison_table(numbering, data, failures),
        "cells": cell_table(numbering, data, failures),
        "tests_summary": tests_summary_table(numbering, data, "Appendix C")})
    context["why"] = why_section(numbering, data)
    context["tables"]["accuracy"] = accuracy_table(numbering, data)
    context["distributed"] = distributed_section(numbering, data)
    from fwbench.report import usage as usage_report  # builds on this module's table helpers

    context["tables"].update({
        "memory": usage_report.memory_table(numbering, data),
        "memory_comparisons": usage_report.memory_comparison_table(numbering, data),
        "latency": usage_report.latency_table(numbering, data)})
    context["claims"] = claims_section(numbering, data)
    context["figures"] = {key: _figure(numbering, f, href) for key, f in figures.items()}
    context["paper_figures"] = PAPER_FIGURES
    context["left_out"] = {paper: _left_out(figures, keys) for paper, keys in
                           PAPER_FIGURES.items()}
    context["tables"]["audit"] = audit_table(numbering, data)
    context["audit"] = audit_appendix(numbering, data, run)
    context["tables"]["failures"] = failure_table(numbering, data)
    context["tables"]["tests"] = tests_table(numbering, data)
    context["method"] = method(data, facts)
    context["abstract"] = abstract(data, facts, soft, context["claims"],
                                   context["tables"]["failures"])
    context["threats"] = threats(data, facts, soft)
    context["title"] = "PyTorch and TensorFlow, measured: " + (facts["run"] or "run")
    context["created"] = datetime.fromtimestamp(epoch, timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    context["generator"] = f"fwbench {__version__}"
    context["css"] = (REPORT_DIR / "style.css").read_text()
    return context


def method(data: Inputs, facts: dict) -> dict:
    trials, comparisons = data.trials, data.comparisons
    shown = HARDWARE_COLUMNS + _machine_columns(trials)
    hardware = {c: _join(_unique(trials, c)) for c in shown if _unique(trials, c)}
    corrections = [name for column, name in (("p_adjusted", "Bonferroni"), ("holm_p", "Holm"),
                                             ("bh_p", "Benjamini-Hochberg"))
                   if column in comparisons]
    return {
        "hardware": hardware,
        "hardware_missing": [c for c in shown if c not in hardware],
        "trials_per_cell": _span(trials.groupby("cell_id").size()) if "cell_id" in trials
        else "none",
        "interleaved": "run_order" in trials,
        "ratio_methods": _unique(comparisons, "ratio_method"),
        "corrections": corrections,
        "families": _unique(data.tests, "family"),
        "exploratory": sum(style.is_exploratory(r) for _, r in comparisons.iterrows())
        if "exploratory" in comparisons else 0,
        "pairs": _adjacency_sentence(adjacency_summary(trials)),
        "steadiness": _steadiness_sentence(steadiness_summary(trials, data.cell_stats,
                                                              comparisons)),
    }


def _adjacency_sentence(summary: dict) -> str:
    """How many interleaved pairs really ran back to back, as the trials recorded it."""
    n = summary["pairs"]
    if not n:
        return ""
    if not summary["recorded"]:
        return (f"Whether the two trials of each of the {n} pairs ran back to back was not "
                "recorded in this run (its trials table has no `pair_adjacent` column), so the "
                "paired blocks test pairs all of them, as planned.")
    text = (f"{summary['adjacent']} of {n} pairs (trial k of PyTorch and of TensorFlow) ran "
            "back to back, with no other trial between them")
    if summary["adjacent"] < n:
        gaps = [f"{int(summary['max_pair_gap_trials'])} trials"
                if "max_pair_gap_trials" in summary else "",
                fmt_duration(summary["max_pair_gap_s"] * 1e9)
                if "max_pair_gap_s" in summary else ""]
        gaps = ", ".join(g for g in gaps if g)
        text += f" (the widest gap: {gaps})" if gaps else ""
        text += "; the paired blocks test uses only the adjacent ones"
    return text + "."


def _steadiness_sentence(summary: dict) -> str:
    """How many ok trials cannot support a verdict, the comparisons that left them out and those
    of them left exploratory."""
    if summary["unsteady"] is None or not summary["ok"]:
        return ""
    text = (f"Of the {summary['ok']} ok trials, {summary['unsteady']} never reached a steady "
            f"warm-up and {summary['drifting']} drift within their timed iterations "
            f"({summary['drift_source']})")
    if summary["comparisons"]:
        text += (f"; the {summary['comparisons']} comparison(s) that had such a trial left it "
                 f"out, and {summary['exploratory']} of them kept too few trials for a verdict")
    return text + "."


def abstract(data: Inputs, facts: dict, soft: list[dict], claims: dict, failures: dict) -> list:
    out, counts, hints = [], claims["counts"], claims["exploratory"]
    versions = _join(f"{s['label']} {s['version']}" for s in soft) or "no framework"
    out.append(
        f"We measured {facts['n_cells']} cells ({_join(facts['models']) or 'no model'}; "
        f"{_join(facts['phases']) or 'no phase'}; batch sizes {', '.join(facts['batch_sizes'])}"
        f") of {versions} on {_join(facts['devices']) or 'no device'}, in {facts['n_trials']} "
        f"fresh-process trials of which {facts['n_ok']} ended ok.")
    comparisons = data.comparisons
    if "ratio" in comparisons and comparisons["ratio"].notna().any():
        rated = comparisons[comparisons["ratio"].notna()]
        kinds = [outcome(r) for _, r in rated.iterrows()]
        low, high = rated.loc[rated["ratio"].idxmin()], rated.loc[rated["ratio"].idxmax()]
        out.append(
            f"PyTorch's median time divided by TensorFlow's ranged from {sig(low['ratio'])} "
            f"({_pair_name(low)}) to {sig(high['ratio'])} ({_pair_name(high)}). PyTorch was "
            f"faster in {kinds.count('pytorch_faster')} of {len(kinds)} matched pairs, "
            f"TensorFlow in {kinds.count('tensorflow_faster')}; "
            f"{kinds.count('equivalent')} were equivalent and "
            f"{kinds.count('inconclusive')} inconclusive"
            + _exploratory_clause(rated) + ".")
    else:
        out.append("No matched pair produced a PyTorch/TensorFlow ratio in this run.")
    judged = ", ".join(_tally(v, counts[v], hints[v]) for v in VERDICTS if counts[v])
    out.append(f"Of the {sum(counts.values())} quantitative claims of the five source papers: "
               f"{judged}.")
    if sum(hints.values()):
        out.append(f"The {sum(hints.values())} exploratory verdicts rest on too few trials (or on "
                   "unsteady or drifting ones) to confirm or contradict a paper: they are hints "
                   "for a run with more trials, not findings.")
    if failures["rows"]:
        statuses = pd.Series([r[2] for r in failures["rows"]]).value_counts().sort_index()
        out.append(f"{len(failures['rows'])} trials did not end ok ("
                   + _join(f"{n} {s}" for s, n in statuses.items())
                   + f"); Table {failures['number']} gives each with its reason.")
    return out


def _exploratory_clause(rated: pd.DataFrame) -> str:
    hints = sum(style.is_exploratory(r) for _, r in rated.iterrows())
    if not hints:
        return ""
    every = "every one of these verdicts is" if hints == len(rated) else f"{hints} of them are"
    return f"; {every} exploratory, a hint rather than a finding"


def _pair_name(row) -> str:
    return " ".join(str(row[a]) if a != "batch_size" else f"batch {row[a]}"
                    for a in ("model", "phase", "batch_size", "device") if a in row.index)


def threats(data: Inputs, facts: dict, soft: list[dict]) -> list[str]:
    out = []
    per_cell = data.trials.groupby("cell_id").size() if "cell_id" in data.trials else []
    if len(per_cell) and int(per_cell.min()) < MIN_TRIALS_FOR_VERDICT:
        out.append(f"Few trials: some cells have {int(per_cell.min())} trials; an interval of "
                   f"a median from fewer than {MIN_TRIALS_FOR_VERDICT} trials is wide, and "
                   "verdicts drawn from it are fragile.")
    if facts["devices"] == ["cpu"]:
        out.append("Only the CPU was measured: every GPU claim is left as not measured, and "
                   "CPU numbers from a shared virtual machine vary with its neighbours.")
    if "defaults" not in facts["profiles"]:
        out.append("Only the matched settings profile was run; the papers measured each "
                   "framework as it comes, so their claims are judged on matched settings here.")
    out.append("Synthetic in-memory data: input pipelines, which the papers' epoch times "
               "include, are not measured by the throughput experiment.")
    out.append("Model equivalence: both frameworks build the same architecture from one spec; "
               "kernel choices (convolution algorithms, layouts) still differ, by design of each "
               "framework, and are part of what is compared.")
    out.append("Published statistics: florencio2019 paired runs that were not paired and "
               "reports p = 3.896559845095909e-18, the floor the normal approximation of the "
               "Wilcoxon signed-rank test reaches at n = 100, for five hypotheses; we compare "
               "independent trials with Mann-Whitney U and intervals instead.")
    return out


# --- rendering ----------------------------------------------------------------------------------

@cache
def _environment():
    import jinja2

    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(REPORT_DIR / "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined,
                              lstrip_blocks=True, keep_trailing_newline=True)
    environment.filters["code"] = code_spans
    return environment


def code_spans(text) -> markupsafe.Markup:
    """Escape ``text``, then show its `backticked` spans as code."""
    import re

    import markupsafe

    escaped = str(markupsafe.escape(text))
    return markupsafe.Markup(re.sub(r"`([^`<>]+)`", r"<code>\1</code>", escaped))


def render_html(context: dict) -> str:
    return _environment().get_template(TEMPLATE).render(**context)


@contextmanager
def _source_date_epoch(epoch: int):
    old = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = str(epoch)
    try:
        yield
    finally:
        if old is None:
            del os.environ["SOURCE_DATE_EPOCH"]
        else:
            os.environ["SOURCE_DATE_EPOCH"] = old


def render_pdf(html: str, base_url: Path, epoch: int) -> bytes:
    """The PDF of ``html``; the same HTML and figures give the same bytes."""
    import weasyprint

    with _source_date_epoch(epoch):
        document = weasyprint.HTML(string=html, base_url=str(base_url) + os.sep)
        return document.write_pdf(pdf_identifier=f"fwbench-{epoch}".encode())


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def _staged_directory(target: Path):
    """A fresh folder next to ``target`` that replaces it when the block ends without error."""
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    stage.chmod(0o777 & ~_umask())
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
    os.replace(stage, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def build_report(inputs: dict, *, html: str, pdf: str, figures: str, run: str) -> None:
    """Write the report's HTML, its PDF and the figures folder both reference.

    ``inputs`` maps iterations, trials, cells (parquet) and cell_stats, comparisons, tests (CSV)
    to paths; optionally ablation, gaps, profiles, scaling, strategies, flops, telemetry_trace
    and ``versions``, the version audit's versions.csv (rules/audit.smk), whose
    diff-<other>.csv files beside it are shown when present. Every output is written
    atomically; the PDF's date is the end of the last trial, so the same inputs give a
    byte-identical PDF.
    """
    data = load_inputs(inputs)
    epoch = source_date_epoch(data.trials)
    html_path, figures_dir = Path(html), Path(figures)
    href = Path(os.path.relpath(figures_dir, html_path.parent)).as_posix()
    with _staged_directory(figures_dir) as stage:
        drawn = make_figures(data, stage, failure_reasons(data.trials))
    context = build_context(data, run=run, figures=drawn, href=href, epoch=epoch)
    text = render_html(context)
    document = render_pdf(text, html_path.parent, epoch)
    _write_atomic(html_path, text.encode())
    _write_atomic(Path(pdf), document)
