"""A shipped run's README (results/<run>/README.md), written from the run's own tables with its
report: whether it is preliminary (it failed the shipping gate) and why, the machine, how busy
it was while the trials measured, the dates and the wall time, and which published claims the
run can judge and which it cannot. A rebuild rewrites it, so it
never drifts from the data it describes.

    text = readme(data, claims_rows, run="tian2020-cpu")
"""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims import PAPERS
from fwbench.analysis.claims.setting import ANOTHER_SETTING
from fwbench.analysis.claims.wording import DEVICE_NAMES, count, join, label, missing, unique
from fwbench.analysis.summaries import spread
from fwbench.measure.telemetry.outside import OTHER_WORK
from fwbench.report.formatting import fmt
from fwbench.report.inputs import Inputs
from fwbench.report.sections import machine, plan, preliminary
from fwbench.report.sections.reproduction import UNJUDGED


def readme(data: Inputs, claims: list[dict], *, run: str) -> str:
    """The README of ``run``: ``claims`` are the report's claim rows, each with its verdict."""
    trials = data.trials
    gate = preliminary.markdown(data)
    return "\n\n".join([
        f"# {run}: PyTorch and TensorFlow, measured" + (" (preliminary)" if gate else ""),
        *([gate] if gate else []),
        what_ran(data, run) + " " + plan.plan_status(data),
        "## Machine\n\n" + machine.describe(trials) + "\n\n" + load(trials),
        "## Claims\n\n" + (NOT_COUNTED if gate else "") + scope(trials) + judged(claims),
        "## Rebuild\n\n"
        "The report is report/report.html and report/report.pdf; its data appendices are in "
        "report/data/. Remake the tables, statistics, figures, report and this file from "
        "cells/ (no trial is run again), and check them byte for byte against "
        "rebuild.sha256:\n\n"
        f"    python -m fwbench rebuild results/{run}\n"
        f"    python -m fwbench rebuild results/{run} --check",
    ]) + "\n"


# Before the claims of a preliminary run: its verdicts count toward no finding.
NOT_COUNTED = ("This run is preliminary (above): the verdicts below are what its data read, and "
               "count toward no finding.\n\n")


def what_ran(data: Inputs, run: str) -> str:
    """The trials, their software, the A/A controls' trials, the dates and the wall time (of
    every trial, the controls' included: the time the run took)."""
    trials = data.trials
    if trials.empty:
        return "No trial was recorded."
    ok = int((trials["status"] == "ok").sum())
    versions = join(f"{label(f)} {join(unique(part, 'framework_version'))}"
                    for f, part in trials.groupby("framework", sort=True))
    cells = count(trials["cell_id"].nunique(), "cell")
    text = (f"{count(len(trials), 'trial')} ({ok} ok) of {cells}, "
            f"{join(unique(trials, 'experiment'))} experiment, on "
            f"{join('the ' + DEVICE_NAMES.get(d, d) for d in unique(trials, 'device'))}: "
            f"{versions}. " + controls_sentence(len(data.control_trials))
            + when(data.every_trial))
    recorded = [r for r in unique(trials, "run") if r != run]
    if recorded:
        text += (f" The trials record the run name {join(f'`{r}`' for r in recorded)}: they "
                 "were measured under that name and copied here unchanged.")
    return text


def controls_sentence(n_trials: int) -> str:
    return f"Its A/A controls ran {count(n_trials, 'more trial')}. " if n_trials else ""


def when(trials: pd.DataFrame) -> str:
    """The dates, and the wall time from each session's first start to its last end."""
    start = pd.to_datetime(trials["started_at"], utc=True, errors="coerce")
    end = pd.to_datetime(trials["ended_at"], utc=True, errors="coerce")
    if start.isna().all() or end.isna().all():
        return "The trials recorded no times."
    sessions = trials["session"].fillna("") if "session" in trials else pd.Series("", trials.index)
    spans = [(end[part.index].max() - start[part.index].min()).total_seconds()
             for _, part in trials.groupby(sessions, sort=True)]
    dates = sorted({d.strftime("%Y-%m-%d") for d in (start.min(), end.max())})
    text = (f"Measured {' to '.join(dates)} (UTC), from {start.min():%H:%M} to "
            f"{end.max():%H:%M}: {duration(sum(spans))} of wall time")
    return text + (f" over {count(len(spans), 'session')}." if len(spans) > 1 else ".")


