"""The figures of the results' speed sections: PyTorch's time over TensorFlow's per matched
pair (as intervals, and as a speed-up heatmap of model against batch size), every cell's
throughput, and time per sample against batch size. Framework-free.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import rc_context

from fwbench.analysis.columns import PAIR_AXES, without
from fwbench.plan.frameworks import COMPARED, FASTER
from fwbench.report.figures import style

# Axes besides model and batch size that split the heatmap into panels.
PANEL_AXES = without(PAIR_AXES, "model", "batch_size", "world_size")


# --- relative time: PyTorch/TensorFlow median ratio per pair, log scale ----------------------

def relative_time(comparisons, failures: dict, folder: Path, *, key="relative_time",
                  title="Relative time", select: dict | None = None, source=None,
                  absent: str = "", published=(), paper: str | None = None) -> style.Figure:
    """The ratio of PyTorch's to TensorFlow's median time per matched pair, with its interval.

    ``failures`` maps a pair id to the reason it has no ratio (a failed trial); such pairs get a
    row of their own saying so, instead of silently disappearing. ``select`` keeps rows whose
    axis values match; ``absent`` completes the sentence when nothing matches. A redrawn paper
    figure passes ``paper`` (its short name) and the time ratios it ``published`` for the
    figure (fwbench.analysis.claims.published): each is drawn, black, beside the rows of its
    cells measured in its setting (the rows need a ``dataset``: claims.setting.with_dataset).
    """
    frame = style.select_rows(comparisons, select)
    rated = frame["ratio"].notna() & (frame["ratio"].astype(str) != "") if "ratio" in frame \
        else pd.Series(False, index=frame.index)
    if not rated.any():  # rows of reasons alone would draw an empty axis
        return style.Figure(key, title, "", reason=f"Not drawn: {absent or 'no matched pair'}.",
                            source=source)
    frame = style.sort_pairs(frame)
    varying = style.varying_axes(frame)
    with rc_context(style.RC):
        fig = style.new_figure(6.8, 0.9 + 0.22 * len(frame))
        ax = fig.add_subplot()
        shown = _draw_ratios(ax, frame, failures, varying, list(published))
        file = style.save(fig, folder, f"{key}.svg")
    fixed = style.fixed(frame)
    hints = sum(style.is_exploratory(r) for _, r in frame.iterrows())
    band = equivalence_margin(frame)
    caption = (f"{title}: the time ratio of each matched pair "
               f"({style.wording.count(len(frame), 'pair')}; {fixed}) "
               "with its interval; colour: the verdict of the comparison"
               + (f"; shaded: the equivalence margin, {style.wording.sig(band[0])}× to "
                  f"{style.wording.sig(band[1])}×" if band else "") + "."
               + (" Hollow markers and dashed bars: "
                  f"{style.wording.count(hints, 'exploratory comparison')}, whose "
                  "verdict is a hint only (too few trials, or unsteady or drifting ones)."
                  if hints else "")
               + style.published_note(list(published), shown, paper))
    return style.Figure(key, title, caption, file=file, source=source)


def _draw_ratios(ax, frame, failures: dict, varying: list[str], values: list[dict]) -> list:
    """The pairs' ratios and, beside each, the published ones for its cells and setting;
    returns those."""
    from fwbench.analysis.claims import published

    labels, seen, hints, shown = [], set(), 0, []
    beside = [published.matching(values, row) for _, row in frame.iterrows()]
    low, high = style.ratio_limits(
        [v for c in ("ratio", "ratio_ci_low", "ratio_ci_high") if c in frame for v in frame[c]]
        + [b for found in beside for v in found for b in published.bounds(v)])
    band = equivalence_margin(frame)
    if band:
        style.equivalence_band(ax, *band)
    for y, (_, row) in enumerate(frame.iterrows()):
        labels.append(style.pair_label(row, varying))
        for value in beside[y]:
            _draw_published(ax, y, *published.bounds(value))
            shown.append(value)
        ratio = row.get("ratio")
        if style.missing(ratio) or float(ratio) <= 0:
            reason = failures.get(row["pair_id"], "no ratio in the statistics")
            ax.text(1.0, y, f"  not measured: {_shorten(reason)}", va="center", ha="left",
                    fontsize=6.5, color="#444444")
            continue
        kind = style.outcome(row)
        colour = style.OUTCOME_COLOURS[kind]
        hint = style.is_exploratory(row)
        lo, hi = row.get("ratio_ci_low"), row.get("ratio_ci_high")
        if not style.missing(lo) and not style.missing(hi):
            ax.plot([float(lo), float(hi)], [y, y], color=colour, linewidth=1.6,
                    linestyle=HINT_LINE if hint else "-", solid_capstyle="butt")
        ax.plot([float(ratio)], [y], "o", color=colour, markersize=4,
                markerfacecolor="white" if hint else colour)
        seen.add(kind)
        hints += hint
    ax.axvline(1.0, color="black", linewidth=0.8)
    style.ratio_axis(ax, low, high)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlabel("PyTorch time / TensorFlow time (log scale)")
    ax.grid(axis="x", which="major", color="#dddddd", linewidth=0.5)
    handles = verdict_handles([k for k in style.OUTCOME_LABELS if k in seen], hints)
    if shown:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color=style.PUBLISHED_COLOUR, marker="D", markersize=3.5,
                              markerfacecolor="white", linewidth=1, label="published"))
    if band:
        from matplotlib.patches import Patch

        handles.append(Patch(color="#009e73", alpha=0.12, label="equivalence margin"))
    if handles:
        ax.figure.legend(handles=handles, loc="outside lower center", frameon=False,
                         ncols=len(handles))
    return shown


def _draw_published(ax, y: float, low: float, high: float) -> None:
    """A published ratio under the pair's own: its range as a black bar, a hollow diamond at
    the middle (on the log scale)."""
    y = y + 0.3
    if high > low:
        ax.plot([low, high], [y, y], color=style.PUBLISHED_COLOUR, linewidth=1,
                solid_capstyle="butt")
    ax.plot([math.sqrt(low * high)], [y], "D", color=style.PUBLISHED_COLOUR, markersize=3.5,
            markerfacecolor="white")


def equivalence_margin(frame) -> tuple[float, float] | None:
    """The margin the verdicts read (the statistics' rope columns), when one holds for all."""
    bounds = {(float(lo), float(hi)) for lo, hi in zip(frame.get("rope_low", []),
                                                      frame.get("rope_high", []))
              if not style.missing(lo) and not style.missing(hi)}
    return bounds.pop() if len(bounds) == 1 else None


# An exploratory comparison is drawn hollow and dashed: a hint, not a verdict.
HINT_LINE = (0, (2, 1.2))


def verdict_handles(kinds: list[str], hints: int) -> list:
    """Legend entries: one filled marker per verdict drawn, and the hollow one for hints."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=style.OUTCOME_COLOURS[k], marker="o", markersize=4,
                      label=style.OUTCOME_LABELS[k]) for k in kinds]
    if hints:
        handles.append(Line2D([], [], color="#555555", marker="o", markersize=4,
                              markerfacecolor="white", linestyle=HINT_LINE,
                              label="hollow, dashed: exploratory (a hint)"))
    return handles


def _shorten(text: str, limit: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"



# --- speed-up heatmap ---------------------------------------------------------------------------

def speedup_heatmap(comparisons, failures: dict, folder: Path, *,
                    key="speedup_heatmap") -> style.Figure:
    """The time ratio (PyTorch / TensorFlow) per model and batch size, one panel per
    combination of the other axes, on a colour scale symmetric in log: orange where the
    statistics find PyTorch faster (below 1), blue where TensorFlow; white where undecided."""
    title = "Time ratio by model and batch size"
    frame = comparisons if comparisons is not None else pd.DataFrame()
    if frame.empty or "ratio" not in frame or "batch_size" not in frame:
        return style.Figure(key, title, "",
                            reason="Not drawn: the statistics hold no matched pair.")
    # An axis that varies only with the model (a model's input shape) names no panel.
    axes = [a for a in PANEL_AXES if a in frame and frame[a].astype(str).nunique() > 1
            and (frame.groupby("model")[a].nunique() > 1).any()]
    panels = list(frame.groupby(axes, sort=True)) if axes else [((), frame)]
    rated = [float(r) for r in frame["ratio"] if not style.missing(r) and float(r) > 0]
    if not rated:
        return style.Figure(key, title, "", reason="Not drawn: no matched pair has a ratio.")
    span = min(max(max(abs(math.log(r)) for r in rated), math.log(2)), math.log(4))
    with rc_context(style.RC):
        models = sorted(frame["model"].astype(str).unique())
        cols = min(2, len(panels))
        fig = style.new_figure(6.8,
                               (0.6 + 0.32 * len(models)) * math.ceil(len(panels) / cols) + 0.6)
        grid = fig.subplots(math.ceil(len(panels) / cols), cols, squeeze=False)
        image = None
        for ax, (values, part) in zip(grid.ravel(), panels):
            values = values if isinstance(values, tuple) else (values,)
            image = _draw_heatmap(ax, part, models, span, failures)
            ax.set_title(" ".join(str(v) for v in values), fontsize=7)
        for ax in grid.ravel()[len(panels):]:
            ax.set_visible(False)
        bar = fig.colorbar(image, ax=grid.ravel().tolist(), shrink=0.8)
        ticks = [t for t in style.RATIO_TICKS if abs(math.log(t)) <= span + 1e-9]
        bar.set_ticks([math.log(t) for t in ticks],
                      labels=[style.fmt(t, "ratio_tick") for t in ticks])
        bar.ax.minorticks_off()
        bar.set_label("PyTorch time / TensorFlow time")
        file = style.save(fig, folder, f"{key}.svg")
    fixed = style.fixed(frame, PANEL_AXES)
    hints = sum(style.is_exploratory(r) for _, r in frame.iterrows()
                if not style.missing(r.get("ratio")))
    caption = (f"{title}: the time ratio per model and batch size ({fixed}); orange where "
               "the statistics find PyTorch faster, blue where they find TensorFlow faster, "
               "white where they find the two equivalent or cannot tell. Bold: a verdict "
               "(faster or equivalent) that is not exploratory; plain: inconclusive or "
               "exploratory" + (f" ({hints} exploratory)" if hints else "")
               + "; a grey cell names why the pair has no ratio.")
    return style.Figure(key, title, caption, file=file)


def _colour_map():
    from matplotlib.colors import LinearSegmentedColormap

    return LinearSegmentedColormap.from_list(
        "fwbench_ratio", [style.FRAMEWORK_COLOURS[COMPARED[0]], "#ffffff",
                          style.FRAMEWORK_COLOURS[COMPARED[1]]])


def _draw_heatmap(ax, part: pd.DataFrame, models: list[str], span: float, failures: dict):
    batches = sorted({int(b) for b in part["batch_size"] if not style.missing(b)})
    grid = np.full((len(models), len(batches)), np.nan)
    for _, row in part.iterrows():
        if style.missing(row["batch_size"]):
            continue
        i, j = models.index(str(row["model"])), batches.index(int(row["batch_size"]))
        ratio = row.get("ratio")
        if style.missing(ratio) or float(ratio) <= 0:
            ax.text(j, i, _short(failures.get(row["pair_id"], "not measured")), ha="center",
                    va="center", fontsize=5.5, color="#444444")
            continue
        verdict = str(row.get("verdict")) if not style.is_exploratory(row) else "exploratory"
        decided = verdict in (*FASTER, "equivalent")
        # Coloured only where the statistics say which is faster: a colour reads as a winner.
        faster = verdict in FASTER
        grid[i, j] = math.log(float(ratio)) if faster else 0.0   # log PyTorch / TensorFlow
        ax.text(j, i, style.fmt(ratio, "ratio_cell"), ha="center", va="center", fontsize=6.5,
                fontweight="bold" if decided else "normal")
    masked = np.ma.masked_invalid(grid)
    image = ax.imshow(masked, cmap=_colour_map().with_extremes(bad="#dddddd"), vmin=-span,
                      vmax=span, aspect="auto")
    ax.set_xticks(range(len(batches)), [str(b) for b in batches])
    ax.set_yticks(range(len(models)), models)
    ax.set_xlabel("batch size")
    ax.spines[:].set_visible(False)
    return image


def _short(reason: str) -> str:
    reason = str(reason)
    return "OOM" if "oom" in reason.lower() or "out of memory" in reason.lower() else \
        "not measured"



# --- throughput with confidence-interval error bars ----------------------------------------

def throughput(cell_stats, folder: Path, *, key="throughput") -> style.Figure:
    """Samples per second per cell and framework, with the interval of the median."""
    title = "Throughput"
    if cell_stats is None or cell_stats.empty or "median_ns" not in cell_stats:
        return style.Figure(key, title, "", reason="Not drawn: the statistics hold no cell median.")
    keep = [not style.missing(v) and float(v) > 0 for v in cell_stats["median_ns"]]
    if "throughput_sps" in cell_stats:
        keep = [k and not style.missing(v) for k, v in zip(keep, cell_stats["throughput_sps"])]
    frame = cell_stats[keep]
    if frame.empty:
        return style.Figure(key, title, "", reason="Not drawn: no cell has a measured median time.")
    frame = style.sort_pairs(frame.assign(_fw=frame["framework"].astype(str)))
    pairs = frame.drop_duplicates("pair_id")
    varying = style.varying_axes(pairs)
    with rc_context(style.RC):
        fig = style.new_figure(6.8, 0.9 + 0.22 * len(pairs))
        ax = fig.add_subplot()
        rows = {pid: i for i, pid in enumerate(pairs["pair_id"])}
        for framework, offset in style.FRAMEWORK_OFFSETS:
            part = frame[frame["_fw"] == framework]
            if not part.empty:
                style.draw_points(ax, part, rows, framework, offset, *throughput_columns(part))
        style.log_axis(ax, "x")
        ax.set_yticks(range(len(pairs)),
                      [style.pair_label(r, varying) for _, r in pairs.iterrows()])
        ax.set_ylim(len(pairs) - 0.5, -0.5)
        ax.set_xlabel("samples per second (log scale)")
        ax.grid(axis="x", which="both", color="#eeeeee", linewidth=0.5)
        fig.legend(loc="outside lower center", frameon=False, ncols=2)
        file = style.save(fig, folder, f"{key}.svg")
    caption = ("Throughput: samples per iteration divided by the median time of one iteration, "
               "per cell, with the interval that the confidence interval of the median time "
               "gives. Log scale.")
    return style.Figure(key, title, caption, file=file)


def throughput_columns(part):
    """Samples per second and the interval the median time's gives, per row of ``part``."""
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



# --- time per sample against batch size (patel2023 Fig. 4) ---------------------------------

def time_vs_batch(cell_stats, folder: Path, *, key="inference_vs_batch", phase="infer",
                  source=None) -> style.Figure:
    """Median time per sample against batch size, one line per model and framework."""
    title = "Inference time per sample against batch size"
    frame = style.select_rows(cell_stats, {"phase": phase})
    if frame.empty or "median_ns" not in frame:
        return style.Figure(key, title, "", source=source,
                            reason=f"Not drawn: this run has no {phase} cell with a median time.")
    frame = frame[[not style.missing(v) for v in frame["median_ns"]]]
    if frame.empty or frame["batch_size"].nunique() < 2:
        return style.Figure(key, title, "", source=source,
                            reason="Not drawn: it needs at least two batch sizes of one model with "
                             f"a measured {phase} time; this run has "
                             f"{frame['batch_size'].nunique() if not frame.empty else 0}.")
    devices = sorted(frame["device"].astype(str).unique())
    with rc_context(style.RC):
        fig = style.new_figure(6.8, 2.8)
        axes = fig.subplots(1, len(devices), squeeze=False)[0]
        for ax, device in zip(axes, devices):
            _draw_per_sample(ax, frame[frame["device"].astype(str) == device], device)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right upper", frameon=False)
        file = style.save(fig, folder, f"{key}.svg")
    caption = (f"{title}: median {phase} time of one batch divided by the batch size, per model "
               "and framework, with the confidence interval of the median. Log-log scale.")
    return style.Figure(key, title, caption, file=file, source=source)


def _draw_per_sample(ax, frame, device: str) -> None:
    groups = frame.groupby(["model", "framework", "input_shape", "mode", "profile"], sort=True)
    markers = "osD^v<>"
    models = sorted(frame["model"].astype(str).unique())
    extra = [a for a in ("input_shape", "mode", "profile") if frame[a].astype(str).nunique() > 1]
    for (model, framework, shape, mode, profile), group in groups:
        group = group.sort_values("batch_size")
        batch = group["batch_size"].astype(float).to_numpy()
        per = group["median_ns"].astype(float).to_numpy() / batch / 1e6
        colour = style.FRAMEWORK_COLOURS.get(str(framework), "#444444")
        marker = markers[models.index(str(model)) % len(markers)]
        named = {"input_shape": shape, "mode": mode, "profile": profile}
        label = " ".join([style.FRAMEWORK_LABELS.get(str(framework), str(framework)), str(model),
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
    style.batch_axis(ax, frame["batch_size"])
    style.log_axis(ax, "y")
    ax.set_xlabel("batch size")
    ax.set_ylabel("time per sample (ms, log scale)")
    ax.set_title(f"device: {device}")
    ax.grid(which="both", color="#eeeeee", linewidth=0.5)
