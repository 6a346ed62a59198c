"""Section 3, Per machine (after Latency): a merged run's origins (fwbench merge), each machine
or session with its own comparisons, and the pooled ratio only where pooling is valid
(fwbench.analysis.origins decides). An unmerged run has one origin and no such section."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims import wording
from fwbench.analysis.origins import HETEROGENEITY_ALPHA, origins, pooled_comparisons
from fwbench.report import tables
from fwbench.report.formatting import Notes, fmt, interval_text, verdict_text
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section


def context(numbering: tables.Numbering, data: Inputs) -> dict:
    names = origins(data.trials)
    if len(names) < 2:
        return {"shown": False, "machines": [], "pooled": None}
    axes = tables.shown_axes(data.comparisons)
    machines = [_machine(numbering, data, name, axes) for name in names]
    pooled = pooled_comparisons(data.comparisons)
    first = data.comparisons.drop_duplicates("pair_id").set_index("pair_id")
    return {"shown": True, "machines": machines,
            "pooled": _pooled_table(numbering, pooled, first, axes),
            "alpha": wording.percent(HETEROGENEITY_ALPHA), "everywhere": _everywhere(pooled, first)}


def _machine(numbering: tables.Numbering, data: Inputs, name: str, axes: list[str]) -> dict:
    trials = data.trials[data.trials["run"].astype(str) == name]
    started = pd.to_datetime(trials["started_at"], utc=True)
    facts = {"host": wording.join(wording.unique(trials, "hostname")) or "not recorded",
             "cpu": wording.join(wording.unique(trials, "cpu_model")) or "not recorded",
             "cores": wording.join(wording.unique(trials, "cpu_count")) or "not recorded",
             "gpu": wording.join(wording.unique(trials, "device_name")) or "none",
             "versions": wording.join(f"{wording.label(f)} {v}" for f, v in _versions(trials)),
             "dates": f"{started.min():%Y-%m-%d %H:%M} to {started.max():%Y-%m-%d %H:%M} UTC",
             "trials": len(trials), "ok": int((trials["status"] == "ok").sum())}
    frame = data.comparisons[data.comparisons["run"].astype(str) == name]
    notes, rows = Notes(), []
    for _, row in tables.sorted_rows(frame).iterrows():
        rows.append([str(row.get(a, "")) for a in axes] + [
            wording.ratio(row["ratio"]),
            interval_text(row, "ratio_ci_low", "ratio_ci_high", notes, "no interval"),
            verdict_text(row, notes)])
    caption = (f"Origin {name}: PyTorch's time over TensorFlow's per matched pair, from this "
               "origin's trials alone, with its interval at the family's level. "
               f"{tables.constant(frame, wording.PAIR_AXES)}")
    table = tables.table(numbering, f"origin-{name}", caption,
                         [tables.axis_header(a) for a in axes] + ["Ratio", "Interval",
                                                                  "Verdict"],
                         rows, notes, f"Origin {name} compared no pair.",
                         classes=[""] * len(axes) + ["num", "num", "verdict"])
    return {"name": name, **facts, "table": table}


def _versions(trials: pd.DataFrame) -> list[tuple[str, str]]:
    if "framework_version" not in trials:
        return []
    return [(f, wording.join(wording.unique(g, "framework_version")))
            for f, g in trials.groupby("framework", sort=True)]


def _pooled_table(numbering: tables.Numbering, pooled: pd.DataFrame, first: pd.DataFrame,
                  axes: list[str]) -> dict:
    """The pooled ratios, one row per pair (``first``: each pair's first comparison row)."""
    notes, rows = Notes(), []
    for _, row in pooled.iterrows():
        pair = first.loc[row["pair_id"]]
        ratio = wording.ratio(row["ratio"]) if row["pooled"] else notes.missing(
            "not pooled: the origins disagree")
        rows.append([str(pair.get(a, "")) for a in axes] + [
            row["origins"], ratio,
            interval_text(row, "ratio_ci_low", "ratio_ci_high", notes,
                          "not pooled: the origins disagree"),
            wording.fmt_p(row["heterogeneity_p"]) if not wording.missing(
                row["heterogeneity_p"]) else "",
            _sd(row["within_sd"]), _sd(row["between_sd"]), _holds_on_text(row["holds_on"]),
            verdict_text(row, notes), row["note"]])
    caption = ("The origins pooled, pair by pair: the fixed-effect mean of the origins' log "
               "ratios, only where Cochran's Q test finds no heterogeneity at "
               f"{wording.percent(HETEROGENEITY_ALPHA)} and no two origins reach opposite "
               "verdicts; elsewhere each origin's own ratio is the result. Within: the SD of "
               "one pair's log ratio inside an origin, which each origin's interval covers; "
               "between: the SD of the origins' own log ratios beyond that noise "
               "(DerSimonian-Laird), which no single run's interval covers.")
    return tables.table(numbering, "origins-pooled", caption,
                        [tables.axis_header(a) for a in axes] + [
                            "Origins", "Ratio", "Interval", "Q p", "SD within", "SD between",
                            "Verdict of each origin", "Verdict", "Note"],
                        rows, notes, "No pair was compared in two origins.",
                        classes=[""] * len(axes) + ["", "num", "num", "num", "num", "num", "",
                                                    "verdict", "msg"])


def _sd(value) -> str:
    return "" if wording.missing(value) else fmt(value, "value")


def _holds_on_text(holds_on: str) -> str:
    """"the same on every origin", or each verdict in words with the origins that reached it."""
    if holds_on == "every origin":
        return "the same on every origin"
    for code, words in wording.OUTCOME_LABELS.items():
        holds_on = holds_on.replace(code, words)
    return holds_on


def _everywhere(pooled: pd.DataFrame, first: pd.DataFrame) -> dict:
    """The decided verdicts that hold on every origin, and the pairs whose origins differ, named
    as prose names them."""
    also = wording.telling_apart(first.reset_index())
    same, differ = [], []
    for _, row in pooled.iterrows():
        pair = first.loc[row["pair_id"]]
        name = wording.pair_name(pair, also)
        if row["holds_on"] != "every origin":
            differ.append(name)
        elif str(pair["verdict"]) in wording.OUTCOME_LABELS and pair["verdict"] != "inconclusive":
            same.append(f"{name} ({wording.OUTCOME_LABELS[str(pair['verdict'])]})")
    return {"same": wording.join(same), "differ": wording.join(differ),
            "n_same": len(same), "n_differ": len(differ)}


SECTION = Section(key="origins", place="results", order=60, title="Per machine",
                  context=lambda b: context(b.numbering, b.data),
                  shown=lambda c: c["origins"]["shown"])