def duration(seconds: float) -> str:
    """8 min 44 s, 2 h 5 min: a wall time as a person reads it."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def load(trials: pd.DataFrame) -> str:
    """How busy the machine was while the trials measured: every core's busy share during
    each trial (its telemetry's mean CPU utilization), against what the trial's own threads
    could use; what is beyond that was other work."""
    if "cpu_util_mean" not in trials or trials["cpu_util_mean"].isna().all():
        return "The trials recorded no CPU utilization, so the load while measuring is unknown."
    busy = trials["cpu_util_mean"].dropna().astype(float) / 100
    load = spread(busy)
    text = (f"Load while measuring: all processors were busy {fmt(load['median'], 'share')} of "
            f"the time during a trial (median over the {count(len(busy), 'trial')} whose "
            f"telemetry read it; {fmt(load['min'], 'share')} to {fmt(load['max'], 'share')}).")
    threads, cpus = unique(trials, "threads_intra"), unique(trials, "cpu_count")
    if len(threads) == 1 and len(cpus) == 1:
        world = int(trials["world_size"].fillna(1).max()) if "world_size" in trials else 1
        own = int(threads[0]) * world
        share = min(1.0, own / int(cpus[0]))
        text += (f" A trial's own {count(own, 'thread')} could keep {fmt(share, 'share')} of "
                 f"the {cpus[0]} logical processors busy; "
                 + (_beyond_own(trials) if load["median"] > share else
                    "the median stays within that, so it shows no other work."))
    return text


def _beyond_own(trials: pd.DataFrame) -> str:
    """What kept the machine busier than a trial's threads could: other work, or where the
    telemetry recorded the measurement's own processes, those and what was left."""
    methods = unique(trials, "outside_busy_method") if "outside_busy_method" in trials else []
    if methods != [OTHER_WORK]:
        return "the rest was other work on the machine."
    other = spread(trials["outside_busy_pct"].astype(float) / 100)
    return ("the rest was the measurement's own work beside it (its sampler, its supervisor "
            "and the workflow) and any other work: with the measurement's own left out, the "
            f"processors outside a trial's own were busy {fmt(other['median'], 'level')} of "
            f"the time (median; at most {fmt(other['max'], 'level')}).")


def scope(trials: pd.DataFrame) -> str:
    """Which processor the verdicts hold for, where every trial recorded one kind; "" else (the
    gate says why)."""
    scoped = machine.holds_for(trials, "Every verdict below holds")
    return f"{scoped} Another kind can read them differently.\n\n" if scoped else ""


def judged(claims: list[dict]) -> str:
    """The claims the run judged, each with its status (and what differs from the paper's
    setting), then those it could not, counted per paper."""
    verdicts = [c for c in claims if c["verdict"] not in UNJUDGED]
    elsewhere = sum(c["verdict"] == ANOTHER_SETTING for c in verdicts)
    lines = [f"This run judges {len(verdicts) - elsewhere} of the {len(claims)} published claims "
             f"in the paper's own setting, and measures {elsewhere} more in another setting."]
    for claim in verdicts:
        here = claim.get("verdict_here")
        status = claim["verdict"] + (f" (here: {here})" if here and not missing(here) else "")
        if claim.get("exploratory"):
            status += ", exploratory"
        differs = "; ".join(claim.get("differs", []))
        lines.append(f"- {claim['id']}: {status}" + (f"; differs: {differs}" if differs else ""))
    reasons = []
    for verdict in UNJUDGED:
        rows = [c for c in claims if c["verdict"] == verdict]
        if rows:
            per_paper = join(f"{p} {sum(c['paper'] == p for c in rows)}" for p in PAPERS
                             if any(c["paper"] == p for c in rows))
            reasons.append(f"{len(rows)} {verdict} ({per_paper})")
    if reasons:
        lines.append(f"\nIt cannot judge the other {len(claims) - len(verdicts)}: "
                     f"{join(reasons)}; report/data/claims.csv gives each one's reason.")
    return "\n".join(lines)
