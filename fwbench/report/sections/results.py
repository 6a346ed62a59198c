"""Sections 3.1 to 3.6, Results: PyTorch against TensorFlow pair by pair (relative time, speed-up
heatmap, the comparisons table), every cell (table, throughput), batch size, the tests, and
energy, achieved FLOP/s and one trial's telemetry."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fwbench.analysis.claims import wording
from fwbench.analysis.claims.florencio import TELEMETRY_LABELS, telemetry_absent
from fwbench.analysis.controls import passed
from fwbench.analysis.telemetry_trace import CHOICE
from fwbench.report import formatting, tables
from fwbench.report.facts import first_message
from fwbench.report.figures import flops, speed, telemetry
from fwbench.report.figures.style import Figure
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section, drawn, machine, placed
from fwbench.report.sections.plan import recorded_margin


def context(numbering: tables.Numbering, data: Inputs, failures: dict) -> dict:
    """The results' tables in document order; ``failures``: pair id -> why it is incomplete."""
    peaks = data.flops.get("peak_flops", [])
    return {"comparisons": comparison_table(numbering, data, failures),
            "controls": control_table(numbering, data),
            "cells": cell_table(numbering, data, failures),
            "failed_pairs": (f"The {wording.count(len(failures), 'pair')} whose trials failed "
                             "are kept and marked as not measured, with the reason."
                             if failures else ""),
            "peak_known": any(not wording.missing(p) for p in peaks)}


def figures(data: Inputs, folder: Path, failures: dict) -> dict[str, Figure]:
    """The results' figures in document order, drawn into ``folder`` or left out."""
    comparisons, stats, trials = data.comparisons, data.cell_stats, data.trials
    return {
        "relative_time": speed.relative_time(comparisons, failures, folder, title="Relative time",
                                             absent=no_pair_reason(trials)),
        "speedup_heatmap": speed.speedup_heatmap(comparisons, failures, folder),
        "throughput": speed.throughput(stats, folder),
        "inference_vs_batch": speed.time_vs_batch(stats, folder, source="patel2023 Fig. 4"),
        "energy": telemetry.per_cell_metric(
            trials, folder, key="energy_per_sample", title="Energy per sample",
            column="energy_per_sample_j", label=TELEMETRY_LABELS["energy_per_sample_j"],
            absent=telemetry_absent(trials, "energy_per_sample_j")),
        "flops": flops.achieved_flops(data.flops, folder, absent=tables.absent_reason(
            data, "flops", "the statistics computed no achieved FLOP/s (stats/flops.csv, rule "
                           "summarise_flops)")),
        "telemetry": telemetry.telemetry_trace(data.telemetry_trace, folder, chosen=CHOICE,
                                               absent=tables.absent_reason(data, "telemetry_trace",
                                                                           TRACE_ABSENT)),
    }


def no_pair_reason(trials) -> str:
    """Why no pair has a ratio: a run of one framework has no second side."""
    measured = wording.unique(trials, "framework")
    if len(measured) == 1:
        return (f"the run measured {wording.label(measured[0])} alone, so no pair has both "
                "frameworks")
    return "no matched pair has ok trials of both frameworks"


TRACE_ABSENT = ("the tables hold no telemetry trace: no trial ended ok, or the rule "
                "collect_telemetry_trace did not run (tables/telemetry_trace.parquet)")


