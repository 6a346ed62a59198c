"""Each published claim (report/claims.yaml) judged from the statistics' tables: a verdict,
what this run measured, and whether the verdict is only a hint (exploratory).

Judging reads tables only: comparisons, cell statistics, tests, trials, and the distributed
experiment's scaling and strategy tables. The report renders the verdicts.

    claims/
    ├── kinds.py        the registry of claim kinds: each kind's judge and hint, the tables
    ├── catalog.py      report/claims.yaml loaded and checked: claims and context
    ├── rows.py         the rows a claim selects; why a verdict from them is only a hint
    ├── setting.py      whether the run measured the paper's setting, and what differs
    ├── numbers.py      every number as text: fmt(value, quantity) (shared with the report)
    ├── wording.py      missing values, flags, outcomes, intervals and lists as text
    ├── published.py    the numbers the papers state (report/published.yaml), where they stand
    ├── direction.py    direction, mixed, sometimes: who is faster (by how much), from the
    │                   comparisons
    ├── batch.py        batch_trend, power_batch: patel2023's batch-size claims
    ├── florencio.py    normality, telemetry: florencio2019's tests replicated
    ├── distributed.py  strategy_comparison, scaling: beyond one device
    └── real_data.py    first_epoch, higher, time_to_accuracy: the real-data experiments
    (untestable and pending, which give no verdict, are registered here)

Each kind registers its judge and its hint in its own module (``kinds.register``); adding a
kind is a function and a ``register`` line there, and its claims in claims.yaml. A paper's
belief it sets out to examine, or an explanation it offers, is context (``role:
context`` in claims.yaml): ``load_claims`` lists it under ``context``, never judged or counted.

Usage::

    catalog = load_claims()             # {"papers", "claims", "context"}
    result = evaluate_claim(catalog["claims"][0], comparisons, cell_stats, tests, trials)
    result["verdict"], result["ours"], result["exploratory"]
"""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims import (  # noqa: F401 (each registers the kinds it judges)
    batch,
    direction,
    distributed,
    florencio,
    real_data,
)
from fwbench.analysis.claims.catalog import CLAIMS_PATH, load_claims  # noqa: F401 (interface)
from fwbench.analysis.claims.kinds import KINDS, Tables, register
from fwbench.analysis.claims.rows import min_trials, rope
from fwbench.analysis.claims.setting import ANOTHER_SETTING, JUDGED, differences
from fwbench.analysis.claims.wording import PAIR_AXES

PAPERS = ["patel2023", "dai2022", "florencio2019", "tian2020", "sumanjali2024"]
VERDICTS = ["confirmed", "contradicted", "equivalent", "inconclusive", ANOTHER_SETTING,
            "not measured", "untestable"]
SELECT_AXES = set(PAIR_AXES)


def evaluate_claim(claim: dict, comparisons: pd.DataFrame, cell_stats: pd.DataFrame,
                   tests: pd.DataFrame | None = None, trials: pd.DataFrame | None = None,
                   scaling: pd.DataFrame | None = None,
                   strategies: pd.DataFrame | None = None,
                   statistics: dict | None = None) -> dict:
    """The verdict on one published claim: {verdict, ours, notes, exploratory, differs,
    verdict_here}.

    A claim is confirmed or contradicted only where the run measured the paper's setting
    (``claim["setting"]``): elsewhere its verdict is "measured in another setting", ``differs``
    says what differs and ``verdict_here`` keeps what the data of this setting read.
    ``exploratory`` says why the verdict is only a hint ("" when it is not): it was judged from
    comparisons the statistics mark exploratory, or from fewer trials than a verdict needs (the
    analysis plan's ``min_trials_for_verdict``, from ``statistics``: the config's block). A
    hint confirms or contradicts nothing on its own, and the report labels it everywhere.
    A claim of a size is judged against its published range widened by the plan's margin
    (``rope``, from ``statistics``).
    """
    tables = Tables(comparisons, cell_stats, tests, trials, scaling, strategies)
    kind = KINDS[claim["test"]["kind"]]
    result = {**kind.judge(claim, tables, rope(statistics)), "differs": [], "verdict_here": ""}
    if result["verdict"] in JUDGED:
        result["differs"] = differences(claim, trials)
        if result["differs"]:
            result["verdict_here"], result["verdict"] = result["verdict"], ANOTHER_SETTING
            result["notes"] = [n for n in result["notes"] if "matched profile" not in n]
    undecided = result["verdict"] in ("not measured", "untestable")
    result["exploratory"] = "" if undecided else kind.hint(claim, tables, min_trials(statistics))
    return result


# The kinds that say why no verdict is possible: a claim no run of ours can test, and one that
# needs a measurement not made yet.
register("untestable", lambda claim, *_: {
    "verdict": "untestable", "ours": f"untestable: {claim['test']['reason']}", "notes": []})
register("pending", lambda claim, *_: {
    "verdict": "not measured", "notes": [],
    "ours": f"not measured in this run: needs {claim['test']['needs']}"})
CLAIM_KINDS = frozenset(KINDS)
