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

import math
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
import yaml

from fwbench import SOURCE_DIR, __version__
from fwbench.analysis.stats import hodges_lehmann, median_ci
from fwbench.analysis.telemetry_trace import CHOICE
from fwbench.analysis.trial_quality import adjacency_summary, steadiness_summary
from fwbench.environment.images import DIGEST
from fwbench.measure.telemetry.machine import CPU_COLUMNS, GPU_COLUMNS
from fwbench.plan.cells import REAL_DATA
from fwbench.report import figures as figs
from fwbench.report.figures import missing, outcome

if TYPE_CHECKING:  # imported where used, like jinja2
    import markupsafe

REPORT_DIR = SOURCE_DIR / "report"
TEMPLATE = "report.html.j2"
CLAIMS_PATH = REPORT_DIR / "claims.yaml"

FRAMEWORK_LABELS = figs.FRAMEWORK_LABELS
PAPERS = ["patel2023", "dai2022", "florencio2019", "tian2020", "sumanjali2024"]
VERDICTS = ["confirmed", "contradicted", "equivalent", "inconclusive", "not measured",
            "untestable"]
CLAIM_KINDS = {"direction", "mixed", "batch_trend", "normality", "telemetry", "power_batch",
               "gap_explanation", "strategy_comparison", "scaling", "pending", "untestable",
               "first_epoch", "higher", "time_to_accuracy"}
SELECT_AXES = set(figs.PAIR_AXES)

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
MIN_TRIALS_FOR_VERDICT = 7


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
    # The "why" section's inputs (fwbench.plan.ablation, fwbench.measure.profiling); empty when not run.
    ablation: pd.DataFrame = field(default_factory=pd.DataFrame)
    gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    profiles: pd.DataFrame = field(default_factory=pd.DataFrame)
    # Beyond one device (fwbench.measure.distributed), achieved FLOP/s (fwbench.analysis.flops) and one trial's
    # telemetry over time (fwbench.analysis.telemetry_trace); empty when not passed.
    scaling: pd.DataFrame = field(default_factory=pd.DataFrame)
    strategies: pd.DataFrame = field(default_factory=pd.DataFrame)
    flops: pd.DataFrame = field(default_factory=pd.DataFrame)
    telemetry_trace: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The real-data experiments' records (fwbench.measure.results): per epoch, and confusion matrices.
    epochs: pd.DataFrame = field(default_factory=pd.DataFrame)
    confusion: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The version audit (rules/audit.smk): versions.csv, and each diff-<other>.csv beside it.
    versions: pd.DataFrame = field(default_factory=pd.DataFrame)
    diffs: dict = field(default_factory=dict)
    versions_path: str | None = None
    # What a framework costs its user (fwbench.analysis.memory, fwbench.analysis.latency), and the iterations
    # the latency distribution is drawn from; empty when not passed.
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
    columns = [c for c in ITERATION_COLUMNS + figs.PAIR_AXES if c in have]
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
    axes = [a for a in figs.PAIR_AXES if a in cells]
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
    for axis in figs.PAIR_AXES + ["framework", "pair_id", "cell_id"]:
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


def sig(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits, in plain notation (0.820, 1.40, 1234)."""
    value = float(value)
    if value == 0:
        return "0"
    exponent = math.floor(math.log10(abs(value)))
    if exponent < -4:
        return f"{value:.{digits - 1}e}"
    return f"{value:.{max(digits - 1 - exponent, 0)}f}"


def fmt_duration(ns) -> str:
    """Nanoseconds as a readable duration with 3 significant digits: 812 µs, 2.44 ms, 1.20 s."""
    seconds = float(ns) / 1e9
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{sig(seconds / scale)} {unit}"
    return f"{sig(seconds / 1e-9)} ns"


def fmt_p(p) -> str:
    p = float(p)
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def fmt_interval(low, high, fmt=sig) -> str:
    return f"[{fmt(low)}, {fmt(high)}]"


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


def _label(framework) -> str:
    return FRAMEWORK_LABELS.get(str(framework), str(framework))


def _join(items) -> str:
    items = [str(i) for i in items]
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _span(values) -> str:
    """A count or range of counts as text: "3" or "2–3"."""
    values = sorted({int(v) for v in values if not missing(v)})
    if not values:
        return "none"
    return str(values[0]) if len(values) == 1 else f"{values[0]}–{values[-1]}"


def _text(value) -> str:
    """A table value as text; whole floats (a nullable integer read back) without ".0"."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _unique(frame: pd.DataFrame, column: str) -> list[str]:
    if column not in frame:
        return []
    return sorted({_text(v) for v in frame[column] if not missing(v)})


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


def _figure(numbering: Numbering, figure: figs.Figure, href: str) -> dict:
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

# Trials-table columns (fwbench.analysis.tables.environment_columns) that make up a framework's stack.
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
                     for a, value in figs.constant_axes(frame, axes).items())


def _axis_header(axis: str) -> str:
    return {"batch_size": "Batch", "input_shape": "Shape"}.get(axis, axis.capitalize())


def _sorted(frame: pd.DataFrame, extra: list[str] = ()) -> pd.DataFrame:
    keys = [a for a in figs.PAIR_AXES + list(extra) if a in frame]
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
    axes = _varying(frame, figs.PAIR_AXES) or ["model"]
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
               f"{_constant(frame, figs.PAIR_AXES)}.")
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


def _percent(level) -> str:
    return f"{100 * float(level):.1f}".rstrip("0").rstrip(".") + " %"


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
    if isinstance(interval, NotMeasured) or missing(level) or abs(float(level) - 0.95) < 1e-9:
        return interval
    if uniform is not None and abs(float(level) - uniform) < 1e-6:
        return interval
    return f"{interval} at {_percent(level)}"


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
    axes = _varying(frame, figs.PAIR_AXES) or ["model"]
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
               f"{_constant(frame, figs.PAIR_AXES)}.{_level_sentence(uniform)}"
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
    if column == "decision" and not missing(value) and figs.is_exploratory(row):
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


# --- claims -------------------------------------------------------------------------------------

@cache
def load_claims(path: str = str(CLAIMS_PATH)) -> dict:
    with open(path) as f:
        return yaml.safe_load(f)


def evaluate_claim(claim: dict, comparisons: pd.DataFrame, cell_stats: pd.DataFrame,
                   tests: pd.DataFrame | None = None, trials: pd.DataFrame | None = None,
                   gaps: pd.DataFrame | None = None, scaling: pd.DataFrame | None = None,
                   strategies: pd.DataFrame | None = None) -> dict:
    """The verdict on one published claim: {verdict, ours, notes, exploratory}.

    ``exploratory`` says why the verdict is only a hint ("" when it is not): it was judged from
    comparisons the statistics mark exploratory, or from fewer trials than a verdict needs. A
    hint confirms or contradicts nothing on its own, and the report labels it everywhere.
    """
    args = (claim, comparisons, cell_stats, tests, trials, gaps, scaling, strategies)
    result = _judge_claim(*args)
    undecided = result["verdict"] in ("not measured", "untestable")
    result["exploratory"] = "" if undecided else _claim_hint(*args)
    return result


