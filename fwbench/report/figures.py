"""The report's figures: matplotlib (Agg, no pyplot) to deterministic SVG. Framework-free.

Each builder takes tidy tables, writes at most one SVG into a folder and returns a ``Figure``:
either the file it wrote, or the sentence saying why the figure is left out. The same tables
give byte-identical SVG (fixed hash salt, no date in the metadata, text drawn as paths).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib import rc_context  # noqa: E402
from matplotlib.figure import Figure as MplFigure  # noqa: E402

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
OUTCOME_COLOURS = {"pytorch_faster": "#d55e00", "tensorflow_faster": "#0072b2",
                   "equivalent": "#009e73", "inconclusive": "#7f7f7f"}
OUTCOME_LABELS = {"pytorch_faster": "PyTorch faster", "tensorflow_faster": "TensorFlow faster",
                  "equivalent": "equivalent", "inconclusive": "inconclusive"}
FRAMEWORK_COLOURS = {"pytorch": "#d55e00", "tensorflow": "#0072b2"}
FRAMEWORK_LABELS = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}

# Axis columns that name a pair, in the order a label lists them.
PAIR_AXES = ["experiment", "device", "model", "phase", "batch_size", "input_shape", "precision",
             "mode", "profile", "optimizer"]


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


def missing(value) -> bool:
    """True for None, NaN, NaT and pandas' NA: a value that was not measured."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN, NaT and NA are not equal to themselves
    except (TypeError, ValueError):
        return False


def flag(value) -> bool:
    """A boolean cell of a table: True, "True" or 1; anything missing is False."""
    if missing(value):
        return False
    return value.strip().lower() == "true" if isinstance(value, str) else bool(value)


def is_exploratory(row) -> bool:
    """The comparison's verdict is only a hint (too few trials, unsteady or drifting ones):
    fwbench.analysis.stats marks it, and every figure and table says so beside the verdict."""
    return flag(row.get("exploratory"))


def outcome(row) -> str:
    """The direction a comparison row supports (ratio > 1: PyTorch slower).

    The statistics' verdict decides when it is one of ``OUTCOME_LABELS``; for tables without
    one, an interval that excludes 1 decides, else ``inconclusive``.
    """
    verdict = "" if missing(row.get("verdict")) else str(row.get("verdict")).lower()
    if verdict in OUTCOME_LABELS:  # the statistics' own verdict (fwbench.analysis.stats.verdict)
        return verdict
    if "equiv" in verdict:
        return "equivalent"
    low, high = row.get("ratio_ci_low"), row.get("ratio_ci_high")
    if not missing(high) and float(high) < 1:
        return "pytorch_faster"
    if not missing(low) and float(low) > 1:
        return "tensorflow_faster"
    for key in ("pytorch", "tensorflow"):
        if f"{key} faster" in verdict or f"{key}_faster" in verdict:
            return f"{key}_faster"
    return "inconclusive"


def pair_label(row, varying: list[str]) -> str:
    """A short label for a pair naming only the axes that vary across the figure."""
    parts = [str(row["model"]), str(row["phase"])]
    for axis in varying:
        if axis in ("model", "phase"):
            continue
        value = row[axis]
        parts.append(f"b{value}" if axis == "batch_size" else str(value))
    return " ".join(parts)


def varying_axes(frame) -> list[str]:
    return [a for a in PAIR_AXES if a in frame.columns and frame[a].astype(str).nunique() > 1]


def constant_axes(frame, axes=PAIR_AXES) -> dict:
    """The axes with one value over the frame, for a caption. One that is "none" there does
    not apply to these cells (fwbench.analysis.tables.AXIS_DEFAULTS: a throughput cell's optimizer)
    and is left out."""
    return {a: str(frame[a].iloc[0]) for a in axes
            if a in frame.columns and len(frame) and frame[a].astype(str).nunique() == 1
            and str(frame[a].iloc[0]) != "none"}


def _sort_pairs(frame):
    keys = [a for a in PAIR_AXES if a in frame.columns]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


def _save(fig: MplFigure, folder: Path, name: str) -> str:
    with rc_context(RC):
        fig.savefig(folder / name, format="svg", metadata=SVG_METADATA, bbox_inches="tight")
    return name


def _new(width_in: float, height_in: float) -> MplFigure:
    with rc_context(RC):
        return MplFigure(figsize=(width_in, height_in), layout="constrained")


# --- relative time: PyTorch/TensorFlow median ratio per pair, log scale ----------------------

def relative_time(comparisons, failures: dict, folder: Path, *, key="relative_time",
                  title="Relative time", select: dict | None = None, source=None,
                  absent: str = "") -> Figure:
    """The ratio of PyTorch's to TensorFlow's median time per matched pair, with its interval.

    ``failures`` maps a pair id to the reason it has no ratio (a failed trial); such pairs get a
    row of their own saying so, instead of silently disappearing. ``select`` keeps rows whose
    axis values match; ``absent`` completes the sentence when nothing matches.
    """
    frame = select_rows(comparisons, select)
    if frame.empty:
        return Figure(key, title, "", reason=f"Not drawn: {absent or 'no matched pair'}.",
                      source=source)
    frame = _sort_pairs(frame)
    varying = varying_axes(frame)
    with rc_context(RC):
        fig = _new(6.8, 0.9 + 0.22 * len(frame))
        ax = fig.add_subplot()
        _draw_ratios(ax, frame, failures, varying)
        file = _save(fig, folder, f"{key}.svg")
    fixed = ", ".join(f"{k} {v}" for k, v in constant_axes(frame).items())
    hints = sum(is_exploratory(r) for _, r in frame.iterrows())
    caption = (f"{title}: PyTorch's median time divided by TensorFlow's, per matched pair "
               f"({len(frame)} pairs; {fixed}). Left of 1: PyTorch faster. Bars: the ratio's "
               "confidence interval; colour: the verdict of the comparison. Log scale."
               + (f" Hollow markers and dashed bars: {hints} exploratory comparison(s), whose "
                  "verdict is a hint only (too few trials, or unsteady or drifting ones)."
                  if hints else ""))
    return Figure(key, title, caption, file=file, source=source)


def select_rows(frame, select: dict | None):
    """The rows of ``frame`` whose axis values match ``select`` (a list means any of them)."""
    if frame is None or frame.empty or not select:
        return frame if frame is not None else _empty()
    keep = frame.index == frame.index
    for axis, wanted in select.items():
        if axis not in frame.columns:
            return frame.iloc[0:0]
        values = wanted if isinstance(wanted, list) else [wanted]
        keep &= frame[axis].astype(str).isin([str(v) for v in values])
    return frame[keep]