def comparison_table(numbering: tables.Numbering, data: Inputs, failures: dict) -> dict:
    frame, notes = tables.sorted_rows(data.comparisons), formatting.Notes()
    axes = tables.varying(frame, wording.PAIR_AXES) or ["model"]
    problem = data.problems.get("comparisons")
    no_ratio = (f"no statistics ({problem})" if problem else
                "the statistics computed no ratio (both frameworks need ok trials)")
    methods = formatting.interval_methods(frame)
    level_column = ("ratio_ci_family_level" if "ratio_ci_family_level" in frame
                    else "ratio_ci_level")
    uniform = formatting.uniform_level(frame, level_column)
    joint = formatting.nominal(data.statistics)
    per_row_method = len(methods) > 1  # one method for all: said once, in the caption
    rows = []
    for _, row in frame.iterrows():
        cells = [str(row.get(a, "")) for a in axes]
        if "ratio" not in row.index or wording.missing(row["ratio"]):
            # no ratio: one reason (the failed trials) stands for every column of the pair
            reason = notes.missing(failures.get(row.get("pair_id"), no_ratio))
            rows.append(cells + [reason] * (7 if per_row_method else 6))
            continue
        method = [formatting.cell_text(row, "ratio_method", notes, "no interval method recorded")]
        level = row.get(level_column)  # said only when the family falls short of the plan
        level = level if not wording.missing(level) and float(level) < joint - 1e-9 else None
        interval = formatting.interval_text(row, "ratio_ci_low", "ratio_ci_high", notes,
                                            "no interval computed")
        if (level is not None and float(level) <= 0
                and not isinstance(interval, formatting.NotMeasured)):
            interval, level = f"{interval} (no joint coverage)", None
        rows.append(cells + [
            formatting.cell_text(row, "ratio", notes, no_ratio, wording.sig),
            formatting.with_level(interval, level, uniform, joint),
            *(method if per_row_method else []),
            formatting.cell_text(row, _test_p(row), notes, "too few trials for a test",
                                 wording.fmt_p),
            formatting.cell_text(row, "p_adjusted", notes, "no adjusted p (no test)",
                                 wording.fmt_p),
            _cliffs(row, notes),
            formatting.verdict_text(row, notes),
        ])
    interval = (f" Interval: {methods[0]}." if len(methods) == 1 else
                "" if methods else " No interval method was recorded.")
    tests = ({TEST_NAMES[_test_p(row)] for _, row in frame.iterrows()}
             or {TEST_NAMES["paired_p"]})
    caption = ("The time ratio per matched pair with its interval, the p of the test that "
               f"interval inverts, {' or '.join(sorted(tests))} (raw, and adjusted within the "
               "family), and Cliff's delta (above 0: PyTorch slower). The intervals of one "
               f"family hold together {formatting.level_phrase(None, joint)} (Section 2.6); "
               f"the verdict reads the interval alone.{interval}"
               f"{_family_level_sentence(uniform, joint)} "
               f"{tables.constant(frame, wording.PAIR_AXES)} "
               + machine.holds_for(data.trials, "The ratios hold")).rstrip()
    why = data.problems.get("comparisons", "no matched pair was compared")
    return tables.table(numbering, "comparisons", caption,
                        [tables.axis_header(a) for a in axes] + ["Ratio", "Interval"]
                        + (["Method"] if per_row_method else []) + ["p", "p (Bonferroni)",
                                                                    "Cliff's δ", "Verdict"],
                        rows, notes, f"No comparison: {why}.",
                        classes=[""] * len(axes) + ["num", "num"] + ([""] if per_row_method else [])
                        + ["num", "num", "", ""])


# The test a comparison's interval inverts, whose p `p_adjusted` adjusts: the paired t where
# the trials pair, else the Mann-Whitney U (fwbench.analysis.comparisons).
TEST_NAMES = {"paired_p": "the paired t test of the pairs' log ratios",
              "mannwhitney_p": "the Mann-Whitney U test of the trials' values"}


def _test_p(row) -> str:
    return "paired_p" if not wording.missing(row.get("paired_p")) else "mannwhitney_p"


def control_table(numbering: tables.Numbering, data: Inputs) -> dict:
    """The A/A controls (stats/controls.csv): the run's own check of false positives, each
    control's ratio of a cell to itself with its interval and whether it passed."""
    rows = [[f"{wording.label(r.framework)} {r.model} {r.phase}, batch {r.batch_size}",
             f"{int(r.n_pairs)}", formatting.fmt(r.ratio, "ratio"),
             formatting.fmt_interval(r.ratio_ci_low, r.ratio_ci_high),
             formatting.fmt_interval(r.equivalence_ci_low, r.equivalence_ci_high),
             "passed" if ok else "failed", str(r.note)]
            for r, ok in zip(data.controls.itertuples(), passed(data.controls))]
    level = (wording.percent(float(data.controls["ratio_ci_level"].iloc[0]))
             if len(data.controls) else "")
    caption = ("A/A controls: one cell of one framework in both slots of a pair, measured and "
               "analysed as a comparison is (slot a over slot b), in a family of their own. A "
               "control passes when its ratio is equivalent to 1 within the plan's margin for "
               f"controls{_bracketed(recorded_margin(data.controls))}; one that fails marks the "
               f"run preliminary. Interval at {level}; equivalence read from the TOST interval "
               "beside it.")
    return tables.table(numbering, "controls", caption,
                        ["Control", "Pairs", "Ratio", "Interval", "Equivalence interval",
                         "Result", "Note"], rows, formatting.Notes(),
                        "The run has no A/A controls.",
                        classes=["", "num", "num", "num", "num", "", ""])


def _bracketed(text: str) -> str:
    return f" ({text})" if text else ""


def _family_level_sentence(level, joint: float) -> str:
    if level is None or not level < joint - 1e-9:
        return ""
    together = (f"hold together at only {wording.percent(level)}" if level > 0 else
                "have no guaranteed joint coverage")
    return (f" With so few trials {wording.percent(joint)} cannot be reached: each family's "
            f"intervals {together}, and none decides a verdict.")


def _cliffs(row, notes: formatting.Notes):
    delta = formatting.cell_text(row, "cliffs_delta", notes, "too few trials for an effect size",
                                 wording.sig)
    if isinstance(delta, formatting.NotMeasured) or wording.missing(row.get("cliffs_magnitude")):
        return delta
    return f"{delta} ({row['cliffs_magnitude']})"


