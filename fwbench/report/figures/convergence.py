"""The figures of the real-data experiments (accuracy and convergence; tian2020's
reproduction): epoch times, validation accuracy per epoch, and each framework's confusion
matrix. Framework-free.
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib import rc_context

from fwbench.analysis.claims import published as paper_values
from fwbench.analysis.columns import TRAINING_AXES
from fwbench.analysis.summaries import median_range
from fwbench.plan.frameworks import COMPARED
from fwbench.report.figures import style

# Axes that tell training results apart: a pair's, but the phase (always train).
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
    finite = [float(v) for v in values_ns if not style.missing(v)]
    return ("s", 1e9) if finite and max(finite) >= 1e9 else ("ms", 1e6)


def epoch_times(summary, folder: Path, *, key: str, title: str, source=None, absent: str = "",
                note: str = "", published=(), paper: str | None = None) -> style.Figure:
    """tian2020's time bars: one panel per ``measure``, per cell each framework's median over
    trials, with the interval of that median as error bars.

    ``summary``: one row per cell, framework and measure, with ``median``, ``low`` and
    ``high`` in nanoseconds; its row order is the order of the bars. ``note`` ends the caption.
    What the ``paper`` ``published`` for a cell is drawn beside it, black: a time ratio as text
    above the cell's bars with ours (PyTorch / TensorFlow of the medians), a time as a hollow
    diamond at its framework's bar.
    """
    if summary is None or summary.empty:
        return style.Figure(key, title, "", source=source, reason=f"Not drawn: {absent}.")
    axes = [a for a in TRAINING_AXES if a in summary]
    varying = _training_varying(summary)
    cells = summary.drop_duplicates(axes)
    position = {tuple(map(str, r[axes])): i for i, (_, r) in enumerate(cells.iterrows())}
    measures = list(dict.fromkeys(summary["measure"]))
    seen, shown = set(), []
    with rc_context(style.RC):
        cols = 2 if len(measures) > 3 else len(measures)
        rows = math.ceil(len(measures) / cols)
        fig = style.new_figure(6.8, 0.4 + 2.2 * rows)
        panels = fig.subplots(rows, cols, squeeze=False).ravel()
        for ax, measure in zip(panels, measures):
            part = summary[summary["measure"] == measure]
            beside = [paper_values.matching(_times(published), row)
                      for _, row in part.iterrows()]
            unit, scale = _time_unit(part["high"].tolist() + part["median"].tolist()
                                     + [paper_values.bounds(v)[1] for b in beside for v in b])
            for (_, row), values in zip(part.iterrows(), beside):
                offset = -0.2 if row["framework"] == COMPARED[0] else 0.2
                x = position[tuple(map(str, row[axes]))] + offset
                for value in values:
                    ax.plot([x], [paper_values.bounds(value)[0] / scale], "D", markersize=4,
                            color=style.PUBLISHED_COLOUR, markerfacecolor="white", zorder=3)
                    shown.append(value)
                if style.missing(row["median"]):
                    ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=6,
                            color="#666666")
                    continue
                framework = str(row["framework"])
                median = float(row["median"]) / scale
                low, high = (float(row[c]) / scale if not style.missing(row[c]) else median
                             for c in ("low", "high"))
                ax.bar(x, median, width=0.4, color=style.FRAMEWORK_COLOURS[framework],
                       yerr=[[median - low], [high - median]], capsize=2,
                       error_kw={"linewidth": 0.8},
                       label=None if framework in seen else style.FRAMEWORK_LABELS[framework])
                seen.add(framework)
            shown += _published_ratios(ax, part, axes, position, published)
            ax.set_xticks(range(len(position)),
                          [_training_label(r, varying) for _, r in cells.iterrows()],
                          rotation=30 if len(position) > 2 else 0,
                          ha="right" if len(position) > 2 else "center")
            ax.set_ylabel(f"time ({unit})")
            ax.set_title(measure, fontsize=7)
            ax.grid(axis="y", color="#eeeeee", linewidth=0.5)
            ax.set_axisbelow(True)
        for ax in panels[len(measures):]:
            ax.set_visible(False)
        legend = {label: handle for ax in panels
                  for handle, label in zip(*ax.get_legend_handles_labels())}
        if any(v["quantity"] == "duration" for v in shown):
            from matplotlib.lines import Line2D

            legend["published"] = Line2D([], [], color=style.PUBLISHED_COLOUR, marker="D",
                                         markerfacecolor="white", linewidth=0, markersize=4)
        fig.legend(legend.values(), legend.keys(), loc="outside lower center", frameon=False,
                   ncols=len(legend))
        file = style.save(fig, folder, f"{key}.svg")
    fixed = style.fixed(cells, TRAINING_AXES)
    caption = (f"{title}: per cell, the median over trials of each framework's "
               + "; ".join(measures) + f" ({fixed}). Error bars: the distribution-free interval "
               "of the median (order statistics; the range of the trials when there are too "
               f"few for 95 %). n/a: not measured. {note}").strip()
    if any(v["quantity"] == "ratio" for v in shown):
        caption += (" Above a cell's bars: this run's PyTorch / TensorFlow ratio of the medians "
                    "and the ratio the paper states.")
    caption += style.published_note(list(published), shown, paper)
    return style.Figure(key, title, caption, file=file, source=source)


def _times(values) -> list[dict]:
    """The published values a time bar stands beside: times, not ratios."""
    return [v for v in values if v["quantity"] == "duration"]


def _published_ratios(ax, part, axes: list[str], position: dict, values) -> list:
    """Above each cell's bars in ``ax``: the time ratio the paper states for it, under this
    run's (PyTorch / TensorFlow of the medians); returns the values written."""
    ratios = [v for v in values if v["quantity"] == "ratio"]
    cells = [(group, paper_values.matching(ratios, group.iloc[0]))
             for _, group in part.groupby(axes, sort=False, dropna=False)]
    written = []
    for group, stated in cells:
        if not stated:
            continue
        if not written:
            low, high = ax.get_ylim()
            ax.set_ylim(low, high + 0.45 * (high - low))  # room above the bars
        medians = dict(zip(group["framework"].astype(str), group["median"]))
        pt, tf = (medians.get(f) for f in COMPARED)
        ours = ("n/a" if style.missing(pt) or style.missing(tf) or not tf
                else style.fmt(float(pt) / float(tf), "ratio"))
        lines = [f"ours {ours}", *(f"published {paper_values.text(v)}" for v in stated)]
        x = position[tuple(map(str, group.iloc[0][axes]))]
        ax.text(x, 0.98, "\n".join(lines), transform=ax.get_xaxis_transform(), ha="center",
                va="top", fontsize=5.5, color=style.PUBLISHED_COLOUR,
                bbox={"facecolor": "white", "edgecolor": "#999999", "linewidth": 0.5})
        written += stated
    return written