def _empty():
    import pandas as pd

    return pd.DataFrame()


def _draw_ratios(ax, frame, failures: dict, varying: list[str]) -> None:
    labels, seen, hints = [], set(), 0
    finite = [float(v) for c in ("ratio", "ratio_ci_low", "ratio_ci_high") if c in frame
              for v in frame[c] if not missing(v) and float(v) > 0]
    low = min(finite + [1.0]) / 1.6
    high = max(finite + [1.0]) * 1.6
    for y, (_, row) in enumerate(frame.iterrows()):
        labels.append(pair_label(row, varying))
        ratio = row.get("ratio")
        if missing(ratio) or float(ratio) <= 0:
            reason = failures.get(row["pair_id"], "no ratio in the statistics")
            ax.text(1.0, y, f"  not measured: {_shorten(reason)}", va="center", ha="left",
                    fontsize=6.5, color="#444444")
            continue
        kind = outcome(row)
        colour = OUTCOME_COLOURS[kind]
        hint = is_exploratory(row)
        lo, hi = row.get("ratio_ci_low"), row.get("ratio_ci_high")
        if not missing(lo) and not missing(hi):
            ax.plot([float(lo), float(hi)], [y, y], color=colour, linewidth=1.6,
                    linestyle=HINT_LINE if hint else "-", solid_capstyle="butt")
        ax.plot([float(ratio)], [y], "o", color=colour, markersize=4,
                markerfacecolor="white" if hint else colour)
        seen.add(kind)
        hints += hint
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlabel("PyTorch median time / TensorFlow median time (log scale)")
    ax.grid(axis="x", which="both", color="#dddddd", linewidth=0.5)
    handles = verdict_handles([k for k in OUTCOME_LABELS if k in seen], hints)
    if handles:
        ax.figure.legend(handles=handles, loc="outside lower center", frameon=False,
                         ncols=len(handles))


# An exploratory comparison is drawn hollow and dashed: a hint, not a verdict.
HINT_LINE = (0, (2, 1.2))


