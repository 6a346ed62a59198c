"""Section 2, Method: what was measured, the software and settings in force (Table: settings),
the two framework environments (Table: stack), the hardware, repetitions and the statistics."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims import wording
from fwbench.analysis.comparisons import NOT_ESTIMABLE
from fwbench.analysis.trial_quality import adjacency_summary, steadiness_summary
from fwbench.report.facts import column_or_none, is_native, pinned, rows_where
from fwbench.report.formatting import Notes, NotMeasured, count, interval_methods, span
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section, machine, plan
from fwbench.report.sections.hypothesis_tests import fitting_tests
from fwbench.report.tables import Numbering, table


def context(numbering: Numbering, data: Inputs, soft: list[dict], facts: dict) -> dict:
    """The method section: its tables, numbered in document order, and its sentences."""
    return {"settings": settings_table(numbering, soft),
            "stack": stack_differences(numbering, data.trials),
            "plan": plan.plan_table(numbering, data.statistics),
            "sensitivity": plan.sensitivity_table(numbering, data),
            "sweep": sweep_sentence(facts), "machine": machine.describe(data.trials),
            "plan_status": plan.plan_status(data), "quality": plan.quality_sentence(data),
            **plan.statistics_sentences(data), **method(data, soft)}


def sweep_sentence(facts: dict) -> str:
    """What the sweep crossed, each axis in the right number."""
    def axis(values: list[str], noun: str, plural: str | None = None) -> str:
        return f"{noun if len(values) == 1 else plural or noun + 's'} " \
               f"{wording.join(values) or 'none'}"

    return (f"The sweep crosses the {axis(facts['experiments'], 'experiment')}, "
            f"{wording.join(facts['frameworks']) or 'no framework'}, the "
            f"{axis(facts['models'], 'model')}, the {axis(facts['phases'], 'phase')}, the "
            f"{axis([wording.DEVICE_NAMES.get(d, d) for d in facts['devices']], 'device')}, "
            f"{axis(facts['batch_sizes'], 'batch size')}, "
            f"{axis(facts['precisions'], 'precision')}, the "
            f"{axis(facts['modes'], 'execution-mode pair')} and the "
            f"{axis(facts['profiles'], 'settings profile')}: {facts['n_cells']} cells forming "
            f"{facts['n_pairs']} matched pairs (the same cell in both frameworks).")


def method(data: Inputs, soft: list[dict]) -> dict:
    trials, comparisons = data.trials, data.comparisons
    per_cell = span(trials.groupby("cell_id").size()) if "cell_id" in trials else "no"
    kept = "; ".join(f"{s['label']} trials kept {count(s['iterations'], 'timed iteration')} "
                     f"after {count(s['warmup'], 'warm-up iteration')}" for s in soft)
    hints = (sum(wording.is_exploratory(r) for _, r in comparisons.iterrows())
             if "exploratory" in comparisons else 0)
    return {
        "repetitions": f"Cells had {count(per_cell, 'trial')}" + (f"; {kept}." if kept else "."),
        "interleaved": "run_order" in trials,
        "ratio_methods": interval_methods(comparisons),
        "families": (count(len(wording.unique(fitting_tests(data), "family")), "family",
                           "families") if "family" in data.tests else ""),
        "exploratory": (f"{count(hints, 'comparison')} {'is' if hints == 1 else 'are'} "
                        "exploratory (too few usable trials on a side, or trials that never "
                        "reached a steady warm-up or drift within their timed iterations): "
                        "their verdicts, and every claim judged from them, are labelled as "
                        "hints, not findings." if hints else ""),
        "pairs": _adjacency_sentence(adjacency_summary(trials)),
        "steadiness": _steadiness_sentence(steadiness_summary(trials, data.cell_stats,
                                                              comparisons), data.sensitivity),
    }


def _adjacency_sentence(summary: dict) -> str:
    """How many interleaved pairs really ran back to back, as the trials recorded it."""
    n = summary["pairs"]
    if not n:
        return ""
    if not summary["recorded"]:
        return (f"Whether the two trials of each of the {n} pairs ran back to back was not "
                "recorded in this run (its trials table has no `pair_adjacent` column), so the "
                "paired blocks test pairs all of them, as planned.")
    sentence = (f"{summary['adjacent']} of {n} pairs (trial k of PyTorch and of TensorFlow) ran "
            "back to back, with no other trial between them")
    if summary["adjacent"] < n:
        gaps = [f"{int(summary['max_pair_gap_trials'])} trials"
                if "max_pair_gap_trials" in summary else "",
                wording.fmt_duration(summary["max_pair_gap_s"] * 1e9)
                if "max_pair_gap_s" in summary else ""]
        gaps = ", ".join(g for g in gaps if g)
        sentence += f" (the widest gap: {gaps})" if gaps else ""
        sentence += "; the paired blocks test uses only the adjacent ones"
    return sentence + "."


def _steadiness_sentence(summary: dict, sensitivity: pd.DataFrame) -> str:
    """How many ok trials cannot support a verdict; then, read from the sensitivity table, the
    comparisons it left trials out of, those not estimable and those left exploratory."""
    if summary["unsteady"] is None or not summary["ok"]:
        return ""
    sentence = (f"Of the {summary['ok']} ok trials, {summary['unsteady']} never reached a steady "
            f"warm-up and {summary['drifting']} drift within their timed iterations "
            f"({summary['drift_source']}); the primary analysis keeps them")
    rows = sensitivity[(sensitivity.get("analysis") == "without quality classes")
                       & (pd.to_numeric(sensitivity.get("excluded"), errors="coerce") > 0)
                       ] if len(sensitivity) else sensitivity
    if len(rows):
        lost = int((rows["verdict"] == NOT_ESTIMABLE).sum())
        short = int(rows["exploratory"].fillna(False).astype(bool).sum())
        sentence += (f", and the sensitivity analysis leaves the trials of its quality classes "
                     f"out of {count(len(rows), 'comparison')}: {lost} of them not estimable "
                     f"(every trial of a side left out) and {short} with too few trials left "
                     "for a verdict")
    return sentence + "."


def settings_table(numbering: Numbering, soft: list[dict]) -> dict:
    rows = [[s["label"], s["version"], s["threads_intra"], s["threads_inter"],
             s["threads_requested"], s["mode"], s["layout"], str(s["trials"]), s["iterations"],
             s["warmup"]] for s in soft]
    return table(numbering, "settings", "Settings in force, as each trial recorded them: "
                 "intra-op and inter-op threads in force and threads requested, execution "
                 "mode, layout, trials, and the timed and warm-up iterations per trial.",
                 ["Framework", "Version", "Intra-op", "Inter-op", "Requested", "Mode",
                  "Layout", "Trials", "Timed", "Warm-up"],
                 rows, Notes(), "No trial recorded its settings.")


# Trials-table columns (fwbench.analysis.tables.environment_columns) that make up a framework's
# stack.
STACK_ITEMS = {
    "cuda": "CUDA (framework build)",
    "cudnn": "cuDNN (framework build)",
    "python": "Python",
    "platform": "OS/platform",
    "container": "container image",
    "image_digest": "image digest",
}

# Columns a trial fills from its env.json: one of them set means the trial recorded its environment.
ENVIRONMENT_COLUMNS = ("hostname", "platform", "python", "cpu_model", "container")

NATIVE = "none (native)"


def _recorded(row) -> bool:
    return any(not wording.missing(row.get(c)) for c in ENVIRONMENT_COLUMNS)


def _stack_value(row, column: str) -> str | None:
    """One trial's value of a stack item as text; None where the trial recorded no environment."""
    if column in ("container", "image_digest"):
        container = row.get("container")
        if wording.missing(container):
            return None
        if is_native(container):
            return NATIVE
        if column == "container":
            return str(container)
        digest = row.get("image_digest")
        return str(digest) if pinned(digest) else "none (unpinned)"
    value = row.get(column)
    if not wording.missing(value) and str(value).strip():
        return wording.text(value)
    if column in ("cuda", "cudnn") and _recorded(row):
        return "none (not in this build)"
    return None