def accuracy_curves(epochs, folder: Path, *, key: str, title: str, source=None,
                    absent: str = "", published=(), paper: str | None = None) -> style.Figure:
    """Validation accuracy against epoch: one panel per cell pair, one line per framework and
    optimizer, the median over trials with the trials' range as a band; an accuracy the
    ``paper`` ``published`` for a line's cell drawn beside it, black and dotted."""
    from matplotlib.ticker import MaxNLocator

    if epochs is None or epochs.empty:
        return style.Figure(key, title, "", source=source, reason=f"Not drawn: {absent}.")
    panel_axes = [a for a in TRAINING_AXES if a in epochs and a != "optimizer"]
    panels_frame = epochs.drop_duplicates(panel_axes).sort_values(panel_axes, kind="stable")
    varying = [a for a in _training_varying(panels_frame) if a != "optimizer"]
    optimizers = sorted(epochs["optimizer"].dropna().astype(str).unique())
    shown = list(panels_frame.iterrows())[:style.MAX_PANELS]
    drawn = []
    with rc_context(style.RC):
        cols = min(len(shown), 2)
        rows = math.ceil(len(shown) / cols)
        fig = style.new_figure(6.8, 2.3 * rows)
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
        for ax, (_, first) in zip(axes, shown):
            part = epochs[(epochs[panel_axes].astype(str) == first[panel_axes].astype(str))
                          .all(axis=1)]
            for (framework, optimizer), line in part.groupby(
                    ["framework", part["optimizer"].fillna("").astype(str)], sort=True):
                stats = median_range(line, "epoch", "val_accuracy")
                colour = style.FRAMEWORK_COLOURS.get(str(framework), "#444444")
                linestyle = (OPTIMIZER_STYLES[optimizers.index(optimizer) % len(OPTIMIZER_STYLES)]
                             if optimizer in optimizers else "-")
                label = " ".join([style.FRAMEWORK_LABELS.get(str(framework), str(framework)),
                                  optimizer]).strip()
                ax.fill_between(stats.index, 100 * stats["min"], 100 * stats["max"],
                                color=colour, alpha=0.2, linewidth=0)
                ax.plot(stats.index, 100 * stats["median"], color=colour, linestyle=linestyle,
                        marker="o" if len(stats) <= 12 else None, markersize=2.5,
                        linewidth=1, label=label)
                line_cell = {**first.to_dict(), "framework": framework, "optimizer": optimizer}
                drawn += _published_accuracy(ax, published, line_cell, label)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel("epoch")
            ax.set_ylabel("validation accuracy (%)")
            ax.set_title(_training_label(first, varying), fontsize=8)
            ax.grid(color="#eeeeee", linewidth=0.5)
            ax.legend(frameon=False, fontsize=6)
        for ax in axes[len(shown):]:
            ax.set_visible(False)
        file = style.save(fig, folder, f"{key}.svg")
    more = (f" The first {len(shown)} of {len(panels_frame)} cells are drawn."
            if len(panels_frame) > len(shown) else "")
    fixed = style.fixed(panels_frame)
    caption = (f"{title}: accuracy on the test set after each training epoch, per cell; lines: "
               "the median over trials per framework and optimizer, bands: the range of the "
               f"trials ({fixed}).{more}" + style.published_note(list(published), drawn, paper))
    return style.Figure(key, title, caption, file=file, source=source)