def cell_table(numbering: tables.Numbering, data: Inputs, failures: dict) -> dict:
    frame, notes = data.cell_stats, formatting.Notes()
    if frame.empty:
        frame = data.cells
    frame = tables.sorted_rows(frame, ["framework"])
    axes = tables.varying(frame, wording.PAIR_AXES) or ["model"]
    status = _cell_status(data.trials)
    shared, legend = _shared_warnings(frame), tables.Legend("W")
    uniform = formatting.uniform_level(frame, "ci_level")
    nominal = formatting.nominal(data.statistics)
    rows = []
    for _, row in frame.iterrows():
        failed = status.get(str(row.get("cell_id")), "no ok trial")
        rows.append([str(row.get(a, "")) for a in axes] + [wording.label(row.get("framework")),
            _trial_count(row, notes),
            formatting.cell_text(row, "median_ns", notes, failed, wording.fmt_duration),
            formatting.with_level(formatting.interval_text(row, "ci_low_ns", "ci_high_ns", notes,
                                                           failed, wording.fmt_duration),
                                  row.get("ci_level"), uniform, nominal),
            formatting.cell_text(row, "iqr_ns", notes, failed, wording.fmt_duration),
            formatting.cell_text(row, "cv", notes, "needs two ok trials", wording.sig),
            formatting.cell_text(row, "throughput_sps", notes, failed, wording.sig),
            formatting.cell_text(row, "cold_start_median_ns", notes, failed, wording.fmt_duration),
            legend.cite(_cell_remarks(row, shared)),
        ])
    caption = ("Every cell: trials ended ok of those run (Ok); median of the trials' median "
               "iteration times with its confidence interval "
               f"({formatting.level_phrase(uniform, nominal)}), "
               "interquartile range and coefficient of variation between trials; throughput "
               "(samples/s); median cold-start iteration (Cold). "
               f"{tables.constant(frame, wording.PAIR_AXES)}"
               f"{formatting.level_sentence(uniform, nominal)}"
               + tables.every_cell(shared))
    why = data.problems.get("cell_stats", "no cell was summarized")
    return tables.table(numbering, "cells", caption,
                        [tables.axis_header(a) for a in axes]
                        + ["Framework", "Ok", "Median", "Interval", "IQR", "CV",
                           "Samples/s", "Cold", "Remarks"],
                        rows, notes, f"No cell statistics: {why}.",
                        classes=[""] * (len(axes) + 1) + ["num"] * 7 + [""], legend=legend)


def _warning_list(value) -> list[str]:
    return [] if wording.missing(value) else [w.strip() for w in str(value).split(";") if w.strip()]


def _shared_warnings(frame: pd.DataFrame) -> list[str]:
    """Warnings every cell carries: said once in the caption rather than in every row."""
    if "warnings" not in frame or len(frame) < 2:
        return []
    lists = [_warning_list(v) for v in frame["warnings"]]
    return [w for w in lists[0] if all(w in other for other in lists[1:])]


def _cell_status(trials: pd.DataFrame) -> dict:
    if trials.empty or "status" not in trials:
        return {}
    failed = trials[trials["status"] != "ok"]
    return {str(cell): f"{wording.join(sorted(set(g['status'])))}: "
                       f"{first_message(g) or 'no message'}"
            for cell, g in failed.groupby("cell_id", sort=True)}


def _trial_count(row, notes: formatting.Notes):
    if wording.missing(row.get("n_ok")) or wording.missing(row.get("n_trials")):
        return notes.missing("the statistics have no trial counts")
    return f"{int(row['n_ok'])}/{int(row['n_trials'])}"


def _cell_remarks(row, shared: list[str]) -> list[str]:
    parts = [w for w in _warning_list(row.get("warnings")) if w not in shared]
    if not wording.missing(row.get("status")) and str(row["status"]) != "ok":
        parts.append(f"{row['status']}: {row.get('message', '')}".strip(": "))
    return parts


def parts(context: dict) -> list[tuple[str, str]]:
    """Section 3's subsections that have something measured to show: its own four, then those
    placed in it (fwbench.report.sections)."""
    present = [
        ("relative", "Relative time", True),
        ("cells", "Every cell", True),
        ("batch", "Batch size", drawn(context, "inference_vs_batch")),
        ("energy", "Energy, achieved FLOP/s and telemetry",
         drawn(context, "energy", "flops", "telemetry")),
        *((s.id, s.title, s.shown(context)) for s in placed("results")),
    ]
    return [(key, title) for key, title, shown in present if shown]


SECTION = Section(key="results", place="body", order=30, title="Results", parts=parts,
                  context=lambda b: context(b.numbering, b.data, b.reasons), figures=figures)
