"""The figures of what the trials' telemetry recorded: each cell's energy per sample, and one
trial's CPU and GPU readings over time with the harness's phases shaded. Framework-free.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib import rc_context

from fwbench.analysis.claims import wording
from fwbench.analysis.summaries import median_range
from fwbench.report.figures import style

# --- a per-trial value per cell: energy per sample ----------------------------------------

def per_cell_metric(trials, folder: Path, *, key: str, title: str, column: str, label: str,
                    absent: str = "") -> style.Figure:
    """Median over trials of ``column`` per cell and framework, with the trials' range. Log."""
    frame = trials
    if not frame.empty and column in frame:
        frame = frame[(frame["status"] == "ok") & frame[column].notna()]
        frame = frame[frame[column].astype(float) > 0]
    if frame.empty or column not in frame:
        return style.Figure(key, title, "", reason=f"Not drawn: {absent}.")
    frame = style.sort_pairs(frame)
    pairs = frame.drop_duplicates("pair_id")
    varying = style.varying_axes(pairs)
    rows = {pid: i for i, pid in enumerate(pairs["pair_id"])}
    with rc_context(style.RC):
        fig = style.new_figure(6.8, 0.9 + 0.22 * len(pairs))
        ax = fig.add_subplot()
        for framework, offset in style.FRAMEWORK_OFFSETS:
            part = frame[frame["framework"] == framework]
            if part.empty:
                continue
            stats = median_range(part, "pair_id", column, sort=False)
            y = [rows[p] + offset for p in stats.index]
            ax.errorbar(stats["median"], y, xerr=[stats["median"] - stats["min"],
                                                  stats["max"] - stats["median"]],
                        fmt="o", markersize=3.5, capsize=2, linewidth=1,
                        color=style.FRAMEWORK_COLOURS[framework],
                        label=style.FRAMEWORK_LABELS[framework])
        style.log_axis(ax, "x")
        ax.set_yticks(range(len(pairs)),
                      [style.pair_label(r, varying) for _, r in pairs.iterrows()])
        ax.set_ylim(len(pairs) - 0.5, -0.5)
        ax.set_xlabel(f"{label} (log scale)")
        ax.grid(axis="x", which="both", color="#eeeeee", linewidth=0.5)
        fig.legend(loc="outside lower center", frameon=False, ncols=2)
        file = style.save(fig, folder, f"{key}.svg")
    caption = (f"{title}: median over trials of each trial's {label}, per cell and framework; "
               "bars: range over the trials. Log scale.")
    return style.Figure(key, title, caption, file=file)


# --- one trial's telemetry over time, its phases shaded -------------------------------------

PHASE_SHADES = {"cold_start": ("cold start", "#e69f00"), "warmup": ("warm-up", "#f0e442"),
                "measure": ("measure", "#56b4e9"), "blocks": ("blocks", "#cc79a7")}
TRACE_PANELS = (("utilization (%)", (("cpu", "cpu_util_pct", "CPU utilization, all cores"),
                                     ("gpu", "gpu_util_pct", "GPU utilization"))),
                ("temperature (°C)", (("cpu", "cpu_temp_c", "CPU temperature"),
                                      ("gpu", "gpu_temp_c", "GPU temperature"))),
                ("GPU power (W)", (("gpu", "gpu_power_w", "GPU board power"),)))


def telemetry_trace(trace, folder: Path, *, key="telemetry_trace", chosen: str = "",
                    absent: str = "") -> style.Figure:
    """One trial's CPU and GPU utilization, temperatures and GPU power over time (its side
    file, as tables/telemetry_trace.parquet holds it), the harness's phases shaded; a panel
    without readings is left out and named in the caption."""
    title = "Telemetry trace of one trial"
    if trace is None or trace.empty or "source" not in trace:
        return style.Figure(key, title, "", reason=f"Not drawn: {absent}.")
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
        return style.Figure(key, title, "", reason="Not drawn: the chosen trial's side file has no "
                                             "reading.")
    with rc_context(style.RC):
        fig = style.new_figure(6.8, 1.0 + 1.3 * len(panels))
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
            if "%" in label:  # utilization from 0 to 100 %: never a cut axis
                ax.set_ylim(0, 105)
            ax.legend(loc="lower left", bbox_to_anchor=(1.0, 0.0), frameon=False, fontsize=6)
        axes[-1].set_xlabel("seconds from the cold-start iteration")
        handles = [_phase_patch(name) for name in markers["marker"] if name in PHASE_SHADES]
        if handles:
            fig.legend(handles=handles, loc="outside lower center", frameon=False,
                       ncols=len(handles))
        file = style.save(fig, folder, f"{key}.svg")
    first = trace.iloc[0]
    cell = (str(first["cell_id"]) if wording.missing(first.get("framework"))
            else f"{wording.label(first['framework'])}'s {wording.pair_name(first)}")
    caption = (f"{title}: trial {int(first['trial'])} of {cell}, {chosen}. "
               "Before 0 the process starts, imports its framework and builds the model; the "
               "shaded spans are the harness's phases between its markers. CPU utilization is "
               "the whole machine's." + (f" No reading of: {', '.join(lacking)}." if lacking
                                         else ""))
    return style.Figure(key, title, caption, file=file)


def _shade_phases(ax, markers) -> None:
    times = list(zip(markers["marker"], markers["t_s"].astype(float)))
    for (name, start), (_, end) in zip(times, times[1:]):
        if name in PHASE_SHADES:
            ax.axvspan(start, end, color=PHASE_SHADES[name][1], alpha=0.25, linewidth=0)


def _phase_patch(name: str):
    from matplotlib.patches import Patch

    label, colour = PHASE_SHADES[name]
    return Patch(color=colour, alpha=0.25, label=label)
