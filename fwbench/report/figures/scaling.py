"""The figure of the distributed experiment: throughput and scaling efficiency against the
number of devices or processes, per framework and strategy. Framework-free.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib import rc_context

from fwbench.analysis.columns import CELL_AXES, without
from fwbench.report.figures import style
from fwbench.report.figures.speed import throughput_columns

# The axes that tell a distributed cell's series apart (besides framework and strategy).
DISTRIBUTED_AXES = without(CELL_AXES, "experiment", "framework", "phase")
STRATEGY_STYLES = {"multi_process": "-", "single_process": "--"}


def scaling(cell_stats, efficiency, folder: Path, *, key="scaling", source=None,
            absent: str = "") -> style.Figure:
    """Throughput (left) and scaling efficiency (right) against the number of devices or
    processes, one line per framework, strategy and cell, with intervals: the median's for the
    throughput, the Hodges-Lehmann interval of fwbench.measure.distributed for the efficiency.
    ``absent`` completes the sentence when the statistics hold no distributed cell."""
    title = "Scaling over devices"
    frame = style.select_rows(cell_stats, {"experiment": "distributed"})
    if frame.empty or "throughput_sps" not in frame:
        return style.Figure(key, title, "", source=source, reason=f"Not drawn: {absent}.")
    frame = frame[[not style.missing(v) for v in frame["throughput_sps"]]]
    if frame.empty:
        return style.Figure(key, title, "", source=source, reason=(
            "Not drawn: no distributed cell has an ok trial (Appendix B gives each failure)."))
    frame = frame.assign(world_size=frame["world_size"].astype(int))
    varying = [a for a in DISTRIBUTED_AXES if a in frame and frame[a].astype(str).nunique() > 1]
    keys = ["framework", "strategy", *varying]
    measured = style.select_rows(efficiency, {"experiment": "distributed"})
    if not measured.empty:
        measured = measured[[not style.missing(v) for v in measured["efficiency"]]]
    with rc_context(style.RC):
        fig = style.new_figure(6.8, 2.8)
        left, right = fig.subplots(1, 2)
        for values, group in frame.groupby(keys, sort=True):
            _draw_series(left, right, dict(zip(keys, values)), varying, group, measured)
        threshold = _label_axes(left, right, sorted(frame["world_size"].unique()), measured)
        fig.legend(loc="outside lower center", frameon=False, ncols=2)
        file = style.save(fig, folder, f"{key}.svg")
    fixed = style.fixed(frame, leave=("experiment",))
    caption = (f"{title}: left, throughput (per-device batch × devices / median step time, so the "
               "batch per device is fixed: weak scaling) against the number of devices or "
               "processes, per framework and strategy, with the interval of the median; right, "
               "the scaling efficiency E(N) = X(N) / (N × X(1)) with its Hodges-Lehmann interval "
               f"(1: linear; dotted: {style.fmt(threshold, 'setting')}, which we read as "
               "near-linear). "
               + (f"{fixed}." if fixed else "")
               + ("" if not measured.empty else " No efficiency: no strategy has ok trials "
                  "both at one device and at more."))
    return style.Figure(key, title, caption.strip(), file=file, source=source)


def _draw_series(left, right, values: dict, varying: list[str], group, measured) -> None:
    """One series: its throughput on ``left``, its measured efficiency (1 at one device) on
    ``right``."""
    series_style = _series_style(values, varying)
    group = group.sort_values("world_size")
    sps, lo, hi = throughput_columns(group)
    left.errorbar(group["world_size"], sps, yerr=[[max(s - a, 0) for s, a in zip(sps, lo)],
                                                  [max(b - s, 0) for s, b in zip(sps, hi)]],
                  capsize=2, linewidth=1, markersize=3.5, **series_style)
    rows = style.select_rows(measured, values)
    if rows.empty:
        return
    rows = rows.sort_values("world_size")
    eff = rows["efficiency"].astype(float).to_numpy()
    lo, hi = (rows[c].astype(float).to_numpy() for c in ("efficiency_ci_low", "efficiency_ci_high"))
    right.errorbar([1, *rows["world_size"].astype(int)], [1.0, *eff],
                   yerr=[[0, *(max(e - a, 0) for e, a in zip(eff, lo))],
                         [0, *(max(b - e, 0) for e, b in zip(eff, hi))]],
                   capsize=2, linewidth=1, markersize=3.5, **{**series_style, "label": None})


def _label_axes(left, right, sizes: list, measured) -> float:
    """Both panels' axes over the device counts ``sizes``, with the lines at linear and at
    near-linear efficiency; returns the near-linear threshold drawn."""
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.minorticks_off()
        ax.set_xlabel("devices or processes")
        ax.grid(color="#eeeeee", linewidth=0.5)
    left.set_ylabel("samples per second")
    right.axhline(1.0, color="black", linewidth=0.8)
    threshold = _near_linear(measured)
    right.axhline(threshold, color="#7f7f7f", linewidth=0.8, linestyle=":")
    right.set_ylabel("scaling efficiency")
    return threshold


def _series_style(values: dict, varying: list[str]) -> dict:
    from fwbench.plan.strategies import STRATEGY_LABELS, resolve_strategy, strategy_pair
    framework, strategy = str(values["framework"]), str(values["strategy"])
    name = STRATEGY_LABELS[resolve_strategy(strategy, framework)]
    extra = [f"b{values[a]}" if a == "batch_size" else str(values[a]) for a in varying]
    return {"color": style.FRAMEWORK_COLOURS.get(framework, "#444444"), "marker": "o",
            "linestyle": STRATEGY_STYLES[strategy_pair(strategy)],
            "label": " ".join([name, *extra])}


def _near_linear(efficiency) -> float:
    from fwbench.analysis.scaling import NEAR_LINEAR
    if efficiency.empty or "near_linear_threshold" not in efficiency:
        return NEAR_LINEAR
    return float(efficiency["near_linear_threshold"].iloc[0])