def stack_differences(numbering: Numbering, trials: pd.DataFrame) -> dict:
    """Per framework: CUDA and cuDNN of its build, Python, OS, image and digest, from the trials
    table; which are the same in both environments and which differ; where each was measured."""
    frameworks = wording.unique(trials, "framework")
    notes, rows = Notes(), []
    status: dict[str, list[str]] = {"same": [], "differ": [], "unknown": []}
    has_any = any(c in trials for c in STACK_ITEMS)
    for column, title in (STACK_ITEMS.items() if has_any and frameworks else []):
        source = "container" if column == "image_digest" else column
        values = []
        for framework in frameworks:
            part = trials[trials["framework"].astype(str) == framework]
            if source not in trials:
                values.append(notes.missing(f"the trials table has no `{source}` column"))
                continue
            found = [_stack_value(row, column) for _, row in part.iterrows()]
            known = sorted({v for v in found if v is not None})
            if not known:
                values.append(notes.missing("no trial of this framework recorded its environment "
                                            "(no env.json beside its result)"))
                continue
            unrecorded = found.count(None)
            values.append(wording.join(known)
                          + (f" ({unrecorded} of {len(found)} trials recorded none)"
                             if unrecorded else ""))
        compared = []
        if len(frameworks) > 1:
            if any(isinstance(v, NotMeasured) for v in values):
                kind = "unknown"
            else:
                kind = "same" if len(set(values)) == 1 else "differ"
            status[kind].append(title)
            compared = [{"same": "same", "differ": "differs", "unknown": "unknown"}[kind]]
        rows.append([title, *values, *compared])
    labels = [wording.label(f) for f in frameworks]
    listed = table(
        numbering, "stack", "Stack of each framework environment, from the environment every "
        "trial recorded (its env.json): the CUDA and cuDNN versions the framework was built "
        "against, Python, the operating system, and the container image with its digest. The "
        "libraries actually loaded, the compiler and every package are in the version audit "
        "(Appendix A).",
        ["Item", *labels] + (["In both"] if len(frameworks) > 1 else []), rows, notes,
        "No stack can be listed: the trials table has none of the columns "
        + wording.join(f"`{c}`" for c in STACK_ITEMS)
        + " (fwbench.measure.results reads them from each trial's env.json).",
        classes=["", *["id"] * len(labels), ""])
    return {"table": listed, "frameworks": labels, **status,
            "where": [s for f in frameworks for s in _where_measured(trials, f)]}