def _judge_claim(claim: dict, comparisons: pd.DataFrame, cell_stats: pd.DataFrame,
                 tests: pd.DataFrame | None = None, trials: pd.DataFrame | None = None,
                 gaps: pd.DataFrame | None = None, scaling: pd.DataFrame | None = None,
                 strategies: pd.DataFrame | None = None) -> dict:
    """The verdict on one published claim: {verdict, ours, notes}.

    ``direction`` and ``mixed`` read the comparisons; ``batch_trend`` reads the statistics'
    trend tests (Jonckheere-Terpstra) or, without them, the cell statistics; ``normality``,
    ``telemetry`` and ``power_batch`` read the statistics' replications of the papers' tests
    (and the trials' telemetry values); ``gap_explanation`` reads the counterfactual mode tests
    (``fwbench.analysis.ablation.gap_tests``); ``strategy_comparison`` and ``scaling`` read the
    distributed experiment's stats/strategies.csv and stats/scaling.csv; ``first_epoch``,
    ``higher`` and ``time_to_accuracy`` read the trials of the real-data experiments
    (``_judge_real_data``); ``pending`` and ``untestable`` say why no verdict is possible.
    """
    test = claim["test"]
    kind = test["kind"]
    if kind == "untestable":
        return {"verdict": "untestable", "ours": f"untestable: {test['reason']}", "notes": []}
    if kind == "pending":
        return {"verdict": "not measured", "ours": f"not measured in this run: needs "
                f"{test['needs']}", "notes": []}
    if kind == "power_batch":
        return _judge_power(tests)
    if kind == "gap_explanation":
        return _judge_gap_explanation(gaps, test.get("select", {}))
    if kind == "strategy_comparison":
        return _judge_strategies(strategies, test, trials)
    if kind == "scaling":
        return _judge_scaling(scaling, test, trials)
    if kind in ("first_epoch", "higher", "time_to_accuracy"):
        return _judge_real_data(claim, trials)
    if kind == "batch_trend" and tests is not None:
        from_tests = _trend_from_tests(tests)
        if from_tests:
            return from_tests
    source = cell_stats if kind == "batch_trend" else comparisons
    rows, notes = _claim_rows(source, test.get("select", {}))
    if isinstance(rows, str):
        return {"verdict": "not measured", "ours": f"not measured in this run: {rows}",
                "notes": notes}
    if kind == "normality":
        verdict, ours = _judge_normality(rows, tests)
        return {"verdict": verdict, "ours": ours, "notes": notes}
    if kind == "telemetry":
        verdict, ours = _judge_telemetry(rows, claim, trials, tests)
        return {"verdict": verdict, "ours": ours, "notes": notes}
    judge = {"direction": _judge_direction, "mixed": _judge_mixed,
             "batch_trend": _judge_batch_trend}[kind]
    verdict, ours = judge(rows, claim)
    return {"verdict": verdict, "ours": ours, "notes": notes}


def _claim_hint(claim: dict, comparisons: pd.DataFrame, cell_stats: pd.DataFrame,
                tests: pd.DataFrame | None, trials: pd.DataFrame | None,
                gaps: pd.DataFrame | None, scaling: pd.DataFrame | None,
                strategies: pd.DataFrame | None) -> str:
    """Why a claim's verdict is only a hint, from the rows its kind was judged on; "" if not."""
    test = claim["test"]
    kind, select = test["kind"], test.get("select", {})
    if kind in ("direction", "mixed", "normality", "telemetry"):
        rows, _ = _claim_rows(comparisons, select)
        return _hint_from_comparisons(rows)
    if kind in ("batch_trend", "power_batch") and tests is not None and "exploratory" in tests:
        prefix = "Jonckheere" if kind == "batch_trend" else "TOST"
        rows = tests[(tests["source"] == "patel2023") & (tests["decision"] != "skipped")
                     & tests["test"].astype(str).str.startswith(prefix)]
        hints = int(sum(figs.flag(v) for v in rows["exploratory"]))
        if len(rows):
            return (f"{hints} of {len(rows)} series have fewer than {MIN_TRIALS_FOR_VERDICT} "
                    "trials at some batch size" if hints else "")
    if kind == "batch_trend":
        rows, _ = _claim_rows(cell_stats, select)
        return _fewest(rows, ["n_ok"], "trials in a cell")
    if kind == "gap_explanation" and gaps is not None and len(gaps):
        rows, _ = _claim_rows(gaps, select)
        return _fewest(rows, ["n_pytorch", "n_tensorflow"], "trials on a side")
    if kind in ("strategy_comparison", "scaling"):
        frame, counts, strategy = ((strategies, ["n_single", "n_multi"], test.get("expect"))
                                   if kind == "strategy_comparison" else
                                   (scaling, ["n_baseline", "n_trials"], test.get("strategy")))
        rows, _ = _distributed_claim_rows(frame, test, strategy, "")
        return _fewest(rows, counts, "trials of a strategy")
    if kind in ("first_epoch", "higher", "time_to_accuracy") and trials is not None:
        frame = real_data_trials(trials, str(select.get("experiment", "convergence")))
        rows, _ = _claim_rows(frame, select) if len(frame) else ("", [])
        if isinstance(rows, str) or "cell_id" not in rows:
            return ""
        return _fewest(rows.groupby("cell_id").size().rename("n").to_frame(), ["n"],
                       "ok trials in a cell")
    return ""


def _hint_from_comparisons(rows) -> str:
    if isinstance(rows, str) or "exploratory" not in rows:
        return ""
    rated = rows[[not missing(r) for r in rows["ratio"]]] if "ratio" in rows else rows
    hints = rated[[figs.flag(v) for v in rated["exploratory"]]]
    if hints.empty:
        return ""
    reasons = list(dict.fromkeys(part for r in hints.get("exploratory_reason", [])
                                 if not missing(r) for part in str(r).split("; ") if part))
    why = f" ({'; '.join(reasons[:3])}{'; …' if len(reasons) > 3 else ''})" if reasons else ""
    return f"{len(hints)} of {len(rated)} comparisons are exploratory{why}"


def _fewest(rows, columns: list[str], what: str) -> str:
    """"" when every row has at least MIN_TRIALS_FOR_VERDICT in each count column, else why."""
    if isinstance(rows, str) or rows is None or rows.empty:
        return ""
    counts = [pd.to_numeric(rows[c], errors="coerce") for c in columns if c in rows]
    if not counts:
        return ""
    fewest = min(float(c.min()) for c in counts)
    if missing(fewest) or fewest >= MIN_TRIALS_FOR_VERDICT:
        return ""
    return f"as few as {int(fewest)} {what}, fewer than {MIN_TRIALS_FOR_VERDICT}"


