"""What this run did not measure: every figure, table and section left out of the paper
because the run has no data for it, with the reason, one item per reason. Nothing unmeasured
is drawn; this list is where it is named."""

from __future__ import annotations

import re

from fwbench.report.sections import Section

# A reason as a reader of the paper reads it: a preset by its name, and without the paths,
# tables and config keys that tell a developer where to look.
FOR_READERS = [
    (re.compile(r"presets/([\w-]+)\.yaml"), r"the \1 preset"),
    (re.compile(r"\s*\((?:config key|config experiment)[^()]*\)"), ""),
    (re.compile(r"\s*\([^()]*\b[\w/-]+\.(?:md|csv|yaml)\b[^()]*\)"), ""),
    (re.compile(r"\s*\(fwbench\.[\w.]+[^()]*\)"), ""),
    (re.compile(r"\bmeasured on cpu\b"), "measured on the CPU"),
    (re.compile(r"\bmeasured on cuda\b"), "measured on a GPU"),
]


def for_readers(reason: str) -> str:
    """``reason`` as a reader of the paper reads it (FOR_READERS), on one line."""
    reason = " ".join(str(reason).split())
    for pattern, replacement in FOR_READERS:
        reason = pattern.sub(replacement, reason)
    return reason


def context(figures: dict, context: dict) -> list[str]:
    """One sentence per thing left out, those sharing a reason said once."""
    groups: dict[str, list[str]] = {}

    def leave_out(title: str, reason: str) -> None:
        reason = _clause(reason)
        if reason:
            groups.setdefault(reason, []).append(title)

    for figure in figures.values():
        if not figure.file:
            leave_out(f"{figure.title} ({figure.source})" if figure.source else figure.title,
                      figure.reason or "")
    for title, entry in _tables(context):
        if not entry["number"]:
            leave_out(title, entry["empty"])
    if context["why"]["absent"]:
        leave_out("the ablation of each setting", context["why"]["absent"])
    if context["memory"]["untested"]:
        leave_out("PyTorch against TensorFlow in memory", context["memory"]["untested"])
    return [_capital(f"{'; '.join(titles)}: {reason}.") for reason, titles in groups.items()]


def _capital(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:]


def _tables(context: dict) -> list[tuple[str, dict]]:
    return [("the accuracy table", context["accuracy"]["table"]),
            ("the scaling-efficiency table", context["distributed"]["scaling"]),
            ("the strategy comparison", context["distributed"]["strategies"]),
            ("the profile breakdown", context["why"]["decomposition"]),
            ("the counterfactual execution modes", context["why"]["gaps"]),
            ("peak memory", context["memory"]["table"]),
            ("latency percentiles", context["latency"]["table"])]


def _clause(reason: str) -> str:
    """A left-out item's reason as a clause: without "Not drawn:" or "No …:" heads and the
    final full stop."""
    reason = for_readers(reason)
    for head in ("Not drawn: ", "Not drawn. "):
        reason = reason.removeprefix(head)
    if reason.startswith("No ") and ": " in reason.split(".")[0]:
        reason = reason.split(": ", 1)[1]
    reason = reason.rstrip(".")
    return reason[:1].lower() + reason[1:] if reason[:2] != reason[:2].upper() else reason


SECTION = Section(key="unmeasured", place="body", order=55, template=None, late=True,
                  context=lambda b: context(b.figures, b.context))  # in threats' block
