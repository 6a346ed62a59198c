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
             "mode", "profile"]


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


def outcome(row) -> str:
    """The direction a comparison row supports (ratio > 1: PyTorch slower).

    The statistics' verdict decides when it is one of ``OUTCOME_LABELS``; for tables without
    one, an interval that excludes 1 decides, else ``inconclusive``.
    """
    verdict = "" if missing(row.get("verdict")) else str(row.get("verdict")).lower()
    if verdict in OUTCOME_LABELS:  # the statistics' own verdict (fwbench.stats.verdict)
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


def constant_axes(frame) -> dict:
    return {a: str(frame[a].iloc[0]) for a in PAIR_AXES
            if a in frame.columns and len(frame) and frame[a].astype(str).nunique() == 1}


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
    caption = (f"{title}: PyTorch's median time divided by TensorFlow's, per matched pair "
               f"({len(frame)} pairs; {fixed}). Left of 1: PyTorch faster. Bars: the ratio's "
               "confidence interval; colour: the verdict of the comparison. Log scale.")
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
    labels, seen = [], set()
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
        lo, hi = row.get("ratio_ci_low"), row.get("ratio_ci_high")
        if not missing(lo) and not missing(hi):
            ax.plot([float(lo), float(hi)], [y, y], color=colour, linewidth=1.6,
                    solid_capstyle="butt")
        ax.plot([float(ratio)], [y], "o", color=colour, markersize=4,
                label=None if kind in seen else OUTCOME_LABELS[kind])
        seen.add(kind)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlabel("PyTorch median time / TensorFlow median time (log scale)")
    ax.grid(axis="x", which="both", color="#dddddd", linewidth=0.5)
    if seen:
        ax.figure.legend(loc="outside lower center", frameon=False, ncols=len(seen))


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
        for framework, offset in (("pytorch", -0.17), ("tensorflow", 0.17)):
            part = frame[frame["_fw"] == framework]
            if part.empty:
                continue
            y = [rows[p] + offset for p in part["pair_id"]]
            sps, lo, hi = _throughput_columns(part)
            ax.errorbar(sps, y, xerr=[[max(s - a, 0) for s, a in zip(sps, lo)],
                                      [max(b - s, 0) for s, b in zip(sps, hi)]],
                        fmt="o", markersize=3.5, capsize=2, linewidth=1,
                        color=FRAMEWORK_COLOURS[framework], label=FRAMEWORK_LABELS[framework])
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
        sps, lo, hi = (part[n].astype(float).to_numpy() for n in names)
        return sps, [s if math.isnan(v) else v for s, v in zip(sps, lo)], \
            [s if math.isnan(v) else v for s, v in zip(sps, hi)]
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
        for framework, offset in (("pytorch", -0.17), ("tensorflow", 0.17)):
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
    from fwbench.profiling import CATEGORIES, CATEGORY_LABELS

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
