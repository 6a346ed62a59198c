"""The figure of achieved FLOP/s per cell and the fraction of the device's peak it reaches
(stats/flops.csv, ``fwbench.analysis.flops``). Framework-free.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib import rc_context

from fwbench.report.figures import style


def achieved_flops(flops, folder: Path, *, key="achieved_flops", absent: str = "") -> style.Figure:
    """Achieved FLOP/s per cell and framework with the interval its throughput gives (left),
    and the fraction of the device's peak where a peak is known (right)."""
    title = "Achieved FLOP/s and fraction of peak"
    if flops is None or flops.empty or "achieved_flops" not in flops:
        return style.Figure(key, title, "", reason=f"Not drawn: {absent}.")
    frame = flops[[not style.missing(v) for v in flops["achieved_flops"]]]
    if frame.empty:
        reasons = sorted({str(n) for n in flops["note"] if not style.missing(n) and str(n)})
        return style.Figure(key, title, "", reason="Not drawn: no cell has an achieved rate ("
                            + "; ".join(reasons) + ").")
    frame = style.sort_pairs(frame)
    pairs = frame.drop_duplicates("pair_id")
    rows = {pid: i for i, pid in enumerate(pairs["pair_id"])}
    peaked = frame[[not style.missing(v) for v in frame["fraction_of_peak"]]]
    with rc_context(style.RC):
        fig = style.new_figure(6.8, 0.9 + 0.22 * len(pairs))
        axes = fig.subplots(1, 2 if len(peaked) else 1, sharey=True, squeeze=False)[0]
        unit, scale = ("TFLOP/s", 1e-12) if frame["achieved_flops"].max() >= 1e12 else \
            ("GFLOP/s", 1e-9)
        _framework_points(axes[0], frame, rows, "achieved_flops", "achieved_ci_low",
                          "achieved_ci_high", scale)
        style.log_axis(axes[0], "x")
        axes[0].set_xlabel(f"achieved {unit} (log scale)")
        if len(peaked):
            _framework_points(axes[1], peaked, rows, "fraction_of_peak", "fraction_ci_low",
                              "fraction_ci_high", 100, label=False)
            axes[1].set_xlabel("% of the device's peak")
        varying = style.varying_axes(pairs)
        axes[0].set_yticks(range(len(pairs)),
                           [style.pair_label(r, varying) for _, r in pairs.iterrows()])
        axes[0].set_ylim(len(pairs) - 0.5, -0.5)
        for ax in axes:
            ax.grid(axis="x", which="both", color="#eeeeee", linewidth=0.5)
        fig.legend(loc="outside lower center", frameon=False, ncols=2)
        file = style.save(fig, folder, f"{key}.svg")
    sources = sorted({str(s) for s in peaked.get("peak_source", []) if not style.missing(s)})
    unpeaked = frame[[style.missing(v) for v in frame["fraction_of_peak"]]]
    # A note's reason, without the config remedy that stats/flops.csv gives its user.
    reasons = sorted({str(n).split(": set ")[0] for n in unpeaked["note"]
                      if not style.missing(n) and str(n)})
    caption = (f"{title}: FLOPs per sample (a multiply-add is 2 FLOPs; training 3 × forward; "
               "normalization, activations and the optimizer not counted, so both values are "
               "lower bounds) times samples per second, per cell and framework, with the "
               "interval the throughput's gives"
               + (f"; right, as a share of the peak ({'; '.join(sources)})" if sources else "")
               + "." + (f" No fraction of peak for {len(unpeaked)} of {len(frame)} cells: "
                        + "; ".join(reasons) + "." if len(unpeaked) else ""))
    return style.Figure(key, title, caption, file=file)


def _framework_points(ax, frame, rows: dict, column: str, low: str, high: str, scale: float,
                      label: bool = True) -> None:
    """One point per cell with its interval, PyTorch above TensorFlow in each pair's row."""
    for framework, offset in style.FRAMEWORK_OFFSETS:
        part = frame[frame["framework"] == framework]
        if not part.empty:
            value, lo, hi = (part[c].astype(float).to_numpy() * scale for c in (column, low, high))
            style.draw_points(ax, part, rows, framework, offset, value, lo, hi, label)
