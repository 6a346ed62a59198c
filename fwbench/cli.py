"""The ``fwbench`` command (also ``python -m fwbench``). Each command parses its arguments and
calls the library. Imports are lazy: ``--help`` and ``--version`` work with nothing installed
but fwbench itself, and a command whose packages are missing says how to install them."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

from fwbench import SOURCE_DIR, __version__, jobs
from fwbench.errors import FwbenchError

DESCRIPTION = """\
fwbench measures PyTorch against TensorFlow on the same models, data and settings, and writes a
report with statistics, figures and the exact software behind every number.

The measurements are a Snakemake workflow: in the repository, `make run` (or, with the
environment active, `snakemake --cores 1`) runs the default sweep and writes
results/default/report/report.html. The commands below work around such runs."""

EXAMPLES = """\
examples:
  fwbench rebuild results/reference        remake the shipped reference run's report
  fwbench export results/reference         its tables as Parquet and CSV, with a data dictionary
  fwbench models                           the models both frameworks provide
  fwbench doctor                           is this machine ready, and quiet, for a run?
  fwbench run                              the default sweep, or resume it (make run)
  fwbench run --preset tian2020-cpu        a preset; results/tian2020-cpu-2/, as that one ships
  fwbench run --dry-run -- --use-singularity
                                           what would run, every trial in its image
  fwbench audit results/reference          its software versions, and what differs elsewhere