def _published_accuracy(ax, values, cell: dict, label: str) -> list:
    """The published accuracies of ``cell`` (a line's) as black dotted levels, named."""
    shown = paper_values.matching(values, cell)
    for value in shown:
        level = 100 * paper_values.bounds(value)[0]
        ax.axhline(level, color=style.PUBLISHED_COLOUR, linestyle=":", linewidth=0.9)
        ax.annotate(f"published, {label}: {paper_values.text(value)}", (0.02, level),
                    xycoords=("axes fraction", "data"), xytext=(0, 2),
                    textcoords="offset points", fontsize=6, color=style.PUBLISHED_COLOUR)
    return shown


def confusion_matrices(confusion, folder: Path, *, key: str, title: str, which: str,
                       source=None, absent: str = "") -> style.Figure:
    """Each framework's confusion matrix for one cell, summed over its trials and divided by
    each true class's count, shaded with the share printed in each cell."""
    if confusion is None or confusion.empty:
        return style.Figure(key, title, "", source=source, reason=f"Not drawn: {absent}.")
    frameworks = [f for f in COMPARED if f in set(confusion["framework"])]
    with rc_context(style.RC):
        fig = style.new_figure(6.8, 3.6)
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
                    ax.text(j + 0.5, i + 0.5, style.fmt(value, "share", unit=False),
                            ha="center", va="center", fontsize=4.5,
                            color="white" if value > 0.6 else "black")
            ticks = [k + 0.5 for k in range(len(labels))]
            ax.set_xticks(ticks, labels, rotation=90)
            ax.set_yticks(ticks, labels)
            ax.invert_yaxis()
            ax.set_aspect("equal")
            ax.set_xlabel("predicted class")
            ax.set_ylabel("true class")
            matrix = counts.to_numpy(dtype=float)
            correct = matrix.trace() / max(matrix.sum(), 1)
            ax.set_title(f"{style.FRAMEWORK_LABELS.get(framework, framework)}: "
                         f"{style.wording.count(part['trial'].nunique(), 'trial')}, "
                         f"{style.fmt(correct, 'accuracy')} correct",
                         fontsize=8)
        fig.colorbar(mesh, ax=list(panels), shrink=0.7, label="share of the true class")
        file = style.save(fig, folder, f"{key}.svg")
    caption = (f"{title}: {which}. Rows: the true class; columns: the predicted class; each "
               "framework's counts summed over its trials and divided by the true class's "
               "count (numbers: per cent of that class).")
    return style.Figure(key, title, caption, file=file, source=source)
