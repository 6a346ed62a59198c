"""Section 3.8, Accuracy and convergence: the accuracy each framework reached in the real-data
experiments (tian2020, sumanjali2024, florencio2019's epoch), with the per-trial helpers
tian2020's figures (Section 4.4) draw from."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims import wording
from fwbench.analysis.claims.real_data import metric_format, no_real_data, real_data_trials
from fwbench.analysis.claims.setting import with_dataset
from fwbench.analysis.summaries import median_interval
from fwbench.plan.cells import REAL_DATA
from fwbench.report import formatting, tables
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section


def context(numbering: tables.Numbering, data: Inputs) -> dict:
    return {"table": accuracy_table(numbering, data)}


# The groups of the accuracy table and the time bars: the training axes, then the framework.
TRAINING_KEYS = [*wording.TRAINING_AXES, "framework"]

# tian2020's times per trial (trials-table columns; see fwbench.measure.results): the panel
# title, and the phase a time ratio the paper states names for it (report/published.yaml); the
# first epoch's excess over the later ones is stated in seconds, by its column, not as a ratio.
EPOCH_TIMES = {"median_ns": ("training per epoch", "train"),
               "inference_median_ns": ("inference", "infer"),
               "cold_start_ns": ("first epoch", "first_epoch"),
               "first_epoch_excess_ns": ("first epoch above the median epoch", None)}


def of_ok_trials(frame: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """The rows of a per-trial table (epochs, confusion) that belong to an ok trial."""
    ok = real_data_trials(trials)
    keys = ["run", "cell_id", "trial"]
    if frame.empty or ok.empty or not set(keys) <= set(frame.columns):
        return frame.iloc[0:0]
    wanted = set(map(tuple, ok[keys].astype(str).to_numpy()))
    return frame[[tuple(key) in wanted for key in frame[keys].astype(str).to_numpy()]]


def _groups(frame: pd.DataFrame):
    """(axis values, trials) per training group and framework, in order."""
    if frame.empty:
        return
    keys = [k for k in TRAINING_KEYS if k in frame]
    for key, group in frame.groupby(keys, sort=True, dropna=False):
        yield dict(zip(keys, key)), group


def epoch_time_summary(trials: pd.DataFrame) -> pd.DataFrame:
    """Per convergence cell and framework, the median over trials of each of tian2020's times,
    with its interval: the data of the time bars, each row with the ``phase`` and ``metric``
    (column) a published value selects and the ``dataset`` its setting names."""
    frame = with_dataset(real_data_trials(trials, "convergence"))
    return pd.DataFrame([{**key, "dataset": group["dataset"].iloc[0], "measure": measure,
                          "phase": phase, "metric": column, **median_interval(group[column])}
                         for key, group in _groups(frame)
                         for column, (measure, phase) in EPOCH_TIMES.items()])


def data_sources(trials: pd.DataFrame) -> str:
    frame = real_data_trials(trials)
    return wording.join(wording.unique(frame, "data_source")) or "not recorded"


# The accuracy table's columns per experiment: (trials-table column, header).
ACCURACY_TABLE = {
    "convergence": [("final_accuracy", "Final accuracy (%)"), ("best_accuracy",
                    "Best accuracy (%)"), ("epochs_to_accuracy", "Epochs to target"),
                    ("time_to_accuracy_ns", "Time to target")],
    "epoch": [("test_accuracy", "Test accuracy (%)")],
}


def _median_text(values, column: str, notes: formatting.Notes, reason: str, uniform=None):
    """The median over trials with its interval (and coverage when not the table's), as
    text."""
    fmt = metric_format(column)
    m = median_interval(values)
    if not m["n"]:
        return notes.missing(reason)
    if m["n"] == 1:
        return f"{fmt(m['median'])} (one trial: no interval)"
    return f"{fmt(m['median'])} " + formatting.with_level(
        wording.fmt_interval(m["low"], m["high"], fmt), m["level"], uniform)


def _to_target(group: pd.DataFrame, column: str, notes: formatting.Notes, uniform):
    """Epochs or time to the target accuracy, over the trials that reached it."""
    targets = wording.unique(group, "target_accuracy")
    if not targets:
        return notes.missing("no target accuracy was set (`data.target_accuracy`)")
    reached = group[column].dropna()
    if reached.empty:
        return notes.missing(f"no trial reached the target accuracy {wording.join(targets)} in its "
                             f"{formatting.span(group.get('n_epochs', []))} epochs")
    said = _median_text(reached, column, notes, "", uniform)
    if len(reached) < len(group):
        said += f" ({len(reached)} of {len(group)} trials reached it)"
    return said


def accuracy_table(numbering: tables.Numbering, data: Inputs) -> dict:
    """Accuracy per cell, optimizer and framework: tian2020's and sumanjali2024's final and best
    validation accuracy, epochs and training time to the target, florencio2019's test
    accuracy after its epoch; each the median over trials with its interval."""
    frame, notes = real_data_trials(data.trials), formatting.Notes()
    columns = [c for e in REAL_DATA if e in wording.unique(frame, "experiment") for c in
               ACCURACY_TABLE[e]]
    axes = tables.varying(frame, wording.TRAINING_AXES) or ["model"]
    uniform = formatting.one_level(m["level"] for _, g in _groups(frame) for c, _ in columns
                                   for m in [median_interval(g[c])] if m["n"] > 1)
    rows = []
    for key, group in _groups(frame):
        values = []
        for column, header in columns:
            if (column, header) not in ACCURACY_TABLE[key["experiment"]]:
                values.append("—")
            elif column in ("epochs_to_accuracy", "time_to_accuracy_ns"):
                values.append(_to_target(group, column, notes, uniform))
            else:
                values.append(_median_text(group[column], column, notes,
                                           "no trial recorded it", uniform))
        rows.append([wording.text(key[a]) for a in axes]
                    + [wording.label(key["framework"]), str(len(group)), *values])
    caption = ("Accuracy of the real-data experiments per cell and framework, from the same "
               "initial weights and batch order in both: the median over trials of the "
               "validation accuracy on the test set after the last epoch (final) and at the "
               "best epoch (best), the epochs and the training time (validation passes "
               "excluded, as tian2020 subtracts them) to the target accuracy "
               f"{wording.join(wording.unique(frame, 'target_accuracy')) or '(none set)'} "
               "over the trials that reached it, and the epoch experiment's test accuracy after "
               "training; each with the distribution-free interval of the median over trials ("
               f"{formatting.level_phrase(uniform, formatting.nominal(data.statistics))}; — "
               "where the experiment does not measure it)."
               f"{formatting.level_sentence(uniform, formatting.nominal(data.statistics))} "
               "Epochs per trial: "
               f"{formatting.span(frame.get('n_epochs', []))}. Data: {data_sources(data.trials)}. "
               f"{tables.constant(frame, wording.TRAINING_AXES)}")
    return tables.table(numbering, "accuracy", caption,
                        [tables.axis_header(a) for a in axes] + ["Framework", "Trials"]
                        + [header for _, header in columns], rows, notes,
                        f"No accuracy was measured: {no_real_data(data.trials)}.",
                        classes=[""] * (len(axes) + 1) + ["num"] * (1 + len(columns)))


SECTION = Section(key="accuracy", place="results", order=20, title="Accuracy and convergence",
                  context=lambda b: context(b.numbering, b.data),
                  shown=lambda c: bool(c["accuracy"]["table"]["number"]))