`fwbench <command> --help` explains a command. Documentation: README.md and docs/."""

INSTALL_HINT = ("install fwbench's locked environment: in the repository, `make .venv/.installed` "
                "(or `pip install -r requirements.lock && pip install --no-deps -e .`), then run "
                "`.venv/bin/fwbench` or activate it with `. .venv/bin/activate`")


def _snakemake(args: list[str]) -> int:
    """Snakemake run by this interpreter, so by the environment fwbench is installed in,
    whatever PATH holds."""
    if importlib.util.find_spec("snakemake") is None:
        raise FwbenchError(f"Snakemake is not installed beside fwbench ({sys.executable}); "
                           + INSTALL_HINT)
    return subprocess.run([sys.executable, "-m", "snakemake", *args]).returncode


def _unlock_command(args) -> int:
    from fwbench.workflow import locks

    alive = locks.snakemake_alive()
    if alive:
        print(f"fwbench: Snakemake is still running here (pid {', '.join(map(str, alive))}); "
              "wait for it or stop it before resuming.", file=sys.stderr)
        return 1
    if locks.stale_locks():
        print("fwbench: removing the stale lock of an interrupted run.", file=sys.stderr)
        snakefile = SOURCE_DIR / "Snakefile"
        return _snakemake(["--snakefile", str(snakefile), "--unlock", "--cores", "1"])
    return 0


def _restore_times_command(args) -> int:
    from fwbench.workflow.rebuild import restore_times

    count = restore_times(_run_dir(args.run_dir))
    print(f"fwbench: {count} files of {args.run_dir} carry the time they were measured again.",
          file=sys.stderr)
    return 0


def _run_dir(path: str) -> Path:
    """A run folder that exists, or an error naming what to pass instead."""
    run_dir = Path(path)
    if not (run_dir / "cells").is_dir():
        why = ("it does not exist" if not run_dir.exists() else "it is a file"
               if not run_dir.is_dir() else "it has no cells/ folder of trial results")
        runs = sorted(p.parent.name for p in Path("results").glob("*/cells"))
        hint = f" Runs here: {', '.join(f'results/{r}' for r in runs)}." if runs else (
            " No run under ./results: run the workflow first (`make run`), or work from the "
            "repository, which ships results/reference.")
        raise FwbenchError(f"{path} is not a run folder ({why}); give results/<run>.{hint}")
    return run_dir


def _rebuild_command(args) -> int:
    from fwbench.analysis.run_folder import saved_config, trial_files
    from fwbench.measure.results import load_trial
    from fwbench.workflow.manifest import (
        MANIFEST,
        NO_HARFBUZZ,
        check_manifest,
        subsets_fonts_with_harfbuzz,
        write_manifest,
    )
    from fwbench.workflow.rebuild import rebuild_arguments

    if args.preliminary and not args.record:
        raise FwbenchError("--preliminary records a run that failed the shipping gate: give it "
                           "with --record")
    if args.record and not subsets_fonts_with_harfbuzz():
        # Its PDF's checksum would match no rebuild on a machine that has it (every other one).
        raise FwbenchError(f"refused to record: {NO_HARFBUZZ}, and record again")
    run_dir = _run_dir(args.run_dir)
    saved_config(run_dir)   # a config or result that does not read stops here, not in Snakemake
    for path in trial_files(run_dir, controls=None):
        load_trial(path)
    try:
        arguments = rebuild_arguments(run_dir, SOURCE_DIR / "Snakefile")
    except ValueError as exc:
        raise FwbenchError(f"{exc}; move or link the run folder under a results/ folder") from None
    print(f"fwbench: snakemake {' '.join(arguments)}", file=sys.stderr)
    status = _snakemake(arguments)
    if status or not (args.check or args.record):
        return status
    manifest = run_dir / MANIFEST
    if args.record:
        # Only a run that passed the shipping gate is recorded as evidence; --preliminary
        # records one that failed, as the preliminary run its report and README say it is.
        from fwbench.analysis.gate import failures, read_gate

        reasons = failures(read_gate(run_dir))
        for reason in reasons:
            print(f"fwbench rebuild: gate: {reason}", file=sys.stderr)
        if reasons and not args.preliminary:
            print(f"fwbench rebuild: refused to record {args.run_dir}: it failed the shipping "
                  "gate for the reasons above; measure it again, or record it as preliminary "
                  "with --record --preliminary", file=sys.stderr)
            return 1
        write_manifest(run_dir)
        print(f"fwbench rebuild: {'preliminary' if reasons else 'passed the shipping gate'}; "
              f"checksums of every rebuilt file -> {manifest}", file=sys.stderr)
        return 0
    if not manifest.is_file():
        raise FwbenchError(f"{manifest} is missing: record one with `fwbench rebuild "
                           f"{args.run_dir} --record` from a rebuild you trust")
    differ = check_manifest(run_dir)
    for line in differ:
        print(f"fwbench rebuild: {line}", file=sys.stderr)
    print(f"fwbench rebuild: {'differs from' if differ else 'byte-identical to'} {manifest}",
          file=sys.stderr)
    return 1 if differ else 0


def _export_command(args) -> int:
    from fwbench.analysis.export import export_run
    from fwbench.analysis.run_folder import tables_folder

    run_dir = _run_dir(args.run_dir)
    written = export_run(run_dir, args.out, formats=args.format, mlflow=args.mlflow,
                         mlflow_uri=args.mlflow_uri)
    dictionary = next(p for p in written if p.name == "data_dictionary.json")
    print(f"fwbench export: {len(written)} files in {dictionary.parent}, from the tables in "
          f"{tables_folder(run_dir)}; what each column holds, and its unit: {dictionary}"
          + (f"; MLflow run in {written[-1]}" if args.mlflow else ""), file=sys.stderr)
    return 0


def _compare_command(args) -> int:
    """Exit 0: passed (or no gate), 1: a cell fails the gate, 2: bad input (main), 3: no cell
    could be decided; on 2 and 3 nothing is written. The gate's PASS or FAIL line comes last."""
    from fwbench.analysis.compare import compare_runs, slowdowns
    from fwbench.analysis.run_folder import load_run
    from fwbench.report.compare_page import gate_line, summary, write_comparison

    a, b = load_run(args.run_a), load_run(args.run_b)
    for stale in (run.stale for run in (a, b) if run.stale):
        print(f"fwbench compare: {stale}", file=sys.stderr)
    comparison = compare_runs(a, b)
    if undecided := comparison.undecided():
        print(f"fwbench compare: nothing could be decided: {undecided}; nothing written",
              file=sys.stderr)
        return 3
    print(summary(comparison), flush=True)
    out = Path(args.out) if args.out else a.path.parent / f"compare-{a.name}-{b.name}"
    written = write_comparison(comparison, out)
    print(f"fwbench compare: wrote {', '.join(map(str, written))}", file=sys.stderr, flush=True)
    if args.fail_on_slowdown is None:
        return 0
    print(gate_line(comparison, args.fail_on_slowdown))
    return 1 if len(slowdowns(comparison.cells, args.fail_on_slowdown)) else 0


