"""Section 6, Conclusion: what this run shows, on which processor, whether it counts as
evidence, and what would change its verdicts, each sentence read from the tables it names."""

from __future__ import annotations

import math

import pandas as pd

from fwbench.analysis.claims import wording
from fwbench.analysis.controls import passed as control_passed
from fwbench.analysis.gate import failures
from fwbench.plan.frameworks import FASTER
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section, machine
from fwbench.report.sections.preliminary import is_preliminary

# A verdict's comparisons are listed by name up to this many, else counted with their range.
LISTED = 4


def context(data: Inputs) -> list[str]:
    """The conclusion's sentences."""
    rated = data.comparisons[data.comparisons["ratio"].notna()] \
        if "ratio" in data.comparisons else data.comparisons.iloc[:0]
    if rated.empty:
        return ["This run produced no PyTorch/TensorFlow ratio, so it shows nothing about "
                "their speed."]
    out = [_shows(rated, data.trials)]
    out.append("It counts as evidence: it passed every check of the shipping gate."
               if not is_preliminary(data) else
               _preliminary(data.gate))
    out.append(_would_change(rated, data.controls))
    return out


def _preliminary(gate: pd.DataFrame) -> str:
    """Why the run is not evidence: the gate's checks that failed."""
    checks = list(dict.fromkeys(reason.split(":")[0] for reason in failures(gate)))
    noun = "check" if len(checks) == 1 else "checks"
    return (f"It is preliminary, not evidence: the gate's {noun} {wording.join(checks)} failed "
            "(page 1 gives each reason).")


def _shows(rated: pd.DataFrame, trials: pd.DataFrame) -> str:
    """Each decided comparison, grouped by its verdict, with its ratio."""
    groups, also = [], wording.telling_apart(rated)
    for verdict in wording.OUTCOME_LABELS:
        rows = rated[rated["verdict"] == verdict]
        if len(rows) > LISTED:  # a count and a range, not a list the reader cannot hold
            groups.append(f"{wording.OUTCOME_LABELS[verdict]} in {len(rows)} comparisons "
                          f"({wording.ratio(rows['ratio'].min())} to "
                          f"{wording.ratio(rows['ratio'].max())})")
        elif len(rows):
            groups.append(f"{wording.OUTCOME_LABELS[verdict]} in " + wording.join(
                f"{wording.pair_name(r, also)} ({wording.ratio(r['ratio'])})"
                for _, r in rows.iterrows()))
    where = machine.holds_for(trials, "These hold").removesuffix(".")
    return (f"PyTorch's time over TensorFlow's reads {'; '.join(groups)}."
            + (f" {where}, not for processors in general." if where else
               f" The trials {machine.kind_unrecorded(trials)}, so no kind of processor is "
               "named."))


def _would_change(rated: pd.DataFrame, controls: pd.DataFrame) -> str:
    """What would change a verdict: the "faster" verdict whose interval stops nearest to 1,
    another processor, and the controls' own check."""
    text = ""
    faster = rated[rated["verdict"].isin(FASTER)]
    if len(faster):
        # the bound of each interval nearest to 1, and how far it lies from 1 on the log scale
        below = faster["verdict"] == FASTER[0]
        bound = faster["ratio_ci_high"].where(below, faster["ratio_ci_low"]).astype(float)
        nearest = faster.loc[bound.map(math.log).abs().idxmin()]
        near = float(bound[nearest.name])
        side = "below" if near < 1 else "above"
        text = (f"The \"faster\" verdict nearest to changing is "
                f"{wording.pair_name(nearest, wording.telling_apart(rated))}: its interval "
                f"[{wording.ratio(nearest['ratio_ci_low'])}, "
                f"{wording.ratio(nearest['ratio_ci_high'])}] ends "
                f"{wording.percent(abs(near - 1))} {side} 1. ")
    text += ("Another kind of processor can reverse a verdict: the default configuration has "
             "read two of its four comparisons the other way on an AMD and an Intel host, so no "
             "verdict here is general.")
    if len(controls):
        ok = control_passed(controls)
        text += (" Its A/A controls, the run's own check of false positives, "
                 + ("all passed." if ok.all() else f"passed {int(ok.sum())} of {len(ok)}."))
    return text


SECTION = Section(key="conclusion", place="body", order=60, title="Conclusion",
                  context=lambda b: context(b.data))
