"""Section 3.9, Beyond one device: every strategy's scaling efficiency and the two strategies
of each framework compared (stats/scaling.csv and stats/strategies.csv,
fwbench.analysis.scaling), with the scaling figure."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fwbench.analysis.claims.distributed import (
    DISTRIBUTED_ABSENT,
    NO_SCALING,
    NO_STRATEGIES,
    distributed_absent,
    faster_text,
    shortfall,
)
from fwbench.analysis.claims.wording import (
    join,
    label,
    missing,
    sig,
    text,
    unique,
)
from fwbench.report.figures import scaling as scaling_figures
from fwbench.report.figures.scaling import DISTRIBUTED_AXES
from fwbench.report.figures.style import Figure
from fwbench.report.formatting import (
    Notes,
    cell_text,
    interval_text,
    with_level,
)
from fwbench.report.inputs import Inputs
from fwbench.report.tables import (
    Legend,
    Numbering,
    absent_reason,
    axis_header,
    constant,
    sorted_rows,
    table,
    varying,
)


def context(numbering: Numbering, data: Inputs) -> dict:
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
    fixed = constant(frame, DISTRIBUTED_AXES)
    return f" {fixed}." if fixed else ""


def scaling_table(numbering: Numbering, data: Inputs) -> dict:
    frame, notes, legend = sorted_rows(data.scaling, ["framework", "strategy", "world_size"]), \
        Notes(), Legend("S")
    axes = varying(frame, DISTRIBUTED_AXES)
    rows = []
    for _, r in frame.iterrows():
        note = "" if missing(r.get("note")) else str(r["note"])
        measured = not missing(r.get("efficiency"))
        reason = note or "no ok trial"
        rows.append([*(text(r[a]) for a in axes), label(r["framework"]),
                     _strategy_name(r["strategy"], r["framework"]), text(r["world_size"]),
                     cell_text(r, "speedup", notes, reason, sig),
                     cell_text(r, "efficiency", notes, reason, sig),
                     with_level(interval_text(r, "efficiency_ci_low", "efficiency_ci_high", notes,
                                              reason), shortfall(r)),
                     str(r["verdict"]), legend.cite([note] if note and measured else [])])
    threshold = unique(frame, "near_linear_threshold")
    caption = ("Scaling efficiency of every strategy at N devices or processes against one: "
               "E(N) = X(N) / (N × X(1)), where X is a trial's throughput (per-device batch × N "
               "/ median step time: weak scaling), with the Hodges-Lehmann interval of E (at "
               "least 95 % unless stated); speed-up X(N) / X(1). Verdict: near-linear when the "
               f"whole interval is at or above {join(threshold) or 'the threshold'}, "
               "sub-linear when it is below, else inconclusive." + _fixed(frame))
    return table(numbering, "scaling", caption,
                 [axis_header(a) for a in axes] + ["Framework", "Strategy", "Devices",
                                                   "Speed-up", "Efficiency", "Interval",
                                                   "Verdict", "Remarks"],
                 rows, notes, "No scaling efficiency: "
                 f"{absent_reason(data, 'scaling', distributed_absent(data.trials, NO_SCALING))}.",
                 classes=[""] * (len(axes) + 2) + ["num"] * 4 + ["", ""], legend=legend)


def strategy_table(numbering: Numbering, data: Inputs) -> dict:
    frame, notes = sorted_rows(data.strategies, ["framework", "world_size"]), Notes()
    axes = varying(frame, DISTRIBUTED_AXES)
    rows = []
    for _, r in frame.iterrows():
        reason = ("" if missing(r.get("note")) else str(r["note"])) or "no ok trial"
        rows.append([*(text(r[a]) for a in axes), label(r["framework"]),
                     text(r["world_size"]),
                     f"{_strategy_name(r['multi_process'], r['framework'])} / "
                     f"{_strategy_name(r['single_process'], r['framework'])}",
                     cell_text(r, "throughput_multi_sps", notes, reason, sig),
                     cell_text(r, "throughput_single_sps", notes, reason, sig),
                     cell_text(r, "ratio", notes, reason, sig),
                     with_level(interval_text(r, "ratio_ci_low", "ratio_ci_high", notes, reason),
                                shortfall(r)),
                     # cell_text calls the lambda at once, on this row (bugbear cannot tell).
                     cell_text(r, "ratio", notes, reason, lambda _: faster_text(r["faster"]))])  # noqa: B023
    caption = ("The two strategies of each framework at the same number of devices: the "
               "multi-process strategy's throughput (samples/s, median over trials) over the "
               "single-process one's, with the Hodges-Lehmann interval of the ratio (at least "
               "95 % unless stated); above 1: the multi-process strategy is faster. A strategy "
               "is named faster only when the interval excludes 1 at the nominal level."
               + _fixed(frame))
    absent = absent_reason(data, "strategies", distributed_absent(data.trials, NO_STRATEGIES))
    return table(numbering, "strategies", caption,
                 [axis_header(a) for a in axes] + ["Framework", "Devices",
                                                   "Multi / single process",
                                                   "Samples/s, multi", "Samples/s, single",
                                                   "Ratio", "Interval", "Faster"],
                 rows, notes, f"No strategy comparison: {absent}.",
                 classes=[""] * (len(axes) + 1) + ["num", ""] + ["num"] * 4 + [""])
