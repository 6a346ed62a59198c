"""The figures of what a framework costs its user (the report's memory and latency sections):
peak memory against batch size, and the distribution of single-iteration latency (an ECDF per
matched pair). Framework-free.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import rc_context

from fwbench.analysis.memory import METRICS
from fwbench.report.figures import style

MARKERS = "osD^v<>P"
MIB = 2**20
# Pairs drawn in the latency figure; more would make panels too small to read.
MAX_ECDF_PANELS = 12


# --- memory against batch size ----------------------------------------------------------------

def memory_vs_batch(memory, folder: Path, *, key="memory_vs_batch",
                    absent: str = "") -> style.Figure:
    """Median peak memory per cell against batch size, one line per model and framework, with
    the interval of the median; a cell that ran out of memory is marked where it would be.
    ``absent`` says why when there is nothing to draw."""
    title = "Peak memory against batch size"
    if memory is None or memory.empty or "median_bytes" not in memory:
        why = absent or "the statistics hold no peak memory (stats/memory.csv)"
        return style.Figure(key, title, "", reason=f"Not drawn: {why}.")
    panels = [(m, p) for m in METRICS for p in ("train", "infer")
              if len(memory[(memory["metric"] == m) & (memory["phase"].astype(str) == p)])]
    with rc_context(style.RC):
        fig = style.new_figure(6.8, 2.5 * math.ceil(len(panels) / 2))
        axes = fig.subplots(math.ceil(len(panels) / 2), min(2, len(panels)), squeeze=False)
        for ax, (metric, phase) in zip(axes.ravel(), panels):
            part = memory[(memory["metric"] == metric) & (memory["phase"].astype(str) == phase)]
            _draw_memory(ax, part, f"{METRICS[metric]}, {phase}")
        for ax in axes.ravel()[len(panels):]:
            ax.set_visible(False)
        _shared_legend(fig, axes.ravel()[:len(panels)])
        file = style.save(fig, folder, f"{key}.svg")
    oom = memory[pd.to_numeric(memory["n_oom"], errors="coerce").fillna(0) > 0]
    fixed = style.fixed(memory, leave=("phase", "model"))
    caption = (f"{title}: median over ok trials of each cell's peak ({fixed}), with the "
               "interval of the median. Process peak RSS includes each framework's own "
               "libraries, hundreds of MB before any model; the device peak is the framework "
               "allocator's on a GPU. ")
    crossed = style.wording.count(len(oom.drop_duplicates("cell_id")), "cell")
    caption += (f"Crosses at the top: {crossed} ran out of "
                "memory in some trial." if len(oom) else "No cell ran out of memory.")
    return style.Figure(key, title, caption, file=file)


def _series(frame: pd.DataFrame) -> list[str]:
    """Axes besides model and framework that tell lines apart (not one that follows the model,
    as its input shape does)."""
    return [a for a in ("input_shape", "precision", "mode", "profile", "device")
            if a in frame and frame[a].astype(str).nunique() > 1
            and (frame.groupby("model")[a].nunique() > 1).any()]


def _draw_memory(ax, part: pd.DataFrame, title: str) -> None:
    models = sorted(part["model"].astype(str).unique())
    extra = _series(part)
    measured = part[[not style.missing(v) for v in part["median_bytes"]]]
    for key, group in measured.groupby(["model", "framework", *extra], sort=True):
        model, framework = str(key[0]), str(key[1])
        group = group.sort_values("batch_size")
        batch = group["batch_size"].astype(float).to_numpy()
        value, low, high = (group[c].astype(float).to_numpy() / MIB
                            for c in ("median_bytes", "ci_low_bytes", "ci_high_bytes"))
        label = " ".join([style.FRAMEWORK_LABELS.get(framework, framework), model,
                          *(str(v) for v in key[2:])])
        ax.errorbar(batch, value, yerr=[np.maximum(value - low, 0), np.maximum(high - value, 0)],
                    color=style.FRAMEWORK_COLOURS.get(framework, "#444444"),
                    marker=MARKERS[models.index(model) % len(MARKERS)], markersize=3.5,
                    linewidth=1, capsize=2, label=label)
    oom = part[pd.to_numeric(part["n_oom"], errors="coerce").fillna(0) > 0]
    if len(oom):
        top = ax.get_ylim()[1] if len(measured) else 1.0
        for _, row in oom.iterrows():
            ax.plot([float(row["batch_size"])], [top], "x", markersize=6, clip_on=False,
                    color=style.FRAMEWORK_COLOURS.get(str(row["framework"]), "#444444"))
        ax.plot([], [], "x", color="#444444", label="out of memory")
    style.batch_axis(ax, part["batch_size"])
    ax.set_ylim(bottom=0)  # from zero: a cut axis would make a few MiB look large
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
                 absent: str = "") -> style.Figure:
    """The empirical distribution of single-iteration times per matched pair (inference pairs
    where the run has them): each framework's pooled ok trials as a step line, each of its
    trials faint behind it, p50/p90/p99 ticked."""
    title = "Latency distribution"
    frame = _kept(iterations, trials)
    if frame.empty:
        why = absent or "no ok trial kept its iterations (tables/iterations.parquet)"
        return style.Figure(key, title, "", reason=f"Not drawn: {why}.")
    phase = "infer" if (frame["phase"].astype(str) == "infer").any() else \
        str(frame["phase"].iloc[0])
    frame = frame[frame["phase"].astype(str) == phase]
    pairs = (frame.drop_duplicates("pair_id")
             .sort_values([a for a in ("model", "batch_size", "pair_id") if a in frame]))
    shown = pairs.head(MAX_ECDF_PANELS)
    varying = style.varying_axes(pairs)
    cols = min(3, len(shown))
    rows = math.ceil(len(shown) / cols)
    with rc_context(style.RC):
        fig = style.new_figure(6.8, 1.7 * rows + 0.5)
        axes = fig.subplots(rows, cols, squeeze=False)
        for ax, (_, pair) in zip(axes.ravel(), shown.iterrows()):
            _draw_ecdf(ax, frame[frame["pair_id"] == pair["pair_id"]])
            ax.set_title(style.pair_label(pair, varying), fontsize=7)
        for ax in axes.ravel()[len(shown):]:
            ax.set_visible(False)
        drawn = set(frame["framework"].astype(str))   # a one-framework run names one
        handles = [_line(style.FRAMEWORK_COLOURS[f], style.FRAMEWORK_LABELS[f])
                   for f in style.FRAMEWORK_COLOURS if f in drawn]
        fig.legend(handles=handles, loc="outside lower center", frameon=False, ncols=2)
        file = style.save(fig, folder, f"{key}.svg")
    more = (f" The first {len(shown)} of {len(pairs)} pairs are drawn; the latency table has "
            "every cell." if len(pairs) > len(shown) else "")
    caption = (f"{title} ({phase}): the share of single iterations (one batch each) finished "
               "within a time, per matched pair; thick: the pooled ok trials of each framework, "
               "faint: each trial alone; ticks at p50, p90 and p99. Log time scale." + more)
    return style.Figure(key, title, caption, file=file)


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
    """One pair's ECDFs, in ms, or in s where its slowest iteration takes a second or more (a
    tick reads "2 s", never "2k ms")."""
    unit, scale = ("s", 1e9) if pair["time_ns"].max() >= 1e9 else ("ms", 1e6)
    for framework, colour in style.FRAMEWORK_COLOURS.items():
        part = pair[pair["framework"] == framework]
        if part.empty:
            continue
        for _, trial in part.groupby("trial"):
            values = np.sort(trial["time_ns"].to_numpy(dtype=float)) / scale
            ax.step(values, np.arange(1, values.size + 1) / values.size, where="post",
                    color=colour, linewidth=0.5, alpha=0.35)
        values = np.sort(part["time_ns"].to_numpy(dtype=float)) / scale
        ax.step(values, np.arange(1, values.size + 1) / values.size, where="post",
                color=colour, linewidth=1.4)
        ticks = np.percentile(values, [50, 90, 99], method="inverted_cdf")
        ax.plot(ticks, [0.5, 0.9, 0.99], "|", color=colour, markersize=6)
    style.log_axis(ax, "x")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"time per iteration ({unit})", fontsize=6)
    ax.grid(which="both", color="#eeeeee", linewidth=0.5)
