"""Section 3.10, Memory: peak memory per cell with its spread, PyTorch against TensorFlow in
memory (decided as time is), and memory against batch size."""

from __future__ import annotations

from pathlib import Path

from fwbench.analysis.claims import wording
from fwbench.analysis.memory import CONSTANT_SHARE_OF_MARGIN, METRICS
from fwbench.plan.frameworks import COMPARED, per_side
from fwbench.report import formatting, tables
from fwbench.report.figures import usage
from fwbench.report.figures.style import Figure
from fwbench.report.formatting import fmt
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section, drawn


def context(numbering: tables.Numbering, data: Inputs) -> dict:
    tested, untested = varying_comparisons(data)
    return {"table": memory_table(numbering, data),
            "comparisons": memory_comparison_table(numbering, data, tested, untested),
            "untested": untested}


def varying_comparisons(data: Inputs):
    """The memory comparisons the statistics tested (``varies``: the peak moves between trials;
    fwbench.analysis.memory decides it), and why the others are left untested ("" when none
    is)."""
    frame = data.memory_comparisons
    if frame.empty or "varies" not in frame:
        return frame, ""
    kept = frame[[wording.flag(v) for v in frame["varies"]]]
    if len(kept) == len(frame):
        return kept, ""
    share = CONSTANT_SHARE_OF_MARGIN * (float(frame["rope_high"].iloc[0]) - 1.0)
    return kept, (f"in {len(frame) - len(kept)} of {len(frame)} pairs each framework's trials "
                  f"span less than {fmt(share, 'level')} of their median peak, so those peaks are "
                  "reported per cell and not tested")


def figures(data: Inputs, folder: Path) -> dict[str, Figure]:
    return {"memory": usage.memory_vs_batch(data.memory, folder, absent=tables.absent_reason(
        data, "memory", "the trials recorded no peak memory (peak_rss_bytes)"))}


MIB = 2**20

PEAK_NAMES = {"peak_rss_bytes": "RSS", "device_peak_bytes": "device"}

MEMORY_VERDICTS = {verdict: f"{wording.FRAMEWORK_LABELS[side]} less"
                   for verdict, side in zip(per_side("{}_less"), COMPARED)}


def _mib(value) -> str:
    return fmt(value, "memory", unit=False)


def memory_table(numbering: tables.Numbering, data: Inputs) -> dict:
    """Per cell and peak: the median over ok trials with its interval, the range, and what
    failed (out of memory)."""
    frame, notes = tables.sorted_rows(data.memory, ["framework", "metric"]), formatting.Notes()
    axes = tables.shown_axes(frame)
    uniform = formatting.uniform_level(frame, "ci_level")
    nominal = formatting.nominal(data.statistics)
    shared, own = tables.remarks(frame)
    legend = tables.Legend("M")
    rows = []
    for (_, row), own_remarks in zip(frame.iterrows(), own):
        failed = (f"out of memory in all {wording.text(row['n_trials'])} trials"
                  if int(row.get("n_oom", 0) or 0) else "no ok trial recorded this peak")
        rows.append([str(row.get(a, "")) for a in axes] + [
            wording.label(row["framework"]), PEAK_NAMES.get(row["metric"], row["metric"]),
            formatting.cell_text(row, "median_bytes", notes, failed, _mib),
            formatting.with_level(formatting.interval_text(row, "ci_low_bytes", "ci_high_bytes",
                                                           notes, failed, _mib),
                                  row.get("ci_level"), uniform, nominal),
            formatting.interval_text(row, "min_bytes", "max_bytes", notes, failed, _mib),
            f"{wording.text(row['n_values'])}/{wording.text(row['n_trials'])}",
            legend.cite(own_remarks),
        ])
    peaks = "; ".join(f"{PEAK_NAMES[m]}: {what}" for m, what in METRICS.items()
                      if m in set(frame.get("metric", [])))
    caption = ("Peak memory per cell in MiB: the median over ok trials with its interval "
               f"({formatting.level_phrase(uniform, nominal)}), the range over trials, and the "
               "trials that recorded it. "
               f"{peaks}. {tables.constant(frame, wording.PAIR_AXES)}"
               f"{formatting.level_sentence(uniform, nominal)}"
               + tables.every_cell(shared))
    why = data.problems.get("memory", "the trials recorded no peak memory")
    return tables.without_empty_remarks(tables.table(numbering, "memory", caption,
                  [tables.axis_header(a) for a in axes] + ["Framework", "Peak", "Median (MiB)",
                                                           "Interval (MiB)", "Range (MiB)",
                                                           "Trials", "Remarks"],
                  rows, notes, f"No peak memory: {why}.",
                  classes=[""] * len(axes) + ["", "", "num", "num", "num", "num", ""],
                  legend=legend))


def memory_comparison_table(numbering: tables.Numbering, data: Inputs, tested,
                            untested: str = "") -> dict:
    """Per matched pair and peak whose memory varies: PyTorch's median over TensorFlow's,
    decided as time is; when none varies, ``untested`` says why the table is empty."""
    frame, notes = tables.sorted_rows(tested, ["metric"]), formatting.Notes()
    axes = tables.shown_axes(frame)
    rows = []
    for _, row in frame.iterrows():
        rows.append([str(row.get(a, "")) for a in axes] + [
            PEAK_NAMES.get(row["metric"], row["metric"]),
            formatting.cell_text(row, "ratio", notes, "no ratio", wording.ratio),
            formatting.interval_text(row, "ratio_ci_low", "ratio_ci_high", notes, "no interval"),
            formatting.cell_text(row, "mannwhitney_p", notes, "no test", wording.fmt_p),
            formatting.cell_text(row, "p_adjusted", notes, "no test", wording.fmt_p),
            _memory_verdict(row, notes),
        ])
    sizes = wording.unique(frame, "family_size")
    family = (f" ({wording.count(wording.join(sizes), 'comparison')}, the peaks that vary)"
              if sizes else "")
    caption = ("PyTorch's median peak memory over TensorFlow's per matched pair (above 1: "
               "PyTorch uses more), with the statistics of time: the Hodges-Lehmann interval of "
               f"the log peaks at the Bonferroni level of its family{family}, the exact "
               "Mann-Whitney p raw and adjusted, and the verdict against the equivalence margin. "
               f"{tables.constant(frame, wording.PAIR_AXES)}")
    why = data.problems.get("memory_comparisons",
                            untested or "no pair has a peak on both sides")
    return tables.table(numbering, "memory-comparisons", caption,
                        [tables.axis_header(a) for a in axes] + ["Peak", "Ratio", "Interval", "p",
                                                                 "p (Bonferroni)", "Verdict"],
                        rows, notes, f"No memory comparison: {why}.",
                        classes=[""] * len(axes) + ["", "num", "num", "num", "num", ""])


def _memory_verdict(row, notes: formatting.Notes):
    said = formatting.verdict_text(row, notes)
    for name, shown in MEMORY_VERDICTS.items():
        said = said.replace(name, shown) if isinstance(said, str) else said
    return said


SECTION = Section(
    key="memory", place="results", order=40, title="Memory",
    context=lambda b: context(b.numbering, b.data),
    figures=lambda data, folder, failures: figures(data, folder),
    shown=lambda c: bool(c["memory"]["table"]["number"]) or drawn(c, "memory"))
