"""Command line: ``python -m fwbench <command>``. Each command parses arguments and calls the library."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from fwbench import provenance, workflow
from fwbench.supervisor import Interrupted, stop_on_signals
from fwbench.trial import measure_idle_baseline, run_trial


def _trial_command(args) -> int:
    stop_on_signals()
    try:
        result = run_trial(json.loads(args.settings), args.result, args.env, args.telemetry,
                           args.idle)
    except Interrupted as exc:
        print(f"fwbench: trial interrupted, nothing written: {exc}", file=sys.stderr)
        return 130
    times = result["iteration_ns"]
    summary = f"median {sorted(times)[len(times) // 2] / 1e6:.3f} ms" if times else result["message"]
    print(f"{result['cell_id']} trial {result['trial']}: {result['status']} ({summary})",
          file=sys.stderr)
    return 0


def _unlock_command(args) -> int:
    alive = workflow.snakemake_alive()
    if alive:
        print(f"fwbench: Snakemake is still running here (pid {', '.join(map(str, alive))}); "
              "wait for it or stop it before resuming.", file=sys.stderr)
        return 1
    if workflow.stale_locks():
        print("fwbench: removing the stale lock of an interrupted run.", file=sys.stderr)
        snakefile = provenance.SOURCE_DIR / "Snakefile"
        return subprocess.run(["snakemake", "--snakefile", str(snakefile), "--unlock",
                               "--cores", "1"]).returncode
    return 0


def _rebuild_command(args) -> int:
    command = workflow.rebuild_command(args.run_dir, provenance.SOURCE_DIR / "Snakefile")
    print(f"fwbench: {' '.join(command)}", file=sys.stderr)
    return subprocess.run(command).returncode


def _idle_command(args) -> int:
    idle = measure_idle_baseline(args.out, duration_s=args.duration, period_s=args.period)
    print(f"idle baseline: {json.dumps(idle)[:300]}", file=sys.stderr)
    return 0


def _models_command(args) -> int:
    from fwbench.models import print_models  # counts parameters in both frameworks

    print_models(as_json=args.json)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fwbench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    trial = commands.add_parser("trial", help="measure one trial (a workflow job runs this)")
    trial.add_argument("--settings", required=True, help="the trial's settings as JSON (from the plan)")
    trial.add_argument("--result", required=True, help="path of trial-<k>.json")
    trial.add_argument("--env", required=True, help="path of trial-<k>.env.json")
    trial.add_argument("--telemetry", required=True, help="path of trial-<k>.telemetry.csv")
    trial.add_argument("--idle", help="the run's idle baseline (idle.json)")
    trial.set_defaults(func=_trial_command)
    idle = commands.add_parser("idle", help="measure the idle baseline before the first trial")
    idle.add_argument("--out", required=True)
    idle.add_argument("--duration", type=float, default=3.0, help="seconds")
    idle.add_argument("--period", type=float, default=0.1, help="sampling period in seconds")
    idle.set_defaults(func=_idle_command)
    models = commands.add_parser("models", help="the model zoo: parameters, FLOPs, differences")
    models.add_argument("--json", action="store_true", help="print JSON instead of a table")
    models.set_defaults(func=_models_command)
    unlock = commands.add_parser("unlock-if-idle",
                                 help="remove a stale Snakemake lock, only if no Snakemake runs here")
    unlock.set_defaults(func=_unlock_command)
    rebuild = commands.add_parser("rebuild", help="rebuild tables, statistics, figures and report "
                                  "of a run from its cell files, running no experiment")
    rebuild.add_argument("run_dir", help="the run's folder, e.g. results/reference")
    rebuild.set_defaults(func=_rebuild_command)
    args = parser.parse_args(argv)
    return args.func(args)
