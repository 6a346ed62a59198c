"""The commands the workflow's jobs run (rules/benchmark.smk): ``trial``, ``idle``,
``prepare-data`` and ``fix-warmup``. They work, each with its own --help, but ``fwbench --help``
leaves them out: a user starts runs with ``fwbench run``, and these take the plan's settings."""

from __future__ import annotations

import json
import sys


def _trial_command(args) -> int:
    from fwbench.measure.supervisor import Interrupted, stop_on_signals
    from fwbench.measure.trial import run_trial

    stop_on_signals()
    timeline = {"job_started": _epoch_ns(args.job_started), "python_started": args.started_ns}
    try:
        result = run_trial(json.loads(args.settings), args.result, args.env, args.telemetry,
                           args.idle, timeline={k: v for k, v in timeline.items() if v},
                           warmup_path=args.warmup)
    except Interrupted as exc:
        print(f"fwbench: trial interrupted, nothing written: {exc}", file=sys.stderr)
        return 130
    times = result["iteration_ns"]
    summary = (f"median {sorted(times)[len(times) // 2] / 1e6:.3f} ms" if times
               else result["message"])
    print(f"{result['cell_id']} trial {result['trial']}: {result['status']} ({summary})",
          file=sys.stderr)
    return 0


def _fix_warmup_command(args) -> int:
    from fwbench.analysis.steady_state import fixed_warmup
    from fwbench.measure.results import load_trial, write_json

    record = fixed_warmup([load_trial(path) for path in args.calibration], warmup_min=args.min,
                          warmup_max=args.max, warmup_max_s=args.max_s or None)
    write_json(record, args.out)
    print(f"{record['cell_id']}: warm up {record['iterations']} steps ({record['reason']})",
          file=sys.stderr)
    return 0


def _prepare_data_command(args) -> int:
    from fwbench.measure.data import prepare_data
    from fwbench.measure.results import write_json

    settings = json.loads(args.settings)
    manifests = prepare_data(settings["data"], settings["shapes"])
    write_json(manifests, args.out)
    print(f"data ready: {', '.join(manifests) or 'none'}", file=sys.stderr)
    return 0


def _epoch_ns(seconds: str | None) -> int | None:
    """Bash's ``$EPOCHREALTIME`` ("1732451234.123456", a comma in some locales) in ns; None
    when the shell has none (not bash 5)."""
    try:
        return round(float((seconds or "").replace(",", ".")) * 1e9)
    except ValueError:
        return None


def _idle_command(args) -> int:
    from fwbench.measure.trial import measure_idle_baseline

    idle = measure_idle_baseline(args.out, duration_s=args.duration, period_s=args.period)
    print(f"idle baseline: {json.dumps(idle)[:300]}", file=sys.stderr)
    return 0


def add_commands(commands, command) -> None:
    """Add the jobs' commands to the command line's ``commands``, each by ``command`` (the
    command line's helper that registers one) with no summary, so that the list omits it."""
    idle = command(
        commands, "idle", None,
        "Run by the workflow before the first trial. Sample GPU power, the energy counters "
        "and temperatures with nothing running (a CUDA context held on each GPU, as a trial "
        "holds one), and write the baseline that trials subtract from their energy and wait "
        "for before they start.", _idle_command)
    idle.add_argument("--out", required=True, help="the JSON file to write")
    idle.add_argument("--duration", type=float, default=3.0, help="seconds (default 3)")
    idle.add_argument("--period", type=float, default=0.1, help="sampling period in seconds")

    data = command(
        commands, "prepare-data", None,
        "Run by the workflow before the first trial that reads a data set. Fetch and verify "
        "every data set the sweep reads and write what the trials will read (data set, source, "
        "files and checksums).", _prepare_data_command)
    data.add_argument("--settings", required=True, help="the config's data block and the "
                      "sweep's input shapes, as JSON {\"data\": ..., \"shapes\": ...}")
    data.add_argument("--out", required=True, help="the data.json to write")

    warmup = command(
        commands, "fix-warmup", None,
        "Run by the workflow after a cell's calibration trials. Find where their single steps "
        "reach their steady state (a changepoint analysis of each; the first step a majority "
        "is steady from) and write the warm-up every trial of the cell takes, within "
        "[--min, --max] steps (or --max-s seconds).",
        _fix_warmup_command)
    warmup.add_argument("--calibration", required=True, nargs="+",
                        help="the cell's calibration results (calibration.json, "
                        "calibration-2.json, ...)")
    warmup.add_argument("--out", required=True, help="the warmup.json to write")
    warmup.add_argument("--min", type=int, required=True, help="fewest warm-up steps")
    warmup.add_argument("--max", type=int, required=True,
                        help="most warm-up steps, and the warm-up when none is found")
    warmup.add_argument("--max-s", type=float, default=0.0,
                        help="the cap in seconds: allow as many steps as fit in it at the "
                        "calibration's median step, where that is more than --max (0: none)")

    trial = command(
        commands, "trial", None,
        "Run by the workflow. Measure one trial: a fresh process runs the cell while "
        "telemetry is sampled, and its result, provenance and telemetry files are written "
        "atomically. The workflow passes the settings from its plan; running it by hand is for "
        "debugging.", _trial_command)
    trial.add_argument("--settings", required=True,
                       help="the trial's settings as JSON (from the plan)")
    trial.add_argument("--result", required=True, help="path of trial-<k>.json")
    trial.add_argument("--env", required=True, help="path of trial-<k>.env.json")
    trial.add_argument("--telemetry", required=True, help="path of trial-<k>.telemetry.csv")
    trial.add_argument("--idle", help="the run's idle baseline (idle.json)")
    trial.add_argument("--warmup", help="the cell's warm-up record (warmup.json), fixed by its "
                       "calibration trial; empty or absent: warm up warmup_max steps")
    trial.add_argument("--job-started", metavar="SECONDS",
                       help="when the job's shell started, in seconds since the epoch (the "
                       "workflow passes bash's $EPOCHREALTIME), for the timeline in the log")