def verdict_handles(kinds: list[str], hints: int) -> list:
    """Legend entries: one filled marker per verdict drawn, and the hollow one for hints."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=OUTCOME_COLOURS[k], marker="o", markersize=4,
                      label=OUTCOME_LABELS[k]) for k in kinds]
    if hints:
        handles.append(Line2D([], [], color="#555555", marker="o", markersize=4,
                              markerfacecolor="white", linestyle=HINT_LINE,
                              label="hollow, dashed: exploratory (a hint)"))
    return handles


def _shorten(text: str, limit: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- time per sample against batch size (patel2023 Fig. 4) ---------------------------------

def time_vs_batch(cell_stats, folder: Path, *, key="inference_vs_batch", phase="infer",
                  source=None) -> Figure:
    """Median time per sample against batch size, one line per model and framework."""
    title = "Inference time per sample against batch size"
    frame = select_rows(cell_stats, {"phase": phase})
    if frame.empty or "median_ns" not in frame:
        return Figure(key, title, "", source=source,
                      reason=f"Not drawn: this run has no {phase} cell with a median time.")
    frame = frame[[not missing(v) for v in frame["median_ns"]]]
    if frame.empty or frame["batch_size"].nunique() < 2:
        return Figure(key, title, "", source=source,
                      reason="Not drawn: it needs at least two batch sizes of one model with "
                             f"a measured {phase} time; this run has "
                             f"{frame['batch_size'].nunique() if not frame.empty else 0}.")
    devices = sorted(frame["device"].astype(str).unique())
    with rc_context(RC):
        fig = _new(6.8, 2.6)
        axes = fig.subplots(1, len(devices), squeeze=False)[0]
        for ax, device in zip(axes, devices):
            _draw_per_sample(ax, frame[frame["device"].astype(str) == device], device)
        file = _save(fig, folder, f"{key}.svg")
    caption = (f"{title}: median {phase} time of one batch divided by the batch size, per model "
               "and framework, with the confidence interval of the median. Log-log scale.")
    return Figure(key, title, caption, file=file, source=source)


def _draw_per_sample(ax, frame, device: str) -> None:
    groups = frame.groupby(["model", "framework", "input_shape", "mode", "profile"], sort=True)
    markers = "osD^v<>"
    models = sorted(frame["model"].astype(str).unique())
    extra = [a for a in ("input_shape", "mode", "profile") if frame[a].astype(str).nunique() > 1]
    for (model, framework, shape, mode, profile), group in groups:
        group = group.sort_values("batch_size")
        batch = group["batch_size"].astype(float).to_numpy()
        per = group["median_ns"].astype(float).to_numpy() / batch / 1e6
        colour = FRAMEWORK_COLOURS.get(str(framework), "#444444")
        marker = markers[models.index(str(model)) % len(markers)]
        named = {"input_shape": shape, "mode": mode, "profile": profile}
        label = " ".join([FRAMEWORK_LABELS.get(str(framework), str(framework)), str(model),
                          *(str(named[a]) for a in extra)])
        if {"ci_low_ns", "ci_high_ns"} <= set(group.columns):
            lo = group["ci_low_ns"].astype(float).to_numpy() / batch / 1e6
            hi = group["ci_high_ns"].astype(float).to_numpy() / batch / 1e6
            ok = [not (math.isnan(a) or math.isnan(b)) for a, b in zip(lo, hi)]
            yerr = [[p - a if k else 0 for p, a, k in zip(per, lo, ok)],
                    [b - p if k else 0 for p, b, k in zip(per, hi, ok)]]
            ax.errorbar(batch, per, yerr=yerr, color=colour, marker=marker, markersize=3.5,
                        linewidth=1, capsize=2, label=label)
        else:
            ax.plot(batch, per, color=colour, marker=marker, markersize=3.5, linewidth=1,
                    label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("time per sample (ms)")
    ax.set_title(f"device: {device}")
    ax.grid(which="both", color="#eeeeee", linewidth=0.5)
    ax.legend(frameon=False)


# --- throughput with confidence-interval error bars ----------------------------------------

# Each pair's row: PyTorch's point just above TensorFlow's.
FRAMEWORK_OFFSETS = (("pytorch", -0.17), ("tensorflow", 0.17))


def throughput(cell_stats, folder: Path, *, key="throughput") -> Figure:
    """Samples per second per cell and framework, with the interval of the median."""
    title = "Throughput"
    if cell_stats is None or cell_stats.empty or "median_ns" not in cell_stats:
        return Figure(key, title, "", reason="Not drawn: the statistics hold no cell median.")
    keep = [not missing(v) and float(v) > 0 for v in cell_stats["median_ns"]]
    if "throughput_sps" in cell_stats:
        keep = [k and not missing(v) for k, v in zip(keep, cell_stats["throughput_sps"])]
    frame = cell_stats[keep]
    if frame.empty:
        return Figure(key, title, "", reason="Not drawn: no cell has a measured median time.")
    frame = _sort_pairs(frame.assign(_fw=frame["framework"].astype(str)))
    pairs = frame.drop_duplicates("pair_id")
    varying = varying_axes(pairs)
    with rc_context(RC):
        fig = _new(6.8, 0.9 + 0.22 * len(pairs))
        ax = fig.add_subplot()
        rows = {pid: i for i, pid in enumerate(pairs["pair_id"])}
        for framework, offset in FRAMEWORK_OFFSETS:
            part = frame[frame["_fw"] == framework]
            if not part.empty:
                _draw_points(ax, part, rows, framework, offset, *_throughput_columns(part))
        ax.set_xscale("log")
        ax.set_yticks(range(len(pairs)), [pair_label(r, varying) for _, r in pairs.iterrows()])
        ax.set_ylim(len(pairs) - 0.5, -0.5)
        ax.set_xlabel("samples per second (log scale)")
        ax.grid(axis="x", which="both", color="#eeeeee", linewidth=0.5)
        fig.legend(loc="outside lower center", frameon=False, ncols=2)
        file = _save(fig, folder, f"{key}.svg")
    caption = ("Throughput: samples per iteration divided by the median time of one iteration, "
               "per cell, with the interval that the confidence interval of the median time "
               "gives. Log scale.")
    return Figure(key, title, caption, file=file)


def _throughput_columns(part):
    names = ("throughput_sps", "throughput_ci_low_sps", "throughput_ci_high_sps")
    if set(names) <= set(part.columns):  # the statistics' own (samples per iteration known)
        return tuple(part[n].astype(float).to_numpy() for n in names)
    batch = part["batch_size"].astype(float).to_numpy()
    median = part["median_ns"].astype(float).to_numpy()
    sps = batch / median * 1e9
    lo_ns = part["ci_high_ns"].astype(float).to_numpy() if "ci_high_ns" in part else median
    hi_ns = part["ci_low_ns"].astype(float).to_numpy() if "ci_low_ns" in part else median
    lo = [s if math.isnan(t) else b / t * 1e9 for s, b, t in zip(sps, batch, lo_ns)]
    hi = [s if math.isnan(t) else b / t * 1e9 for s, b, t in zip(sps, batch, hi_ns)]
    return sps, lo, hi


# --- box plots of per-trial times (florencio2019 Fig. 4 and 5) -----------------------------

def trial_boxplots(trials, folder: Path, *, key: str, title: str, select: dict, source=None,
                   absent: str = "", note: str = "", column: str = "median_ns",
                   label: str | None = None) -> Figure:
    """Box plots of one per-trial value, one box per framework (default: median iteration time).

    ``select`` keeps the cells; ``label`` names the y axis of any ``column`` other than a time;
    ``note`` completes the caption (what the value stands for).
    """
    frame = select_rows(trials, select)
    if not frame.empty and column in frame:
        frame = frame[(frame["status"] == "ok") & frame[column].notna()]
    if frame.empty or column not in frame:
        return Figure(key, title, "", source=source, reason=f"Not drawn: {absent}.")
    values = frame[column].astype(float)
    if column.endswith("_ns"):
        values = values / 1e9
        unit, scale = ("s", 1.0) if values.max() >= 1 else ("ms", 1e3)
        label, values = f"time ({unit})", values * scale
    with rc_context(RC):
        fig = _new(3.3, 2.4)
        ax = fig.add_subplot()
        names = [f for f in ("tensorflow", "pytorch") if f in set(frame["framework"])]
        data = [values[frame["framework"] == f] for f in names]
        box = ax.boxplot(data, tick_labels=[FRAMEWORK_LABELS[f] for f in names],
                         patch_artist=True, widths=0.5, medianprops={"color": "black"})
        for patch, name in zip(box["boxes"], names):
            patch.set_facecolor(FRAMEWORK_COLOURS[name])
            patch.set_alpha(0.5)
        ax.set_ylabel(label or column)
        file = _save(fig, folder, f"{key}.svg")
    fixed = ", ".join(f"{k} {v}" for k, v in constant_axes(frame).items())
    caption = (f"{title}: one value per trial (a fresh process); box plots per framework "
               f"({len(frame)} trials; {fixed}). {note}").strip()
    return Figure(key, title, caption, file=file, source=source, narrow=True)


# --- a per-trial telemetry value against batch size (patel2023 Fig. 5) -----------------------

def metric_vs_batch(trials, folder: Path, *, key: str, title: str, column: str, label: str,
                    select: dict, source=None, absent: str = "") -> Figure:
    """Median over trials of ``column`` against batch size, one line per model and framework,
    with the range of the trials as error bars."""
    frame = select_rows(trials, select)
    if not frame.empty and column in frame:
        frame = frame[(frame["status"] == "ok") & frame[column].notna()]
    if frame.empty or column not in frame or frame["batch_size"].nunique() < 2:
        return Figure(key, title, "", source=source, reason=f"Not drawn: {absent}.")
    with rc_context(RC):
        fig = _new(6.8, 2.6)
        ax = fig.add_subplot()
        for (model, framework), group in frame.groupby(["model", "framework"], sort=True):
            stats = group.groupby("batch_size")[column].agg(["median", "min", "max"])
            batch = stats.index.astype(float)
            ax.errorbar(batch, stats["median"], yerr=[stats["median"] - stats["min"],
                                                      stats["max"] - stats["median"]],
                        color=FRAMEWORK_COLOURS.get(str(framework), "#444444"), marker="o",
                        markersize=3.5, capsize=2, linewidth=1,
                        label=f"{FRAMEWORK_LABELS.get(str(framework), framework)} {model}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size")
        ax.set_ylabel(label)
        ax.grid(which="both", color="#eeeeee", linewidth=0.5)
        fig.legend(loc="outside right upper", frameon=False)
        file = _save(fig, folder, f"{key}.svg")
    fixed = ", ".join(f"{k} {v}" for k, v in constant_axes(frame).items()
                      if k not in ("model", "framework"))
    caption = (f"{title}: median over trials of each trial's {label}, per model and framework; "
               f"bars: range over the trials ({fixed}).")
    return Figure(key, title, caption, file=file, source=source)


# --- a per-trial value per cell: energy per sample ----------------------------------------

def per_cell_metric(trials, folder: Path, *, key: str, title: str, column: str, label: str,
                    absent: str = "") -> Figure:
    """Median over trials of ``column`` per cell and framework, with the trials' range. Log."""
    frame = trials
    if not frame.empty and column in frame:
        frame = frame[(frame["status"] == "ok") & frame[column].notna()]
        frame = frame[frame[column].astype(float) > 0]
    if frame.empty or column not in frame:
        return Figure(key, title, "", reason=f"Not drawn: {absent}.")
    frame = _sort_pairs(frame)
    pairs = frame.drop_duplicates("pair_id")
    varying = varying_axes(pairs)
    rows = {pid: i for i, pid in enumerate(pairs["pair_id"])}
    with rc_context(RC):
        fig = _new(6.8, 0.9 + 0.22 * len(pairs))
        ax = fig.add_subplot()
        for framework, offset in FRAMEWORK_OFFSETS:
            part = frame[frame["framework"] == framework]
            if part.empty:
                continue
            stats = part.groupby("pair_id", sort=False)[column].agg(["median", "min", "max"])
            y = [rows[p] + offset for p in stats.index]
            ax.errorbar(stats["median"], y, xerr=[stats["median"] - stats["min"],
                                                  stats["max"] - stats["median"]],
                        fmt="o", markersize=3.5, capsize=2, linewidth=1,
                        color=FRAMEWORK_COLOURS[framework], label=FRAMEWORK_LABELS[framework])
        ax.set_xscale("log")
        ax.set_yticks(range(len(pairs)), [pair_label(r, varying) for _, r in pairs.iterrows()])
        ax.set_ylim(len(pairs) - 0.5, -0.5)
        ax.set_xlabel(f"{label} (log scale)")
        ax.grid(axis="x", which="both", color="#eeeeee", linewidth=0.5)
        fig.legend(loc="outside lower center", frameon=False, ncols=2)
        file = _save(fig, folder, f"{key}.svg")
    caption = (f"{title}: median over trials of each trial's {label}, per cell and framework; "
               "bars: range over the trials. Log scale.")
    return Figure(key, title, caption, file=file)


