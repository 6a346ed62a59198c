"""Section 3.11, Latency: p50, p90 and p99 of single iterations per cell with their intervals,
and the whole distribution of each pair."""

from __future__ import annotations

from pathlib import Path

from fwbench.analysis.claims import wording
from fwbench.report import tables
from fwbench.report.figures import usage
from fwbench.report.figures.style import Figure
from fwbench.report.formatting import Notes, cell_text, fmt
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section, drawn


def context(numbering: tables.Numbering, data: Inputs) -> dict:
    return {"table": latency_table(numbering, data)}


def figures(data: Inputs, folder: Path) -> dict[str, Figure]:
    return {"latency": usage.latency_ecdf(data.iterations, data.trials, folder)}


def _with_bounds(row, q: int, notes: Notes):
    """"228 µs (223–296)": the percentile with its interval in the percentile's unit."""
    value = cell_text(row, f"p{q}_ns", notes, "no kept iteration", wording.fmt_duration)
    low, high = row.get(f"p{q}_ci_low_ns"), row.get(f"p{q}_ci_high_ns")
    if not isinstance(value, str) or wording.missing(low) or wording.missing(high):
        return value
    estimate = row[f"p{q}_ns"]
    bounds = (fmt(b, "duration", unit=False, like=estimate) for b in (low, high))
    return f"{value} ({'–'.join(bounds)})"


def latency_table(numbering: tables.Numbering, data: Inputs) -> dict:
    """Per inference cell (every cell when the run has none): p50, p90 and p99 of its kept
    iterations, each with its bootstrap interval over trials."""
    frame = data.latency
    if "phase" in frame and (frame["phase"].astype(str) == "infer").any():
        frame = frame[frame["phase"].astype(str) == "infer"]
    frame, notes = tables.sorted_rows(frame, ["framework"]), Notes()
    axes = tables.shown_axes(frame)
    shared, own = tables.remarks(frame)
    legend = tables.Legend("L")
    rows = []
    for (_, row), own_remarks in zip(frame.iterrows(), own):
        rows.append([str(row.get(a, "")) for a in axes] + [
            wording.label(row["framework"]), *(_with_bounds(row, q, notes) for q in (50, 90, 99)),
            f"{wording.text(row['n_iterations'])} ({wording.text(row['n_trials'])})",
            legend.cite(own_remarks)])
    phase = "inference " if "phase" in frame and (frame["phase"].astype(str) == "infer").all() \
        else ""
    caption = (f"Latency per {phase}cell: the 50th, 90th and 99th percentile of single "
               "iterations (one batch each) pooled over the ok trials, each with its "
               f"{_levels(frame)}percentile-bootstrap interval (in brackets, same unit) that "
               "draws whole trials, and the iterations (trials) behind them. "
               f"{tables.constant(frame, wording.PAIR_AXES)}"
               + tables.every_cell(shared))
    why = data.problems.get("latency", "no ok trial kept its iterations")
    return tables.without_empty_remarks(tables.table(numbering, "latency", caption,
                  [tables.axis_header(a) for a in axes] + ["Framework", "p50", "p90", "p99",
                                                           "Iterations (trials)", "Remarks"],
                  rows, notes, f"No latency percentiles: {why}.",
                  classes=[""] * len(axes) + ["", "num", "num", "num", "num", ""],
                  legend=legend))


def _levels(frame) -> str:
    """The bootstrap intervals' coverage as the statistics recorded it ("95 % "), else ""."""
    levels = [wording.percent(v) for v in wording.unique(frame, "ci_level")]
    return f"{wording.join(levels)} " if levels else ""


SECTION = Section(
    key="latency", place="results", order=50, title="Latency",
    context=lambda b: context(b.numbering, b.data),
    figures=lambda data, folder, failures: figures(data, folder),
    shown=lambda c: bool(c["latency"]["table"]["number"]) or drawn(c, "latency"))
