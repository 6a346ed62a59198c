"""Where the time goes: one profiled run per cell, in a supervised fresh process
(fwbench.measure.profile_steps), written to ``<cell dir>/profile.json``.

The profiled run is not a trial: its file has its own schema
(``rules/schemas/profile.schema.yaml``, ``"kind": "profile"``), so no table of timings ever reads
it, and its times (inflated by the profiler) never enter the statistics; the profiles table is
fwbench.analysis.profiles'.

Usage::

    run_profile(TrialSettings.from_dict(params), "results/default/cells/.../profile.json")
"""

from __future__ import annotations

import dataclasses
import json
import sys

from fwbench import SOURCE_DIR
from fwbench.measure.child import thread_environment
from fwbench.measure.payload import TrialPayload
from fwbench.measure.profile_steps import DEFAULT_STEPS
from fwbench.plan.contract import TrialSettings

PROFILE_KIND = "profile"
JSON_VERSION = 1
SCHEMA_PATH = SOURCE_DIR / "rules" / "schemas" / "profile.schema.yaml"
ENTRY = "fwbench.measure.profile_steps:profile_trial"


def run_profile(settings: TrialSettings, out_path) -> dict:
    """Profile one cell in a supervised fresh process and write ``profile.json`` atomically.

    ``settings``: the trial settings of any trial of the cell (``Plan.trial_settings``), with
    ``profile_steps``. A failure is written too, with its status and message.
    """
    from datetime import datetime, timezone

    from fwbench.environment import source
    from fwbench.measure.results import write_json
    from fwbench.measure.supervisor import supervise

    started = datetime.now(timezone.utc).isoformat()
    outcome = supervise(ENTRY, settings.to_dict(), timeout_s=settings.timeout_s,
                        memory_limit_mb=settings.memory_limit_mb,
                        env=thread_environment(settings.threads))
    payload = TrialPayload.from_dict(outcome.payload)
    result = {
        "schema_version": JSON_VERSION,
        "kind": PROFILE_KIND,
        "run": settings.run,
        "cell_id": settings.cell_id,
        "pair_id": settings.pair_id,
        "cell": settings.cell.to_dict(),
        "status": outcome.status,
        "message": outcome.message,
        "profile_steps": settings.profile_steps or DEFAULT_STEPS,
        "profile": payload.details.get("profile"),
        "settings_in_force": payload.settings_in_force,
        "versions": payload.versions,
        "started_at": started,
        "ended_at": datetime.now(timezone.utc).isoformat(),
        "workflow": source.git_state(),
    }
    validate_profile(result)
    write_json(result, out_path)
    return result


def validate_profile(data: dict, source: str = "profile result") -> dict:
    """Check a profile result against its schema; raise ResultError naming what is wrong."""
    from fwbench.errors import ResultError
    from fwbench.measure.results import check_schema, schema_validator

    if data.get("kind") != PROFILE_KIND or data.get("schema_version") != JSON_VERSION:
        raise ResultError(f"{source}: not a profile result of version {JSON_VERSION} (kind "
                          f"{data.get('kind')!r}, schema_version {data.get('schema_version')!r})")
    return check_schema(data, schema_validator(SCHEMA_PATH), source)


def main(argv: list[str] | None = None) -> int:
    """``python -m fwbench.measure.profiling --settings JSON --out profile.json`` (a workflow
    job)."""
    import argparse

    from fwbench.measure.supervisor import Interrupted, stop_on_signals

    parser = argparse.ArgumentParser(prog="python -m fwbench.measure.profiling",
                                     description=main.__doc__)
    parser.add_argument("--settings", required=True, help="the cell's trial settings as JSON")
    parser.add_argument("--out", required=True, help="path of <cell dir>/profile.json")
    parser.add_argument("--steps", type=int, help="profiled steps (default: settings' "
                        f"profile_steps, else {DEFAULT_STEPS})")
    args = parser.parse_args(argv)
    settings = TrialSettings.from_dict(json.loads(args.settings))
    if args.steps:
        settings = dataclasses.replace(settings, profile_steps=args.steps)
    stop_on_signals()
    try:
        result = run_profile(settings, args.out)
    except Interrupted as exc:
        print(f"fwbench: profile interrupted, nothing written: {exc}", file=sys.stderr)
        return 130
    p = result["profile"] or {}
    summary = ", ".join(f"{c} {v:.0%}" for c, v in (p.get("share") or {}).items() if v >= 0.01)
    print(f"{result['cell_id']} profile: {result['status']} ({summary or result['message']})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
