"""Page 1 of a run that failed the shipping gate (fwbench.analysis.gate, stats/gate.csv): it is
preliminary, every reason in sentences, and its claim verdicts count toward no finding. The gate
decides; this module only says what it decided, here and in the run's README."""

from __future__ import annotations

from fwbench.analysis.gate import passes
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section

# How each check reads as a heading.
TITLES = {"one measuring code": "One version of what measures",
          "one processor kind": "One kind of processor", "quiet": "A quiet machine",
          "A/A controls": "A/A controls", "headline comparisons": "Every comparison decided"}
SUMMARY = ("This run is preliminary: it did not pass the gate a run passes before it ships as "
           "evidence (one version of what measures, one kind of processor, a quiet machine, A/A "
           "controls equivalent to 1, and every comparison decided or sized to decide). Its "
           "numbers are what was measured, but its verdicts on the published claims count "
           "toward no finding, here or across runs, until it is measured again.")


def is_preliminary(data: Inputs) -> bool:
    """Whether the run's gate failed (a run rebuilt without the gate is not judged here)."""
    return not data.gate.empty and not passes(data.gate)


def context(data: Inputs) -> dict | None:
    """The summary and, per failed check, its reasons in sentences; None when not
    preliminary."""
    if not is_preliminary(data):
        return None
    failed = data.gate[~data.gate["passed"].astype(bool)]
    reasons = [{"check": TITLES.get(check, check),
                "text": " ".join(_sentence(r) for r in part["reason"])}
               for check, part in failed.groupby("check", sort=False)]
    return {"summary": SUMMARY, "reasons": reasons}


def markdown(data: Inputs) -> str | None:
    """The same for the run's README."""
    found = context(data)
    if found is None:
        return None
    return "\n".join(["**Preliminary.** " + found["summary"], ""]
                     + [f"- {r['check']}: {r['text']}" for r in found["reasons"]])


def _sentence(text: str) -> str:
    text = str(text).strip()
    return text[0].upper() + text[1:] if text else text


SECTION = Section(key="preliminary", place="head", order=10, template=None,
                  context=lambda b: context(b.data))  # laid out in the warnings block
