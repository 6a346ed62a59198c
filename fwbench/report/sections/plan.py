"""The analysis plan as the method section prints it: the config's `statistics` block (levels,
margin, family, quality rules), every level and margin the report states read from it or from
the statistics' own columns, and the sensitivity analysis beside the primary one when the
statistics wrote it. Nothing here is a constant of the report."""

from __future__ import annotations

from fwbench.analysis.claims import wording
from fwbench.report import formatting, tables
from fwbench.report.inputs import Inputs


def meanings() -> dict[str, str]:
    """What each key of the plan means: the first sentence of its description in the config
    schema, so the table says what the schema says."""
    from fwbench.plan.config import load_schema

    spec = load_schema()["properties"]["statistics"].get("properties", {})
    return {key: " ".join(str(value.get("description", "")).split()).split(". ")[0].rstrip(".")
            for key, value in spec.items()}


def plan_value(key: str, value) -> str:
    """A plan value as text: a coverage as a percentage, a margin as ± a percentage."""
    if isinstance(value, dict):
        return "; ".join(f"{k.replace('_', ' ')} {plan_value(k, v)}" for k, v in value.items())
    if isinstance(value, list):
        return wording.join(plan_value(key, v) for v in value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if key in ("rope", "margin"):
        return "±" + wording.percent(value)
    if key in ("confidence", "alpha") or key.endswith("_level"):
        return wording.percent(value)
    return wording.text(value) if float(value).is_integer() else wording.sig(value)


def plan_table(numbering: tables.Numbering, plan: dict) -> dict:
    said = meanings()
    rows = [[key, said.get(key) or key.replace("_", " "), plan_value(key, value)]
            for key, value in plan.items()]
    return tables.table(numbering, "plan", "The analysis plan: the config's `statistics` "
                        "block, fixed before the trials ran.", ["Key", "Meaning", "Value"],
                        rows, formatting.Notes(), "The run records no analysis plan.",
                        wide=False, classes=["id", "", "num"])


def margin(data: Inputs) -> str:
    """The equivalence margin as the plan states it, else as the statistics recorded it."""
    plan = data.statistics
    for key in ("margin", "rope"):
        if isinstance(plan.get(key), (int, float)):
            return plan_value(key, plan[key])
    high = wording.unique(data.comparisons, "rope_high")
    return ("±" + wording.percent(float(high[0]) - 1)) if len(high) == 1 else "the plan's"


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
        each = f" (here each at {wording.join(levels)})" if levels else ""
        control = (f"One error rate holds across each family of comparisons ({named}"
                   f"{wording.join(sizes)} comparisons each): every interval of a family is "
                   f"widened so that the family's intervals hold together at {joint}{each}, "
                   "and a pair is faster when its interval excludes 1.")
    return {"error_control": control, "margin": margin(data)}


def sensitivity_table(numbering: tables.Numbering, data: Inputs) -> dict:
    """The analysis without a quality class's trials, beside the primary one (when written)."""
    frame, notes = tables.sorted_rows(data.sensitivity), formatting.Notes()
    axes = tables.shown_axes(frame) if len(frame) else []
    extra = [c for c in ("analysis", "without", "excluded", "n_pytorch", "n_tensorflow")
             if c in frame]
    rows = []
    for _, row in frame.iterrows():
        rows.append([str(row.get(a, "")) for a in axes]
                    + [wording.text(row[c]) if not wording.missing(row[c]) else "—"
                       for c in extra]
                    + [formatting.cell_text(row, "ratio", notes, "no ratio", wording.sig),
                       formatting.interval_text(row, "ratio_ci_low", "ratio_ci_high", notes,
                                                "no interval"),
                       formatting.verdict_text(row, notes)])
    return tables.table(numbering, "sensitivity", "Sensitivity analysis: the comparisons "
                        "again without the trials of a quality class (warm-up, no steady "
                        "state, drift); the primary analysis uses every ok trial.",
                        [tables.axis_header(a) for a in axes]
                        + [c.replace("_", " ").capitalize() for c in extra]
                        + ["Ratio", "Interval", "Verdict"], rows, notes,
                        "The statistics wrote no sensitivity analysis.",
                        classes=[""] * (len(axes) + len(extra)) + ["num", "num", ""])
