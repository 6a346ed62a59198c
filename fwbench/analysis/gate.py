"""The gate a run passes before it ships as evidence (DESIGN.md, "Shipping a run"): one version
of what measures, one processor kind, every trial timed on a quiet machine, A/A controls passed,
and every headline comparison decided. stats/gate.csv holds one row per reason (``check``,
``passed``, ``reason``); the report, the run's README and the index read it and decide nothing.
A run that fails may stay in results/ only as preliminary, its claim verdicts counted nowhere."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fwbench.analysis.claims.numbers import fmt
from fwbench.analysis.claims.wording import (
    OUTCOME_LABELS,
    count,
    join,
    label,
    pair_name,
    telling_apart,
)
from fwbench.analysis.controls import passed
from fwbench.measure.telemetry.outside import NO_OUTSIDE, outside_busy
from fwbench.plan.frameworks import FASTER

GATE_COLUMNS = ["check", "passed", "reason"]
# The busy share the processors outside a trial's own may reach while it is timed, when the
# analysis plan states none (statistics.quiet_busy_max). The default stays out of the plan
# itself, so a plan written before the gate keeps the hash its trials recorded.
QUIET_BUSY_MAX = 0.10
DECIDED = (*FASTER, "equivalent")


def gate(trials: pd.DataFrame, comparisons: pd.DataFrame, *, statistics: dict,
         controls: pd.DataFrame | None = None) -> pd.DataFrame:
    """stats/gate.csv: every check's reasons to fail, or the one sentence saying it passed.
    ``statistics`` is the analysis plan; ``controls`` the A/A controls (stats/controls.csv:
    one row per control, ``control`` naming it and ``passed``), None where the run has none."""
    found = {
        "one measuring code": measuring_code(trials),
        "one processor kind": processor_kind(trials),
        "quiet": quiet(trials, statistics.get("quiet_busy_max", QUIET_BUSY_MAX)),
        "A/A controls": aa_controls(controls, telling_apart(comparisons)),
        "headline comparisons": headline(comparisons, statistics),
    }
    rows = [{"check": check, "passed": passed, "reason": reason}
            for check, (passed, reasons) in found.items() for reason in reasons]
    return pd.DataFrame(rows, columns=GATE_COLUMNS)


def passes(gate_rows: pd.DataFrame) -> bool:
    """Whether the run ships as evidence: every check passed."""
    return not gate_rows.empty and bool(gate_rows["passed"].astype(bool).all())


def read_gate(run_dir) -> pd.DataFrame:
    """A rebuilt run's stats/gate.csv; one that is missing or does not read stops the caller
    with a ResultError naming it."""
    from fwbench.analysis.export import read_table

    return read_table(Path(run_dir) / "stats" / "gate.csv", tuple(GATE_COLUMNS))


def failures(gate_rows: pd.DataFrame) -> list[str]:
    """Every reason the run fails, as ``check: reason``."""
    failed = gate_rows[~gate_rows["passed"].astype(bool)]
    return [f"{row.check}: {row.reason}" for row in failed.itertuples()]


def measuring_code(trials: pd.DataFrame) -> tuple[bool, list[str]]:
    """One hash of what measures in every trial; trials from before it was kept fall back to
    their commit, which stands for the code only when one clean commit measured them all."""
    codes = _column(trials, "measuring_code")
    if len(trials) and codes.notna().all() and _column(trials, "image_digest").notna().all():
        # In containers each framework runs in its own image by design, and the hash holds the
        # image's digest: one hash per framework is one version of what measures.
        per = codes.groupby(trials["framework"]).unique()
        if all(len(hashes) == 1 for hashes in per):
            return True, ["Each framework's trials recorded one hash of what measures, its image "
                          "in it (" + join(f"{f} {h[0]}" for f, h in per.items()) + ")."]
        return False, ["A framework's trials recorded several hashes of what measures ("
                       + join(f"{f}: {', '.join(h)}" for f, h in per.items() if len(h) > 1)
                       + "): different code or images measured them."]
    if len(trials) and codes.notna().all():
        kinds = codes.value_counts().sort_index()
        if len(kinds) == 1:
            return True, [f"Every trial recorded one hash of what measures ({kinds.index[0]})."]
        return False, [f"The trials recorded {len(kinds)} hashes of what measures ("
                       + join(f"{h}: {count(n, 'trial')}" for h, n in kinds.items())
                       + "): different code or software measured them."]
    commits = _column(trials, "git_commit")
    unhashed = count(int(codes.isna().sum()), "trial")
    if commits.isna().any():
        return False, [f"{unhashed} recorded no hash of what measures, and "
                       f"{count(int(commits.isna().sum()), 'trial')} no commit either: what "
                       "measured them is unknown."]
    kinds = commits.value_counts().sort_index()
    if len(kinds) > 1:
        return False, [f"{unhashed} recorded no hash of what measures, and the run mixes "
                       f"{len(kinds)} commits ("
                       + join(f"{c[:12]}: {count(n, 'trial')}" for c, n in kinds.items())
                       + "): one version of the measuring code cannot be shown."]
    dirty = int(_column(trials, "git_dirty").fillna(False).astype(bool).sum())
    if dirty:
        return False, [f"{unhashed} recorded no hash of what measures, and "
                       f"{count(dirty, 'trial')} ran from a work tree with uncommitted "
                       "changes: their commit does not say what measured them."]
    return True, [f"Every trial ran from commit {kinds.index[0][:12]} with a clean work tree "
                  "(the trials recorded no hash of what measures; the commit stands for it)."]


def processor_kind(trials: pd.DataFrame) -> tuple[bool, list[str]]:
    """A verdict holds for the processor it was measured on: one kind, recorded by every
    trial."""
    kinds = _column(trials, "cpu_kind")
    if not len(trials) or kinds.isna().any():
        names = sorted(_column(trials, "cpu_model")[kinds.isna()].dropna().unique())
        named = (f"only by its name ({join(names)}), " if names else "")
        return False, [f"{int(kinds.isna().sum())} of {count(len(trials), 'trial')} recorded "
                       f"the processor {named}without its vendor, family and model: the run "
                       "cannot show that one kind of processor measured it."]
    found = sorted(kinds.unique())
    if len(found) > 1:
        return False, [f"The trials ran on {len(found)} kinds of processor ({join(found)}), "
                       "whose verdicts need not agree."]
    return True, [f"Every trial ran on one kind of processor: {found[0]}."]


def quiet(trials: pd.DataFrame, busy_max: float) -> tuple[bool, list[str]]:
    """Every ok trial was timed while the processors outside its own were busy less than
    ``busy_max`` (a share): other work on them moves a trial's time, and a pair's two trials
    need not see the same."""
    ok = trials[trials["status"] == "ok"] if "status" in trials else trials
    busy = pd.Series([_outside_busy(row) for _, row in ok.iterrows()], index=ok.index,
                     dtype=float) / 100
    plan = f"the plan allows less than {fmt(busy_max, 'level')}"
    if ok.empty:
        return False, ["No trial ended ok, so none was shown to run quiet."]
    reasons = []
    loud = busy[busy >= busy_max]
    if len(loud):
        reasons.append(f"{count(len(loud), 'trial')} of {len(ok)} ran beside other work: the "
                       "processors outside their own were busy "
                       f"{fmt(loud.median(), 'level')} of the time while they were timed "
                       f"(median; {fmt(loud.min(), 'level')} to {fmt(loud.max(), 'level')}), "
                       f"where {plan}.")
    unknown = int(busy.isna().sum())
    if unknown:
        reasons.append(f"{count(unknown, 'trial')} recorded nothing that shows how busy the "
                       "processors outside their own were.")
    if reasons:
        return False, reasons
    return True, [f"Every ok trial ran quiet: the processors outside its own were busy at most "
                  f"{fmt(busy.max(), 'level')} of the time while it was timed; {plan}."]


def _outside_busy(row) -> float | None:
    """The trial's outside busy share (%) as the tables recorded it; in tables from before they
    did, derived from the whole machine's share as fwbench.measure.telemetry.outside does. A
    trial whose threads took every processor had nothing beside it: 0."""
    if pd.notna(row.get("outside_busy_pct")):
        return row["outside_busy_pct"]
    processors, util = row.get("cpu_count"), row.get("cpu_util_mean")
    busy, how = outside_busy(
        None, {}, threads=int(row.get("threads_requested") or 1) * int(row.get("world_size") or 1),
        processors=int(processors) if pd.notna(processors) else None,
        util_mean=float(util) if pd.notna(util) else None)
    return 0.0 if how == NO_OUTSIDE else busy


def aa_controls(controls: pd.DataFrame | None, also=()) -> tuple[bool, list[str]]:
    """The same framework in both slots of a pair: a control that finds a difference shows
    the design's own false positives, and a design is trusted only when its controls pass.
    ``also``: the axes that tell the run's comparisons apart, which name its controls too."""
    if controls is None or controls.empty:
        return False, ["no A/A controls: the run compared no framework with itself, so its "
                       "design's own false-positive rate is unknown."]
    failed = controls[~passed(controls)]
    if len(failed):
        return False, [f"{_control_name(row, also)} failed (ratio {fmt(row['ratio'], 'ratio')}): "
                       f"{str(row['note']).removeprefix('failed: ')}."
                       for _, row in failed.iterrows()]
    return True, [f"Every A/A control passed ({count(len(controls), 'control')}): "
                  + "; ".join(f"{_control_name(row, also)} (ratio {fmt(row['ratio'], 'ratio')})"
                              for _, row in controls.iterrows()) + "."]


