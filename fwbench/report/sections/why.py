"""Section 3.7, Why: the ablation's decomposition of the gap (one paragraph per group and the
decomposition table), where the time goes (profiles), and patel2023's explanation tested by the
counterfactual execution modes (fwbench.analysis.ablation.gap_tests)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from fwbench.analysis.ablation import GROUP
from fwbench.analysis.claims import wording
from fwbench.plan.frameworks import COMPARED, per_side
from fwbench.report.figures import why as why_figures
from fwbench.report.figures.style import Figure
from fwbench.report.formatting import Notes, cell_text, fmt, interval_text
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section, drawn
from fwbench.report.tables import Numbering, table


def context(numbering: Numbering, data: Inputs) -> dict:
    """The "why" section: one generated paragraph per ablation group, the decomposition table,
    the counterfactual mode tests (patel2023's explanation), and a summary of those tests."""
    paragraphs = explain(data.ablation, data.gaps, data.profiles)
    experiments = wording.unique(data.ablation, "experiment")
    by_experiment = [{"experiment": e, "paragraphs": [p for p in paragraphs
                                                      if str(p["key"].get("experiment")) == e]}
                     for e in experiments]
    return {
        "experiments": by_experiment,
        "absent": (None if paragraphs else
                   "This run has no ablation (config key `ablation`): no factor was varied from "
                   "each framework's defaults towards matched settings, so the gap is not "
                   "decomposed." + (f" ({data.problems['ablation']}.)"
                                    if "ablation" in data.problems else "")),
        "decomposition": decomposition_table(numbering, data),
        "gaps": gap_table(numbering, data),
        "patel": patel_gap_summary(data.gaps),
        "profiled": int(data.profiles["cell_id"].nunique()) if "cell_id" in data.profiles else 0,
    }


def figures(data: Inputs, folder: Path) -> dict[str, Figure]:
    return {"ablation_waterfall": why_figures.waterfall(data.ablation, folder),
            "time_breakdown": why_figures.time_breakdown(data.profiles, folder,
                                                         cell_stats=data.cell_stats)}


def _log_interval(row, low: str, high: str, notes: Notes, reason: str) -> object:
    return interval_text(row, low, high, notes, reason, write=lambda v: fmt(v, "log_ratio"))


def decomposition_table(numbering: Numbering, data: Inputs) -> dict:
    frame, notes, rows = data.ablation, Notes(), []
    if "row" in frame:
        keys = [k for k in GROUP if k in frame]
        for _key, group in frame.groupby(keys, sort=True):
            first = group.iloc[0]
            rows.append({"group": f"{first['model']} {first['phase']}, batch "
                                  f"{wording.text(first['batch_size'])}, {first['input_shape']}, "
                                  f"{first['device']} ({first['method']})"})
            for _, r in group.sort_values("step", kind="stable").iterrows():
                why = r["reason"] if not wording.missing(r.get("reason")) and r["reason"] else \
                    f"{r['status']}"
                reason = f"{r['status']}: {why}" if r["status"] != "measured" else why
                if r["status"] == "unsupported":
                    rows.append([str(r["factor"]), wording.text(r["profile"]),
                                 wording.text(r["mode"]), "—", "—", "—", "—",
                                 f"cannot vary here: {why}"])
                    continue
                rows.append([
                    {"total": "gap at defaults", "residual": "residual"}.get(
                        r["row"], str(r["factor"])),
                    wording.text(r["profile"]) if not wording.missing(r.get("profile")) else "—",
                    wording.text(r["mode"]) if not wording.missing(r.get("mode")) else "—",
                    cell_text(r, "ratio", notes, reason, wording.sig),
                    cell_text(r, "contribution", notes, reason, lambda v: fmt(v, "log_ratio")),
                    _log_interval(r, "contribution_ci_low", "contribution_ci_high", notes,
                                  reason),
                    cell_text(r, "share", notes, "the gap at defaults is not established (its "
                              "interval contains 0), or the step was not measured",
                              lambda v: fmt(v, "share")),
                    wording.text(r["note"]) if not wording.missing(r.get("note")) else "",
                ])
    return table(
        numbering, "decomposition",
        "The PyTorch/TensorFlow gap decomposed: the ratio of median times with each framework's "
        "defaults, after each factor is matched, and what remains (residual). Contributions are "
        "on log time, so they add up: contributions + residual = the gap at defaults; > 0 means "
        "matching the factor lowered PyTorch's time relative to TensorFlow's. Intervals: "
        "percentile bootstrap over trials within each arm.",
        ["Step", "Profile", "Mode pair", "Ratio after", "Contribution", "Interval",
         "Share of the gap", "Remark"], rows, notes,
        "No decomposition: this run has no ablation.",
        classes=["", "", "", "num", "num", "num", "num", ""])


def gap_table(numbering: Numbering, data: Inputs) -> dict:
    frame, notes, rows = data.gaps, Notes(), []
    if "counterfactual" in frame:
        keys = [k for k in ("device", "model", "phase", "batch_size", "input_shape",
                            "precision", "profile") if k in frame]
        for _key, group in frame.groupby(keys, sort=True):
            first = group.iloc[0]
            interval = wording.fmt_interval(first["baseline_ci_low"], first["baseline_ci_high"])
            rows.append({"group": f"{first['model']} {first['phase']}, batch "
                                  f"{wording.text(first['batch_size'])}, {first['device']}, "
                                  f"{first['precision']}, {first['profile']}: baseline PyTorch "
                                  "eager / TensorFlow tf.function "
                                  f"{wording.sig(first['baseline_ratio'])} {interval}"})
            for _, r in group.iterrows():
                rows.append([
                    r["counterfactual"], " / ".join(str(r[c]) for c in per_side("{}_mode")),
                    wording.sig(r["ratio"]),
                    interval_text(r, "ratio_ci_low", "ratio_ci_high", notes, "no interval"),
                    fmt(r["gap_closed"], "share"),
                    interval_text(r, "gap_closed_ci_low", "gap_closed_ci_high", notes,
                                  "no interval", write=lambda v: fmt(v, "share")),
                    "yes" if str(r["interleaved"]) == "True" else "no",
                    r["verdict"],
                ])
    return table(
        numbering, "gap_tests",
        "patel2023's explanation tested: from the idiomatic baseline (PyTorch eager against "
        "TensorFlow tf.function), each counterfactual's PyTorch/TensorFlow ratio with its "
        "Hodges-Lehmann interval, and the share of the baseline gap it closes on log time (1: "
        "closed, 0: unchanged, < 0: widened; bootstrap interval). Interleaved: whether the two "
        "arms were measured as one alternating cell pair.",
        ["Counterfactual", "PyTorch / TensorFlow mode", "Ratio", "Interval", "Gap closed",
         "Interval", "Interleaved", "Verdict"], rows, notes,
        "No counterfactual was measured: the run needs the `idiomatic` mode pair and at least "
        "one of `eager` and `compiled` on the same cells.",
        classes=["", "", "num", "num", "num", "num", "", ""])


def patel_gap_summary(gaps: pd.DataFrame) -> list[str]:
    """Sentences answering patel2023: does switching TensorFlow to eager, or PyTorch to
    torch.compile, close TensorFlow's CPU advantage?"""
    if gaps is None or gaps.empty or "counterfactual" not in gaps:
        return ["Not tested in this run: it needs PyTorch eager against TensorFlow tf.function "
                "and at least one counterfactual mode pair (`eager`, `compiled`) on CPU cells."]
    cpu = gaps[gaps["device"].astype(str) == "cpu"]
    if cpu.empty:
        return ["Not tested in this run: no CPU cell has the counterfactual modes."]
    out = []
    advantage = cpu[cpu["verdict"] != "no TensorFlow advantage to explain"]
    cells = cpu.drop_duplicates(["model", "phase", "batch_size", "input_shape", "precision",
                                 "profile"])
    adv_cells = advantage.drop_duplicates(["model", "phase", "batch_size", "input_shape",
                                           "precision", "profile"])
    out.append(f"TensorFlow (tf.function) was shown faster than PyTorch (eager) in "
               f"{len(adv_cells)} of {len(cells)} CPU cells with the counterfactual modes "
               f"(baseline ratios {_span_ratio(cells['baseline_ratio'])}).")
    for name in ("TensorFlow eager", "PyTorch torch.compile", "TensorFlow XLA"):
        part = advantage[advantage["counterfactual"] == name]
        if part.empty:
            continue
        tally = part["verdict"].value_counts()
        out.append(f"{name}: " + wording.join(f"{n} {v}" for v, n in tally.items())
                   + f" (gap closed {_span_pct(part['gap_closed'])}).")
    if len(out) == 1 and not advantage.empty:
        out.append("No counterfactual was measured on those cells.")
    if advantage.empty:
        out.append("With no TensorFlow advantage on the CPU, there is nothing for the static "
                   "graph or XLA to explain in this run.")
    return out


def _span_ratio(values) -> str:
    values = sorted(float(v) for v in values if not wording.missing(v))
    if not values:
        return "none"
    if len(values) == 1:
        return wording.sig(values[0])
    return f"{wording.sig(values[0])} to {wording.sig(values[-1])}"


def _span_pct(values) -> str:
    values = sorted(float(v) for v in values if not wording.missing(v))
    if not values:
        return "unknown"
    if len(values) == 1:
        return fmt(values[0], "share")
    return f"{fmt(values[0], 'share')} to {fmt(values[-1], 'share')}"


FACTOR_LABELS = {
    "threads": "threads",
    "tf32": "TF32 (off in both)",
    "cudnn_autotune": "cuDNN autotuning (on in both)",
    "layout": "the layout (NHWC in both: PyTorch channels_last)",
    "determinism": "op determinism (off in both)",
    "memory_growth": "GPU memory growth (on demand in both)",
    "mode=eager": "the execution mode (eager in both)",
    "mode=idiomatic": "the execution mode (PyTorch eager, TensorFlow tf.function)",
    "mode=compiled": "the execution mode (torch.compile against XLA)",
    "mode=keras": "the execution mode (PyTorch eager against Keras's loop)",
    "precision=bf16": "mixed precision (bf16 in both)",
    "precision=fp16": "mixed precision (fp16 in both)",
    "precision=fp32": "full fp32 precision",
}

SHORT_LABELS = {"threads": "threads", "tf32": "TF32", "cudnn_autotune": "cuDNN autotuning",
                "layout": "layout", "determinism": "op determinism",
                "memory_growth": "GPU memory growth"}


def factor_label(factor: str) -> str:
    return FACTOR_LABELS.get(factor, factor)


def _r(value) -> str:
    return fmt(value, "ratio")


def _gap_sentence(ratio: float, low=None, high=None) -> str:
    interval = f" (interval {_r(low)}–{_r(high)})" if _present(low) and _present(high) else ""
    if ratio >= 1:
        return f"PyTorch took {_r(ratio)}× TensorFlow's time{interval}"
    return f"PyTorch took {_r(ratio)}× TensorFlow's time, i.e. TensorFlow took {_r(1 / ratio)}× " \
           f"PyTorch's{interval}"


def _present(value) -> bool:
    return value is not None and value == value


def explain(decomposition: pd.DataFrame, gaps: pd.DataFrame | None = None,
            profiles: pd.DataFrame | None = None) -> list[dict]:
    """One short paragraph per ablation group answering "why": the gap at defaults, what each
    factor changed, what remains, where the time goes (profiles), and patel2023's test.

    Returns [{"title": ..., "text": ..., "key": {group columns}}] in group order.
    """
    out = []
    if decomposition is None or decomposition.empty:
        return out
    keys = [k for k in GROUP if k in decomposition]
    for key, rows in decomposition.groupby(keys, sort=True):
        ident = dict(zip(keys, key))
        total = rows[rows["row"] == "total"].iloc[0]
        gap = _gap_sentence(total["ratio"], math.exp(total["contribution_ci_low"]),
                            math.exp(total["contribution_ci_high"]))
        parts = [f"With each framework's defaults ({total['mode']} mode pair), {gap}."]
        parts.extend(_factor_sentences(rows, total["ratio"], ident))
        parts.extend(_residual_sentence(rows))
        parts.extend(_profile_sentences(profiles, ident, rows))
        parts.extend(_gap_test_sentences(gaps, ident))
        title = (f"{ident.get('model')} {ident.get('phase')}, batch {ident.get('batch_size')}, "
                 f"{ident.get('input_shape')}, {ident.get('device')}")
        out.append({"title": title, "text": " ".join(parts), "key": ident})
    return out


def _factor_sentences(rows: pd.DataFrame, ratio_before, ident: dict) -> list[str]:
    """What matching each factor in turn did to the ratio, and the factors the device cannot
    vary."""
    moved, unsupported, parts = [], [], []
    for _, r in rows[rows["row"] == "factor"].iterrows():
        if r["status"] == "unsupported":
            unsupported.append(r)
            continue
        if r["status"] != "measured":
            moved.append(f"{factor_label(r['factor'])} was not measured ({r['reason']})")
            continue
        share = (f", {fmt(r['share'], 'share')} of the gap"
                 if _present(r.get("share")) and 0 <= float(r["share"]) <= 1 else "")
        low, high = float(r["contribution_ci_low"]), float(r["contribution_ci_high"])
        ci = (f"; contribution {fmt(r['contribution'], 'log_ratio')} on log time, interval "
              f"{fmt(low, 'log_ratio')} to {fmt(high, 'log_ratio')}"
              + (", not distinguishable from no effect" if low <= 0 <= high else ""))
        after = f"to {_r(r['ratio'])}" if _present(r.get("ratio")) else ""
        verb = ("Matching" if not str(r["factor"]).startswith(("mode=", "precision="))
                else "Switching")
        moved.append(f"{verb} {factor_label(r['factor'])} moved the ratio from "
                     f"{_r(ratio_before)} {after}{share}{ci}")
        ratio_before = r["ratio"] if _present(r.get("ratio")) else ratio_before
    if moved:
        parts.append("; ".join(moved) + ".")
    if unsupported:
        names = [SHORT_LABELS.get(r["factor"], r["factor"]) for r in unsupported]
        parts.append(f"Not varied on the {ident.get('device', 'device')}: "
                     + wording.join(names) + " (each reason is in the decomposition table; threads "
                     "are equal in every profile).")
    return parts


def _residual_sentence(rows: pd.DataFrame) -> list[str]:
    """What remains with every listed factor matched (none when the residual was not
    measured)."""
    residual = rows[rows["row"] == "residual"]
    if not len(residual) or residual.iloc[0]["status"] != "measured":
        return []
    res = residual.iloc[0]
    share = (f" ({fmt(res['share'], 'share')} of the gap at defaults)"
             if _present(res.get("share")) and 0 <= float(res["share"]) <= 1 else "")
    if "last measured" in str(res.get("note") or ""):
        return [f"At the last measured point ({res['profile']}, {res['mode']}), "
                f"{_gap_sentence(res['ratio'])}; the steps after it were not "
                "measured, so no residual is claimed."]
    return [f"With every listed factor matched, {_gap_sentence(res['ratio'])}:"
            f" this residual{share} is what none of the listed factors explains."]


def _profile_sentences(profiles, ident, rows) -> list[str]:
    if profiles is None or profiles.empty or "category" not in profiles:
        return []
    p = profiles[(profiles["status"] == "ok")]
    for k, v in ident.items():
        if k in p and k != "run":
            p = p[p[k].astype(str) == str(v)]
    out = []
    points = rows[(rows["status"] == "measured") & rows["profile"].notna()]
    ends = points.iloc[[0, -1]].drop_duplicates(["profile", "mode", "precision"])
    for _, point in ends.iterrows():
        cell = p[(p["profile"] == point["profile"]) & (p["mode"] == point["mode"])
                 & (p["precision"] == point["precision"])]
        sides = {fw: cell[cell["framework"] == fw].set_index("category")
                 for fw in COMPARED}
        if any(s.empty for s in sides.values()):
            continue
        pt, tf = sides.values()
        diff = (pt["ns_per_step"] - tf["ns_per_step"]).dropna()
        biggest = diff.abs().sort_values(ascending=False).index[:2]
        where = "; ".join(
            f"{category.replace('_', ' ')}: {fmt(pt.loc[category, 'ns_per_step'], 'duration')} "
            f"against {fmt(tf.loc[category, 'ns_per_step'], 'duration')}"
            for category in biggest)
        out.append(
            f"Profiled at {point['profile']}/{point['mode']}: PyTorch spent "
            f"{fmt(pt.loc['host_overhead', 'share'], 'share')} of a step outside operators (host "
            f"overhead) against TensorFlow's {fmt(tf.loc['host_overhead', 'share'], 'share')}; "
            "the largest "
            f"differences per step (PyTorch against TensorFlow, profiled time) are {where}.")
    return out


def _gap_test_sentences(gaps, ident) -> list[str]:
    if gaps is None or gaps.empty:
        return []
    g = gaps
    for k, v in ident.items():
        if k in g and k not in ("run", "experiment"):
            g = g[g[k].astype(str) == str(v)]
    out = []
    for profile, rows in g.groupby("profile", sort=True):
        first = rows.iloc[0]
        tested = "; ".join(
            f"{r['counterfactual']}: ratio {_r(r['ratio'])} (gap closed "
            f"{fmt(r['gap_closed'], 'share')}), {r['verdict']}" for _, r in rows.iterrows())
        out.append(f"patel2023's explanation at {profile} (baseline PyTorch eager against "
                   f"TensorFlow tf.function, ratio {_r(first['baseline_ratio'])}): {tested}.")
    return out


SECTION = Section(
    key="why", place="results", order=10, title="Why: factors, and where the time goes",
    context=lambda b: context(b.numbering, b.data),
    figures=lambda data, folder, failures: figures(data, folder),
    shown=lambda c: (bool(c["why"]["experiments"]) or drawn(c, "ablation_waterfall",
                                                            "time_breakdown")
                     or bool(c["why"]["gaps"]["number"])))