# --- the real-data experiments: epoch times, accuracy per epoch, confusion (tian2020) ----------

# Axes that tell training results apart: a pair's, but the phase (always train).
TRAINING_AXES = [a for a in PAIR_AXES if a != "phase"]
OPTIMIZER_STYLES = ("-", "--", ":", "-.")


def _training_label(row, varying: list[str]) -> str:
    parts = [str(row["model"])]
    for axis in varying:
        if axis != "model":
            parts.append(f"b{row[axis]}" if axis == "batch_size" else str(row[axis]))
    return " ".join(parts)


def _training_varying(frame) -> list[str]:
    return [a for a in TRAINING_AXES if a in frame and frame[a].astype(str).nunique() > 1]


def _time_unit(values_ns) -> tuple[str, float]:
    finite = [float(v) for v in values_ns if not missing(v)]
    return ("s", 1e9) if finite and max(finite) >= 1e9 else ("ms", 1e6)


def epoch_times(summary, folder: Path, *, key: str, title: str, source=None, absent: str = "",
                note: str = "") -> Figure:
    """tian2020's time bars: one panel per ``measure``, per cell each framework's median over
    trials, with the interval of that median as error bars.

    ``summary``: one row per cell, framework and measure, with ``median``, ``low`` and
    ``high`` in nanoseconds; its row order is the order of the bars. ``note`` ends the caption.
    """
    if summary is None or summary.empty:
        return Figure(key, title, "", source=source, reason=f"Not drawn: {absent}.")
    axes = [a for a in TRAINING_AXES if a in summary]
    varying = _training_varying(summary)
    cells = summary.drop_duplicates(axes)
    position = {tuple(map(str, r[axes])): i for i, (_, r) in enumerate(cells.iterrows())}
    measures = list(dict.fromkeys(summary["measure"]))
    seen = set()
    with rc_context(RC):
        fig = _new(6.8, 2.6)
        panels = fig.subplots(1, len(measures), squeeze=False)[0]
        for ax, measure in zip(panels, measures):
            part = summary[summary["measure"] == measure]
            unit, scale = _time_unit(part["high"].tolist() + part["median"].tolist())
            for framework, offset in (("pytorch", -0.2), ("tensorflow", 0.2)):
                for _, row in part[part["framework"] == framework].iterrows():
                    x = position[tuple(map(str, row[axes]))] + offset
                    if missing(row["median"]):
                        ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=6,
                                color="#666666")
                        continue
                    median = float(row["median"]) / scale
                    low, high = (float(row[c]) / scale if not missing(row[c]) else median
                                 for c in ("low", "high"))
                    ax.bar(x, median, width=0.4, color=FRAMEWORK_COLOURS[framework],
                           yerr=[[median - low], [high - median]], capsize=2,
                           error_kw={"linewidth": 0.8},
                           label=None if framework in seen else FRAMEWORK_LABELS[framework])
                    seen.add(framework)
            ax.set_xticks(range(len(position)),
                          [_training_label(r, varying) for _, r in cells.iterrows()],
                          rotation=30 if len(position) > 2 else 0,
                          ha="right" if len(position) > 2 else "center")
            ax.set_ylabel(f"time ({unit})")
            ax.set_title(measure, fontsize=7)
            ax.grid(axis="y", color="#eeeeee", linewidth=0.5)
            ax.set_axisbelow(True)
        fig.legend(loc="outside lower center", frameon=False, ncols=2)
        file = _save(fig, folder, f"{key}.svg")
    fixed = ", ".join(f"{k} {v}" for k, v in constant_axes(cells).items())
    caption = (f"{title}: per cell, the median over trials of each framework's "
               + "; ".join(measures) + f" ({fixed}). Error bars: the distribution-free interval "
               "of the median (order statistics; the range of the trials when there are too "
               f"few for 95 %). n/a: not measured. {note}").strip()
    return Figure(key, title, caption, file=file, source=source)


