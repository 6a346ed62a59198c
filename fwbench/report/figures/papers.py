"""The figures only the reproductions of the source papers show (Section 4): florencio2019's
box plots of per-trial values, and patel2023 Fig. 5's telemetry value against batch size. The
papers' other figures are the results' own (``speed``). Framework-free.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib import rc_context

from fwbench.analysis.summaries import median_range
from fwbench.plan.frameworks import COMPARED
from fwbench.report.figures import style

# --- box plots of per-trial times (florencio2019 Fig. 4 and 5) -----------------------------

def trial_boxplots(trials, folder: Path, *, key: str, title: str, select: dict, source=None,
                   absent: str = "", note: str = "", column: str = "median_ns",
                   label: str | None = None, published=(), paper: str | None = None,
                   ours=(), phase: str | None = None) -> style.Figure:
    """Box plots of one per-trial value, one box per framework (default: median iteration time).

    ``select`` keeps the cells; ``label`` names the y axis of any ``column`` other than a time;
    ``note`` completes the caption (what the value stands for); ``phase`` is the phase the value
    measures where it is not its trials' (a training trial's passes over the test set are
    inference). The p-values the ``paper`` ``published`` for the figure are written in it where
    the cells are in its setting, and ``ours`` beside them: the same test on this run's trials
    at the paper's unit and per trial (fwbench.analysis.claims.florencio.paired_tests).
    """
    frame = style.select_rows(trials, select)
    if not frame.empty and column in frame:
        frame = frame[(frame["status"] == "ok") & frame[column].notna()]
    if frame.empty or column not in frame:
        return style.Figure(key, title, "", source=source, reason=f"Not drawn: {absent}.")
    frame = frame if phase is None else frame.assign(phase=phase)
    values = frame[column].astype(float)
    if column.endswith("_ns"):
        values = values / 1e9
        unit, scale = ("s", 1.0) if values.max() >= 1 else ("ms", 1e3)
        label, values = f"time ({unit})", values * scale
    with rc_context(style.RC):
        fig = style.new_figure(3.3, 2.4)
        ax = fig.add_subplot()
        names = [f for f in reversed(COMPARED) if f in set(frame["framework"])]
        data = [values[frame["framework"] == f] for f in names]
        box = ax.boxplot(data, tick_labels=[style.FRAMEWORK_LABELS[f] for f in names],
                         patch_artist=True, widths=0.5, medianprops={"color": "black"})
        for patch, name in zip(box["boxes"], names):
            patch.set_facecolor(style.FRAMEWORK_COLOURS[name])
            patch.set_alpha(0.5)
        ax.set_ylabel(label or column)
        shown = published_p(ax, published, frame.iloc[0], ours)
        file = style.save(fig, folder, f"{key}.svg")
    fixed = style.fixed(frame)
    caption = (f"{title}: one value per trial (a fresh process); box plots per framework "
               f"({len(frame)} trials; {fixed}). {note}").strip()
    caption += style.published_note(list(published), shown, paper)
    if published or ours:
        caption += (" The paired Wilcoxon test on this run's trials: "
                    + ("; ".join(_test_text(t) for t in ours) or "not run") + ".")
    return style.Figure(key, title, caption, file=file, source=source, narrow=True)


def _test_text(test: dict) -> str:
    """"as published, over 100 pooled iterations, p = 4.0 × 10⁻¹⁸"."""
    return (f"{test['at']}, over {style.count(test['n'], test['unit'], test['units'])}, "
            f"p = {style.fmt(test['p'], 'p')}")


def published_p(ax, values, row, ours) -> list:
    """The published p-values for ``row``'s cells, where they are in its setting, written at
    the top of ``ax`` with ours (at the paper's unit and per trial) below; returns those
    published values written."""
    from fwbench.analysis.claims import published

    shown = published.matching(values, row)
    lines = [f"p published: {published.text(v)}" for v in shown]
    lines += [f"p this run, {t['at']} (n = {t['n']}): {style.fmt(t['p'], 'p')}" for t in ours]
    if lines:
        low, high = ax.get_ylim()
        ax.set_ylim(low, high + 0.35 * (high - low))  # room above the boxes
        ax.text(0.5, 0.98, "\n".join(lines), transform=ax.transAxes, ha="center", va="top",
                fontsize=6.5, color=style.PUBLISHED_COLOUR,
                bbox={"facecolor": "white", "edgecolor": "#999999", "linewidth": 0.5})
    return shown


# --- a per-trial telemetry value against batch size (patel2023 Fig. 5) -----------------------

def metric_vs_batch(trials, folder: Path, *, key: str, title: str, column: str, label: str,
                    select: dict, source=None, absent: str = "") -> style.Figure:
    """Median over trials of ``column`` against batch size, one line per model and framework,
    with the range of the trials as error bars."""
    frame = style.select_rows(trials, select)
    if not frame.empty and column in frame:
        frame = frame[(frame["status"] == "ok") & frame[column].notna()]
    if frame.empty or column not in frame or frame["batch_size"].nunique() < 2:
        return style.Figure(key, title, "", source=source, reason=f"Not drawn: {absent}.")
    with rc_context(style.RC):
        fig = style.new_figure(6.8, 2.6)
        ax = fig.add_subplot()
        for (model, framework), group in frame.groupby(["model", "framework"], sort=True):
            stats = median_range(group, "batch_size", column)
            batch = stats.index.astype(float)
            ax.errorbar(batch, stats["median"], yerr=[stats["median"] - stats["min"],
                                                      stats["max"] - stats["median"]],
                        color=style.FRAMEWORK_COLOURS.get(str(framework), "#444444"), marker="o",
                        markersize=3.5, capsize=2, linewidth=1,
                        label=f"{style.FRAMEWORK_LABELS.get(str(framework), framework)} {model}")
        style.batch_axis(ax, frame["batch_size"])
        ax.set_xlabel("batch size")
        ax.set_ylabel(label)
        ax.grid(which="both", color="#eeeeee", linewidth=0.5)
        fig.legend(loc="outside right upper", frameon=False)
        file = style.save(fig, folder, f"{key}.svg")
    fixed = style.fixed(frame, leave=("model", "framework"))
    caption = (f"{title}: median over trials of each trial's {label}, per model and framework; "
               f"bars: range over the trials ({fixed}).")
    return style.Figure(key, title, caption, file=file, source=source)
