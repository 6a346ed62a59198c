"""Claims on the real-data experiments (tian2020, sumanjali2024, florencio2019's epoch), judged on
their ok trials: the first epoch's excess (``first_epoch``), a per-trial value higher in one group
of trials than another (``higher``), and who reaches the target accuracy sooner
(``time_to_accuracy``)."""

from __future__ import annotations

import math

import pandas as pd

from fwbench.analysis.claims.direction import judge_direction
from fwbench.analysis.claims.kinds import Tables, register
from fwbench.analysis.claims.numbers import fmt
from fwbench.analysis.claims.rows import claim_rows, fewest, not_measured
from fwbench.analysis.claims.wording import (
    PAIR_AXES,
    TRAINING_AXES,
    fmt_duration,
    fmt_interval,
    join,
    label,
    missing,
    percent,
    select_rows,
    text,
    unique,
)
from fwbench.analysis.estimators import hodges_lehmann
from fwbench.plan.cells import REAL_DATA
from fwbench.plan.frameworks import COMPARED, FASTER, opposite

CONVERGENCE_PRESET = "presets/tian2020-convergence.yaml"
# Per-trial values a claim may compare (kinds `higher` and `time_to_accuracy`).
TRIAL_METRICS = {
    "final_accuracy": "validation accuracy after the last epoch",
    "best_accuracy": "best validation accuracy",
    "test_accuracy": "test accuracy after training",
    "first_epoch_excess_ns": "first epoch's training time above the median later epoch",
    "inference_median_ns": "time of a pass over the test set",
    "epochs_to_accuracy": "epochs to the target accuracy",
    "time_to_accuracy_ns": "training time to the target accuracy (validation excluded)",
}


def real_data_trials(trials: pd.DataFrame, experiment: str | None = None) -> pd.DataFrame:
    """The ok trials of the `epoch` and `convergence` experiments (or of ``experiment``), with
    tian2020's excess of the first epoch over the median later one (convergence: cold start
    minus median). Empty, without columns, when there are none."""
    if not {"experiment", "status"} <= set(trials.columns):
        return pd.DataFrame()
    frame = trials[trials["experiment"].astype(str).isin(REAL_DATA) & (trials["status"] == "ok")]
    excess = (pd.to_numeric(frame["cold_start_ns"], errors="coerce")
              - pd.to_numeric(frame["median_ns"], errors="coerce"))
    frame = frame.assign(first_epoch_excess_ns=excess.where(frame["experiment"] == "convergence"))
    if experiment is not None:
        frame = frame[frame["experiment"] == experiment]
    return frame if len(frame) else pd.DataFrame()


def no_real_data(trials: pd.DataFrame, experiment: str = "convergence") -> str:
    """Why a real-data figure, table or claim has no data, and how to measure it."""
    ran = join(unique(trials, "experiment")) or "no"
    how = (f"{CONVERGENCE_PRESET} runs it for tian2020 (docs/data.md gives every paper's "
           "protocol)" if experiment == "convergence" else "docs/data.md gives the protocol")
    return (f"this run has no ok trial of the `{experiment}` experiment (it ran the {ran} "
            f"experiment); {how}")


def percent_text(value) -> str:
    return fmt(value, "accuracy", unit=False)


def metric_format(column: str):
    """How a per-trial value is written: a duration, an accuracy in %, or a plain number."""
    if column.endswith("_ns"):
        return fmt_duration
    if column in ("final_accuracy", "best_accuracy", "test_accuracy"):
        return percent_text
    return lambda value: fmt(value, "epochs")


def judge_real_data(claim: dict, tables: Tables, margin: float) -> dict:
    """A claim judged on the ok trials of the real-data experiments (kinds ``first_epoch``,
    ``higher``, ``time_to_accuracy``); ``margin`` widens a published first-epoch ratio."""
    test = claim["test"]
    trials = tables.trials if tables.trials is not None else pd.DataFrame()
    experiment = str(test.get("select", {}).get("experiment", "convergence"))
    frame = real_data_trials(trials, experiment)
    if frame.empty:
        return not_measured(no_real_data(trials, experiment), [])
    selected = claim_rows(frame, test.get("select", {}))
    if selected.rows is None:
        return not_measured(selected.why, selected.notes)
    rows, notes = selected.rows, selected.notes
    if test["kind"] == "first_epoch":
        verdict, ours = _judge_first_epoch(rows, claim, margin)
    else:
        judge = {"higher": _judge_higher, "time_to_accuracy": _judge_time_to_accuracy}
        verdict, ours = judge[test["kind"]](rows, claim)
    return {"verdict": verdict, "ours": ours, "notes": notes}