def _control_name(row, also=()) -> str:
    """An A/A control in words, as page 1 names it: "PyTorch's A/A control of lenet5 inference
    at batch 4 on the CPU"."""
    return f"{label(row.get('framework', ''))}'s A/A control of {_name(row, 'control', also)}"


def _name(row, key: str, also=()) -> str:
    """A comparison or control in words where its row has the axes, else its id ``key``;
    ``also``: the axes that tell it from the others ("with adam")."""
    return pair_name(row, also) or f"`{row[key]}`"


def headline(comparisons: pd.DataFrame, statistics: dict | None = None
             ) -> tuple[bool, list[str]]:
    """Every comparison the run claims is decided, not a hint; or undecided with the power the
    plan promised (``statistics.sizing``, fwbench.plan.sizing): it had the pairs the rule asked,
    and its interval excludes the difference the rule sized it to decide."""
    if comparisons.empty:
        return False, ["No headline comparison: the run compared no matched pair."]
    exploratory = _column(comparisons, "exploratory").fillna(False).astype(str).str.lower()
    hint = comparisons["verdict"].isin(DECIDED) & (exploratory == "true")
    undecided = comparisons[~comparisons["verdict"].isin(DECIDED) | hint]
    rule = (statistics or {}).get("sizing")
    rows = [row for _, row in undecided.iterrows()]
    also = telling_apart(comparisons)
    powered = [_powered(row, rule, statistics, also) for row in rows]
    failed = [(row, why) for row, (ok, why) in zip(rows, powered) if not ok]
    if not failed:
        return True, [f"Every headline comparison is decided "
                      f"({count(len(comparisons), 'comparison')})."
                      if undecided.empty else
                      f"Every headline comparison is decided, or undecided with the power the "
                      f"plan promised ({count(len(comparisons), 'comparison')}: "
                      + "; ".join(why for _, why in powered) + ")."]
    # One reason per state and cause, naming every comparison it holds for: a plan without a
    # sizing rule gives every undecided comparison the same cause.
    named: dict[tuple[str, str], list[str]] = {}
    for row, why in failed:
        named.setdefault((row.verdict, why), []).append(_name(row, "pair_id", also))
    return False, [f"The comparison{'s' if len(names) > 1 else ''} of {join(names)} "
                   + _state(verdict, len(names) > 1) + f": {why}."
                   for (verdict, why), names in named.items()]


