"""A cell's warm-up: found once on its calibration trials, then the same for all its trials.

A calibration trial is a fresh process like a trial, timing only single steps after the cold
start: for ``warmup.calibration_s`` and at least twice ``warmup.max``
(fwbench.measure.harness.Schedule). A cell runs ``warmup.calibrations`` of them, one after the
other (1 when the config does not say). On the host, a changepoint analysis of each one's steps
finds where its steady state starts (fwbench.analysis.steady_state: PELT, as Barrett et al.,
OOPSLA 2017, classify runs; `fwbench fix-warmup` calls it), and ``fix_warmup`` turns what it
found into the count every trial of the cell warms up, written to the cell's ``warmup.json``:

- the warm-up ends at the first step from which a majority of the calibrations is steady: a
  change that recurs in most processes is the cell's warm-up, and one that a single process
  shows (the host changing speed under it) moves nothing. One calibration is its own majority;
- a calibration whose steps leave a level and return to it (class ``switching``) shows the host,
  not a warm-up, and counts as not steady;
- steady from step k: k steps, at least ``warmup.min``;
- steady only after the cap: the cap, and the trials are recorded as not warmed up to a steady
  state. The cap is ``warmup.max`` steps, or as many as ``warmup.max_s`` seconds hold at the
  calibrations' median step when that is more: a sub-millisecond step (LeNet-5) may warm up the
  hundreds of steps its steady state takes, a slow one keeps ``warmup.max``;
- no majority steady, or too few calibrations that ended ``ok``: ``warmup.max`` (the fallback).
  Where the host switched speed in most of them, the record says so (class ``switching``) and
  leaves ``steady`` unknown: that is the host's doing, not a warm-up that never settled.

Usage::

    record = fix_warmup([calibration_result], [{"found": 37, "class": "warmup",
                                                "changepoints": [37]}],
                        warmup_min=10, warmup_max=100)
    read_warmup("results/default/cells/…/warmup.json")["iterations"]   # 37
"""

from __future__ import annotations

import os

from fwbench import SOURCE_DIR

SCHEMA_PATH = SOURCE_DIR / "rules" / "schemas" / "warmup.schema.yaml"
METHOD = ("changepoints (PELT, fwbench.analysis.steady_state) in the single steps of the cell's "
          "calibration trials, the first step a majority is steady from; Barrett et al., "
          "OOPSLA 2017")


def fix_warmup(calibrations: list[dict], findings: list[dict], *, warmup_min: int,
               warmup_max: int, warmup_max_s: float | None = None) -> dict:
    """The warm-up of every trial of the calibrated cell.

    ``calibrations``: the cell's calibration trials' results; ``findings``: per calibration,
    the changepoint analysis of its ``iteration_ns``: ``found`` (where its steady final segment
    starts, None for none), ``class`` (Barrett et al.'s, or ``switching``) and
    ``changepoints`` (the segment starts); None, None and [] for one that did not end ``ok``."""
    ok = [(c, f) for c, f in zip(calibrations, findings) if c["status"] == "ok"]
    majority = len(calibrations) // 2 + 1
    steps = [t for c, _ in ok for t in c["iteration_ns"]]
    cap = step_cap(steps, warmup_max, warmup_max_s)
    steady = sorted((f["found"], k) for k, (_, f) in enumerate(ok)
                    if f["found"] is not None and f["class"] != "switching")
    # The calibration whose steady start is the majority's (else the first that ended ok).
    if len(steady) >= majority:
        chosen = ok[steady[majority - 1][1]]
    else:
        chosen = ok[0] if ok else (calibrations[0], findings[0])
    record = {"cell_id": calibrations[0]["cell_id"], "class": chosen[1]["class"],
              "found": None, "changepoints": list(chosen[1]["changepoints"]),
              "calibration_status": chosen[0]["status"],
              "calibration_steps": len(chosen[0]["iteration_ns"]), "method": METHOD,
              "bounds": {"min": warmup_min, "max": warmup_max, "max_s": warmup_max_s,
                         "cap": cap},
              "calibrations": [{"status": c["status"], "steps": len(c["iteration_ns"]),
                                "class": f["class"], "found": f["found"],
                                "changepoints": list(f["changepoints"])}
                               for c, f in zip(calibrations, findings)]}
    of = _of(len(calibrations))
    if len(ok) < majority:
        failed = [c["status"] for c in calibrations if c["status"] != "ok"]
        said = (f"the calibration ended {failed[0]}" if len(calibrations) == 1 else
                f"{len(failed)} of the {len(calibrations)} calibrations did not end ok "
                f"({', '.join(failed)})")
        return {**record, "class": None, "changepoints": [], "calibration_status": failed[0],
                "iterations": warmup_max, "steady": None,
                "reason": f"{said}: warmup.max ({warmup_max}), the fallback"}
    if len(steady) < majority:
        switching = sum(f["class"] == "switching" for _, f in ok)
        if 2 * switching >= len(ok):
            where = of if len(calibrations) == 1 else f"{switching} of {of}"
            return {**record, "class": "switching", "iterations": warmup_max, "steady": None,
                    "reason": f"the host switched speed in {where}: warmup.max "
                              f"({warmup_max}), the fallback"}
        return {**record, "class": "no_steady_state", "iterations": warmup_max,
                "steady": False,
                "reason": f"no steady state in the {_steps_of(ok)}: warmup.max "
                          f"({warmup_max}), the fallback"}
    found = steady[majority - 1][0]
    where = (f"of the calibration's {len(steps)}" if len(calibrations) == 1 else
             f"in {sum(1 for f, _ in steady if f <= found)} of {of}")
    record["found"] = found
    if found > cap:
        past = "warmup.max" if cap == warmup_max else f"the {warmup_max_s:g} s cap"
        return {**record, "iterations": cap, "steady": False,
                "reason": f"steady from step {found} {where}, past {past}: cut to {cap}"}
    iterations = max(found, warmup_min)
    raised = f", raised to warmup.min ({warmup_min})" if iterations > found else ""
    return {**record, "iterations": iterations, "steady": True,
            "reason": f"steady from step {found} {where}{raised}"}


def _of(n: int) -> str:
    return "the calibration" if n == 1 else f"the {n} calibrations"


def _steps_of(ok: list) -> str:
    if len(ok) == 1:
        return f"calibration's {len(ok[0][0]['iteration_ns'])} steps"
    return f"{len(ok)} calibrations' steps"


def step_cap(iteration_ns: list, warmup_max: int, warmup_max_s: float | None) -> int:
    """The most warm-up steps: ``warmup_max``, or the steps ``warmup_max_s`` seconds hold at the
    calibrations' median step when that is more (no steps: ``warmup_max``)."""
    if not warmup_max_s or not iteration_ns:
        return warmup_max
    median_ns = sorted(iteration_ns)[len(iteration_ns) // 2]
    return max(warmup_max, int(warmup_max_s * 1e9 // max(median_ns, 1)))


def uncalibrated(warmup_max: int) -> dict:
    """The warm-up of a trial run without its cell's calibration (by hand, in a test):
    ``warmup.max`` steps, the fallback, with nothing known of a steady state."""
    return {"iterations": warmup_max, "steady": None, "class": None, "found": None,
            "reason": f"no calibration: warmup.max ({warmup_max}), the fallback"}


def read_warmup(path: str | os.PathLike) -> dict:
    """The warm-up record ``fix_warmup`` made, checked against rules/schemas/warmup.schema.yaml."""
    from fwbench.measure.results import check_schema, read_json, schema_validator

    record = read_json(path, "the warm-up record")
    return check_schema(record, schema_validator(SCHEMA_PATH), str(path))