def _pairs_of(rows: pd.DataFrame, apart: set):
    """(description, sub-frame) per comparison: the rows split by every training axis that the
    compared groups do not name."""
    keys = [k for k in TRAINING_AXES if k in rows and k not in apart]
    for key, group in rows.groupby(keys, sort=True, dropna=False):
        named = dict(zip(keys, key))
        varying = [k for k in keys if rows[k].astype(str).nunique() > 1]
        yield " ".join(text(named[k]) for k in varying), group


def _judge_first_epoch(rows: pd.DataFrame, claim: dict, margin: float) -> tuple[str, str]:
    """tian2020's first-epoch time: per cell pair, PyTorch's median first epoch over
    TensorFlow's, with the Hodges-Lehmann interval of the log times, judged as a direction
    (or, where the paper states it, a size)."""
    ratios = []
    for _, group in _pairs_of(rows, {"framework"}):
        pt, tf = (group.loc[group["framework"] == f, "cold_start_ns"].dropna().astype(float)
                  for f in COMPARED)
        if pt.empty or tf.empty:
            continue
        hl = hodges_lehmann([math.log(v) for v in pt], [math.log(v) for v in tf])
        ratios.append({**group.iloc[0][[a for a in PAIR_AXES if a in group]].to_dict(),
                       "ratio": float(pt.median() / tf.median()),
                       "ratio_ci_low": math.exp(hl.low), "ratio_ci_high": math.exp(hl.high),
                       # an interval short of the nominal level decides nothing
                       # (fwbench.analysis.stats)
                       "verdict": None if hl.attained else "inconclusive"})
    if not ratios:
        return "not measured", ("not measured in this run: no cell has first-epoch times of "
                                "both frameworks")
    verdict, ours = judge_direction(pd.DataFrame(ratios), claim, margin)
    return verdict, f"first-epoch training time, {ours}"


def _describe_group(group: dict) -> str:
    """A claim's group of trials in words: "PyTorch adam", "TensorFlow mode eager/idiomatic"."""
    parts = []
    for axis, value in group.items():
        value = "/".join(map(str, value)) if isinstance(value, list) else str(value)
        parts.append(label(value) if axis == "framework" else value if axis == "optimizer"
                     else f"{axis.replace('_', ' ')} {value}")
    return " ".join(parts)