def _merge_command(args) -> int:
    from fwbench.analysis.merge import ORIGINS, merge_runs

    origins = merge_runs([_run_dir(run) for run in args.runs], args.into)
    for row in origins:
        print(f"fwbench merge: {row['source']} -> trials {row['trials']} of {args.into} "
              f"(origin {row['origin']}, {row['hostname']}, {row['cpu_model']})",
              file=sys.stderr)
    print(f"fwbench merge: {Path(args.into) / ORIGINS}; rebuild its tables, statistics and "
          f"report with `fwbench rebuild {args.into}`", file=sys.stderr)
    return 0


def _index_command(args) -> int:
    from fwbench.report.index import write_index

    out, unreadable = write_index(args.results, args.out)
    for name, why in unreadable.items():
        print(f"fwbench index: {name} is listed as unreadable: {why}", file=sys.stderr)
    print(f"fwbench index: {out}", file=sys.stderr)
    return 0


def _models_command(args) -> int:
    from fwbench.plan.models import print_models  # counts parameters in both frameworks

    print_models(as_json=args.json)
    return 0


def _pin_images_command(args) -> int:
    from fwbench.environment.pinning import pin_command

    return pin_command(args.lock)


def _doctor_command(args) -> int:
    from fwbench.measure import doctor

    found = doctor.checks(args.path, containers=args.use_singularity)
    print("\n".join(map(doctor.line, found)))
    print(doctor.verdict(found))
    return 1 if doctor.blocks(found) else 0


def _run_command(args) -> int:
    from fwbench.measure import doctor
    from fwbench.plan.runs import new_run, uses_containers

    extra = args.snakemake_args[1:] if args.snakemake_args[:1] == ["--"] else args.snakemake_args
    run = new_run(args.preset, args.configfile, extra, dry_run=args.dry_run, groups=args.groups)
    moved = (f" (results/{run.asked}/ holds a shipped run, which no run writes into)"
             if run.run != run.asked else "")
    print(f"fwbench run: {'would write' if args.dry_run else 'writes'} {run.folder}{moved}",
          file=sys.stderr)
    if run.groups:
        print(f"fwbench run: measures the next {_groups(run.groups)} not yet measured and "
              f"stops, {run.groups_left} left after them", file=sys.stderr)
    found = doctor.checks(containers=uses_containers(extra))
    print("\n".join(map(doctor.line, found)), doctor.verdict(found), sep="\n", file=sys.stderr)
    if doctor.blocks(found):
        print("fwbench run: nothing started, nothing written", file=sys.stderr)
        return 1
    if not args.dry_run and _unlock_command(args):
        return 1
    print(f"fwbench: snakemake {' '.join(run.arguments)}", file=sys.stderr)
    status = _snakemake(run.arguments)
    if args.dry_run:
        print(f"fwbench run: dry run, nothing written; a run would write {run.folder}",
              file=sys.stderr)
    elif status:
        print(f"fwbench run: wrote {run.folder}, unfinished (Snakemake's exit status {status}); "
              "the same command resumes it", file=sys.stderr)
    elif run.groups:
        print(f"fwbench run: measured {_groups(run.groups)} more of {run.folder}; "
              + (f"{run.groups_left} left: the same command measures the next"
                 if run.groups_left else "none left: without --groups it writes the report"),
              file=sys.stderr)
    else:
        _index_command(argparse.Namespace(results="results", out=None))
        print(f"fwbench run: wrote {run.folder}; report: {run.folder}report/report.html and "
              "report.pdf", file=sys.stderr)
    return status


def _audit_command(args) -> int:
    from fwbench.plan.runs import audit_arguments

    run_dir = _run_dir(args.run_dir)
    arguments = audit_arguments(run_dir, SOURCE_DIR / "Snakefile")
    print(f"fwbench: snakemake {' '.join(arguments)}", file=sys.stderr)
    status = _snakemake(arguments)
    if not status:
        written = sorted(p.name for p in (run_dir / "audit").glob("*.csv"))
        print(f"fwbench audit: {run_dir / 'audit'}/: {', '.join(written)}", file=sys.stderr)
    return status


