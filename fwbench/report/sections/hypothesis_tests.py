"""Appendix C, Every hypothesis test: how many tests of each kind the statistics ran and what
they decided; every test, with its p-values, is in the data appendix (tests.csv and .html).

A paper's test is shown only where the run measured that paper's experiment: florencio2019's
normality and paired tests belong to its LeNet-5 runs at batch 100, not to a default sweep."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims import wording
from fwbench.report.formatting import Notes
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section
from fwbench.report.tables import Numbering, table

# Tests only some runs run, each with the reference a reader needs: (words, test name or
# correction it matches, reference key in report/references.yaml).
CITED_TESTS = (("Holm's correction within a family", "holm", "holm1979"),
               ("the Jonckheere-Terpstra trend test", "Jonckheere", "jonckheere1954"),
               ("the Wilcoxon signed-rank test", "Wilcoxon", "wilcoxon1945"),
               ("the Shapiro-Wilk normality test", "Shapiro", "shapiro1965"),
               ("the Lilliefors normality test", "Lilliefors", "lilliefors1967"))

# Tests replicated from a paper, and the trials that make up that paper's experiment.
PAPER_EXPERIMENTS = {"florencio2019": {"model": "lenet5", "batch_size": "100"}}


def fitting_tests(data: Inputs) -> pd.DataFrame:
    """The tests that fit this run's data: a paper's own only where its experiment ran."""
    frame = data.tests
    if frame.empty or "source" not in frame:
        return frame
    keep = pd.Series(True, index=frame.index)
    for paper, select in PAPER_EXPERIMENTS.items():
        if wording.select_rows(data.trials, select).empty:
            keep &= frame["source"].astype(str) != paper
    return frame[keep]


def context(numbering: Numbering, data: Inputs) -> dict:
    """The tests counted by source, test and variant, with what they decided."""
    frame = fitting_tests(data)
    keys = [k for k in ("source", "test", "variant") if k in frame]
    rows = []
    if keys and "decision" in frame:
        for key, group in frame.fillna({k: "" for k in keys}).groupby(keys, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            decisions = group["decision"].fillna("").replace("", "no decision").value_counts()
            rows.append([*map(str, key), str(len(group)),
                         "; ".join(f"{n} {_decision(d)}" for d, n in sorted(decisions.items()))])
    why = data.problems.get("tests", "the statistics ran no test")
    return table(numbering, "tests", "Hypothesis tests by source, test and variant, with what "
                 "they decided. Every test, with its family, p-values and note, is in the data "
                 "appendix Every hypothesis test.", [k.capitalize() for k in keys]
                 + ["Tests", "Decisions"], rows, Notes(), f"No test: {why}.",
                 classes=[""] * len(keys) + ["num", ""])


def cited(data: Inputs) -> list[dict]:
    """The tests of CITED_TESTS this run ran, in that order: [{"words", "key"}] for the
    appendix's sentence and the bibliography."""
    frame = fitting_tests(data)
    names = " ".join(str(v) for column in ("test", "correction") if column in frame
                     for v in frame[column].dropna().unique())
    return [{"words": words, "key": key} for words, match, key in CITED_TESTS
            if match in names]


def _decision(decision: str) -> str:
    """A decision in words: a verdict code becomes its label ("PyTorch faster")."""
    for code, words in wording.OUTCOME_LABELS.items():
        decision = decision.replace(code, words)
    return decision


SECTION = Section(key="tests", template="hypothesis_tests", anchor="appendix-tests",
                  place="appendix", order=30, title="Every hypothesis test",
                  context=lambda b: {**context(b.numbering, b.data), "cited": cited(b.data)})