def accuracy_curves(epochs, folder: Path, *, key: str, title: str, source=None,
                    absent: str = "") -> Figure:
    """Validation accuracy against epoch: one panel per cell pair, one line per framework and
    optimizer, the median over trials with the trials' range as a band."""
    from matplotlib.ticker import MaxNLocator

    if epochs is None or epochs.empty:
        return Figure(key, title, "", source=source, reason=f"Not drawn: {absent}.")
    panel_axes = [a for a in TRAINING_AXES if a in epochs and a != "optimizer"]
    panels_frame = epochs.drop_duplicates(panel_axes).sort_values(panel_axes, kind="stable")
    varying = [a for a in _training_varying(panels_frame) if a != "optimizer"]
    optimizers = sorted(epochs["optimizer"].dropna().astype(str).unique())
    shown = list(panels_frame.iterrows())[:MAX_WHY_PANELS]
    with rc_context(RC):
        cols = min(len(shown), 2)
        rows = math.ceil(len(shown) / cols)
        fig = _new(6.8, 2.3 * rows)
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
        for ax, (_, first) in zip(axes, shown):
            part = epochs[(epochs[panel_axes].astype(str) == first[panel_axes].astype(str))
                          .all(axis=1)]
            for (framework, optimizer), line in part.groupby(
                    ["framework", part["optimizer"].fillna("").astype(str)], sort=True):
                stats = line.groupby("epoch")["val_accuracy"].agg(["median", "min", "max"])
                colour = FRAMEWORK_COLOURS.get(str(framework), "#444444")
                style = (OPTIMIZER_STYLES[optimizers.index(optimizer) % len(OPTIMIZER_STYLES)]
                         if optimizer in optimizers else "-")
                label = " ".join([FRAMEWORK_LABELS.get(str(framework), str(framework)),
                                  optimizer]).strip()
                ax.fill_between(stats.index, 100 * stats["min"], 100 * stats["max"],
                                color=colour, alpha=0.2, linewidth=0)
                ax.plot(stats.index, 100 * stats["median"], color=colour, linestyle=style,
                        marker="o" if len(stats) <= 12 else None, markersize=2.5,
                        linewidth=1, label=label)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel("epoch")
            ax.set_ylabel("validation accuracy (%)")
            ax.set_title(_training_label(first, varying), fontsize=8)
            ax.grid(color="#eeeeee", linewidth=0.5)
            ax.legend(frameon=False, fontsize=6)
        for ax in axes[len(shown):]:
            ax.set_visible(False)
        file = _save(fig, folder, f"{key}.svg")
    more = (f" The first {len(shown)} of {len(panels_frame)} cells are drawn."
            if len(panels_frame) > len(shown) else "")
    fixed = ", ".join(f"{k} {v}" for k, v in constant_axes(panels_frame).items())
    caption = (f"{title}: accuracy on the test set after each training epoch, per cell; lines: "
               "the median over trials per framework and optimizer, bands: the range of the "
               f"trials ({fixed}).{more}")
    return Figure(key, title, caption, file=file, source=source)


def confusion_matrices(confusion, folder: Path, *, key: str, title: str, which: str,
                       source=None, absent: str = "") -> Figure:
    """Each framework's confusion matrix for one cell, summed over its trials and divided by
    each true class's count, shaded with the share printed in each cell."""
    if confusion is None or confusion.empty:
        return Figure(key, title, "", source=source, reason=f"Not drawn: {absent}.")
    frameworks = [f for f in ("pytorch", "tensorflow") if f in set(confusion["framework"])]
    with rc_context(RC):
        fig = _new(6.8, 3.6)
        panels = fig.subplots(1, len(frameworks), squeeze=False)[0]
        for ax, framework in zip(panels, frameworks):
            part = confusion[confusion["framework"] == framework]
            counts = part.pivot_table(index="true_class", columns="predicted_class",
                                      values="count", aggfunc="sum", fill_value=0)
            labels = (part.drop_duplicates("true_class").set_index("true_class")
                      .loc[counts.index, "true_label"].astype(str).tolist())
            totals = counts.sum(axis=1).replace(0, 1)
            share = counts.div(totals, axis=0).to_numpy(dtype=float)
            mesh = ax.pcolormesh(share, cmap="Blues", vmin=0, vmax=1)
            for i, row in enumerate(share):
                for j, value in enumerate(row):
                    ax.text(j + 0.5, i + 0.5, f"{100 * value:.0f}", ha="center", va="center",
                            fontsize=4.5, color="white" if value > 0.6 else "black")
            ticks = [k + 0.5 for k in range(len(labels))]
            ax.set_xticks(ticks, labels, rotation=90)
            ax.set_yticks(ticks, labels)
            ax.invert_yaxis()
            ax.set_aspect("equal")
            ax.set_xlabel("predicted class")
            ax.set_ylabel("true class")
            matrix = counts.to_numpy(dtype=float)
            correct = matrix.trace() / max(matrix.sum(), 1)
            ax.set_title(f"{FRAMEWORK_LABELS.get(framework, framework)}: "
                         f"{part['trial'].nunique()} trial(s), {100 * correct:.1f} % correct",
                         fontsize=8)
        fig.colorbar(mesh, ax=list(panels), shrink=0.7, label="share of the true class")
        file = _save(fig, folder, f"{key}.svg")
    caption = (f"{title}: {which}. Rows: the true class; columns: the predicted class; each "
               "framework's counts summed over its trials and divided by the true class's "
               "count (numbers: per cent of that class).")
    return Figure(key, title, caption, file=file, source=source)


# --- why: the ablation's waterfall and where the time goes ---------------------------------

MAX_WHY_PANELS = 6
CATEGORY_COLOURS = {"convolution": "#0072b2", "matmul": "#56b4e9", "normalization": "#009e73",
                    "elementwise": "#f0e442", "memory": "#e69f00", "fused": "#cc79a7",
                    "other": "#bbbbbb", "host_overhead": "#333333"}


def _group_title(row) -> str:
    return (f"{row['model']} {row['phase']} b{row['batch_size']} {row['input_shape']} "
            f"{row['device']}")