def _state(verdict: str, plural: bool) -> str:
    if verdict in DECIDED:
        return (f"read{'' if plural else 's'} {OUTCOME_LABELS.get(verdict, verdict)} only as a "
                "hint (exploratory)")
    return f"{'are' if plural else 'is'} {verdict}"


def _powered(row, rule: dict | None, statistics: dict | None, also=()) -> tuple[bool, str]:
    """Whether an undecided comparison had the power the plan's sizing rule promised, and why
    (or why not)."""
    if not rule:
        return False, "the plan states no power for undecided comparisons"
    from fwbench.plan.sizing import expected_sd, pairs_to_decide

    alpha = (1 - statistics.get("confidence", 0.95)) / int(row.family_size)
    needed = pairs_to_decide(sd=expected_sd(rule, row.dropna().to_dict()), ratio=rule["ratio"],
                             alpha=alpha, power=rule["power"])
    band = f"{fmt(rule['ratio'], 'ratio')} to {fmt(1 / rule['ratio'], 'ratio')}"
    if row.n_pairs_used < needed:
        return False, (f"{count(int(row.n_pairs_used), 'pair')} where the plan's sizing rule "
                       f"asked {needed}")
    if not rule["ratio"] < row.ratio_ci_low <= row.ratio_ci_high < 1 / rule["ratio"]:
        return False, (f"its interval [{row.ratio_ci_low:.3f}, {row.ratio_ci_high:.3f}] reaches "
                       f"past {band}, the difference the plan's sizing rule promised to decide")
    return True, (f"{_name(row, 'pair_id', also)} had {int(row.n_pairs_used)} pairs and its "
                  f"interval [{row.ratio_ci_low:.3f}, {row.ratio_ci_high:.3f}] lies within {band}")


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame[name] if name in frame else pd.Series(None, index=frame.index, dtype=object)
