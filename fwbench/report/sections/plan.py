"""The analysis plan as the method section prints it: the config's `statistics` block (levels,
margin, family, quality rules), every level and margin the report states read from it or from
the statistics' own columns, and the sensitivity analysis beside the primary one when the
statistics wrote it. Nothing here is a constant of the report."""

from __future__ import annotations

from fwbench.analysis.claims import wording
from fwbench.analysis.comparisons import NOT_ESTIMABLE
from fwbench.analysis.steady_state import CLASSES
from fwbench.plan.sizing import axis_text
from fwbench.report import formatting, tables
from fwbench.report.formatting import fmt
from fwbench.report.inputs import Inputs
from fwbench.report.sections.unmeasured import for_readers

# The quality classes and findings as a reader reads them.
CLASS_WORDS = {"warmup": "warm-up", "switching": "host switching",
               "no_steady_state": "no steady state",
               "unsteady_warmup": "a warm-up that never settled"}


def meanings() -> dict[str, str]:
    """What each key of the plan means: the first sentence of its description in the config
    schema, so the table says what the schema says (its code marks dropped: a table cell is
    plain text)."""
    from fwbench.plan.config import load_schema

    spec = load_schema()["properties"]["statistics"].get("properties", {})
    return {key: for_readers(str(value.get("description", "")).replace("`", ""))
            .split(". ")[0].rstrip(".") for key, value in spec.items()}


