"""A cell's warm-up: found once on its calibration trial, then the same for all its trials.

The calibration trial is a fresh process like a trial, timing only single steps after the cold
start: for ``warmup.calibration_s`` and at least twice ``warmup.max``
(fwbench.measure.harness.Schedule). On the host, a changepoint analysis of those steps finds
where the steady state starts (fwbench.analysis.steady_state: PELT, as Barrett et al., OOPSLA
2017, classify runs; `fwbench fix-warmup` calls it), and ``fix_warmup`` turns what it found
into the count every trial of the cell warms up, written to the cell's ``warmup.json``:

- steady from step k (a warm-up, a flat run, or a slowdown that settles): k steps, at least
  ``warmup.min``;
- steady only after the cap: the cap, and the trials are recorded as not warmed up to a steady
  state. The cap is ``warmup.max`` steps, or as many as ``warmup.max_s`` seconds hold at the
  calibration's median step when that is more: a sub-millisecond step (LeNet-5) may warm up the
  hundreds of steps its steady state takes, a slow one keeps ``warmup.max``;
- no steady state, or a calibration that did not end ``ok``: ``warmup.max`` (the fallback).

Usage::

    record = fix_warmup(calibration_result, found=37, kind="warmup", changepoints=[37],
                        warmup_min=10, warmup_max=100)
    read_warmup("results/default/cells/…/warmup.json")["iterations"]   # 37
"""

from __future__ import annotations

import os

from fwbench import SOURCE_DIR

SCHEMA_PATH = SOURCE_DIR / "rules" / "schemas" / "warmup.schema.yaml"
METHOD = ("changepoints (PELT, fwbench.analysis.steady_state) in the single steps of the cell's "
          "calibration trial; Barrett et al., OOPSLA 2017")


def fix_warmup(calibration: dict, *, found: int | None, kind: str | None,
               changepoints: list[int], warmup_min: int, warmup_max: int,
               warmup_max_s: float | None = None) -> dict:
    """The warm-up of every trial of the calibrated cell.

    ``calibration``: the calibration trial's result; ``found``, ``kind``, ``changepoints``: the
    changepoint analysis of its ``iteration_ns`` (where the steady final segment starts, None
    for no steady state; Barrett et al.'s class; the segment starts), None and [] when it did
    not end ``ok``."""
    steps = len(calibration["iteration_ns"])
    cap = step_cap(calibration["iteration_ns"], warmup_max, warmup_max_s)
    record = {"cell_id": calibration["cell_id"], "class": kind, "found": found,
              "changepoints": list(changepoints), "calibration_status": calibration["status"],
              "calibration_steps": steps, "method": METHOD,
              "bounds": {"min": warmup_min, "max": warmup_max, "max_s": warmup_max_s,
                         "cap": cap}}
    if calibration["status"] != "ok":
        return {**record, "iterations": warmup_max, "steady": None,
                "reason": f"the calibration ended {calibration['status']}: warmup.max "
                          f"({warmup_max}), the fallback"}
    if found is None:
        return {**record, "iterations": warmup_max, "steady": False,
                "reason": f"no steady state in the calibration's {steps} steps: warmup.max "
                          f"({warmup_max}), the fallback"}
    if found > cap:
        past = "warmup.max" if cap == warmup_max else f"the {warmup_max_s:g} s cap"
        return {**record, "iterations": cap, "steady": False,
                "reason": f"steady from step {found} of the calibration's {steps}, past "
                          f"{past}: cut to {cap}"}
    iterations = max(found, warmup_min)
    raised = f", raised to warmup.min ({warmup_min})" if iterations > found else ""
    return {**record, "iterations": iterations, "steady": True,
            "reason": f"steady from step {found} of the calibration's {steps}{raised}"}


def step_cap(iteration_ns: list, warmup_max: int, warmup_max_s: float | None) -> int:
    """The most warm-up steps: ``warmup_max``, or the steps ``warmup_max_s`` seconds hold at the
    calibration's median step when that is more (a calibration without steps: ``warmup_max``)."""
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
