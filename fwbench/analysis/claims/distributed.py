"""patel2023's claims beyond one device, judged on the distributed experiment's tables:
DistributedDataParallel faster than DataParallel (``strategy_comparison``, stats/strategies.csv)
and its near-linear speed-up (``scaling``, stats/scaling.csv)."""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims.kinds import Tables, register
from fwbench.analysis.claims.numbers import fmt
from fwbench.analysis.claims.rows import Selected, claim_rows, fewest, not_measured
from fwbench.analysis.claims.wording import fmt_interval, join, missing, sig, text, with_level
from fwbench.plan.strategies import (
    STRATEGIES,
    STRATEGY_LABELS,
    STRATEGY_PAIRS,
    resolve_strategy,
)

DISTRIBUTED_ABSENT = ("this run has no distributed cell (config `experiment: distributed`; "
                      "docs/distributed.md)")
NO_SCALING = "no strategy was measured at one device and at more in the same cell"
NO_STRATEGIES = ("no cell was measured with both strategies (`single_process` and "
                 "`multi_process`) at the same number of devices")


def distributed_absent(trials: pd.DataFrame | None, otherwise: str) -> str:
    """Why a distributed table is empty: the run has no distributed cell, or ``otherwise``."""
    ran = trials is not None and "experiment" in trials and \
        (trials["experiment"] == "distributed").any()
    return otherwise if ran else DISTRIBUTED_ABSENT


def shortfall(row):
    """The coverage of a Hodges-Lehmann interval of fwbench.measure.distributed when it falls
    short of the nominal level; None when it reaches it (exact, so often a little above)."""
    attained = row.get("ci_attained")
    return None if missing(attained) or str(attained) == "True" else row.get("ci_level")


def faster_text(faster) -> str:
    if faster in STRATEGY_LABELS:
        return f"{STRATEGY_LABELS[faster]} faster"
    return "neither shown faster" if faster == "neither" else str(faster)


def _ci(row, name: str) -> str:
    """``name``'s interval in a distributed table's row, with its coverage when too few
    trials kept it below the nominal level."""
    return with_level(fmt_interval(row[f"{name}_ci_low"], row[f"{name}_ci_high"]),
                      shortfall(row))


def claim_rows_of(frame: pd.DataFrame | None, test: dict, strategy: str,
                  absent: str) -> Selected:
    """The claim's rows of stats/strategies.csv or stats/scaling.csv: selected like any claim's,
    of the framework that runs ``strategy``, at two devices or more; or why there are none
    (``absent`` when the table is empty)."""
    if frame is None or frame.empty:
        return Selected(None, why=absent)
    selected = claim_rows(frame, test.get("select", {}))
    if selected.rows is None:
        return selected
    rows, framework = selected.rows, STRATEGIES[strategy][0]
    return Selected(rows[(rows["framework"] == framework) & (rows["world_size"].astype(int) > 1)],
                    selected.notes)


def _unmeasured(rows: pd.DataFrame, needs: str, notes: list) -> dict:
    """``not measured``, with the failures the statistics noted on the rows, if any."""
    why = join(sorted({str(n) for n in rows.get("note", []) if not missing(n) and str(n)}))
    return not_measured(why or needs, notes)


def judge_strategies(strategies: pd.DataFrame | None, test: dict,
                     trials: pd.DataFrame | None) -> dict:
    """patel2023's "DDP performs better than DataParallel": the strategy comparisons of the
    framework running ``expect`` (fwbench.analysis.scaling.strategy_comparisons), each decided
    by whether its interval excludes 1."""
    expect = test["expect"]
    framework, pair = STRATEGIES[expect]
    other = next(names[framework] for name, names in STRATEGY_PAIRS.items() if name != pair)
    selected = claim_rows_of(strategies, test, expect, distributed_absent(trials, NO_STRATEGIES))
    if selected.rows is None:
        return not_measured(selected.why, selected.notes)
    rows, notes = selected.rows, selected.notes
    measured = rows[[not missing(v) for v in rows["ratio"]]]
    if measured.empty:
        return _unmeasured(rows, "no cell at two devices or more has ok trials of both "
                                 "strategies", notes)
    faster = list(measured["faster"])
    verdict = ("confirmed" if faster.count(expect) == len(faster) else
               "contradicted" if faster.count(other) and not faster.count(expect) else
               "inconclusive")
    texts = [f"{r['model']} at {text(r['world_size'])} devices: "
             f"{STRATEGY_LABELS[r['multi_process']]} / {STRATEGY_LABELS[r['single_process']]} "
             f"throughput {sig(r['ratio'])} {_ci(r, 'ratio')} ({faster_text(r['faster'])})"
             for _, r in measured.iterrows()]
    return {"verdict": verdict, "ours": "; ".join(texts), "notes": notes}


def judge_scaling(scaling: pd.DataFrame | None, test: dict,
                  trials: pd.DataFrame | None) -> dict:
    """patel2023's "DDP offers near-linear speed-ups": the scaling efficiency of ``strategy``
    (fwbench.analysis.scaling.scaling_efficiency) with its interval, near-linear when the whole
    interval is at or above the threshold there."""
    strategy = test["strategy"]
    selected = claim_rows_of(scaling, test, strategy, distributed_absent(trials, NO_SCALING))
    if selected.rows is None:
        return not_measured(selected.why, selected.notes)
    rows, notes = selected.rows, selected.notes
    rows = rows[[resolve_strategy(str(s), str(f)) == strategy
                 for s, f in zip(rows["strategy"], rows["framework"])]]
    measured = rows[[not missing(v) for v in rows["efficiency"]]]
    if measured.empty:
        return _unmeasured(rows, "no cell has ok trials at one device and at more", notes)
    verdicts = list(measured["verdict"])
    near, sub = verdicts.count("near-linear"), verdicts.count("sub-linear")
    verdict = ("confirmed" if near == len(verdicts) else
               "contradicted" if sub and not near else "inconclusive")
    texts = [f"{r['model']} at {text(r['world_size'])} devices: scaling efficiency "
             f"{sig(r['efficiency'])} {_ci(r, 'efficiency')} ({r['verdict']})"
             for _, r in measured.iterrows()]
    threshold = float(measured["near_linear_threshold"].iloc[0])
    return {"verdict": verdict, "notes": notes,
            "ours": "; ".join(texts) + f" (near-linear: the whole interval at or above "
                                       f"{fmt(threshold, 'setting')})"}


def _distributed_hint(claim: dict, tables: Tables, least: int) -> str:
    """Too few trials of a strategy in the rows a distributed claim was judged on."""
    test = claim["test"]
    if test["kind"] == "strategy_comparison":
        frame, counts, strategy = tables.strategies, ["n_single", "n_multi"], test.get("expect")
    else:
        frame, counts, strategy = tables.scaling, ["n_baseline", "n_trials"], test.get("strategy")
    return fewest(claim_rows_of(frame, test, strategy, "").rows, counts,
                  "trials of a strategy", least)


register("strategy_comparison",
         lambda claim, tables, _: judge_strategies(tables.strategies, claim["test"],
                                                   tables.trials), _distributed_hint)
register("scaling",
         lambda claim, tables, _: judge_scaling(tables.scaling, claim["test"], tables.trials),
         _distributed_hint)