def plan_value(key: str, value) -> str:
    """A plan value as text: a coverage as a percentage, a margin as ± a percentage."""
    if key == "pilot":
        return wording.join(pilot_entry(entry) for entry in value)
    if isinstance(value, dict):
        return "; ".join(f"{k.replace('_', ' ')} {plan_value(k, v)}" for k, v in value.items())
    if isinstance(value, list):
        return wording.join(CLASS_WORDS.get(v, plan_value(key, v)) if key ==
                            "sensitivity_leaves_out" else plan_value(key, v) for v in value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if key in ("rope", "margin", "control_margin"):
        return "±" + wording.percent(value)
    if key in ("confidence", "alpha") or key.endswith("_level"):
        return wording.percent(value)
    return fmt(value, "setting")


def pilot_entry(entry: dict) -> str:
    """A sizing pilot's SD and what it sizes: "0.12 for resnet18 train", "0.09 for PyTorch's
    A/A control of lenet5 infer"."""
    values = " ".join(axis_text(v) for k, v in entry.items() if k not in ("sd", "framework"))
    what = (f"{wording.label(entry['framework'])}'s A/A control of {values}"
            if "framework" in entry else values)
    return f"{plan_value('sd', entry['sd'])} for {what}"


def plan_table(numbering: tables.Numbering, plan: dict) -> dict:
    said = meanings()
    rows = [[key, said.get(key) or key.replace("_", " "), plan_value(key, value)]
            for key, value in plan.items()]
    return tables.table(numbering, "plan", "The analysis plan: the config's `statistics` "
                        "block, each key with what the config schema says it means.",
                        ["Key", "Meaning", "Value"], rows, formatting.Notes(),
                        "The run records no analysis plan.", wide=False)


def margin(data: Inputs) -> str:
    """The equivalence margin as the plan states it, else as the statistics recorded it."""
    plan = data.statistics
    for key in ("margin", "rope"):
        if isinstance(plan.get(key), (int, float)):
            return plan_value(key, plan[key])
    return recorded_margin(data.comparisons) or "the plan's"


def recorded_margin(rows) -> str:
    """The margin a statistics table's rows were read with, as "±5 %"; "" where they hold
    none, or several (the comparisons' ``rope``, the A/A controls' own margin)."""
    high = wording.unique(rows, "rope_high")
    return ("±" + wording.percent(float(high[0]) - 1)) if len(high) == 1 else ""


def statistics_sentences(data: Inputs) -> dict:
    """The error control in words, its levels from the plan and the comparisons."""
    frame, plan = data.comparisons, data.statistics
    confidence = plan.get("confidence")
    joint = wording.percent(confidence) if isinstance(confidence, (int, float)) else None
    sizes = wording.unique(frame, "family_size")
    levels = sorted({wording.percent(v) for v in frame.get("ratio_ci_level", [])
                     if not wording.missing(v)})
    families = wording.unique(frame, "family")
    if not sizes or not joint:
        control = ("Each interval holds on its own; no correction across comparisons was "
                   "recorded." if not sizes else "")
    else:
        named = f"{wording.join(f'`{f}`' for f in families)}: " if families else ""
        noun = "comparison" if sizes == ["1"] else "comparisons"
        apiece = " each" if len(families) > 1 or len(sizes) > 1 else ""
        counted = f"{wording.join(sizes)} {noun}{apiece}"
        each = f" (here each at {wording.join(levels)})" if levels else ""
        control = (f"One error rate holds across each family of comparisons ({named}"
                   f"{counted}): every interval of a family is "
                   f"widened so that the family's intervals hold together at {joint}{each}, "
                   "and a pair is faster when its interval excludes 1.")
    return {"error_control": control, "margin": margin(data)}


def sensitivity_table(numbering: tables.Numbering, data: Inputs) -> dict:
    """The analysis without the quality classes' trials, beside the primary one (when the
    statistics wrote it): what it leaves out is said once, in the caption."""
    frame, notes = tables.sorted_rows(data.sensitivity), formatting.Notes()
    axes = tables.shown_axes(frame) if len(frame) else []
    rows = []
    for _, row in frame.iterrows():
        primary = wording.OUTCOME_LABELS.get(str(row.get("primary_verdict")), "")
        if row.get("verdict") == NOT_ESTIMABLE:  # every trial of a side left out
            rows.append([str(row.get(a, "")) for a in axes] + [
                formatting.cell_text(row, "excluded", notes, "not recorded", wording.text),
                "—", "—", "not estimable (n = 0)", primary or "—"])
            continue
        rows.append([str(row.get(a, "")) for a in axes] + [
            formatting.cell_text(row, "excluded", notes, "not recorded", wording.text),
            formatting.cell_text(row, "ratio", notes, "no ratio", wording.ratio),
            formatting.interval_text(row, "ratio_ci_low", "ratio_ci_high", notes,
                                     "too few pairs left for an interval"),
            formatting.verdict_text(row, notes), primary or "—"])
    named = [CLASS_WORDS.get(c.strip(), c.strip()) for w in wording.unique(frame, "without")
             for c in w.split(",")]
    left_out = wording.join(named) or "the quality classes"
    return tables.table(numbering, "sensitivity", "Sensitivity analysis: each comparison "
                        f"again without the trials of {left_out} (Left out: how many), beside "
                        "the primary verdict, which uses every ok trial.",
                        [tables.axis_header(a) for a in axes]
                        + ["Left out", "Ratio", "Interval", "Verdict", "Primary"], rows, notes,
                        "The statistics wrote no sensitivity analysis.",
                        classes=[""] * len(axes) + ["num", "num", "num", "", ""])


def plan_status(data: Inputs) -> str:
    """Whether the trials recorded this plan before they ran (stats/plan.csv), in words."""
    frame = data.plan
    if frame.empty or "trials" not in frame:
        return "The run's statistics do not say whether the trials recorded the plan."
    row = frame.iloc[0]

    def number(column: str) -> int:
        value = row.get(column)
        return 0 if wording.missing(value) else int(value)

    total, same, other = number("trials"), number("trials_same_plan"), number("trials_other_plan")
    if total and same == total:
        return (f"Every trial recorded this plan's hash (`{row.get('plan_hash')}`) before it "
                "ran: the plan was fixed before the data were measured.")
    if other:
        return (f"{wording.count(other, 'trial')} of {total} recorded another plan: the "
                "analysis changed after those data were measured.")
    return (f"{wording.count(total - same, 'trial')} of {total} recorded no plan (measured "
            "before trials recorded it), so this report cannot show that the plan preceded "
            "them.")


def quality_sentence(data: Inputs) -> str:
    """The trials' quality classes per framework (each trial is in one), the warm-ups that never
    settled (a finding beside the class, not a class), and the test of whether they differ."""
    frame = data.quality
    if frame.empty or "framework" not in frame:
        return ""
    parts = []
    for _, row in frame.iterrows():
        counts = wording.join([f"{wording.text(row[f'n_{c}'])} {CLASS_WORDS.get(c, c)}"
                               for c in CLASSES if not wording.missing(row.get(f"n_{c}"))])
        unsettled = row.get("n_unsteady_warmup")
        also = (f" ({wording.text(unsettled)} of them with a warm-up that never reached a "
                "steady state)" if not wording.missing(unsettled) and unsettled else "")
        parts.append(f"{wording.label(row['framework'])}: {counts} of "
                     f"{wording.count(int(row['n_trials']), 'trial')}{also}")
    p = wording.unique(frame, "fisher_p")
    test = (f"; whether they differ between the frameworks: p = {wording.fmt_p(float(p[0]))} "
            f"({frame['test'].iloc[0].split(',')[0]})" if len(p) == 1 and "test" in frame
            else "")
    return f"Trials by quality class: {'; '.join(parts)}{test}."