def waterfall(decomposition, folder: Path, *, key="ablation_waterfall") -> Figure:
    """Per ablation group, the PyTorch/TensorFlow ratio at defaults, each factor's step towards
    matched settings, and the residual, as a waterfall on a log scale with bootstrap intervals.
    """
    title = "What each factor contributes to the gap"
    if decomposition is None or decomposition.empty or "row" not in decomposition:
        return Figure(key, title, "", reason="Not drawn: this run has no ablation (config key "
                                             "`ablation`), so no decomposition was computed.")
    frame = decomposition[decomposition["contribution"].notna()
                          | (decomposition["row"] == "factor")]
    groups = [g for _, g in frame.groupby(["run", "experiment", "device", "model", "phase",
                                           "batch_size", "input_shape"], sort=True)
              if (g["row"] == "total").any()]
    if not groups:
        return Figure(key, title, "", reason="Not drawn: no ablation group has a measured gap "
                                             "at defaults.")
    shown = groups[:MAX_WHY_PANELS]
    with rc_context(RC):
        cols = min(len(shown), 2)
        rows = math.ceil(len(shown) / cols)
        fig = _new(6.8, 2.5 * rows)
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
        for ax, group in zip(axes, shown):
            _draw_waterfall(ax, group.sort_values("step", kind="stable"))
        for ax in axes[len(shown):]:
            ax.set_visible(False)
        file = _save(fig, folder, f"{key}.svg")
    more = (f" The first {MAX_WHY_PANELS} of {len(groups)} groups are drawn; the table has all."
            if len(groups) > len(shown) else "")
    caption = (f"{title}: PyTorch's median time over TensorFlow's (log scale) with each "
               "framework's defaults (first bar), after each factor is matched in turn (a step "
               "down: the factor had made PyTorch look slower), and with every listed factor "
               "matched (last bar, the residual). Whiskers: bootstrap intervals over trials. "
               "Factors the device cannot vary are marked n/a; steps whose trials did not end "
               "ok, not run." + more)
    return Figure(key, title, caption, file=file)


def _draw_waterfall(ax, group) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator

    labels, level, values, seen = [], None, [1.0], set()
    for x, (_, r) in enumerate(group.iterrows()):
        kind = r["row"]
        if kind == "total":
            labels.append("defaults")
        elif kind == "residual":
            labels.append("residual")
        else:
            labels.append(str(r["factor"]).replace("cudnn_autotune", "autotune")
                          .replace("memory_growth", "mem. growth"))
        value = r.get("contribution")
        if missing(value):
            text = "n/a" if r.get("status") == "unsupported" else "not run"
            ax.text(x, 0.03, text, ha="center", va="bottom", fontsize=6, color="#666666",
                    rotation=90, transform=ax.get_xaxis_transform())
            continue
        value = float(value)
        low, high = float(r["contribution_ci_low"]), float(r["contribution_ci_high"])
        if kind in ("total", "residual"):
            bottom, top, err, colour, label = 0.0, value, (low, high), "#7f7f7f", None
            level = value
        else:
            bottom, top = level, level - value
            err = (level - high, level - low)
            lowers = value > 0
            colour = FRAMEWORK_COLOURS["pytorch" if lowers else "tensorflow"]
            label = "matching lowers the ratio" if lowers else "matching raises the ratio"
            level = top
        ax.bar(x, math.exp(top) - math.exp(bottom), bottom=math.exp(bottom), width=0.6,
               color=colour, label=None if label in seen else label)
        seen.add(label)
        ax.plot([x, x], [math.exp(err[0]), math.exp(err[1])], color="black", linewidth=0.8)
        values += [math.exp(v) for v in (top, bottom, *err)]
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.set_yscale("log")
    ax.set_ylim(min(values) / 1.4, max(values) * 1.4)
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_ylabel("PyTorch / TensorFlow time")
    ax.set_title(_group_title(group.iloc[0]), fontsize=8)
    ax.set_axisbelow(True)
    ax.grid(axis="y", which="major", color="#eeeeee", linewidth=0.5)
    if seen - {None}:
        ax.legend(loc="best", frameon=False, fontsize=6)


def time_breakdown(profiles, folder: Path, *, key="time_breakdown", cell_stats=None) -> Figure:
    """Where the time of a step goes, per profiled cell: operator classes and host overhead,
    stacked, PyTorch above TensorFlow for each cell pair.

    Bars are the profiled shares times the cell's median time from the statistics when it is
    known (the profiler's own cost is left out that way), else the profiled time per step.
    """
    from fwbench.measure.profiling import CATEGORIES, CATEGORY_LABELS

    title = "Where the time goes"
    if profiles is None or profiles.empty or "category" not in profiles:
        return Figure(key, title, "", reason="Not drawn: this run profiled no cell (config key "
                                             "`profiling`).")
    ok = profiles[(profiles["status"] == "ok") & profiles["category"].notna()]
    if ok.empty:
        return Figure(key, title, "", reason="Not drawn: no profiled cell ended ok.")
    medians = {}
    if cell_stats is not None and not cell_stats.empty and "median_ns" in cell_stats:
        medians = {str(c): float(m) for c, m in zip(cell_stats["cell_id"], cell_stats["median_ns"])
                   if not missing(m)}
    pairs = sorted(ok["pair_id"].astype(str).unique())
    shown = pairs[:4 * MAX_WHY_PANELS]
    with rc_context(RC):
        fig = _new(6.8, 1.0 + 0.42 * len(shown))
        ax = fig.add_subplot()
        labels, seen = [], set()
        for y, pair in enumerate(shown):
            for framework, offset in (("pytorch", -0.19), ("tensorflow", 0.19)):
                part = ok[(ok["pair_id"].astype(str) == pair) & (ok["framework"] == framework)]
                if part.empty:
                    continue
                part = part.set_index("category")
                cell_id = str(part["cell_id"].iloc[0])
                total = medians.get(cell_id)
                left = 0.0
                for category in CATEGORIES:
                    if category not in part.index:
                        continue
                    width = (float(part.loc[category, "share"]) * total if total
                             else float(part.loc[category, "ns_per_step"])) / 1e6
                    ax.barh(y + offset, width, left=left, height=0.36,
                            color=CATEGORY_COLOURS[category],
                            label=None if category in seen else CATEGORY_LABELS[category])
                    seen.add(category)
                    left += width
                ax.text(left, y + offset, f" {FRAMEWORK_LABELS[framework]}", va="center",
                        fontsize=6)
            row = ok[ok["pair_id"].astype(str) == pair].iloc[0]
            labels.append(f"{row['model']} {row['phase']} b{row['batch_size']} "
                          f"{row['mode']} {row['profile']}")
        ax.set_yticks(range(len(shown)), labels)
        ax.set_ylim(len(shown) - 0.5, -0.5)
        ax.set_xlabel("milliseconds per step")
        ax.grid(axis="x", color="#eeeeee", linewidth=0.5)
        fig.legend(loc="outside lower center", frameon=False, ncols=4)
        file = _save(fig, folder, f"{key}.svg")
    more = (f" The first {len(shown)} of {len(pairs)} profiled pairs are drawn."
            if len(pairs) > len(shown) else "")
    caption = (f"{title}: one step of each profiled cell, split into time in operators by class "
               "and host overhead (on the CPU: no operator running on any thread; on a GPU: the "
               "device idle, waiting for the host), from each framework's own profiler. Bar "
               "length: the profiled shares times the cell's median step time (the profiled "
               "time per step where the statistics have no median)." + more)
    return Figure(key, title, caption, file=file)


