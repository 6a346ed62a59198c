"""What every figure of the report shares: matplotlib (Agg, no pyplot) set up for
deterministic SVG, the colours of the outcomes and frameworks, the ``Figure`` a builder returns,
the helpers that read a table's rows (``missing``, ``outcome``, the pair axes), and ``fmt``,
the one function that writes a number (fwbench.analysis.claims.numbers).

The same tables give byte-identical SVG: a fixed hash salt, no date in the metadata, text drawn
as paths. Framework-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib import rc_context  # noqa: E402
from matplotlib.figure import Figure as MplFigure  # noqa: E402

# A table's cells are read as the verdicts read them (fwbench.analysis.claims.wording).
from fwbench.analysis.claims import wording  # noqa: E402
from fwbench.analysis.claims.numbers import fmt  # noqa: E402
from fwbench.analysis.claims.wording import (  # noqa: E402,F401
    FRAMEWORK_LABELS,
    OUTCOME_LABELS,
    PAIR_AXES,
    flag,
    is_exploratory,
    missing,
    outcome,
)
from fwbench.analysis.tables import AXIS_DEFAULTS  # noqa: E402
from fwbench.plan import frameworks  # noqa: E402
from fwbench.report.formatting import count  # noqa: E402

RC = {
    "svg.hashsalt": "fwbench",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
SVG_METADATA = {"Date": None}

# One colour per outcome and per framework, the same in every figure (colour-blind safe).
FRAMEWORK_COLOURS = frameworks.each("colour")
OUTCOME_COLOURS = {**{verdict: FRAMEWORK_COLOURS[side]
                      for verdict, side in zip(frameworks.FASTER, frameworks.COMPARED)},
                   "equivalent": "#009e73", "inconclusive": "#7f7f7f"}

# Panels a multi-panel figure draws at most; its table has every row.
MAX_PANELS = 6

# Each pair's row of a per-cell figure: the first side's point (PyTorch's) just above the
# second's.
FRAMEWORK_OFFSETS = tuple(zip(frameworks.COMPARED, (-0.17, 0.17)))


@dataclass(frozen=True)
class Figure:
    """One figure of the report: written (``file`` set) or left out (``reason`` set).

    ``source`` names the published figure it rebuilds (e.g. ``patel2023 Fig. 3``), if any.
    """

    key: str
    title: str
    caption: str
    file: str | None = None
    reason: str | None = None
    source: str | None = None
    narrow: bool = False  # half the page width is enough (small box plots)


# A number a paper states, drawn beside ours: black, and named "published" in the legend.
PUBLISHED_COLOUR = "#000000"


def published_note(values: list[dict], shown: list[dict], paper: str | None) -> str:
    """The caption's sentence on the numbers the paper states for this figure: those drawn,
    with where they stand, or why none is (the paper states none, or only for cells or a
    setting not shown: each is named with its setting)."""
    from fwbench.analysis.claims import published
    from fwbench.analysis.claims.setting import VALUE_NAMES

    if paper is None:
        return ""
    if not values:
        return (f" The paper ({paper}) states no number for this figure, so none is drawn "
                "beside ours.")
    if shown:
        said = "; ".join(f"{v['what']}: {published.text(v)} ({v['where']})"
                         for v in dict((v["what"], v) for v in shown).values())
        return f" Black, marked published: what the paper ({paper}) states, {said}."
    said = "; ".join(
        f"{v['what']}: {published.text(v)} ({v['where']}; "
        + ", ".join(VALUE_NAMES.get(str(x), str(x)) for x in v["setting"].values()
                    if x is not None) + ")"
        for v in dict((v["what"], v) for v in values).values())
    return (f" The paper ({paper}) states numbers only for cells or a setting this figure does "
            f"not show, so they are named, not drawn: {said}.")


def pair_label(row, varying: list[str]) -> str:
    """A short label for a pair naming only the axes that vary across the figure."""
    parts = [str(row["model"]), str(row["phase"])]
    for axis in varying:
        value = row[axis]
        if axis in ("model", "phase") or missing(value):
            continue
        parts.append(f"b{value}" if axis == "batch_size" else
                     count(value, "process", "processes") if axis == "world_size" else str(value))
    return " ".join(parts)


def varying_axes(frame) -> list[str]:
    return [a for a in PAIR_AXES if a in frame.columns and frame[a].astype(str).nunique() > 1]


def constant_axes(frame, axes=PAIR_AXES) -> dict:
    """The axes with one value over the frame, for a caption. One whose value is its default in
    fwbench.analysis.tables.AXIS_DEFAULTS does not apply to these cells (a throughput cell's
    optimizer, one process) and is left out."""
    return {a: str(frame[a].iloc[0]) for a in axes
            if a in frame.columns and len(frame) and frame[a].astype(str).nunique() == 1
            and str(frame[a].iloc[0]) not in ("none", str(AXIS_DEFAULTS.get(a)))}


def fixed(frame, axes=PAIR_AXES, leave=()) -> str:
    """The axes with one value over ``frame`` (``constant_axes``), but ``leave``, in words."""
    return wording.setting({a: v for a, v in constant_axes(frame, axes).items()
                            if a not in leave})


def sort_pairs(frame):
    """``frame`` in the order every per-pair figure lists its pairs."""
    keys = [a for a in PAIR_AXES if a in frame.columns]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


def save(fig: MplFigure, folder: Path, name: str) -> str:
    """Write ``fig`` as ``folder/name``, deterministic SVG; the name, for ``Figure.file``."""
    with rc_context(RC):
        fig.savefig(folder / name, format="svg", metadata=SVG_METADATA, bbox_inches="tight")
    return name


def new_figure(width_in: float, height_in: float) -> MplFigure:
    """An empty figure of the given size in inches, laid out by matplotlib's constrained
    layout."""
    with rc_context(RC):
        return MplFigure(figsize=(width_in, height_in), layout="constrained")


def select_rows(frame, select: dict | None):
    """The rows of ``frame`` whose axis values match ``select`` (a list means any of them)."""
    if frame is None or frame.empty or not select:
        return frame if frame is not None else _empty()
    return wording.select_rows(frame, select)


def _empty():
    import pandas as pd

    return pd.DataFrame()


# The ticks of every ratio axis (PyTorch time / TensorFlow time, log scale): 0.5×, 0.67×, 1×,
# 1.5× and 2× always, wider ones only where the data reach them.
RATIO_TICKS = (0.25, 0.33, 0.5, 0.67, 1.0, 1.5, 2.0, 3.0, 4.0)


def ratio_limits(values) -> tuple[float, float]:
    """Limits of a ratio axis: 0.5× to 2× at least, wider where a value needs it."""
    finite = [float(v) for v in values if not missing(v) and float(v) > 0]
    return min(finite + [0.5 * 1.05]) / 1.05, max(finite + [2.0 / 1.05]) * 1.05


def ratio_axis(ax, low: float, high: float, which: str = "x") -> None:
    """A log ratio axis from ``low`` to ``high`` with RATIO_TICKS written "0.67×"."""
    from matplotlib.ticker import NullLocator

    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    (ax.set_xlim if which == "x" else ax.set_ylim)(low, high)
    ticks = [t for t in RATIO_TICKS if low <= t <= high]
    axis.set_ticks(ticks, [fmt(t, "ratio_tick") for t in ticks])
    axis.set_minor_locator(NullLocator())


def equivalence_band(ax, low: float, high: float) -> None:
    """The equivalence margin a verdict reads, shaded behind the data of a ratio axis."""
    ax.axvspan(low, high, color="#009e73", alpha=0.12, linewidth=0, zorder=0,
               label="equivalence margin")


# Mantissas of a log axis' ticks, coarsest first: 1, 10, 100; then 1, 2, 5, 10; then finer.
LOG_TICK_STEPS = ((1,), (1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8))


def log_axis(ax, which: str = "x") -> None:
    """A log axis (after the data are drawn) ticked at plain numbers, never 10²: 100, 1k, 10k
    or 0.5, 1, 2, 5; at least two labelled ticks, the range widened to the next tick when the
    data lie between two."""
    import math

    from matplotlib.ticker import NullLocator

    axis = ax.xaxis if which == "x" else ax.yaxis
    get, set_ = (ax.get_xlim, ax.set_xlim) if which == "x" else (ax.get_ylim, ax.set_ylim)
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    low, high = sorted(get())

    def ticks(steps):
        decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
        found = sorted(s * 10.0 ** d for d in decades for s in steps)
        return [t for t in found if low <= t <= high]

    chosen = next((t for steps in LOG_TICK_STEPS if len(t := ticks(steps)) >= 3), None)
    chosen = chosen or next((t for steps in LOG_TICK_STEPS if len(t := ticks(steps)) >= 2),
                            None)
    if chosen is None:  # the data lie between two ticks of the finest set: reach both
        scale = 10.0 ** math.floor(math.log10(low))
        steps = sorted(s * scale * k for k in (1, 10) for s in LOG_TICK_STEPS[-1])
        low, high = max(s for s in steps if s <= low), min(s for s in steps if s >= high)
        set_(low, high)
        chosen = ticks(LOG_TICK_STEPS[-1])
    axis.set_ticks(chosen, [fmt(t, "tick") for t in chosen])
    axis.set_minor_locator(NullLocator())


def batch_axis(ax, batches) -> None:
    """A log₂ batch-size axis labelled with the batch sizes themselves (2, 4, 8; never 2¹)."""
    from matplotlib.ticker import NullLocator

    batches = sorted({int(b) for b in batches})
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.xaxis.set_minor_locator(NullLocator())
    if len(batches) == 1:
        ax.set_xlim(batches[0] / 1.5, batches[0] * 1.5)


def draw_points(ax, part, rows: dict, framework: str, offset: float, value, lo, hi,
                label: bool = True) -> None:
    """``part``'s points at their pairs' rows, each with its interval (none where a bound is
    missing)."""
    lo = [v if math.isnan(a) else a for v, a in zip(value, lo)]
    hi = [v if math.isnan(b) else b for v, b in zip(value, hi)]
    ax.errorbar(value, [rows[p] + offset for p in part["pair_id"]],
                xerr=[[max(v - a, 0) for v, a in zip(value, lo)],
                      [max(b - v, 0) for v, b in zip(value, hi)]],
                fmt="o", markersize=3.5, capsize=2, linewidth=1,
                color=FRAMEWORK_COLOURS[framework],
                label=FRAMEWORK_LABELS[framework] if label else None)