def _claim_rows(frame: pd.DataFrame, select: dict):
    """The rows a claim selects, or the reason there are none; notes on how they were chosen."""
    if frame.empty:
        return "the statistics hold no rows", []
    for axis, wanted in select.items():
        values = [str(v) for v in (wanted if isinstance(wanted, list) else [wanted])]
        have = _unique(frame, axis)
        if not set(values) & set(have):
            return (f"it has no pair with {axis.replace('_', ' ')} {' or '.join(values)} "
                    f"(this run measured {_join(have) or 'none'})"), []
        frame = frame[frame[axis].astype(str).isin(values)]
    if frame.empty:
        return "no pair has every selected setting at once", []
    notes = []
    if "profile" in frame:
        if (frame["profile"] == "defaults").any():
            frame = frame[frame["profile"] == "defaults"]
        else:
            notes.append("Judged on the matched profile: this run has no `defaults` profile, "
                         "and the paper ran each framework's defaults.")
    if "device" not in select and "device" in frame:
        notes.append(f"Measured on: {_join(_unique(frame, 'device'))}.")
    return frame, notes


def _judge_direction(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    rows = rows[[not missing(r) for r in rows["ratio"]]] if "ratio" in rows else rows.iloc[0:0]
    if rows.empty:
        return "not measured", "not measured in this run: the selected pairs have no ratio"
    expect = claim["test"]["expect"]
    opposite = "tensorflow_faster" if expect == "pytorch_faster" else "pytorch_faster"
    kinds = [outcome(r) for _, r in rows.iterrows()]
    n, agree, against = len(kinds), kinds.count(expect), kinds.count(opposite)
    equal = kinds.count("equivalent")
    need = n if claim["test"].get("aggregate", "all") == "all" else n // 2 + 1
    if agree >= need:
        verdict = "confirmed"
    elif against >= need or (against and not agree and need == n):
        verdict = "contradicted"
    elif equal >= need:
        verdict = "equivalent"
    else:
        verdict = "inconclusive"
    return verdict, _ratio_summary(rows, kinds, claim.get("published_ratio"))


def _ratio_summary(rows: pd.DataFrame, kinds: list[str], published) -> str:
    counts = ", ".join(f"{kinds.count(k)} {figs.OUTCOME_LABELS[k]}" for k in figs.OUTCOME_LABELS
                       if kinds.count(k))
    if len(rows) == 1:
        row = rows.iloc[0]
        text = f"ratio {sig(row['ratio'])}"
        if not missing(row.get("ratio_ci_low")) and not missing(row.get("ratio_ci_high")):
            text += f" {fmt_interval(row['ratio_ci_low'], row['ratio_ci_high'])}"
            if published:
                low, high = row["ratio_ci_low"], row["ratio_ci_high"]
                inside = low <= published[1] and high >= published[0]
                text += (f"; {'overlaps' if inside else 'outside'} the published "
                         f"{sig(published[0])}–{sig(published[1])}")
        return f"{text} ({counts})"
    ratios = rows["ratio"].astype(float)
    return (f"{len(rows)} pairs, ratio {sig(ratios.min())} to {sig(ratios.max())}: {counts}")


def _judge_mixed(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    rows = rows[[not missing(r) for r in rows["ratio"]]] if "ratio" in rows else rows.iloc[0:0]
    if rows.empty:
        return "not measured", "not measured in this run: the selected pairs have no ratio"
    kinds = [outcome(r) for _, r in rows.iterrows()]
    pt, tf = kinds.count("pytorch_faster"), kinds.count("tensorflow_faster")
    if pt and tf:
        verdict = "confirmed"
    elif len(kinds) >= 2 and (pt == len(kinds) or tf == len(kinds)):
        verdict = "contradicted"
    else:
        verdict = "inconclusive"
    return verdict, _ratio_summary(rows, kinds, None)


NORMALITY_TESTS = (("Kolmogorov-Smirnov", "as published"), ("Lilliefors", ""),
                   ("Shapiro-Wilk", ""))


def _judge_normality(pairs: pd.DataFrame, tests: pd.DataFrame | None) -> tuple[str, str]:
    """florencio2019's "not normal": the statistics' normality tests of the selected pairs.

    The verdict follows Shapiro-Wilk (a sound test); the KS test as published (parameters
    estimated from the same sample) and Lilliefors are reported beside it.
    """
    needed = {"source", "test", "variant", "scope", "decision"}
    if tests is None or not needed <= set(tests.columns):
        return "not measured", "not measured in this run: the statistics ran no normality test"
    scopes = tests["scope"].astype(str).str.split(" ").str[0]
    rows = tests[(tests["source"] == "florencio2019") & scopes.isin(set(pairs["pair_id"]))]
    counts, verdict = [], "not measured"
    for name, variant in NORMALITY_TESTS:
        part = rows[(rows["test"] == name)
                    & rows["variant"].astype(str).str.contains(variant, regex=False)
                    & (rows["decision"] != "skipped")]
        if part.empty:
            continue
        rejected = int((part["decision"] == "reject H0").sum())
        counts.append(f"{name}{' as published' if variant else ''} rejects normality in "
                      f"{rejected} of {len(part)}")
        if name == "Shapiro-Wilk":
            verdict = ("confirmed" if rejected == len(part) else
                       "contradicted" if rejected == 0 else "inconclusive")
    if not counts:
        return "not measured", "not measured in this run: no normality test of these cells"
    return verdict, "; ".join(counts) + " samples"


def _judge_telemetry(pairs: pd.DataFrame, claim: dict, trials: pd.DataFrame | None,
                     tests: pd.DataFrame | None) -> tuple[str, str]:
    """A florencio2019 telemetry claim: per pair, the frameworks' medians of one per-trial value
    and the statistics' Mann-Whitney test over trials (florencio2019 rows, unpaired, sound)."""
    test = claim["test"]
    column, expect = test["metric"], test["expect"]
    trials = trials if trials is not None else pd.DataFrame()
    values = trials[trials["pair_id"].astype(str).isin(set(pairs["pair_id"]))] \
        if "pair_id" in trials else trials
    if column not in values or values[column].notna().sum() == 0:
        return "not measured", f"not measured in this run: {telemetry_absent(values, column)}"
    decided = {}
    if tests is not None and {"scope", "metric", "variant", "decision"} <= set(tests.columns):
        sound = tests[(tests["metric"] == column)
                      & (tests["variant"] == "unpaired, trials (sound)")]
        decided = dict(zip(sound["scope"].astype(str), sound["decision"]))
    outcomes, texts = [], []
    for pair_id, group in values[values[column].notna()].groupby("pair_id", sort=True):
        medians = group.groupby("framework")[column].median()
        if not {"pytorch", "tensorflow"} <= set(medians.index):
            continue
        pt, tf = float(medians["pytorch"]), float(medians["tensorflow"])
        significant = decided.get(str(pair_id)) == "reject H0"
        higher = "pytorch_higher" if pt > tf else "tensorflow_higher"
        outcomes.append(higher if significant else "no_difference")
        texts.append(f"PyTorch {sig(pt)} against TensorFlow {sig(tf)} "
                     f"({'different' if significant else 'no significant difference'})")
    if not outcomes:
        return "not measured", ("not measured in this run: no pair has the value for both "
                                "frameworks")
    n, agree = len(outcomes), outcomes.count(expect)
    if expect == "no_difference":
        verdict = "contradicted" if agree < n else "inconclusive"
    else:
        opposite = "tensorflow_higher" if expect == "pytorch_higher" else "pytorch_higher"
        verdict = ("confirmed" if agree == n else
                   "contradicted" if outcomes.count(opposite) and not agree else "inconclusive")
    label = TELEMETRY_LABELS.get(column, column)
    return verdict, f"{label}, medians over trials: " + "; ".join(texts)


def _judge_power(tests: pd.DataFrame | None) -> dict:
    """patel2023's "batch size does not affect power": the statistics' TOST equivalence rows."""
    rows = pd.DataFrame()
    if tests is not None and {"source", "test", "decision"} <= set(tests.columns):
        rows = tests[(tests["source"] == "patel2023")
                     & tests["test"].astype(str).str.startswith("TOST")
                     & (tests["decision"] != "skipped")]
    if rows.empty:
        return {"verdict": "not measured", "notes": [],
                "ours": "not measured in this run: no inference cell has GPU power values at "
                        "two batch sizes or more (NVML on an NVIDIA GPU)"}
    shown = int((rows["decision"] == "equivalent").sum())
    verdict = "confirmed" if shown == len(rows) else "inconclusive"
    return {"verdict": verdict, "notes": [],
            "ours": f"TOST equivalence of power across batch sizes (±rope): shown in {shown} of "
                    f"{len(rows)} model and framework series"}


def _trend_from_tests(tests: pd.DataFrame) -> dict | None:
    """The batch-size claim judged by the statistics' decreasing-trend tests, if they ran."""
    if not {"source", "test", "decision"} <= set(tests.columns):
        return None
    trend = tests[(tests["source"] == "patel2023")
                  & tests["test"].astype(str).str.startswith("Jonckheere")
                  & (tests["decision"] != "skipped")]
    if trend.empty:
        return None
    rejected = int((trend["decision"] == "reject H0").sum())
    n = len(trend)
    verdict = "confirmed" if rejected == n else "inconclusive"
    p = ", ".join(fmt_p(v) for v in trend.get("p_corrected", pd.Series(dtype=float))
                  if not missing(v))
    return {"verdict": verdict, "notes": [],
            "ours": f"Jonckheere-Terpstra test for a decreasing time per sample: {rejected} of "
                    f"{n} model and framework series decrease significantly"
                    + (f" (Holm-corrected p: {p})" if p else "")}


def _judge_batch_trend(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    needed = {"median_ns", "ci_low_ns", "ci_high_ns", "batch_size"}
    if not needed <= set(rows.columns):
        return "not measured", ("not measured in this run: the cell statistics lack "
                                + _join(sorted(needed - set(rows.columns))))
    rows = rows[[not missing(v) for v in rows["median_ns"]]]
    keys = [k for k in ("device", "model", "framework", "input_shape", "mode", "profile")
            if k in rows]
    falls, rises, series = 0, 0, []
    for key, group in rows.groupby(keys, sort=True):
        if group["batch_size"].nunique() < 2:
            continue
        small = group.loc[group["batch_size"].idxmin()]
        large = group.loc[group["batch_size"].idxmax()]
        b_small, b_large = int(small["batch_size"]), int(large["batch_size"])
        if large["ci_high_ns"] / b_large < small["ci_low_ns"] / b_small:
            falls += 1
        elif large["ci_low_ns"] / b_large > small["ci_high_ns"] / b_small:
            rises += 1
        series.append(f"{key[1]} {_label(key[2])}: {fmt_duration(small['median_ns'] / b_small)}"
                      f" → {fmt_duration(large['median_ns'] / b_large)}")
    if not series:
        return "not measured", ("not measured in this run: no model has two batch sizes "
                                "with a measured inference time")
    n = len(series)
    verdict = ("confirmed" if falls == n else "contradicted" if rises > n / 2
               else "inconclusive")
    return verdict, (f"time per sample, smallest → largest batch: {'; '.join(series)} "
                     f"({falls} of {n} fall, {rises} rise)")


GAP_CLOSES = ("closes the gap", "reverses the gap", "narrows the gap")
GAP_KEEPS = ("does not close the gap", "widens the gap")


def _judge_gap_explanation(gaps: pd.DataFrame | None, select: dict) -> dict:
    """patel2023's explanation of TensorFlow's CPU advantage (its static graph and XLA), judged
    by the counterfactual modes: it holds where switching TensorFlow to eager closes (or
    narrows, or reverses) an established TensorFlow advantage."""
    needs = ("not measured in this run: needs PyTorch eager against TensorFlow tf.function and "
             "against TensorFlow eager on the selected cells (mode pairs `idiomatic` and `eager`)")
    if gaps is None or gaps.empty:
        return {"verdict": "not measured", "ours": needs, "notes": []}
    rows, notes = _claim_rows(gaps, select)
    if isinstance(rows, str):
        return {"verdict": "not measured", "ours": f"not measured in this run: {rows}",
                "notes": notes}
    eager = rows[rows["counterfactual"] == "TensorFlow eager"]
    if eager.empty:
        return {"verdict": "not measured", "ours": needs, "notes": notes}
    with_gap = eager[eager["verdict"] != "no TensorFlow advantage to explain"]
    ratios = _join(sig(v) for v in eager["baseline_ratio"])
    if with_gap.empty:
        return {"verdict": "inconclusive", "notes": notes,
                "ours": f"no selected cell shows a TensorFlow advantage to explain (PyTorch "
                        f"eager / TensorFlow tf.function: {ratios})"}
    verdicts = list(with_gap["verdict"])
    closes = sum(v in GAP_CLOSES for v in verdicts)
    keeps = sum(v in GAP_KEEPS for v in verdicts)
    n = len(verdicts)
    verdict = ("confirmed" if closes > n / 2 else "contradicted" if keeps > n / 2
               else "inconclusive")
    ours = (f"switching TensorFlow to eager closed, narrowed or reversed the gap in {closes} of "
            f"{n} cells with a TensorFlow advantage (gap closed: "
            + _join(f"{float(v):.0%}" for v in with_gap["gap_closed"]) + ")")
    compiled = rows[(rows["counterfactual"] == "PyTorch torch.compile")
                    & (rows["verdict"] != "no TensorFlow advantage to explain")]
    if len(compiled):
        ours += (f"; PyTorch with torch.compile did so in "
                 f"{sum(v in GAP_CLOSES for v in compiled['verdict'])} of {len(compiled)}")
    return {"verdict": verdict, "ours": ours, "notes": notes}


def _distributed_claim_rows(frame: pd.DataFrame | None, test: dict, strategy: str,
                            absent: str):
    """The claim's rows of stats/strategies.csv or stats/scaling.csv: selected like any claim's,
    of the framework that runs ``strategy``, at two devices or more; or why there are none
    (``absent`` when the table is empty)."""
    from fwbench.plan.strategies import STRATEGIES
    if frame is None or frame.empty:
        return absent, []
    rows, notes = _claim_rows(frame, test.get("select", {}))
    if isinstance(rows, str):
        return rows, notes
    framework = STRATEGIES[strategy][0]
    return rows[(rows["framework"] == framework) & (rows["world_size"].astype(int) > 1)], notes


def _unmeasured(rows: pd.DataFrame, needs: str, notes: list) -> dict:
    """``not measured``, with the failures the statistics noted on the rows, if any."""
    why = _join(sorted({str(n) for n in rows.get("note", []) if not missing(n) and str(n)}))
    return {"verdict": "not measured", "notes": notes,
            "ours": f"not measured in this run: {why or needs}"}


def _judge_strategies(strategies: pd.DataFrame | None, test: dict,
                      trials: pd.DataFrame | None) -> dict:
    """patel2023's "DDP performs better than DataParallel": the strategy comparisons of the
    framework running ``expect`` (fwbench.analysis.scaling.strategy_comparisons), each decided by
    whether its interval excludes 1."""
    from fwbench.plan.strategies import STRATEGIES, STRATEGY_LABELS, STRATEGY_PAIRS
    expect = test["expect"]
    framework, pair = STRATEGIES[expect]
    other = next(names[framework] for name, names in STRATEGY_PAIRS.items() if name != pair)
    rows, notes = _distributed_claim_rows(strategies, test, expect,
                                          _distributed_absent(trials, NO_STRATEGIES))
    if isinstance(rows, str):
        return {"verdict": "not measured", "ours": f"not measured in this run: {rows}",
                "notes": notes}
    measured = rows[[not missing(v) for v in rows["ratio"]]]
    if measured.empty:
        return _unmeasured(rows, "no cell at two devices or more has ok trials of both "
                                 "strategies", notes)
    faster = list(measured["faster"])
    verdict = ("confirmed" if faster.count(expect) == len(faster) else
               "contradicted" if faster.count(other) and not faster.count(expect) else
               "inconclusive")
    texts = [f"{r['model']} at {_text(r['world_size'])} devices: "
             f"{STRATEGY_LABELS[r['multi_process']]} / {STRATEGY_LABELS[r['single_process']]} "
             f"throughput {sig(r['ratio'])} {_ci(r, 'ratio')} ({_faster_text(r['faster'])})"
             for _, r in measured.iterrows()]
    return {"verdict": verdict, "ours": "; ".join(texts), "notes": notes}


def _ci(row, name: str) -> str:
    """``name``'s interval in a distributed table's row, with its coverage when too few
    trials kept it below the nominal level."""
    return _with_level(fmt_interval(row[f"{name}_ci_low"], row[f"{name}_ci_high"]),
                       _shortfall(row))


def _shortfall(row):
    """The coverage of a Hodges-Lehmann interval of fwbench.measure.distributed when it falls short of
    the nominal level; None when it reaches it (exact, so often a little above)."""
    attained = row.get("ci_attained")
    return None if missing(attained) or str(attained) == "True" else row.get("ci_level")


def _faster_text(faster) -> str:
    from fwbench.plan.strategies import STRATEGY_LABELS
    if faster in STRATEGY_LABELS:
        return f"{STRATEGY_LABELS[faster]} faster"
    return "neither shown faster" if faster == "neither" else str(faster)


def _judge_scaling(scaling: pd.DataFrame | None, test: dict,
                   trials: pd.DataFrame | None) -> dict:
    """patel2023's "DDP offers near-linear speed-ups": the scaling efficiency of ``strategy``
    (fwbench.analysis.scaling.scaling_efficiency) with its interval, near-linear when the whole
    interval is at or above the threshold there."""
    from fwbench.plan.strategies import resolve_strategy
    strategy = test["strategy"]
    rows, notes = _distributed_claim_rows(scaling, test, strategy,
                                          _distributed_absent(trials, NO_SCALING))
    if isinstance(rows, str):
        return {"verdict": "not measured", "ours": f"not measured in this run: {rows}",
                "notes": notes}
    rows = rows[[resolve_strategy(str(s), str(f)) == strategy
                 for s, f in zip(rows["strategy"], rows["framework"])]]
    measured = rows[[not missing(v) for v in rows["efficiency"]]]
    if measured.empty:
        return _unmeasured(rows, "no cell has ok trials at one device and at more", notes)
    verdicts = list(measured["verdict"])
    near, sub = verdicts.count("near-linear"), verdicts.count("sub-linear")
    verdict = ("confirmed" if near == len(verdicts) else
               "contradicted" if sub and not near else "inconclusive")
    texts = [f"{r['model']} at {_text(r['world_size'])} devices: scaling efficiency "
             f"{sig(r['efficiency'])} {_ci(r, 'efficiency')} ({r['verdict']})"
             for _, r in measured.iterrows()]
    threshold = float(measured["near_linear_threshold"].iloc[0])
    return {"verdict": verdict, "notes": notes,
            "ours": "; ".join(texts) + f" (near-linear: the whole interval at or above "
                                       f"{threshold:g})"}


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

CONVERGENCE_PRESET = "presets/tian2020-convergence.yaml"
# The groups of the accuracy table and the time bars: the training axes, then the framework.
TRAINING_KEYS = [*figs.TRAINING_AXES, "framework"]
# tian2020's three times per trial (trials-table columns; see fwbench.measure.results), by panel title.
EPOCH_TIMES = {"median_ns": "training per epoch", "inference_median_ns": "inference",
               "cold_start_ns": "first epoch"}
# Per-trial values a claim may compare (kinds `higher` and `time_to_accuracy`).
TRIAL_METRICS = {
    "final_accuracy": "validation accuracy after the last epoch",
    "best_accuracy": "best validation accuracy",
    "test_accuracy": "test accuracy after training",
    "first_epoch_excess_ns": "first epoch's training time above the median later epoch",
    "epochs_to_accuracy": "epochs to the target accuracy",
    "time_to_accuracy_ns": "training time to the target accuracy (validation excluded)",
}


def real_data_trials(trials: pd.DataFrame, experiment: str | None = None) -> pd.DataFrame:
    """The ok trials of the `epoch` and `convergence` experiments (or of ``experiment``), with
    tian2020's excess of the first epoch over the median later one (convergence: cold start
    minus median). Empty, without columns, when there are none."""
    if not {"experiment", "status"} <= set(trials.columns):
        return pd.DataFrame()
    frame = trials[trials["experiment"].astype(str).isin(REAL_DATA) & (trials["status"] == "ok")]
    excess = (pd.to_numeric(frame["cold_start_ns"], errors="coerce")
              - pd.to_numeric(frame["median_ns"], errors="coerce"))
    frame = frame.assign(first_epoch_excess_ns=excess.where(frame["experiment"] == "convergence"))
    if experiment is not None:
        frame = frame[frame["experiment"] == experiment]
    return frame if len(frame) else pd.DataFrame()


def _no_real_data(trials: pd.DataFrame, experiment: str = "convergence") -> str:
    """Why a real-data figure, table or claim has no data, and how to measure it."""
    ran = _join(_unique(trials, "experiment")) or "no"
    how = (f"{CONVERGENCE_PRESET} runs it for tian2020 (docs/data.md gives every paper's "
           "protocol)" if experiment == "convergence" else "docs/data.md gives the protocol")
    return (f"this run has no ok trial of the `{experiment}` experiment (it ran the {ran} "
            f"experiment); {how}")


def _of_ok_trials(frame: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """The rows of a per-trial table (epochs, confusion) that belong to an ok trial."""
    ok = real_data_trials(trials)
    keys = ["run", "cell_id", "trial"]
    if frame.empty or ok.empty or not set(keys) <= set(frame.columns):
        return frame.iloc[0:0]
    wanted = set(map(tuple, ok[keys].astype(str).to_numpy()))
    return frame[[tuple(key) in wanted for key in frame[keys].astype(str).to_numpy()]]


def _median_interval(values) -> dict:
    """The median over trials with its distribution-free interval (fwbench.analysis.stats.median_ci)."""
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


def _tian_figures(data: Inputs, folder: Path) -> dict[str, figs.Figure]:
    """tian2020's figures from the convergence experiment, each left out with the reason."""
    absent = _no_real_data(data.trials)
    summary = epoch_time_summary(data.trials)
    counts = _span(summary["n"]) if len(summary) else "no"
    confusion = figs.select_rows(_of_ok_trials(data.confusion, data.trials),
                                 {"experiment": "convergence"})
    chosen, which = _confusion_cell(confusion)
    return {
        "tian_times": figs.epoch_times(
            summary, folder, key="tian2020_times", title="Training, inference and first-epoch "
            "times", source="tian2020 Figures 2–4 and 6–8", absent=absent,
            note="Training per epoch: the epochs after the first, validation excluded; "
                 "inference: one pass over the test set (the validations after the first "
                 "epoch); first epoch: its training time, tracing and autotuning included. "
                 f"Trials per bar: {counts}. Data: {_data_sources(data.trials)}."),
        "tian_accuracy": figs.accuracy_curves(
            _of_ok_trials(data.epochs, data.trials), folder, key="tian2020_accuracy",
            title="Validation accuracy per epoch", source="tian2020 Figures 1 and 5",
            absent=absent),
        "tian_confusion": figs.confusion_matrices(
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
    keys = [k for k in figs.TRAINING_AXES if k in frame]
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


def _percent_text(value) -> str:
    return f"{100 * float(value):.1f}"


def _metric_format(column: str):
    if column.endswith("_ns"):
        return fmt_duration
    if column in ("final_accuracy", "best_accuracy", "test_accuracy"):
        return _percent_text
    return lambda value: f"{float(value):g}"


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
    axes = _varying(frame, figs.TRAINING_AXES) or ["model"]
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
               f"{_constant(frame, figs.TRAINING_AXES)}.")
    return _table(numbering, "accuracy", caption,
                  [_axis_header(a) for a in axes] + ["Framework", "Trials"]
                  + [header for _, header in columns], rows, notes,
                  f"No accuracy was measured: {_no_real_data(data.trials)}.",
                  classes=[""] * (len(axes) + 1) + ["num"] * (1 + len(columns)))


# --- the real-data claims: first epoch, accuracy, time to accuracy -----------------------------

def _judge_real_data(claim: dict, trials: pd.DataFrame | None) -> dict:
    """A claim judged on the ok trials of the real-data experiments (kinds ``first_epoch``,
    ``higher``, ``time_to_accuracy``)."""
    test = claim["test"]
    trials = trials if trials is not None else pd.DataFrame()
    experiment = str(test.get("select", {}).get("experiment", "convergence"))
    frame = real_data_trials(trials, experiment)
    if frame.empty:
        return {"verdict": "not measured", "notes": [],
                "ours": f"not measured in this run: {_no_real_data(trials, experiment)}"}
    rows, notes = _claim_rows(frame, test.get("select", {}))
    if isinstance(rows, str):
        return {"verdict": "not measured", "ours": f"not measured in this run: {rows}",
                "notes": notes}
    judge = {"first_epoch": _judge_first_epoch, "higher": _judge_higher,
             "time_to_accuracy": _judge_time_to_accuracy}[test["kind"]]
    verdict, ours = judge(rows, claim)
    return {"verdict": verdict, "ours": ours, "notes": notes}


def _pairs_of(rows: pd.DataFrame, apart: set):
    """(description, sub-frame) per comparison: the rows split by every training axis that the
    compared groups do not name."""
    keys = [k for k in figs.TRAINING_AXES if k in rows and k not in apart]
    for key, group in rows.groupby(keys, sort=True, dropna=False):
        named = dict(zip(keys, key))
        varying = [k for k in keys if rows[k].astype(str).nunique() > 1]
        yield " ".join(_text(named[k]) for k in varying), group


def _judge_first_epoch(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    """tian2020's first-epoch time: per cell pair, PyTorch's median first epoch over
    TensorFlow's, with the Hodges-Lehmann interval of the log times, judged as a direction."""
    ratios = []
    for _, group in _pairs_of(rows, {"framework"}):
        pt, tf = (group.loc[group["framework"] == f, "cold_start_ns"].dropna().astype(float)
                  for f in ("pytorch", "tensorflow"))
        if pt.empty or tf.empty:
            continue
        hl = hodges_lehmann([math.log(v) for v in pt], [math.log(v) for v in tf])
        ratios.append({**group.iloc[0][[a for a in figs.PAIR_AXES if a in group]].to_dict(),
                       "ratio": float(pt.median() / tf.median()),
                       "ratio_ci_low": math.exp(hl.low), "ratio_ci_high": math.exp(hl.high),
                       # an interval short of the nominal level decides nothing (fwbench.analysis.stats)
                       "verdict": None if hl.attained else "inconclusive"})
    if not ratios:
        return "not measured", ("not measured in this run: no cell has first-epoch times of "
                                "both frameworks")
    verdict, ours = _judge_direction(pd.DataFrame(ratios), claim)
    return verdict, f"first-epoch training time, {ours}"


def _describe_group(group: dict) -> str:
    """A claim's group of trials in words: "PyTorch adam", "TensorFlow mode eager/idiomatic"."""
    parts = []
    for axis, value in group.items():
        value = "/".join(map(str, value)) if isinstance(value, list) else str(value)
        parts.append(_label(value) if axis == "framework" else value if axis == "optimizer"
                     else f"{axis.replace('_', ' ')} {value}")
    return " ".join(parts)


def _judge_higher(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    """A per-trial value (``metric``) higher in the ``higher`` trials than in the ``lower``
    ones: per comparison, the Hodges-Lehmann shift with its interval decides."""
    test = claim["test"]
    column, higher, lower = test["metric"], test["higher"], test["lower"]
    fmt = _metric_format(column)
    outcomes, texts = [], []
    for where, group in _pairs_of(rows, set(higher) | set(lower)):
        a, b = (figs.select_rows(group, side)[column].dropna().astype(float)
                for side in (higher, lower))
        if a.empty or b.empty:
            continue
        hl = hodges_lehmann(a, b)
        outcomes.append(_shift_direction(hl, "higher", "lower"))
        unit = " points" if fmt is _percent_text else ""
        texts.append(f"{where + ': ' if where else ''}{_describe_group(higher)} "
                     f"{fmt(a.median())} (n = {len(a)}) against {_describe_group(lower)} "
                     f"{fmt(b.median())} (n = {len(b)}), shift {_shift_text(hl, fmt, unit)}")
    if not outcomes:
        return "not measured", (f"not measured in this run: it needs trials of "
                                f"{_describe_group(higher)} and of {_describe_group(lower)} in "
                                "one cell")
    return (_every_comparison(outcomes, "higher", "lower"),
            f"{TRIAL_METRICS[column]}, medians over trials: " + "; ".join(texts))


def _shift_direction(hl, above: str, below: str) -> str:
    """Which way a Hodges-Lehmann shift goes: its interval above or below 0, at the nominal
    level (short of it, from too few trials, nothing is decided, as in fwbench.analysis.stats)."""
    if not hl.attained or missing(hl.low):
        return "inconclusive"
    return above if hl.low > 0 else below if hl.high < 0 else "inconclusive"


def _shift_text(hl, fmt, unit: str = "") -> str:
    def signed(value) -> str:
        return ("+" if float(value) >= 0 else "−") + fmt(abs(float(value)))

    if missing(hl.estimate):
        return "not computed"
    return (f"{signed(hl.estimate)}{unit} {fmt_interval(hl.low, hl.high, signed)}"
            + ("" if hl.attained else f" at {_percent(hl.level)}, too few trials"))


def _every_comparison(outcomes: list[str], agree: str, against: str) -> str:
    """confirmed when every comparison agrees; contradicted when one goes against and none
    agrees; else inconclusive."""
    if outcomes.count(agree) == len(outcomes):
        return "confirmed"
    return "contradicted" if against in outcomes and agree not in outcomes else "inconclusive"


def _judge_time_to_accuracy(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    """Who reaches the target accuracy sooner (``metric``: epochs or training time), per cell
    pair: where both frameworks reached it in every trial, the Hodges-Lehmann shift decides;
    where one always did and the other never, the one that did."""
    test = claim["test"]
    column, expect = test["metric"], test["expect"]
    if "target_accuracy" not in rows or rows["target_accuracy"].isna().all():
        return "not measured", ("not measured in this run: no target accuracy was set "
                                "(`data.target_accuracy`)")
    fmt = _metric_format(column)
    outcomes, texts = [], []
    for where, group in _pairs_of(rows, {"framework"}):
        sides = {f: group[group["framework"] == f][column] for f in ("pytorch", "tensorflow")}
        if any(s.empty for s in sides.values()):
            continue
        reached = {f: s.dropna().astype(float) for f, s in sides.items()}
        counts = {f: f"{len(reached[f])} of {len(sides[f])}" for f in sides}
        text = "; ".join(f"{_label(f)} reached it in {counts[f]} trials"
                         + (f", median {fmt(reached[f].median())}" if len(reached[f]) else "")
                         for f in sides)
        full = {f: len(reached[f]) == len(sides[f]) for f in sides}
        if all(full.values()):
            hl = hodges_lehmann(reached["pytorch"], reached["tensorflow"])
            kind = _shift_direction(hl, "tensorflow_faster", "pytorch_faster")
            text += f"; PyTorch − TensorFlow {_shift_text(hl, fmt)}"
        elif full["pytorch"] and reached["tensorflow"].empty:
            kind = "pytorch_faster"
        elif full["tensorflow"] and reached["pytorch"].empty:
            kind = "tensorflow_faster"
        else:
            kind = "inconclusive"
        outcomes.append(kind)
        texts.append(f"{where + ': ' if where else ''}{text}")
    if not outcomes:
        return "not measured", ("not measured in this run: no cell has trials of both "
                                "frameworks")
    opposite = "tensorflow_faster" if expect == "pytorch_faster" else "pytorch_faster"
    return _every_comparison(outcomes, expect, opposite), (f"{TRIAL_METRICS[column]} (target "
                     f"{_join(_unique(rows, 'target_accuracy'))}): " + "; ".join(texts))


# --- beyond one device: scaling, and the strategies compared -------------------------------------

DISTRIBUTED_ABSENT = ("this run has no distributed cell (config `experiment: distributed`; "
                      "docs/distributed.md)")
NO_SCALING = "no strategy was measured at one device and at more in the same cell"
NO_STRATEGIES = ("no cell was measured with both strategies (`single_process` and "
                 "`multi_process`) at the same number of devices")


def _distributed_absent(trials: pd.DataFrame | None, otherwise: str) -> str:
    """Why a distributed table is empty: the run has no distributed cell, or ``otherwise``."""
    ran = trials is not None and "experiment" in trials and \
        (trials["experiment"] == "distributed").any()
    return otherwise if ran else DISTRIBUTED_ABSENT


def _strategy_name(strategy, framework) -> str:
    from fwbench.plan.strategies import STRATEGY_LABELS, resolve_strategy
    return STRATEGY_LABELS[resolve_strategy(str(strategy), str(framework))]


def _fixed(frame: pd.DataFrame) -> str:
    """The axes every row of a distributed table shares, as a sentence ("" when none)."""
    fixed = _constant(frame, figs.DISTRIBUTED_AXES)
    return f" {fixed}." if fixed else ""


def distributed_section(numbering: Numbering, data: Inputs) -> dict:
    """Section 3.8: every strategy's scaling efficiency, and the two strategies of each
    framework compared (stats/scaling.csv and stats/strategies.csv, fwbench.measure.distributed)."""
    return {"scaling": scaling_table(numbering, data),
            "strategies": strategy_table(numbering, data)}


def scaling_table(numbering: Numbering, data: Inputs) -> dict:
    frame, notes, legend = _sorted(data.scaling, ["framework", "strategy", "world_size"]), \
        Notes(), Legend("S")
    axes = _varying(frame, figs.DISTRIBUTED_AXES)
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
    axes = _varying(frame, figs.DISTRIBUTED_AXES)
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

# Per-trial telemetry columns of the trials table (fwbench.analysis.tables.TELEMETRY_COLUMNS).
TELEMETRY_LABELS = {
    "power_w_mean": "mean GPU power (W)",
    "energy_per_sample_j": "energy per sample (J)",
    "gpu_temp_c_max": "highest GPU temperature (°C)",
    "cpu_temp_c_max": "highest CPU temperature (°C)",
    "gpu_util_mean": "mean GPU utilization (%)",
    "cpu_util_mean": "mean CPU utilization (%)",
}
TELEMETRY_SOURCES = {"power_w_mean": "NVML on an NVIDIA GPU",
                     "energy_per_sample_j": "NVML on an NVIDIA GPU",
                     "gpu_temp_c_max": "NVML on an NVIDIA GPU",
                     "gpu_util_mean": "NVML on an NVIDIA GPU",
                     "cpu_temp_c_max": "psutil, where the machine exposes a sensor",
                     "cpu_util_mean": "psutil"}


TRACE_ABSENT = ("the tables hold no telemetry trace: no trial ended ok, or the rule "
                "collect_telemetry_trace did not run (tables/telemetry_trace.parquet)")


def _absent(data: Inputs, name: str, default: str) -> str:
    """Why an optional table is empty: how reading it failed, else ``default`` (what an empty
    table means)."""
    problem = data.problems.get(name)
    return problem if problem and not problem.endswith("has no rows") else default


def telemetry_absent(trials: pd.DataFrame, column: str) -> str:
    """Why a telemetry figure or claim has no data: no column, or no trial with a value."""
    label, source = TELEMETRY_LABELS[column], TELEMETRY_SOURCES[column]
    if column not in trials:
        return (f"the trials table has no `{column}` column: this run recorded no telemetry "
                f"({label} comes from {source})")
    devices = _join(_unique(trials, "device")) or "no device"
    return (f"no trial recorded its {label} ({source}; this run measured on {devices})")


def make_figures(data: Inputs, folder: Path, failures: dict) -> dict[str, figs.Figure]:
    """Every figure of the report, in document order, drawn into ``folder`` or left out."""
    comparisons, stats, trials = data.comparisons, data.cell_stats, data.trials
    from fwbench.report import usage_figures

    out = {
        "relative_time": figs.relative_time(comparisons, failures, folder, title="Relative time",
                                            absent="the statistics hold no matched pair"),
        "speedup_heatmap": usage_figures.speedup_heatmap(comparisons, failures, folder),
        "throughput": figs.throughput(stats, folder),
        "inference_vs_batch": figs.time_vs_batch(stats, folder, source="patel2023 Fig. 4"),
        "energy": figs.per_cell_metric(
            trials, folder, key="energy_per_sample", title="Energy per sample",
            column="energy_per_sample_j", label=TELEMETRY_LABELS["energy_per_sample_j"],
            absent=telemetry_absent(trials, "energy_per_sample_j")),
        "flops": figs.achieved_flops(data.flops, folder, absent=_absent(
            data, "flops", "the statistics computed no achieved FLOP/s (stats/flops.csv, rule "
                           "summarise_flops)")),
        "telemetry": figs.telemetry_trace(data.telemetry_trace, folder, chosen=CHOICE,
                                          absent=_absent(data, "telemetry_trace", TRACE_ABSENT)),
    }
    out["ablation_waterfall"] = figs.waterfall(data.ablation, folder)
    out["time_breakdown"] = figs.time_breakdown(data.profiles, folder,
                                                cell_stats=data.cell_stats)
    out["scaling"] = figs.scaling(data.cell_stats, data.scaling, folder,
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
    groups: dict[str, list[figs.Figure]] = {}
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
    frame = figs.select_rows(trials, select)
    for axis, wanted in (("device", "cuda"), ("mode", "idiomatic"), ("profile", "defaults")):
        if axis in frame and not frame.empty:
            values = _unique(frame, axis)
            keep = wanted if wanted in values else values[0]
            frame = frame[frame[axis].astype(str) == keep]
    return frame


def _patel_figures(data: Inputs, folder: Path, failures: dict) -> dict[str, figs.Figure]:
    comparisons, trials = data.comparisons, data.trials
    devices = _join(_unique(trials, "device")) or "no device"

    def relative(number: int, phase: str, device: str, title: str) -> figs.Figure:
        where = "a GPU" if device == "cuda" else "the CPU"
        return figs.relative_time(
            comparisons, failures, folder, key=f"patel2023_fig{number}", title=title,
            source=f"patel2023 Fig. {number}", select={"phase": phase, "device": device},
            absent=f"this run has no {phase} pair on {where} (it measured {devices})")

    infer = _preferred(trials, {"phase": "infer"})
    power = "power_w_mean"
    return {
        "patel_fig1": relative(1, "train", "cuda", "Relative training time on the GPU"),
        "patel_fig2": relative(2, "infer", "cuda", "Relative inference time on the GPU"),
        "patel_fig3": relative(3, "infer", "cpu", "Relative inference time on the CPU"),
        "patel_fig5": figs.metric_vs_batch(
            infer, folder, key="patel2023_fig5", title="GPU power against batch size",
            column=power, label=TELEMETRY_LABELS[power], select={}, source="patel2023 Fig. 5",
            absent=(telemetry_absent(infer, power) if power not in infer or
                    infer[power].notna().sum() == 0 else
                    "it needs inference trials at two batch sizes or more with a power value")),
    }


def _florencio_figures(data: Inputs, folder: Path) -> dict[str, figs.Figure]:
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
        out[f"florencio_fig{number}"] = figs.trial_boxplots(
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
        "exploratory": sum(figs.is_exploratory(r) for _, r in comparisons.iterrows())
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
    hints = sum(figs.is_exploratory(r) for _, r in rated.iterrows())
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