# --- beyond one device: throughput and scaling efficiency against the device count ---------

# The axes that tell a distributed cell's series apart (besides framework and strategy).
DISTRIBUTED_AXES = ["device", "model", "batch_size", "input_shape", "precision", "mode",
                    "profile"]
STRATEGY_STYLES = {"multi_process": "-", "single_process": "--"}


def scaling(cell_stats, efficiency, folder: Path, *, key="scaling", source=None,
            absent: str = "") -> Figure:
    """Throughput (left) and scaling efficiency (right) against the number of devices or
    processes, one line per framework, strategy and cell, with intervals: the median's for the
    throughput, the Hodges-Lehmann interval of fwbench.measure.distributed for the efficiency.
    ``absent`` completes the sentence when the statistics hold no distributed cell."""
    title = "Scaling over devices"
    frame = select_rows(cell_stats, {"experiment": "distributed"})
    if frame.empty or "throughput_sps" not in frame:
        return Figure(key, title, "", source=source, reason=f"Not drawn: {absent}.")
    frame = frame[[not missing(v) for v in frame["throughput_sps"]]]
    if frame.empty:
        return Figure(key, title, "", source=source, reason=(
            "Not drawn: no distributed cell has an ok trial (Appendix B gives each failure)."))
    frame = frame.assign(world_size=frame["world_size"].astype(int))
    varying = [a for a in DISTRIBUTED_AXES if a in frame and frame[a].astype(str).nunique() > 1]
    keys = ["framework", "strategy", *varying]
    measured = select_rows(efficiency, {"experiment": "distributed"})
    if not measured.empty:
        measured = measured[[not missing(v) for v in measured["efficiency"]]]
    with rc_context(RC):
        fig = _new(6.8, 2.8)
        left, right = fig.subplots(1, 2)
        for values, group in frame.groupby(keys, sort=True):
            style = _series_style(dict(zip(keys, values)), varying)
            group = group.sort_values("world_size")
            sps, lo, hi = _throughput_columns(group)
            left.errorbar(group["world_size"], sps, yerr=[[max(s - a, 0) for s, a in zip(sps, lo)],
                                                          [max(b - s, 0) for s, b in zip(sps, hi)]],
                          capsize=2, linewidth=1, markersize=3.5, **style)
            rows = select_rows(measured, dict(zip(keys, values)))
            if rows.empty:
                continue
            rows = rows.sort_values("world_size")
            eff = rows["efficiency"].astype(float).to_numpy()
            lo, hi = (rows[c].astype(float).to_numpy()
                      for c in ("efficiency_ci_low", "efficiency_ci_high"))
            right.errorbar([1, *rows["world_size"].astype(int)], [1.0, *eff],
                           yerr=[[0, *(max(e - a, 0) for e, a in zip(eff, lo))],
                                 [0, *(max(b - e, 0) for e, b in zip(eff, hi))]],
                           capsize=2, linewidth=1, markersize=3.5, **{**style, "label": None})
        sizes = sorted(frame["world_size"].unique())
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
        fig.legend(loc="outside lower center", frameon=False, ncols=2)
        file = _save(fig, folder, f"{key}.svg")
    fixed = ", ".join(f"{k} {v}" for k, v in constant_axes(frame).items() if k != "experiment")
    caption = (f"{title}: left, throughput (per-device batch × devices / median step time, so the "
               "batch per device is fixed: weak scaling) against the number of devices or "
               "processes, per framework and strategy, with the interval of the median; right, "
               "the scaling efficiency E(N) = X(N) / (N × X(1)) with its Hodges-Lehmann interval "
               f"(1: linear; dotted: {threshold:g}, which we read as near-linear). "
               + (f"{fixed}." if fixed else "")
               + ("" if not measured.empty else " No efficiency: no strategy has ok trials "
                  "both at one device and at more."))
    return Figure(key, title, caption.strip(), file=file, source=source)


def _series_style(values: dict, varying: list[str]) -> dict:
    from fwbench.plan.strategies import STRATEGY_LABELS, resolve_strategy, strategy_pair
    framework, strategy = str(values["framework"]), str(values["strategy"])
    name = STRATEGY_LABELS[resolve_strategy(strategy, framework)]
    extra = [f"b{values[a]}" if a == "batch_size" else str(values[a]) for a in varying]
    return {"color": FRAMEWORK_COLOURS.get(framework, "#444444"), "marker": "o",
            "linestyle": STRATEGY_STYLES[strategy_pair(strategy)],
            "label": " ".join([name, *extra])}


def _near_linear(efficiency) -> float:
    from fwbench.analysis.scaling import NEAR_LINEAR
    if efficiency.empty or "near_linear_threshold" not in efficiency:
        return NEAR_LINEAR
    return float(efficiency["near_linear_threshold"].iloc[0])


# --- one trial's telemetry over time, its phases shaded -------------------------------------

PHASE_SHADES = {"cold_start": ("cold start", "#e69f00"), "warmup": ("warm-up", "#f0e442"),
                "measure": ("measure", "#56b4e9"), "blocks": ("blocks", "#cc79a7")}
TRACE_PANELS = (("utilization (%)", (("cpu", "cpu_util_pct", "CPU utilization, all cores"),
                                     ("gpu", "gpu_util_pct", "GPU utilization"))),
                ("temperature (°C)", (("cpu", "cpu_temp_c", "CPU temperature"),
                                      ("gpu", "gpu_temp_c", "GPU temperature"))),
                ("GPU power (W)", (("gpu", "gpu_power_w", "GPU board power"),)))


