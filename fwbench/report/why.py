"""The ablation section's "why" paragraphs: the gap at defaults, what each factor changed, what
remains, where the time goes, and patel2023's explanation tested."""

from __future__ import annotations

import math

import pandas as pd

from fwbench.analysis.ablation import GROUP

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


def _and(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def factor_label(factor: str) -> str:
    return FACTOR_LABELS.get(factor, factor)


def _r(value) -> str:
    return f"{float(value):.2f}"


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
        ratio_before = total["ratio"]
        moved, unsupported = [], []
        for _, r in rows[rows["row"] == "factor"].iterrows():
            if r["status"] == "unsupported":
                unsupported.append(r)
                continue
            if r["status"] != "measured":
                moved.append(f"{factor_label(r['factor'])} was not measured ({r['reason']})")
                continue
            share = (f", {float(r['share']):.0%} of the gap"
                     if _present(r.get("share")) and 0 <= float(r["share"]) <= 1 else "")
            low, high = float(r["contribution_ci_low"]), float(r["contribution_ci_high"])
            ci = (f"; contribution {float(r['contribution']):+.3f} on log time, interval "
                  f"{low:+.3f} to {high:+.3f}"
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
                         + _and(names) + " (each reason is in the decomposition table; threads "
                         "are equal in every profile).")
        residual = rows[rows["row"] == "residual"]
        if len(residual) and residual.iloc[0]["status"] == "measured":
            res = residual.iloc[0]
            share = (f" ({float(res['share']):.0%} of the gap at defaults)"
                     if _present(res.get("share")) and 0 <= float(res["share"]) <= 1 else "")
            if "last measured" in str(res.get("note") or ""):
                parts.append(f"At the last measured point ({res['profile']}, {res['mode']}), "
                             f"{_gap_sentence(res['ratio'])}; the steps after it were not "
                             "measured, so no residual is claimed.")
            else:
                parts.append(f"With every listed factor matched, {_gap_sentence(res['ratio'])}:"
                             f" this residual{share} is what none of the listed factors "
                             "explains.")
        parts.extend(_profile_sentences(profiles, ident, rows))
        parts.extend(_gap_test_sentences(gaps, ident))
        title = (f"{ident.get('model')} {ident.get('phase')}, batch {ident.get('batch_size')}, "
                 f"{ident.get('input_shape')}, {ident.get('device')}")
        out.append({"title": title, "text": " ".join(parts), "key": ident})
    return out


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
                 for fw in ("pytorch", "tensorflow")}
        if any(s.empty for s in sides.values()):
            continue
        pt, tf = sides["pytorch"], sides["tensorflow"]
        diff = (pt["ns_per_step"] - tf["ns_per_step"]).dropna()
        biggest = diff.abs().sort_values(ascending=False).index[:2]
        where = "; ".join(
            f"{category.replace('_', ' ')}: {pt.loc[category, 'ns_per_step'] / 1e3:.0f} µs "
            f"against {tf.loc[category, 'ns_per_step'] / 1e3:.0f} µs"
            for category in biggest)
        out.append(
            f"Profiled at {point['profile']}/{point['mode']}: PyTorch spent "
            f"{pt.loc['host_overhead', 'share']:.0%} of a step outside operators (host "
            f"overhead) against TensorFlow's {tf.loc['host_overhead', 'share']:.0%}; the largest "
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
            f"{float(r['gap_closed']):.0%}), {r['verdict']}" for _, r in rows.iterrows())
        out.append(f"patel2023's explanation at {profile} (baseline PyTorch eager against "
                   f"TensorFlow tf.function, ratio {_r(first['baseline_ratio'])}): {tested}.")
    return out