def _where_measured(trials: pd.DataFrame, framework: str) -> list[str]:
    """Sentences saying where one framework's trials ran: natively, or in which image."""
    if "container" not in trials:
        return []
    part = trials[trials["framework"].astype(str) == framework]
    who, total, out = wording.label(framework), len(part), []

    def count(n: int) -> str:
        if n == total:
            return f"all {n} trials" if n > 1 else "its one trial"
        return f"{n} of {total} trials"

    native = rows_where(part, [is_native(c) for c in part["container"]])
    if len(native):
        out.append(f"{who}: {count(len(native))} measured natively, no container image "
                   "(container: none).")
    digests = column_or_none(part, "image_digest")
    contained = rows_where(part, [not wording.missing(c) and not is_native(c)
                                  for c in part["container"]])
    for image, group in contained.groupby(contained["container"].astype(str), sort=True):
        by_digest = sorted({str(d) for d in digests[group.index] if pinned(d)})
        n_unpinned = sum(not pinned(d) for d in digests[group.index])
        if by_digest:
            out.append(f"{who}: {count(len(group) - n_unpinned)} ran in the image `{image}`, "
                       f"pinned by its digest {wording.join(f'`{d}`' for d in by_digest)}.")
        if n_unpinned:
            out.append(f"{who}: {count(n_unpinned)} ran in the image `{image}` with no sha256 "
                       "digest on record: unpinned.")
    unknown = int(part["container"].isna().sum())
    if unknown:
        out.append(f"{who}: {count(unknown)} recorded no environment, so where they ran is "
                   "unknown.")
    return out


# Section 2's subsections, always present.
PARTS = [("measured", "What was measured"), ("software", "Software and settings"),
         ("stack", "The two framework environments"), ("hardware", "Hardware"),
         ("timing", "Repetitions and timing"), ("statistics", "Statistics")]

SECTION = Section(key="method", place="body", order=20, title="Method", parts=lambda c: PARTS,
                  context=lambda b: context(b.numbering, b.data, b.software, b.facts))