def telemetry_trace(trace, folder: Path, *, key="telemetry_trace", chosen: str = "",
                    absent: str = "") -> Figure:
    """One trial's CPU and GPU utilization, temperatures and GPU power over time (its side
    file, as tables/telemetry_trace.parquet holds it), the harness's phases shaded; a panel
    without readings is left out and named in the caption."""
    title = "Telemetry trace of one trial"
    if trace is None or trace.empty or "source" not in trace:
        return Figure(key, title, "", reason=f"Not drawn: {absent}.")
    samples = trace[trace["source"] != "marker"]
    markers = trace[trace["source"] == "marker"].sort_values("t_s")
    panels, lacking = [], []
    for label, series in TRACE_PANELS:
        drawn = [(s, c, name) for s, c, name in series
                 if c in samples and samples.loc[samples["source"] == s, c].notna().any()]
        lacking += [name for s, c, name in series if (s, c, name) not in drawn]
        if drawn:
            panels.append((label, drawn))
    if not panels:
        return Figure(key, title, "", reason="Not drawn: the chosen trial's side file has no "
                                             "reading.")
    with rc_context(RC):
        fig = _new(6.8, 1.0 + 1.3 * len(panels))
        axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        for ax, (label, drawn) in zip(axes, panels):
            _shade_phases(ax, markers)
            for source, column, name in drawn:
                part = samples[samples["source"] == source]
                for index, series in part.groupby(part["gpu_index"].fillna(-1), sort=True):
                    gpu = f" {int(index)}" if source == "gpu" and part["gpu_index"].nunique() > 1 \
                        else ""
                    ax.plot(series["t_s"], series[column], linewidth=1, label=name + gpu,
                            color="#009e73" if source == "gpu" else "#333333")
            ax.set_ylabel(label)
            ax.grid(color="#eeeeee", linewidth=0.5)
            ax.legend(loc="upper left", frameon=False, fontsize=6)
        axes[-1].set_xlabel("seconds from the cold-start iteration")
        handles = [_phase_patch(name) for name in markers["marker"] if name in PHASE_SHADES]
        if handles:
            fig.legend(handles=handles, loc="outside lower center", frameon=False,
                       ncols=len(handles))
        file = _save(fig, folder, f"{key}.svg")
    first = trace.iloc[0]
    caption = (f"{title}: trial {int(first['trial'])} of {first['cell_id']}, {chosen}. "
               "Before 0 the process starts, imports its framework and builds the model; the "
               "shaded spans are the harness's phases between its markers. CPU utilization is "
               "the whole machine's." + (f" No reading of: {', '.join(lacking)}." if lacking
                                         else ""))
    return Figure(key, title, caption, file=file)


def _shade_phases(ax, markers) -> None:
    times = list(zip(markers["marker"], markers["t_s"].astype(float)))
    for (name, start), (_, end) in zip(times, times[1:]):
        if name in PHASE_SHADES:
            ax.axvspan(start, end, color=PHASE_SHADES[name][1], alpha=0.25, linewidth=0)


def _phase_patch(name: str):
    from matplotlib.patches import Patch

    label, colour = PHASE_SHADES[name]
    return Patch(color=colour, alpha=0.25, label=label)


# --- achieved FLOP/s and the fraction of the device's peak ---------------------------------

def achieved_flops(flops, folder: Path, *, key="achieved_flops", absent: str = "") -> Figure:
    """Achieved FLOP/s per cell and framework with the interval its throughput gives (left),
    and the fraction of the device's peak where a peak is known (right)."""
    from matplotlib.ticker import FuncFormatter

    title = "Achieved FLOP/s and fraction of peak"
    if flops is None or flops.empty or "achieved_flops" not in flops:
        return Figure(key, title, "", reason=f"Not drawn: {absent}.")
    frame = flops[[not missing(v) for v in flops["achieved_flops"]]]
    if frame.empty:
        reasons = sorted({str(n) for n in flops["note"] if not missing(n) and str(n)})
        return Figure(key, title, "", reason="Not drawn: no cell has an achieved rate ("
                      + "; ".join(reasons) + ").")
    frame = _sort_pairs(frame)
    pairs = frame.drop_duplicates("pair_id")
    rows = {pid: i for i, pid in enumerate(pairs["pair_id"])}
    peaked = frame[[not missing(v) for v in frame["fraction_of_peak"]]]
    with rc_context(RC):
        fig = _new(6.8, 0.9 + 0.22 * len(pairs))
        axes = fig.subplots(1, 2 if len(peaked) else 1, sharey=True, squeeze=False)[0]
        unit, scale = ("TFLOP/s", 1e-12) if frame["achieved_flops"].max() >= 1e12 else \
            ("GFLOP/s", 1e-9)
        _framework_points(axes[0], frame, rows, "achieved_flops", "achieved_ci_low",
                          "achieved_ci_high", scale)
        axes[0].set_xscale("log")
        axes[0].xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axes[0].xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        axes[0].set_xlabel(f"achieved {unit} (log scale)")
        if len(peaked):
            _framework_points(axes[1], peaked, rows, "fraction_of_peak", "fraction_ci_low",
                              "fraction_ci_high", 100, label=False)
            axes[1].set_xlabel("% of the device's peak")
        axes[0].set_yticks(range(len(pairs)),
                           [pair_label(r, varying_axes(pairs)) for _, r in pairs.iterrows()])
        axes[0].set_ylim(len(pairs) - 0.5, -0.5)
        for ax in axes:
            ax.grid(axis="x", which="both", color="#eeeeee", linewidth=0.5)
        fig.legend(loc="outside lower center", frameon=False, ncols=2)
        file = _save(fig, folder, f"{key}.svg")
    sources = sorted({str(s) for s in peaked.get("peak_source", []) if not missing(s)})
    unpeaked = frame[[missing(v) for v in frame["fraction_of_peak"]]]
    reasons = sorted({str(n) for n in unpeaked["note"] if not missing(n) and str(n)})
    caption = (f"{title}: FLOPs per sample (a multiply-add is 2 FLOPs; training 3 × forward; "
               "normalization, activations and the optimizer not counted, so both values are "
               "lower bounds) times samples per second, per cell and framework, with the "
               "interval the throughput's gives"
               + (f"; right, as a share of the peak ({'; '.join(sources)})" if sources else "")
               + "." + (f" No fraction of peak for {len(unpeaked)} of {len(frame)} cells: "
                        + "; ".join(reasons) + "." if len(unpeaked) else ""))
    return Figure(key, title, caption, file=file)


def _framework_points(ax, frame, rows: dict, column: str, low: str, high: str, scale: float,
                      label: bool = True) -> None:
    """One point per cell with its interval, PyTorch above TensorFlow in each pair's row."""
    for framework, offset in FRAMEWORK_OFFSETS:
        part = frame[frame["framework"] == framework]
        if not part.empty:
            value, lo, hi = (part[c].astype(float).to_numpy() * scale for c in (column, low, high))
            _draw_points(ax, part, rows, framework, offset, value, lo, hi, label)


def _draw_points(ax, part, rows: dict, framework: str, offset: float, value, lo, hi,
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
