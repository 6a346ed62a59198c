"""Each published claim (report/claims.yaml) judged from the statistics' tables: a verdict,
what this run measured, and whether the verdict is only a hint (exploratory).

Judging reads tables only: comparisons, cell statistics, tests, trials, and the distributed
experiment's scaling and strategy tables. The report renders the verdicts.

    claims/
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

A paper's belief it sets out to examine, or an explanation it offers, is context (``role:
context`` in claims.yaml): ``load_claims`` lists it under ``context``, never judged or counted.

Usage::

    catalog = load_claims()             # {"papers", "claims", "context"}
    result = evaluate_claim(catalog["claims"][0], comparisons, cell_stats, tests, trials)
    result["verdict"], result["ours"], result["exploratory"]
"""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims.batch import (
    judge_batch_trend,
    judge_power,
    patel_tests,
    trend_from_tests,
)
from fwbench.analysis.claims.catalog import (  # noqa: F401 (the package's interface)
    CLAIM_KINDS,
    CLAIMS_PATH,
    load_claims,
)
from fwbench.analysis.claims.direction import judge_direction, judge_mixed, judge_sometimes
from fwbench.analysis.claims.distributed import claim_rows_of, judge_scaling, judge_strategies
from fwbench.analysis.claims.florencio import judge_normality, judge_telemetry
from fwbench.analysis.claims.real_data import judge_real_data, real_data_trials
from fwbench.analysis.claims.rows import (
    claim_rows,
    fewest,
    hint_from_comparisons,
    min_trials,
    not_measured,
    rope,
)
from fwbench.analysis.claims.setting import ANOTHER_SETTING, JUDGED, differences
from fwbench.analysis.claims.wording import PAIR_AXES, flag

PAPERS = ["patel2023", "dai2022", "florencio2019", "tian2020", "sumanjali2024"]
VERDICTS = ["confirmed", "contradicted", "equivalent", "inconclusive", ANOTHER_SETTING,
            "not measured", "untestable"]
REAL_DATA_KINDS = ("first_epoch", "higher", "time_to_accuracy")
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
    tables = {"comparisons": comparisons, "cell_stats": cell_stats, "tests": tests,
              "trials": trials, "scaling": scaling, "strategies": strategies}
    result = {**_judge(claim, tables, rope(statistics)), "differs": [], "verdict_here": ""}
    if result["verdict"] in JUDGED:
        result["differs"] = differences(claim, trials)
        if result["differs"]:
            result["verdict_here"], result["verdict"] = result["verdict"], ANOTHER_SETTING
            result["notes"] = [n for n in result["notes"] if "matched profile" not in n]
    undecided = result["verdict"] in ("not measured", "untestable")
    result["exploratory"] = "" if undecided else _hint(claim, tables, min_trials(statistics))
    return result


def _judge(claim: dict, tables: dict, margin: float) -> dict:
    """The verdict on one published claim: {verdict, ours, notes}.

    ``power_batch`` and ``batch_trend`` read the statistics' tests (``batch_trend`` falls back
    to the cell statistics without them); ``strategy_comparison`` and ``scaling``
    stats/strategies.csv and stats/scaling.csv; the real-data kinds the trials; the others the
    pairs they select (``_judge_selected``); ``pending`` and ``untestable`` say why no verdict
    is possible. ``margin`` widens a published ratio (``judge_direction``).
    """
    test = claim["test"]
    kind = test["kind"]
    if kind == "untestable":
        return {"verdict": "untestable", "ours": f"untestable: {test['reason']}", "notes": []}
    if kind == "pending":
        return {"verdict": "not measured", "ours": f"not measured in this run: needs "
                f"{test['needs']}", "notes": []}
    if kind == "power_batch":
        return judge_power(tables["tests"])
    if kind == "strategy_comparison":
        return judge_strategies(tables["strategies"], test, tables["trials"])
    if kind == "scaling":
        return judge_scaling(tables["scaling"], test, tables["trials"])
    if kind in REAL_DATA_KINDS:
        return judge_real_data(claim, tables["trials"], margin)
    if kind == "batch_trend" and tables["tests"] is not None:
        from_tests = trend_from_tests(tables["tests"])
        if from_tests:
            return from_tests
    return _judge_selected(claim, tables, margin)


def _judge_selected(claim: dict, tables: dict, margin: float) -> dict:
    """``direction``, ``mixed``, ``sometimes``, ``normality`` and ``telemetry`` on the
    comparisons' pairs the claim selects (with the tests and the trials' telemetry);
    ``batch_trend`` on the cells."""
    test = claim["test"]
    kind = test["kind"]
    source = tables["cell_stats"] if kind == "batch_trend" else tables["comparisons"]
    rows, notes = claim_rows(source, test.get("select", {}))
    if isinstance(rows, str):
        return not_measured(rows, notes)
    if kind == "normality":
        verdict, ours = judge_normality(rows, tables["tests"])
    elif kind == "telemetry":
        verdict, ours = judge_telemetry(rows, claim, tables["trials"], tables["tests"])
    elif kind == "direction":
        verdict, ours = judge_direction(rows, claim, margin)
    else:
        judge = {"mixed": judge_mixed, "sometimes": judge_sometimes,
                 "batch_trend": judge_batch_trend}[kind]
        verdict, ours = judge(rows, claim)
    return {"verdict": verdict, "ours": ours, "notes": notes}


def _hint(claim: dict, tables: dict, least: int) -> str:
    """Why a claim's verdict is only a hint, from the rows its kind was judged on (fewer than
    ``least`` trials on a side); "" if not."""
    test = claim["test"]
    kind, select = test["kind"], test.get("select", {})
    tests = tables["tests"]
    if kind in ("direction", "mixed", "sometimes", "normality", "telemetry"):
        rows, _ = claim_rows(tables["comparisons"], select)
        return hint_from_comparisons(rows)
    if kind in ("batch_trend", "power_batch") and tests is not None and "exploratory" in tests:
        rows = patel_tests(tests, "Jonckheere" if kind == "batch_trend" else "TOST")
        hints = int(sum(flag(v) for v in rows["exploratory"]))
        if len(rows):
            return (f"{hints} of {len(rows)} series have fewer than {least} "
                    "trials at some batch size" if hints else "")
    if kind == "batch_trend":
        rows, _ = claim_rows(tables["cell_stats"], select)
        return fewest(rows, ["n_ok"], "trials in a cell", least)
    if kind in ("strategy_comparison", "scaling"):
        return _distributed_hint(test, tables, least)
    if kind in REAL_DATA_KINDS and tables["trials"] is not None:
        frame = real_data_trials(tables["trials"], str(select.get("experiment", "convergence")))
        rows, _ = claim_rows(frame, select) if len(frame) else ("", [])
        if isinstance(rows, str) or "cell_id" not in rows:
            return ""
        return fewest(rows.groupby("cell_id").size().rename("n").to_frame(), ["n"],
                      "ok trials in a cell", least)
    return ""


def _distributed_hint(test: dict, tables: dict, least: int) -> str:
    """Too few trials of a strategy in the rows a distributed claim was judged on."""
    if test["kind"] == "strategy_comparison":
        frame, counts = tables["strategies"], ["n_single", "n_multi"]
        rows, _ = claim_rows_of(frame, test, test.get("expect"), "")
    else:
        frame, counts = tables["scaling"], ["n_baseline", "n_trials"]
        rows, _ = claim_rows_of(frame, test, test.get("strategy"), "")
    return fewest(rows, counts, "trials of a strategy", least)
