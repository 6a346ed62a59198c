"""Section 3.9, Beyond one device: every strategy's scaling efficiency and the two strategies
of each framework compared (stats/scaling.csv and stats/strategies.csv,
fwbench.analysis.scaling), with the scaling figure."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fwbench.analysis.claims import wording
from fwbench.analysis.claims.distributed import (
    DISTRIBUTED_ABSENT,
    NO_SCALING,
    NO_STRATEGIES,
    distributed_absent,
    faster_text,
    shortfall,
)
from fwbench.report import formatting, tables
from fwbench.report.figures import scaling as scaling_figures
from fwbench.report.figures.scaling import DISTRIBUTED_AXES
from fwbench.report.figures.style import Figure
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section, drawn


def context(numbering: tables.Numbering, data: Inputs) -> dict:
    """Every strategy's scaling efficiency, and the two strategies of each framework compared
    (stats/scaling.csv and stats/strategies.csv, fwbench.analysis.scaling)."""
    return {"scaling": scaling_table(numbering, data),
            "strategies": strategy_table(numbering, data)}


def figures(data: Inputs, folder: Path) -> dict[str, Figure]:
    return {"scaling": scaling_figures.scaling(data.cell_stats, data.scaling, folder,
                                               absent=DISTRIBUTED_ABSENT)}


def _strategy_name(strategy, framework) -> str:
    from fwbench.plan.strategies import STRATEGY_LABELS, resolve_strategy
    return STRATEGY_LABELS[resolve_strategy(str(strategy), str(framework))]


def _fixed(frame: pd.DataFrame) -> str:
    """The axes every row of a distributed table shares, as a sentence ("" when none)."""
    fixed = tables.constant(frame, DISTRIBUTED_AXES)
    return f" {fixed}" if fixed else ""


def scaling_table(numbering: tables.Numbering, data: Inputs) -> dict:
    frame = tables.sorted_rows(data.scaling, ["framework", "strategy", "world_size"])
    notes, legend = formatting.Notes(), tables.Legend("S")
    axes = tables.varying(frame, DISTRIBUTED_AXES)
    rows = []
    for _, r in frame.iterrows():
        note = "" if wording.missing(r.get("note")) else str(r["note"])
        measured = not wording.missing(r.get("efficiency"))
        reason = note or "no ok trial"
        rows.append([*(wording.text(r[a]) for a in axes), wording.label(r["framework"]),
                     _strategy_name(r["strategy"], r["framework"]), wording.text(r["world_size"]),
                     formatting.cell_text(r, "speedup", notes, reason, wording.sig),
                     formatting.cell_text(r, "efficiency", notes, reason, wording.sig),
                     formatting.with_level(formatting.interval_text(
                         r, "efficiency_ci_low", "efficiency_ci_high", notes, reason),
                         shortfall(r)),
                     str(r["verdict"]), legend.cite([note] if note and measured else [])])
    threshold = wording.unique(frame, "near_linear_threshold")
    caption = ("Scaling efficiency of every strategy at N devices or processes against one: "
               "E(N) = X(N) / (N × X(1)), where X is a trial's throughput (per-device batch × N "
               "/ median step time: weak scaling), with the Hodges-Lehmann interval of E (at "
               "the level stated); speed-up X(N) / X(1). Verdict: near-linear when the "
               f"whole interval is at or above {wording.join(threshold) or 'the threshold'}, "
               "sub-linear when it is below, else inconclusive." + _fixed(frame))
    absent = tables.absent_reason(data, "scaling", distributed_absent(data.trials, NO_SCALING))
    return tables.table(numbering, "scaling", caption,
                        [tables.axis_header(a) for a in axes]
                        + ["Framework", "Strategy", "Devices", "Speed-up", "Efficiency",
                           "Interval", "Verdict", "Remarks"],
                        rows, notes, f"No scaling efficiency: {absent}.",
                        classes=[""] * (len(axes) + 2) + ["num"] * 4 + ["", ""], legend=legend)


def strategy_table(numbering: tables.Numbering, data: Inputs) -> dict:
    frame = tables.sorted_rows(data.strategies, ["framework", "world_size"])
    notes = formatting.Notes()
    axes = tables.varying(frame, DISTRIBUTED_AXES)
    rows = []
    for _, r in frame.iterrows():
        reason = ("" if wording.missing(r.get("note")) else str(r["note"])) or "no ok trial"
        rows.append([*(wording.text(r[a]) for a in axes), wording.label(r["framework"]),
                     wording.text(r["world_size"]),
                     f"{_strategy_name(r['multi_process'], r['framework'])} / "
                     f"{_strategy_name(r['single_process'], r['framework'])}",
                     formatting.cell_text(r, "throughput_multi_sps", notes, reason, wording.sig),
                     formatting.cell_text(r, "throughput_single_sps", notes, reason, wording.sig),
                     formatting.cell_text(r, "ratio", notes, reason, wording.sig),
                     formatting.with_level(formatting.interval_text(
                         r, "ratio_ci_low", "ratio_ci_high", notes, reason), shortfall(r)),
                     # cell_text calls the lambda at once, on this row (bugbear cannot tell).
                     formatting.cell_text(r, "ratio", notes, reason,
                                          lambda _: faster_text(r["faster"]))])  # noqa: B023
    caption = ("The two strategies of each framework at the same number of devices: the "
               "multi-process strategy's throughput (samples/s, median over trials) over the "
               "single-process one's, with the Hodges-Lehmann interval of the ratio (at the "
               "level stated); above 1: the multi-process strategy is faster. A strategy "
               "is named faster only when the interval excludes 1 at the nominal level."
               + _fixed(frame))
    absent = tables.absent_reason(data, "strategies",
                                  distributed_absent(data.trials, NO_STRATEGIES))
    return tables.table(numbering, "strategies", caption,
                        [tables.axis_header(a) for a in axes]
                        + ["Framework", "Devices", "Multi / single process", "Samples/s, multi",
                           "Samples/s, single", "Ratio", "Interval", "Faster"],
                        rows, notes, f"No strategy comparison: {absent}.",
                        classes=[""] * (len(axes) + 1) + ["num", ""] + ["num"] * 4 + [""])


SECTION = Section(
    key="distributed", place="results", order=30,
    title="Beyond one device: scaling and strategies",
    context=lambda b: context(b.numbering, b.data),
    figures=lambda data, folder, failures: figures(data, folder),
    shown=lambda c: (drawn(c, "scaling") or bool(c["distributed"]["scaling"]["number"])
                     or bool(c["distributed"]["strategies"]["number"])))