def _judge_higher(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    """A per-trial value (``metric``) higher in the ``higher`` trials than in the ``lower``
    ones: per comparison, the Hodges-Lehmann shift with its interval decides."""
    test = claim["test"]
    column, higher, lower = test["metric"], test["higher"], test["lower"]
    fmt = metric_format(column)
    outcomes, texts = [], []
    for where, group in _pairs_of(rows, set(higher) | set(lower)):
        a, b = (select_rows(group, side)[column].dropna().astype(float)
                for side in (higher, lower))
        if a.empty or b.empty:
            continue
        hl = hodges_lehmann(a, b)
        outcomes.append(_shift_direction(hl, "higher", "lower"))
        unit = " points" if fmt is percent_text else ""
        texts.append(f"{where + ': ' if where else ''}{_describe_group(higher)} "
                     f"{fmt(a.median())} (n = {len(a)}) against {_describe_group(lower)} "
                     f"{fmt(b.median())} (n = {len(b)}), shift {_shift_text(hl, fmt, unit)}")
    if not outcomes:
        return "not measured", (f"not measured in this run: it needs trials of "
                                f"{_describe_group(higher)} and of {_describe_group(lower)} in "
                                "one cell")
    return (_every_comparison(outcomes, "higher", "lower"),
            f"{TRIAL_METRICS[column]}, medians over trials: " + "; ".join(texts))


def _shift_direction(hl, above: str, below: str) -> str:
    """Which way a Hodges-Lehmann shift goes: its interval above or below 0, at the nominal
    level (short of it, from too few trials, nothing is decided, as in fwbench.analysis.stats)."""
    if not hl.attained or missing(hl.low):
        return "inconclusive"
    return above if hl.low > 0 else below if hl.high < 0 else "inconclusive"


def _shift_text(hl, fmt, unit: str = "") -> str:
    def signed(value) -> str:
        return ("+" if float(value) >= 0 else "−") + fmt(abs(float(value)))

    if missing(hl.estimate):
        return "not computed"
    return (f"{signed(hl.estimate)}{unit} {fmt_interval(hl.low, hl.high, signed)}"
            + ("" if hl.attained else f" at {percent(hl.level)}, too few trials"))


def _every_comparison(outcomes: list[str], agree: str, against: str) -> str:
    """confirmed when every comparison agrees; contradicted when one goes against and none
    agrees; else inconclusive."""
    if outcomes.count(agree) == len(outcomes):
        return "confirmed"
    return "contradicted" if against in outcomes and agree not in outcomes else "inconclusive"


def _judge_time_to_accuracy(rows: pd.DataFrame, claim: dict) -> tuple[str, str]:
    """Who reaches the target accuracy sooner (``metric``: epochs or training time), per cell
    pair (``_sooner``)."""
    test = claim["test"]
    column, expect = test["metric"], test["expect"]
    if "target_accuracy" not in rows or rows["target_accuracy"].isna().all():
        return "not measured", ("not measured in this run: no target accuracy was set "
                                "(`data.target_accuracy`)")
    outcomes, texts = [], []
    for where, group in _pairs_of(rows, {"framework"}):
        sides = {f: group[group["framework"] == f][column] for f in COMPARED}
        if any(s.empty for s in sides.values()):
            continue
        kind, said = _sooner(sides, metric_format(column))
        outcomes.append(kind)
        texts.append(f"{where + ': ' if where else ''}{said}")
    if not outcomes:
        return "not measured", ("not measured in this run: no cell has trials of both "
                                "frameworks")
    return _every_comparison(outcomes, expect, opposite(expect)), (
        f"{TRIAL_METRICS[column]} (target {join(unique(rows, 'target_accuracy'))}): "
        + "; ".join(texts))


def _sooner(sides: dict, fmt) -> tuple[str, str]:
    """Which framework of one cell pair reached the target sooner, and the counts as text: where
    both reached it in every trial the Hodges-Lehmann shift decides; where one always did and
    the other never, the one that did."""
    reached = {f: s.dropna().astype(float) for f, s in sides.items()}
    counts = {f: f"{len(reached[f])} of {len(sides[f])}" for f in sides}
    said = "; ".join(f"{label(f)} reached it in {counts[f]} trials"
                     + (f", median {fmt(reached[f].median())}" if len(reached[f]) else "")
                     for f in sides)
    full = {f: len(reached[f]) == len(sides[f]) for f in sides}
    first, second = COMPARED
    if all(full.values()):
        hl = hodges_lehmann(*(reached[f] for f in COMPARED))
        kind = _shift_direction(hl, *reversed(FASTER))
        said += f"; {' − '.join(label(f) for f in COMPARED)} {_shift_text(hl, fmt)}"
    elif full[first] and reached[second].empty:
        kind = FASTER[0]
    elif full[second] and reached[first].empty:
        kind = FASTER[1]
    else:
        kind = "inconclusive"
    return kind, said


def _real_data_hint(claim: dict, tables: Tables, least: int) -> str:
    """Too few ok trials in a cell the claim was judged on."""
    if tables.trials is None:
        return ""
    select = claim["test"].get("select", {})
    frame = real_data_trials(tables.trials, str(select.get("experiment", "convergence")))
    rows = claim_rows(frame, select).rows if len(frame) else None
    if rows is None or "cell_id" not in rows:
        return ""
    return fewest(rows.groupby("cell_id").size().rename("n").to_frame(), ["n"],
                  "ok trials in a cell", least)


register("first_epoch", judge_real_data, _real_data_hint)
register("higher", judge_real_data, _real_data_hint)
register("time_to_accuracy", judge_real_data, _real_data_hint)
