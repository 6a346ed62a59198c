"""The report's figures of what a framework costs its user: peak memory against batch size, the
distribution of single-iteration latency (ECDF per pair), and PyTorch's speed-up over
TensorFlow as a heatmap of model against batch size. Framework-free; same conventions as
``fwbench.report.figures`` (deterministic SVG, one colour per framework, a sentence when left out).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import rc_context

from fwbench.analysis.memory import METRICS
from fwbench.report.figures import (
    FRAMEWORK_COLOURS,
    FRAMEWORK_LABELS,
    RC,
    Figure,
    _new,
    _save,
    constant_axes,
    is_exploratory,
    missing,
    pair_label,
    varying_axes,
)

MARKERS = "osD^v<>P"
MIB = 2**20
# Pairs drawn in the latency figure; more would make panels too small to read.
MAX_ECDF_PANELS = 12
# Axes besides model and batch size that split the heatmap into panels.
PANEL_AXES = ["experiment", "device", "phase", "input_shape", "precision", "mode", "profile",
              "optimizer"]


# --- memory against batch size ----------------------------------------------------------------

def memory_vs_batch(memory, folder: Path, *, key="memory_vs_batch", absent: str = "") -> Figure:
    """Median peak memory per cell against batch size, one line per model and framework, with
    the interval of the median; a cell that ran out of memory is marked where it would be.
    ``absent`` says why when there is nothing to draw."""
    title = "Peak memory against batch size"
    if memory is None or memory.empty or "median_bytes" not in memory:
        why = absent or "the statistics hold no peak memory (stats/memory.csv)"
        return Figure(key, title, "", reason=f"Not drawn: {why}.")
    panels = [(m, p) for m in METRICS for p in ("train", "infer")
              if len(memory[(memory["metric"] == m) & (memory["phase"].astype(str) == p)])]
    with rc_context(RC):
        fig = _new(6.8, 2.5 * math.ceil(len(panels) / 2))
        axes = fig.subplots(math.ceil(len(panels) / 2), min(2, len(panels)), squeeze=False)
        for ax, (metric, phase) in zip(axes.ravel(), panels):
            part = memory[(memory["metric"] == metric) & (memory["phase"].astype(str) == phase)]
            _draw_memory(ax, part, f"{METRICS[metric]}, {phase}")
        for ax in axes.ravel()[len(panels):]:
            ax.set_visible(False)
        _shared_legend(fig, axes.ravel()[:len(panels)])
        file = _save(fig, folder, f"{key}.svg")
    oom = memory[pd.to_numeric(memory["n_oom"], errors="coerce").fillna(0) > 0]
    fixed = ", ".join(f"{k} {v}" for k, v in constant_axes(memory).items()
                      if k not in ("phase", "model"))
    caption = (f"{title}: median over ok trials of each cell's peak ({fixed}), with the "
               "interval of the median. Process peak RSS includes each framework's own "
               "libraries, hundreds of MB before any model; the device peak is the framework "
               "allocator's on a GPU. ")
    caption += (f"Crosses at the top: {len(oom.drop_duplicates('cell_id'))} cell(s) ran out of "
                "memory in some trial." if len(oom) else "No cell ran out of memory.")
    return Figure(key, title, caption, file=file)


def _series(frame: pd.DataFrame) -> list[str]:
    """Axes besides model and framework that tell lines apart (not one that follows the model,
    as its input shape does)."""
    return [a for a in ("input_shape", "precision", "mode", "profile", "device")
            if a in frame and frame[a].astype(str).nunique() > 1
            and (frame.groupby("model")[a].nunique() > 1).any()]


def _draw_memory(ax, part: pd.DataFrame, title: str) -> None:
    models = sorted(part["model"].astype(str).unique())
    extra = _series(part)
    measured = part[[not missing(v) for v in part["median_bytes"]]]
    for key, group in measured.groupby(["model", "framework", *extra], sort=True):
        model, framework = str(key[0]), str(key[1])
        group = group.sort_values("batch_size")
        batch = group["batch_size"].astype(float).to_numpy()
        value, low, high = (group[c].astype(float).to_numpy() / MIB
                            for c in ("median_bytes", "ci_low_bytes", "ci_high_bytes"))
        label = " ".join([FRAMEWORK_LABELS.get(framework, framework), model,
                          *(str(v) for v in key[2:])])
        ax.errorbar(batch, value, yerr=[np.maximum(value - low, 0), np.maximum(high - value, 0)],
                    color=FRAMEWORK_COLOURS.get(framework, "#444444"),
                    marker=MARKERS[models.index(model) % len(MARKERS)], markersize=3.5,
                    linewidth=1, capsize=2, label=label)
    oom = part[pd.to_numeric(part["n_oom"], errors="coerce").fillna(0) > 0]
    if len(oom):
        top = ax.get_ylim()[1] if len(measured) else 1.0
        for _, row in oom.iterrows():
            ax.plot([float(row["batch_size"])], [top], "x", markersize=6, clip_on=False,
                    color=FRAMEWORK_COLOURS.get(str(row["framework"]), "#444444"))
        ax.plot([], [], "x", color="#444444", label="out of memory")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel("peak memory (MiB)")
    ax.set_title(title)
    ax.grid(which="both", color="#eeeeee", linewidth=0.5)


def _shared_legend(fig, axes) -> None:
    """One legend under the panels, each series once."""
    seen = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", frameon=False,
                   ncols=min(4, len(seen)))


# --- latency distribution -----------------------------------------------------------------------

def latency_ecdf(iterations, trials, folder: Path, *, key="latency_ecdf",
                 absent: str = "") -> Figure:
    """The empirical distribution of single-iteration times per matched pair (inference pairs
    where the run has them): each framework's pooled ok trials as a step line, each of its
    trials faint behind it, p50/p90/p99 ticked."""
    title = "Latency distribution"
    frame = _kept(iterations, trials)
    if frame.empty:
        why = absent or "no ok trial kept its iterations (tables/iterations.parquet)"
        return Figure(key, title, "", reason=f"Not drawn: {why}.")
    phase = "infer" if (frame["phase"].astype(str) == "infer").any() else \
        str(frame["phase"].iloc[0])
    frame = frame[frame["phase"].astype(str) == phase]
    pairs = (frame.drop_duplicates("pair_id")
             .sort_values([a for a in ("model", "batch_size", "pair_id") if a in frame]))
    shown = pairs.head(MAX_ECDF_PANELS)
    varying = varying_axes(pairs)
    cols = min(3, len(shown))
    rows = math.ceil(len(shown) / cols)
    with rc_context(RC):
        fig = _new(6.8, 1.7 * rows + 0.5)
        axes = fig.subplots(rows, cols, squeeze=False)
        for ax, (_, pair) in zip(axes.ravel(), shown.iterrows()):
            _draw_ecdf(ax, frame[frame["pair_id"] == pair["pair_id"]])
            ax.set_title(pair_label(pair, varying), fontsize=7)
        for ax in axes.ravel()[len(shown):]:
            ax.set_visible(False)
        handles = [_line(FRAMEWORK_COLOURS[f], FRAMEWORK_LABELS[f]) for f in FRAMEWORK_COLOURS]
        fig.legend(handles=handles, loc="outside lower center", frameon=False, ncols=2)
        file = _save(fig, folder, f"{key}.svg")
    more = (f" The first {len(shown)} of {len(pairs)} pairs are drawn; stats/latency.csv has "
            "every cell." if len(pairs) > len(shown) else "")
    caption = (f"{title} ({phase}): the share of single iterations (one batch each) finished "
               "within a time, per matched pair; thick: the pooled ok trials of each framework, "
               "faint: each trial alone; ticks at p50, p90 and p99. Log time scale." + more)
    return Figure(key, title, caption, file=file)


def _kept(iterations, trials) -> pd.DataFrame:
    """The iterations of ok trials with their pair's axes."""
    if iterations is None or iterations.empty or trials is None or trials.empty:
        return pd.DataFrame()
    ok = trials[trials["status"] == "ok"][["run", "cell_id", "trial"]]
    return iterations.merge(ok, on=["run", "cell_id", "trial"])


