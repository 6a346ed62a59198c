"""The abstract: what was measured, how the frameworks compared, the claims' verdicts and the
failures, in a few sentences."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims import VERDICTS, wording
from fwbench.analysis.controls import passed as control_passed
from fwbench.plan.frameworks import FASTER
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section, machine
from fwbench.report.sections.plan import recorded_margin
from fwbench.report.sections.reproduction import tally


def context(data: Inputs, facts: dict, soft: list[dict], claims: dict, failures: dict) -> list:
    out, counts, hints = [], claims["counts"], claims["exploratory"]
    versions = wording.join(f"{s['label']} {s['version']}" for s in soft) or "no framework"
    devices = wording.join(f"the {wording.DEVICE_NAMES.get(d, d)}" for d in facts["devices"])
    out.append(
        f"We measured {facts['n_cells']} cells ({wording.join(facts['models']) or 'no model'}; "
        f"{wording.join(facts['phases']) or 'no phase'}; "
        f"batch {'size' if len(facts['batch_sizes']) == 1 else 'sizes'} "
        f"{', '.join(facts['batch_sizes'])}"
        f") of {versions} on {devices or 'no device'}, "
        f"in {facts['n_trials']} fresh-process trials of which {facts['n_ok']} ended ok."
        + _processor_clause(data.trials))
    comparisons = data.comparisons
    if "ratio" in comparisons and comparisons["ratio"].notna().any():
        rated = comparisons[comparisons["ratio"].notna()]
        kinds = [wording.outcome(r) for _, r in rated.iterrows()]
        low, high = rated.loc[rated["ratio"].idxmin()], rated.loc[rated["ratio"].idxmax()]
        also = wording.telling_apart(rated)
        named = {k: f"{wording.ratio(r['ratio'])} ({wording.pair_name(r, also)})"
                 for k, r in (("low", low), ("high", high))}
        spread = (f"was {named['low']}" if len(rated) == 1
                  else f"ranged from {named['low']} to {named['high']}")
        out.append(
            f"PyTorch's time divided by TensorFlow's {spread}. PyTorch was faster in "
            f"{kinds.count(FASTER[0])} of {wording.count(len(kinds), 'matched pair')}, "
            f"TensorFlow in {kinds.count(FASTER[1])}; "
            f"{kinds.count('equivalent')} were equivalent and "
            f"{kinds.count('inconclusive')} inconclusive"
            + _exploratory_clause(rated) + "." + _family_clause(rated))
    else:
        out.append("No matched pair produced a PyTorch/TensorFlow ratio in this run.")
    if len(data.controls):
        out.append(_controls_sentence(data.controls, len(data.control_trials)))
    if claims["preliminary"]:
        out.append(f"This run is preliminary (it failed the gate a run passes before it ships, "
                   f"above), so its verdicts on the {sum(counts.values())} quantitative claims "
                   "of the five source papers are not counted.")
    else:
        judged = ", ".join(tally(v, counts[v], hints[v]) for v in VERDICTS if counts[v])
        out.append(f"Of the {sum(counts.values())} quantitative claims of the five source "
                   f"papers: {judged}.")
    if sum(hints.values()) and not claims["preliminary"]:
        out.append(f"The {sum(hints.values())} exploratory verdicts rest on too few trials (or on "
                   "unsteady or drifting ones) to confirm or contradict a paper: they are hints "
                   "for a run with more trials, not findings.")
    if failures["rows"]:
        statuses = pd.Series([r[2] for r in failures["rows"]]).value_counts().sort_index()
        out.append(f"{len(failures['rows'])} trials did not end ok ("
                   + wording.join(f"{n} {s}" for s, n in statuses.items())
                   + f"); Table {failures['number']} gives each with its reason.")
    return out


def _processor_clause(trials: pd.DataFrame) -> str:
    """The processor kind the verdicts hold for: the same config has read the other way on
    another kind (docs/statistics.md), so a verdict is stated for the one that produced it."""
    kinds = wording.unique(trials, "cpu_kind")
    if "cpu_kind" not in trials or trials["cpu_kind"].isna().any():
        kinds = []   # a kind some trials lack cannot be shown to be every trial's
    if len(kinds) == 1:
        return (f" Every trial ran on one kind of processor ({kinds[0]}); the verdicts below "
                "hold for that kind, and another can read them differently.")
    if kinds:
        return f" The trials ran on {len(kinds)} kinds of processor: {wording.join(kinds)}."
    return (f" The trials {machine.kind_unrecorded(trials)}, so the verdicts below cannot be "
            "scoped to one kind of processor.")


def _controls_sentence(controls: pd.DataFrame, n_trials: int) -> str:
    """The run's own check of false positives: each A/A control's ratio and whether it passed,
    and the trials they took beside the sweep's."""
    passed = control_passed(controls)
    each = wording.join(f"{wording.label(r['framework'])}'s {wording.pair_name(r)} at "
                        f"{wording.ratio(r['ratio'])}" for _, r in controls.iterrows())
    its = (f"Its A/A controls ({wording.count(n_trials, 'more trial')}), a cell of each "
           "framework compared with itself," if n_trials else
           "Its A/A controls, a cell of each framework compared with itself,")
    if passed.all():
        margin = recorded_margin(controls)
        return (f"{its} read {each}: each equivalent to 1{' within ' + margin if margin else ''}"
                ", so the design found no difference where there is none.")
    return (f"{its} read {each}; "
            f"{int((~passed).sum())} of {len(controls)} did not show equivalence to 1, so the "
            "design's own false-positive rate is not shown to be controlled.")


def _family_clause(rated: pd.DataFrame) -> str:
    """The family the run's error rate covers: what it claims."""
    families, sizes = wording.unique(rated, "family"), wording.unique(rated, "family_size")
    if not families or not sizes:
        return ""
    return (f" One error rate covers each family of comparisons ("
            f"{wording.join(families)}: {wording.count(wording.join(sizes), 'comparison')}).")


def _exploratory_clause(rated: pd.DataFrame) -> str:
    hints = sum(wording.is_exploratory(r) for _, r in rated.iterrows())
    if not hints:
        return ""
    every = "every one of these verdicts is" if hints == len(rated) else f"{hints} of them are"
    return f"; {every} exploratory, a hint rather than a finding"


SECTION = Section(key="abstract", place="head", order=30, late=True,
                  context=lambda b: context(b.data, b.facts, b.software, b.context["claims"],
                                            b.context["failures"]))
