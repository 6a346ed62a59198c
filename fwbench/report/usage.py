"""The report's tables of what a framework costs its user: peak memory per cell with its spread,
PyTorch against TensorFlow in memory (the statistics of time), and latency percentiles per
cell. Plain dicts of text for the template, like every table of ``fwbench.report.render``, which
imports this module where it builds the document.
"""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.memory import METRICS
from fwbench.report.figures import style
from fwbench.report.render import (
    Inputs,
    Legend,
    Notes,
    Numbering,
    _axis_header,
    _constant,
    _get,
    _interval,
    _label,
    _level_sentence,
    _sorted,
    _table,
    _text,
    _uniform_level,
    _varying,
    _verdict_text,
    _with_level,
    fmt_duration,
    fmt_p,
    sig,
)

MIB = 2**20
PEAK_NAMES = {"peak_rss_bytes": "RSS", "device_peak_bytes": "device"}
MEMORY_VERDICTS = {"pytorch_less": "PyTorch less", "tensorflow_less": "TensorFlow less"}


def _axes(frame: pd.DataFrame) -> list[str]:
    return _varying(frame, style.PAIR_AXES) or ["model"]


def _remarks(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The ``note`` column split into remarks every row shares (said once, in the caption) and
    each row's own."""
    lists = [[] if style.missing(v) or not str(v) else str(v).split("; ")
             for v in frame.get("note", pd.Series([""] * len(frame)))]
    shared = ([r for r in lists[0] if all(r in other for other in lists[1:])]
              if len(lists) > 1 else [])
    return shared, [[r for r in rows if r not in shared] for rows in lists]


def _mib(value) -> str:
    return sig(float(value) / MIB)


def memory_table(numbering: Numbering, data: Inputs) -> dict:
    """Per cell and peak: the median over ok trials with its interval, the range, and what
    failed (out of memory)."""
    frame, notes = _sorted(data.memory, ["framework", "metric"]), Notes()
    axes = _axes(frame)
    uniform = _uniform_level(frame, "ci_level")
    shared, own = _remarks(frame)
    legend = Legend("M")
    rows = []
    for (_, row), remarks in zip(frame.iterrows(), own):
        failed = (f"out of memory in all {_text(row['n_trials'])} trials"
                  if int(row.get("n_oom", 0) or 0) else "no ok trial recorded this peak")
        rows.append([str(row.get(a, "")) for a in axes] + [
            _label(row["framework"]), PEAK_NAMES.get(row["metric"], row["metric"]),
            _get(row, "median_bytes", notes, failed, _mib),
            _with_level(_interval(row, "ci_low_bytes", "ci_high_bytes", notes, failed, _mib),
                        row.get("ci_level"), uniform),
            _interval(row, "min_bytes", "max_bytes", notes, failed, _mib),
            f"{_text(row['n_values'])}/{_text(row['n_trials'])}",
            legend.cite(remarks),
        ])
    peaks = "; ".join(f"{PEAK_NAMES[m]}: {text}" for m, text in METRICS.items()
                      if m in set(frame.get("metric", [])))
    caption = ("Peak memory per cell in MiB: the median over ok trials with its interval "
               "(95 % unless stated), the range over trials, and the trials that recorded it. "
               f"{peaks}. {_constant(frame, style.PAIR_AXES)}.{_level_sentence(uniform)}"
               + (f" Every cell: {'; '.join(shared)}." if shared else ""))
    why = data.problems.get("memory", "the trials recorded no peak memory")
    return _without_empty_remarks(_table(numbering, "memory", caption,
                  [_axis_header(a) for a in axes] + ["Framework", "Peak", "Median",
                                                     "Interval", "Range", "Trials",
                                                     "Remarks"],
                  rows, notes, f"No peak memory: {why}.",
                  classes=[""] * len(axes) + ["", "", "num", "num", "num", "num", ""],
                  legend=legend))


def _without_empty_remarks(table: dict) -> dict:
    """A table whose Remarks column (its last) cites nothing loses it."""
    if table["rows"] and not table["legend"] and all(not r[-1] for r in table["rows"]):
        table.update(columns=table["columns"][:-1], classes=table["classes"][:-1],
                     rows=[r[:-1] for r in table["rows"]])
    return table


def memory_comparison_table(numbering: Numbering, data: Inputs) -> dict:
    """Per matched pair and peak: PyTorch's median over TensorFlow's, decided as time is."""
    frame, notes = _sorted(data.memory_comparisons, ["metric"]), Notes()
    axes = _axes(frame)
    rows = []
    for _, row in frame.iterrows():
        rows.append([str(row.get(a, "")) for a in axes] + [
            PEAK_NAMES.get(row["metric"], row["metric"]),
            _get(row, "ratio", notes, "no ratio", sig),
            _interval(row, "ratio_ci_low", "ratio_ci_high", notes, "no interval"),
            _get(row, "mannwhitney_p", notes, "no test", fmt_p),
            _get(row, "p_adjusted", notes, "no test", fmt_p),
            _memory_verdict(row, notes),
        ])
    caption = ("PyTorch's median peak memory over TensorFlow's per matched pair (above 1: "
               "PyTorch uses more), with the statistics of time: the Hodges-Lehmann interval of "
               "the log peaks at the Bonferroni level of its family (experiment, device, phase, "
               "peak), the exact Mann-Whitney p raw and adjusted, and the verdict against "
               f"±5 % equivalence. {_constant(frame, style.PAIR_AXES)}.")
    why = data.problems.get("memory_comparisons", "no pair has a peak on both sides")
    return _table(numbering, "memory-comparisons", caption,
                  [_axis_header(a) for a in axes] + ["Peak", "Ratio", "Interval", "p",
                                                     "p (Bonferroni)", "Verdict"],
                  rows, notes, f"No memory comparison: {why}.",
                  classes=[""] * len(axes) + ["", "num", "num", "num", "num", ""])


def _memory_verdict(row, notes: Notes):
    text = _verdict_text(row, notes)
    for name, label in MEMORY_VERDICTS.items():
        text = text.replace(name, label) if isinstance(text, str) else text
    return text


def _with_bounds(row, q: int, notes: Notes):
    """"228 µs (223–296)": the percentile with its interval in the percentile's unit."""
    value = _get(row, f"p{q}_ns", notes, "no kept iteration", fmt_duration)
    low, high = row.get(f"p{q}_ci_low_ns"), row.get(f"p{q}_ci_high_ns")
    if not isinstance(value, str) or style.missing(low) or style.missing(high):
        return value
    number, unit = value.split(" ")
    scale = float(row[f"p{q}_ns"]) / float(number)
    return f"{value} ({sig(float(low) / scale)}–{sig(float(high) / scale)})"


def latency_table(numbering: Numbering, data: Inputs) -> dict:
    """Per inference cell (every cell when the run has none): p50, p90 and p99 of its kept
    iterations, each with its bootstrap interval over trials."""
    frame = data.latency
    if "phase" in frame and (frame["phase"].astype(str) == "infer").any():
        frame = frame[frame["phase"].astype(str) == "infer"]
    frame, notes = _sorted(frame, ["framework"]), Notes()
    axes = _axes(frame)
    shared, own = _remarks(frame)
    legend = Legend("L")
    rows = []
    for (_, row), remarks in zip(frame.iterrows(), own):
        rows.append([str(row.get(a, "")) for a in axes] + [
            _label(row["framework"]), *(_with_bounds(row, q, notes) for q in (50, 90, 99)),
            f"{_text(row['n_iterations'])} ({_text(row['n_trials'])})", legend.cite(remarks)])
    phase = "inference " if "phase" in frame and (frame["phase"].astype(str) == "infer").all() \
        else ""
    caption = (f"Latency per {phase}cell: the 50th, 90th and 99th percentile of single "
               "iterations (one batch each) pooled over the ok trials, each with its 95 % "
               "percentile-bootstrap interval (in brackets, same unit) that draws whole "
               "trials, and the iterations (trials) behind them. "
               f"{_constant(frame, style.PAIR_AXES)}."
               + (f" Every cell: {'; '.join(shared)}." if shared else ""))
    why = data.problems.get("latency", "no ok trial kept its iterations")
    return _without_empty_remarks(_table(numbering, "latency", caption,
                  [_axis_header(a) for a in axes] + ["Framework", "p50", "p90", "p99",
                                                     "Iterations (trials)", "Remarks"],
                  rows, notes, f"No latency percentiles: {why}.",
                  classes=[""] * len(axes) + ["", "num", "num", "num", "num", ""],
                  legend=legend))