def _line(colour: str, label: str):
    from matplotlib.lines import Line2D

    return Line2D([], [], color=colour, linewidth=1.4, label=label)


def _draw_ecdf(ax, pair: pd.DataFrame) -> None:
    for framework, colour in FRAMEWORK_COLOURS.items():
        part = pair[pair["framework"] == framework]
        if part.empty:
            continue
        for _, trial in part.groupby("trial"):
            values = np.sort(trial["time_ns"].to_numpy(dtype=float)) / 1e6
            ax.step(values, np.arange(1, values.size + 1) / values.size, where="post",
                    color=colour, linewidth=0.5, alpha=0.35)
        values = np.sort(part["time_ns"].to_numpy(dtype=float)) / 1e6
        ax.step(values, np.arange(1, values.size + 1) / values.size, where="post",
                color=colour, linewidth=1.4)
        ticks = np.percentile(values, [50, 90, 99], method="inverted_cdf")
        ax.plot(ticks, [0.5, 0.9, 0.99], "|", color=colour, markersize=6)
    ax.set_xscale("log")
    _few_log_ticks(ax, pair["time_ns"].to_numpy(dtype=float) / 1e6)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("time per iteration (ms)", fontsize=6)
    ax.grid(which="both", color="#eeeeee", linewidth=0.5)


