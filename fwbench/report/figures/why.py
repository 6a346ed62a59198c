"""The figures of why the frameworks differ: the ablation's waterfall (what each factor
contributes to the gap) and where the time of a step goes, from each framework's profiler.
Framework-free.
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib import rc_context

from fwbench.analysis.ablation import GROUP
from fwbench.plan.frameworks import COMPARED
from fwbench.report.figures import style

CATEGORY_COLOURS = {"convolution": "#0072b2", "matmul": "#56b4e9", "normalization": "#009e73",
                    "elementwise": "#f0e442", "memory": "#e69f00", "fused": "#cc79a7",
                    "other": "#bbbbbb", "host_overhead": "#333333"}


def _group_title(row) -> str:
    return (f"{row['model']} {row['phase']} b{row['batch_size']} {row['input_shape']} "
            f"{row['device']}")


def waterfall(decomposition, folder: Path, *, key="ablation_waterfall") -> style.Figure:
    """Per ablation group, the PyTorch/TensorFlow ratio at defaults, each factor's step towards
    matched settings, and the residual, as a waterfall on a log scale with bootstrap intervals.
    """
    title = "What each factor contributes to the gap"
    if decomposition is None or decomposition.empty or "row" not in decomposition:
        return style.Figure(key, title, "", reason="Not drawn: this run has no ablation (config "
                                                   "key `ablation`), so no decomposition was "
                                                   "computed.")
    frame = decomposition[decomposition["contribution"].notna()
                          | (decomposition["row"] == "factor")]
    groups = [g for _, g in frame.groupby(GROUP, sort=True)
              if (g["row"] == "total").any()]
    if not groups:
        return style.Figure(key, title, "", reason="Not drawn: no ablation group has a measured "
                                                   "gap at defaults.")
    shown = groups[:style.MAX_PANELS]
    with rc_context(style.RC):
        cols = min(len(shown), 2)
        rows = math.ceil(len(shown) / cols)
        fig = style.new_figure(6.8, 2.5 * rows)
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
        for ax, group in zip(axes, shown):
            _draw_waterfall(ax, group.sort_values("step", kind="stable"))
        for ax in axes[len(shown):]:
            ax.set_visible(False)
        file = style.save(fig, folder, f"{key}.svg")
    more = (f" The first {style.MAX_PANELS} of {len(groups)} groups are drawn; the table has all."
            if len(groups) > len(shown) else "")
    caption = (f"{title}: PyTorch's median time over TensorFlow's (log scale) with each "
               "framework's defaults (first bar), after each factor is matched in turn (a step "
               "down: the factor had made PyTorch look slower), and with every listed factor "
               "matched (last bar, the residual). Whiskers: bootstrap intervals over trials. "
               "Factors the device cannot vary are marked n/a; steps whose trials did not end "
               "ok, not run." + more)
    return style.Figure(key, title, caption, file=file)


def _draw_waterfall(ax, group) -> None:
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
        if style.missing(value):
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
            colour = style.FRAMEWORK_COLOURS[COMPARED[0 if lowers else 1]]
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
    style.log_axis(ax, "y")
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_ylabel("PyTorch / TensorFlow time")
    ax.set_title(_group_title(group.iloc[0]), fontsize=8)
    ax.set_axisbelow(True)
    ax.grid(axis="y", which="major", color="#eeeeee", linewidth=0.5)
    if seen - {None}:
        ax.legend(loc="best", frameon=False, fontsize=6)


def time_breakdown(profiles, folder: Path, *, key="time_breakdown",
                   cell_stats=None) -> style.Figure:
    """Where the time of a step goes, per profiled cell: operator classes and host overhead,
    stacked, PyTorch above TensorFlow for each cell pair.

    Bars are the profiled shares times the cell's median time from the statistics when it is
    known (the profiler's own cost is left out that way), else the profiled time per step.
    """
    title = "Where the time goes"
    if profiles is None or profiles.empty or "category" not in profiles:
        return style.Figure(key, title, "", reason="Not drawn: this run profiled no cell (config "
                                                   "key `profiling`).")
    ok = profiles[(profiles["status"] == "ok") & profiles["category"].notna()]
    if ok.empty:
        return style.Figure(key, title, "", reason="Not drawn: no profiled cell ended ok.")
    medians = {}
    if cell_stats is not None and not cell_stats.empty and "median_ns" in cell_stats:
        medians = {str(c): float(m) for c, m in zip(cell_stats["cell_id"], cell_stats["median_ns"])
                   if not style.missing(m)}
    pairs = sorted(ok["pair_id"].astype(str).unique())
    shown = pairs[:4 * style.MAX_PANELS]
    with rc_context(style.RC):
        fig = style.new_figure(6.8, 1.0 + 0.42 * len(shown))
        ax = fig.add_subplot()
        _draw_breakdown(ax, ok, shown, medians)
        fig.legend(loc="outside lower center", frameon=False, ncols=4)
        file = style.save(fig, folder, f"{key}.svg")
    more = (f" The first {len(shown)} of {len(pairs)} profiled pairs are drawn."
            if len(pairs) > len(shown) else "")
    caption = (f"{title}: one step of each profiled cell, split into time in operators by class "
               "and host overhead (on the CPU: no operator running on any thread; on a GPU: the "
               "device idle, waiting for the host), from each framework's own profiler. Bar "
               "length: the profiled shares times the cell's median step time (the profiled "
               "time per step where the statistics have no median)." + more)
    return style.Figure(key, title, caption, file=file)


def _draw_breakdown(ax, ok, shown: list[str], medians: dict) -> None:
    """One row per pair in ``shown``: each framework's step as stacked bars per operator class,
    in milliseconds (``medians``: the cells' median step times, where known)."""
    from fwbench.measure.trace import CATEGORIES, CATEGORY_LABELS

    labels, seen = [], set()
    for y, pair in enumerate(shown):
        for framework, offset in zip(COMPARED, (-0.19, 0.19)):
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
            ax.text(left, y + offset, f" {style.FRAMEWORK_LABELS[framework]}", va="center",
                    fontsize=6)
        row = ok[ok["pair_id"].astype(str) == pair].iloc[0]
        labels.append(f"{row['model']} {row['phase']} b{row['batch_size']} "
                      f"{row['mode']} {row['profile']}")
    ax.set_yticks(range(len(shown)), labels)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xlabel("milliseconds per step")
    ax.grid(axis="x", color="#eeeeee", linewidth=0.5)