def _groups(n: int) -> str:
    return f"{n} cell group{'' if n == 1 else 's'}"


def _positive(text: str) -> int:
    """A count of at least 1, for argparse."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"give a whole number of at least 1, not {text!r}")
    return int(text)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Lists the commands under their heading without argparse's line of their metavar."""

    def _format_action(self, action):
        if isinstance(action, argparse._SubParsersAction):
            return "".join(self._format_action(a) for a in action._get_subactions())
        return super()._format_action(action)


def _command(commands, name: str, summary: str | None, description: str, func):
    """A command; one without a summary is the workflow's own (``idle``, ``trial``): it works,
    with its own --help, but the list of commands leaves it out."""
    parser = commands.add_parser(name, description=description,
                                 **({"help": summary} if summary else {}))
    parser.set_defaults(func=func)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fwbench", description=DESCRIPTION, epilog=EXAMPLES,
                                     formatter_class=_Formatter)
    parser.add_argument("--version", action="version", version=f"fwbench {__version__}")
    commands = parser.add_subparsers(dest="command", title="commands", metavar="<command>")

    rebuild = _command(
        commands, "rebuild", "remake a finished run's tables, statistics, figures and report "
        "from its trial results, measuring nothing again",
        "Remake results/<run>/tables, stats, figures and report from the trial results in "
        "results/<run>/cells, planned by the config the run saved when it started "
        "(results/<run>/config.yaml, its analysis plan included), wherever the folder is. No "
        "experiment runs: a missing trial result is an error, not a new measurement. Use it "
        "after changing the code of the statistics or the report, or to rebuild the shipped "
        "reference run (results/reference) on any machine.", _rebuild_command)
    rebuild.add_argument("run_dir", metavar="RUN", help="the run's folder, e.g. results/reference")
    proof = rebuild.add_mutually_exclusive_group()
    proof.add_argument("--check", action="store_true",
                       help="then compare every rebuilt table, statistic, figure and report "
                            "byte for byte with the checksums the run ships (RUN/rebuild.sha256)")
    proof.add_argument("--record", action="store_true",
                       help="then write those checksums (RUN/rebuild.sha256), only for a run "
                            "that passed the shipping gate (RUN/stats/gate.csv); otherwise it "
                            "refuses and names every reason")
    rebuild.add_argument("--preliminary", action="store_true",
                         help="with --record: record a run that failed the gate, as the "
                              "preliminary run its report and README say it is")

    export = _command(
        commands, "export", "write a run's tables and statistics as tidy CSV or Parquet files, "
        "with a data dictionary of every column and its unit",
        "Write one tidy file per table of a run (tables/*.parquet and stats/*.csv) into one "
        "folder, in the formats asked for, with data_dictionary.json naming every column, its "
        "type, its unit and what it means. With --mlflow, also log the run's settings, summary "
        "metrics and files as one MLflow run (needs the mlflow package).", _export_command)
    export.add_argument("run_dir", metavar="RUN", help="the run's folder, e.g. results/reference")
    export.add_argument("--out", help="folder to write (default: RUN/export)")
    export.add_argument("--format", choices=("csv", "parquet"), action="append",
                        help="file format; repeat for both (default: both)")
    export.add_argument("--mlflow", action="store_true",
                        help="also log an MLflow run (pip install mlflow)")
    export.add_argument("--mlflow-uri", metavar="URI",
                        help="MLflow tracking URI (default: RUN/export/mlruns)")

    compare = _command(
        commands, "compare", "what got slower or faster from one run to another, cell by "
        "cell, and what differs between their environments",
        "Compare run B against run A (the baseline) over the cells both measured: each cell "
        "(one framework's measurement) gets the ratio B/A of its per-trial times, with an "
        "interval and a verdict (slower, faster, the same within A's margin, or inconclusive) "
        "under one error control over all the cells. First prints what differs between the "
        "two environments (machine, images, versions); writes compare.csv, environment.csv "
        "and compare.html. Exit status: 0 passed (or no gate), 1 a cell fails "
        "--fail-on-slowdown, 2 bad input, 3 no cell could be decided (none shared, or too few "
        "trials); on 2 and 3 nothing is written. See docs/compare.md.", _compare_command)
    compare.add_argument("run_a", metavar="RUN_A", help="the baseline run, e.g. "
                         "results/reference")
    compare.add_argument("run_b", metavar="RUN_B", help="the run compared with it")
    compare.add_argument("--out", help="folder to write (default: results/compare-<A>-<B>, "
                         "beside RUN_A)")

    def slowdown_percent(text: str) -> float:
        """PCT as the gate needs it: 0 or less fails any slowdown, nan or inf none."""
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError("PCT must be a finite number of percent above 0, "
                                             f"e.g. 10, not {text!r}")
        return value

    compare.add_argument("--fail-on-slowdown", type=slowdown_percent, metavar="PCT",
                         help="exit 1 when a cell is confidently slower in B (its interval "
                              "above 1) and its B/A above 1 + PCT/100; the last line says PASS "
                              "or FAIL and why")

    merge = _command(
        commands, "merge", "make one run from runs of one config measured on several machines "
        "or in several sessions",
        "Copy the trials of every RUN into the new run folder NEW, each keeping its origin "
        "(the run and machine that measured it): the statistics compare the frameworks per "
        "origin, and the report adds a section per machine with a pooled ratio only where the "
        "origins agree. The runs must share their config (run, trials and seed may differ). "
        "Then `fwbench rebuild NEW`. See docs/compare.md.", _merge_command)
    merge.add_argument("runs", metavar="RUN", nargs="+", help="the runs' folders")
    merge.add_argument("--into", metavar="NEW", required=True,
                       help="the merged run's folder, e.g. results/both (must not exist)")

    index = _command(
        commands, "index", "write results/index.html: every run's report with its machine, "
        "date, versions and headline",
        "Write an HTML index of every run under a results folder (a link to its report, the "
        "machine, the dates, the framework versions and how the frameworks compared) and of "
        "every comparison `fwbench compare` wrote there.", _index_command)
    index.add_argument("results", nargs="?", default="results",
                       help="the results folder (default: results)")
    index.add_argument("--out", help="the file to write (default: RESULTS/index.html)")

    models = _command(
        commands, "models", "list the models both frameworks provide: parameters, FLOPs and "
        "where the two libraries differ",
        "List every model of the zoo with its input, trainable parameters (equal in both "
        "frameworks), FLOPs per sample and the known differences between the PyTorch and "
        "TensorFlow versions. Needs PyTorch and TensorFlow installed.", _models_command)
    models.add_argument("--json", action="store_true", help="print JSON instead of a table")

    _command(
        commands, "unlock-if-idle", "before resuming an interrupted run: remove Snakemake's "
        "stale lock, only if no Snakemake is running here",
        "A run that was killed leaves Snakemake's lock behind, and the next run refuses to "
        "start. This removes the lock only when no Snakemake process is alive in this folder, "
        "so it never breaks into a run that is still going. Then resume with "
        "`snakemake --cores 1 --rerun-incomplete`.", _unlock_command)

    restore = _command(
        commands, "restore-times", "before resuming a run in a fresh clone or a copy: give its "
        "files the times they were measured, so that only what is missing runs",
        "Git and a copy without -p stamp every file with the time of the clone, in any order, "
        "and Snakemake reruns what looks older than its inputs: resuming a committed, "
        "unfinished run would measure finished trials again. This sets each trial, calibration "
        "and warm-up file of RUN to the time its result records. Then resume with the run's "
        "command and --rerun-incomplete.", _restore_times_command)
    restore.add_argument("run_dir", metavar="RUN", help="the run's folder, e.g. "
                         "results/dai2022-cpu")

    pin = _command(
        commands, "pin-images", "record the digest each framework image's tag points to now, "
        "in containers/images.lock (needs skopeo, crane or docker)",
        "Ask the registry what each tag in containers/images.lock points to now and write the "
        "sha256 digests into the lock, so every benchmark job runs exactly that image. Run it "
        "after building and pushing the images (containers/build.py --push), then commit the lock. "
        "`make pin-images` does the same. See docs/containers.md.", _pin_images_command)
    pin.add_argument("--lock", help="lock file (default: containers/images.lock, or "
                     "$FWBENCH_IMAGES_LOCK)")

    doctor = _command(
        commands, "doctor", "check this machine before a run: Python, packages, Pango, disk, "
        "memory, container engine, load, governor, turbo, SMT",
        "Check what a run needs and what would disturb its measurements, one line each with "
        "`ok`, `not visible` (the system does not expose it, as in most VMs) or what to do: "
        "the Python version, the packages the workflow imports, Pango (WeasyPrint writes the "
        "PDF with it), free disk, memory, the container engine (with --use-singularity), the "
        "load average and how busy the CPUs are now (over one second), and the frequency "
        "governor, turbo and SMT. Exit 1 when something would make a run fail; warnings "
        "(noisier measurements) do not. `fwbench run` runs it first.", _doctor_command)
    doctor.add_argument("--use-singularity", action="store_true",
                        help="the run's jobs will run in images: check for an engine too")
    doctor.add_argument("--path", default=".",
                        help="where the run writes, for the free disk (default: here)")

    run = _command(
        commands, "run", "start or resume a run: fwbench doctor, then Snakemake on config.yaml "
        "or a preset, never into a shipped run's folder",
        "Check the machine (fwbench doctor; stop if the run would fail), remove an interrupted "
        "run's stale lock when no Snakemake is running here (unlock-if-idle), then run the "
        "workflow with --rerun-incomplete on config.yaml, a preset alone (not merged into "
        "config.yaml) or a config file, on the cores its largest trial takes (2 for the "
        "distributed presets). The same command resumes an interrupted run. It never writes "
        "into a folder holding a shipped run (results/<run>/ with rebuild.sha256): it writes "
        "results/<run>-2/ instead, and says so on its first line; its last line names the "
        "folder it wrote. Snakemake arguments go after --.", _run_command)
    run.allow_abbrev = False   # `--config` is Snakemake's, not short for --configfile
    config = run.add_mutually_exclusive_group()
    config.add_argument("--preset", metavar="NAME", help="presets/NAME.yaml, e.g. tian2020-cpu")
    config.add_argument("--configfile", metavar="FILE",
                        help="another config, e.g. a run's results/<run>/config.yaml")
    run.add_argument("-n", "--dry-run", action="store_true",
                     help="say what would run, measuring and writing nothing")
    run.add_argument("--groups", type=_positive, metavar="N",
                     help="measure only the next N cell groups not yet measured, in the planned "
                     "order, then stop: a run split over sittings never splits a group (its "
                     "pairs are measured together); without it, the whole run and its report")
    run.add_argument("snakemake_args", nargs=argparse.REMAINDER, metavar="-- SNAKEMAKE_ARGS",
                     help="after --, more Snakemake arguments (they win over fwbench's), e.g. "
                     "-- --use-singularity --config 'devices=[cpu,cuda]'")

    audit = _command(
        commands, "audit", "write a run's version audit from its trial files, measuring "
        "nothing: versions per framework environment, and what differs from other runs",
        "Write RUN/audit/versions.csv (the software of every trial, per framework and "
        "environment: image digest or native host) and RUN/audit/diff-<other>.csv against "
        "every other run beside it that has been audited (rules/audit.smk), from RUN's trial "
        "files alone, planned by the config the run saved, as `fwbench rebuild` is. No "
        "experiment runs.", _audit_command)
    audit.add_argument("run_dir", metavar="RUN", help="the run's folder, e.g. results/reference")

    jobs.add_commands(commands, _command)   # the workflow's own commands, not listed
    return parser


def main(argv: list[str] | None = None, started_ns: int | None = None) -> int:
    """``started_ns``: when ``python -m fwbench`` reached its first line (a trial's timeline).

    Exit 2, as argparse does for a bad argument, when the command cannot do what it was asked
    (bad input, a missing package), with one line on stderr and nothing written: 1 stays free
    for what a command finds (a regression, a rebuild that differs)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.started_ns = started_ns
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args)
    except ModuleNotFoundError as exc:
        print(f"fwbench {args.command}: the Python package {exc.name!r} is not installed here; "
              f"{INSTALL_HINT}", file=sys.stderr)
    except FwbenchError as exc:
        print(f"fwbench {args.command}: {' '.join(str(exc).split())}", file=sys.stderr)
    return 2