def _few_log_ticks(ax, values: np.ndarray) -> None:
    """Three plain-number ticks across the data: a panel often spans less than a decade,
    where matplotlib's log labels pile up."""
    from matplotlib.ticker import NullLocator

    low, high = float(values.min()), float(values.max())
    ticks = np.geomspace(low, high, 3) if high > low else np.array([low])
    ax.set_xticks(ticks, [f"{t:.3g}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


# --- speed-up heatmap ---------------------------------------------------------------------------

def speedup_heatmap(comparisons, failures: dict, folder: Path, *, key="speedup_heatmap") -> Figure:
    """PyTorch's speed-up over TensorFlow (TensorFlow's median time / PyTorch's) per model and
    batch size, one panel per combination of the other axes, on a colour scale symmetric in
    log: orange where PyTorch is faster, blue where TensorFlow is."""
    title = "PyTorch's speed-up over TensorFlow"
    frame = comparisons if comparisons is not None else pd.DataFrame()
    if frame.empty or "ratio" not in frame or "batch_size" not in frame:
        return Figure(key, title, "", reason="Not drawn: the statistics hold no matched pair.")
    # An axis that varies only with the model (a model's input shape) names no panel.
    axes = [a for a in PANEL_AXES if a in frame and frame[a].astype(str).nunique() > 1
            and (frame.groupby("model")[a].nunique() > 1).any()]
    panels = list(frame.groupby(axes, sort=True)) if axes else [((), frame)]
    rated = [float(r) for r in frame["ratio"] if not missing(r) and float(r) > 0]
    if not rated:
        return Figure(key, title, "", reason="Not drawn: no matched pair has a ratio.")
    span = min(max(max(abs(math.log(r)) for r in rated), math.log(1.25)), math.log(4))
    with rc_context(RC):
        models = sorted(frame["model"].astype(str).unique())
        cols = min(2, len(panels))
        fig = _new(6.8, (0.6 + 0.32 * len(models)) * math.ceil(len(panels) / cols) + 0.6)
        grid = fig.subplots(math.ceil(len(panels) / cols), cols, squeeze=False)
        image = None
        for ax, (values, part) in zip(grid.ravel(), panels):
            values = values if isinstance(values, tuple) else (values,)
            image = _draw_heatmap(ax, part, models, span, failures)
            ax.set_title(" ".join(str(v) for v in values), fontsize=7)
        for ax in grid.ravel()[len(panels):]:
            ax.set_visible(False)
        bar = fig.colorbar(image, ax=grid.ravel().tolist(), shrink=0.8)
        ticks = [t for t in (0.25, 0.5, 0.8, 1.0, 1.25, 2.0, 4.0) if abs(math.log(t)) <= span]
        bar.set_ticks([math.log(t) for t in ticks], labels=[f"{t:g}×" for t in ticks])
        bar.set_label("TensorFlow time / PyTorch time")
        file = _save(fig, folder, f"{key}.svg")
    fixed = ", ".join(f"{k} {v}" for k, v in constant_axes(frame, PANEL_AXES).items())
    hints = sum(is_exploratory(r) for _, r in frame.iterrows() if not missing(r.get("ratio")))
    caption = (f"{title}: TensorFlow's median time divided by PyTorch's per model and batch "
               f"size ({fixed}); above 1 (orange) PyTorch is faster, below 1 (blue) "
               "TensorFlow is. Bold: a verdict of the statistics (faster or equivalent) that is "
               "not exploratory; plain: inconclusive or exploratory"
               + (f" ({hints} exploratory)" if hints else "")
               + "; a grey cell names why the pair has no ratio.")
    return Figure(key, title, caption, file=file)


def _colour_map():
    from matplotlib.colors import LinearSegmentedColormap

    return LinearSegmentedColormap.from_list(
        "fwbench_speedup", [FRAMEWORK_COLOURS["tensorflow"], "#ffffff",
                            FRAMEWORK_COLOURS["pytorch"]])


def _draw_heatmap(ax, part: pd.DataFrame, models: list[str], span: float, failures: dict):
    batches = sorted({int(b) for b in part["batch_size"] if not missing(b)})
    grid = np.full((len(models), len(batches)), np.nan)
    for _, row in part.iterrows():
        if missing(row["batch_size"]):
            continue
        i, j = models.index(str(row["model"])), batches.index(int(row["batch_size"]))
        ratio = row.get("ratio")
        if missing(ratio) or float(ratio) <= 0:
            ax.text(j, i, _short(failures.get(row["pair_id"], "not measured")), ha="center",
                    va="center", fontsize=5.5, color="#444444")
            continue
        grid[i, j] = -math.log(float(ratio))   # log of TensorFlow / PyTorch
        decided = (str(row.get("verdict")) in ("pytorch_faster", "tensorflow_faster",
                                               "equivalent") and not is_exploratory(row))
        ax.text(j, i, f"{1 / float(ratio):.2f}", ha="center", va="center", fontsize=6.5,
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
