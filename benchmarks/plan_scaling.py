"""How planning grows with the sweep: `snakemake --dry-run` time and peak memory for generated
plans of about 1,000, 5,000 and 10,000 trials, and a no-op re-run of a finished 1,000-trial run.

    python benchmarks/plan_scaling.py [--sizes 1000 5000 10000] [--noop 1000]

Each plan is the default config (two models, two phases, three trials) with as many batch
sizes as it takes to reach the size, planned by Snakemake in a fresh process in a temporary
folder. Time grows linearly when seconds per 1,000 trials stay flat across sizes. The no-op
re-run fabricates the finished run instead of measuring it: every cell's calibration and
warm-up record, every trial's result (a valid result file), provenance and telemetry files, then
every host-side output, each newer than what it is made from; Snakemake must find nothing to do.

Beside each plan, Snakemake alone plans the same trial paths in the same way: one job per trial
with a trial job's four outputs and log, and one rule over every result, but no fwbench code, no
inputs or functions per trial and no other aggregate (FLOOR_SNAKEFILE). The ratio of the two, run
one after the other, says what the workflow costs beyond Snakemake's own work for that many jobs.
Goals (issue 16): 10,000 trials planned in at most 10 s; the no-op re-run in at most 10 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # fwbench from this work tree

from fwbench.plan.config import load, validate  # noqa: E402
from fwbench.plan.sweep import Plan  # noqa: E402

GOAL_S = 10.0

# Snakemake alone: the trial paths of trials.txt, each one job with the outputs and log of
# rules/benchmark.smk's run_trial, and one rule over every result.
FLOOR_SNAKEFILE = """
TRIALS = open("trials.txt").read().split()
TRIAL = "{dir}/cells/{experiment}/{device}/{framework}/{model}/{cell}/trial-{trial}"

rule all:
    input: "floor/all.txt"

rule gather:
    input: TRIALS
    output: "floor/all.txt"
    shell: "touch {output}"

rule trial:
    output:
        *(f"{TRIAL}.{suffix}" for suffix in ("json", "env.json", "telemetry.csv",
                                             "telemetry.json"))
    log: f"logs/{TRIAL}.log"
    shell: "touch {output}"
"""


def sized_config(trials: int) -> dict:
    """The default config with enough batch sizes for about ``trials`` trials."""
    config = load(REPO / "config.yaml")
    per_batch = len(Plan.from_config(validate({**config, "batch_sizes": [1]})).trials)
    batches = max(1, round(trials / per_batch))
    return {**config, "run": "scaling", "batch_sizes": list(range(1, batches + 1))}


def snakemake(workdir: Path, *args: str, snakefile: Path = REPO / "Snakefile"
              ) -> tuple[float, float, int, str]:
    """Wall seconds, CPU seconds, peak resident memory (bytes) and output of one Snakemake
    process (CPU seconds are the figure to trust on a shared machine)."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [str(bin_dir / "snakemake"), "--snakefile", str(snakefile), "--directory",
         str(workdir), "--configfile", str(workdir / "config.yaml"), "--cores", "1", *args],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"snakemake failed:\n{output[-3000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, output


def dry_run(trials: int) -> tuple[int, float, float, int, float]:
    """Trials, then wall s, CPU s and peak bytes of the workflow's dry-run, then CPU s of
    Snakemake alone planning the same trial paths (FLOOR_SNAKEFILE)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = sized_config(trials)
        (Path(tmp) / "config.yaml").write_text(yaml.safe_dump(config))
        seconds, cpu, peak, _ = snakemake(Path(tmp), "--dry-run", "--quiet")
        plan = Plan.from_config(validate(config))
        (Path(tmp) / "trials.txt").write_text("\n".join(plan.trial_paths()))
        (Path(tmp) / "Snakefile.floor").write_text(FLOOR_SNAKEFILE)
        _, floor_cpu, _, _ = snakemake(Path(tmp), "--dry-run", "--quiet",
                                       snakefile=Path(tmp) / "Snakefile.floor")
        return len(plan.trials), seconds, cpu, peak, floor_cpu


def fabricate_finished_run(workdir: Path, plan: Plan) -> None:
    """Every output of a finished run, each newer than its inputs: valid trial results and
    their side files first, then the host-side outputs (empty: Snakemake never reads them)."""
    from fwbench.measure import results

    def write(path: str, text: str = "") -> None:
        Path(workdir, path).parent.mkdir(parents=True, exist_ok=True)
        Path(workdir, path).write_text(text)

    write(plan.idle_path(), "{}")
    for cell in plan.cells():  # calibrations, then their warm-ups
        for name in plan.calibration_names(cell):
            for suffix in ("json", "env.json", "telemetry.csv", "telemetry.json"):
                write(plan.calibration_path(cell, suffix, name), "{}")
    time.sleep(0.05)
    for cell in filter(plan.calibrates, plan.cells()):
        write(plan.warmup_path(cell), "{}")
    time.sleep(0.05)
    stamp = "2026-01-01T00:00:00+00:00"
    for trial in plan.trials:
        settings = plan.trial_settings(trial)
        outcome = type("Outcome", (), {"status": "ok", "message": "", "payload": {
            "iteration_ns": [1_000_000] * 3, "warmup_ns": [], "cold_start_ns": 2_000_000}})
        result = results.make_result(settings, outcome, started_at=stamp, ended_at=stamp,
                                     workflow={"git_commit": None, "git_dirty": None,
                                               "session": "fabricated"})
        results.validate_trial(result)
        results.write_json(result, Path(workdir, trial.path(plan.run)))
        write(trial.path(plan.run, "env.json"), "{}")
        write(trial.path(plan.run, "telemetry.csv"), "t_ns\n")
        write(trial.path(plan.run, "telemetry.json"), "{}")
    time.sleep(0.05)  # host outputs strictly newer than every trial file
    host = ["tables/iterations.parquet", "tables/trials.parquet", "tables/cells.parquet",
            "tables/epochs.parquet", "tables/confusion.parquet", "tables/profiles.parquet",
            "audit/versions.csv", "tables/telemetry_trace.parquet"]
    for name in host:
        write(f"{plan.results_dir()}/{name}")
    time.sleep(0.05)
    for name in ["stats/cells.csv", "stats/comparisons.csv", "stats/tests.csv",
                 "stats/ablation.csv", "stats/gaps.csv", "stats/scaling.csv",
                 "stats/strategies.csv"]:
        write(f"{plan.results_dir()}/{name}")
    time.sleep(0.05)
    write(f"{plan.results_dir()}/stats/flops.csv")
    time.sleep(0.05)
    for name in ["report/report.html", "report/report.pdf", "report/figures/.keep"]:
        write(f"{plan.results_dir()}/{name}")


def noop_rerun(trials: int) -> tuple[int, float, float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        config = sized_config(trials)
        (Path(tmp) / "config.yaml").write_text(yaml.safe_dump(config))
        plan = Plan.from_config(validate(config))
        fabricate_finished_run(Path(tmp), plan)
        seconds, cpu, peak, output = snakemake(Path(tmp))
        if "Nothing to be done" not in output:
            raise SystemExit(f"the fabricated run was not found finished:\n{output[-3000:]}")
        return len(plan.trials), seconds, cpu, peak


def main(sizes: list[int], noop: int) -> None:
    print(f"{'trials':>7} {'dry-run s':>10} {'CPU s':>7} {'CPU s per 1,000':>16} {'peak MiB':>9} "
          f"{'Snakemake alone, CPU s':>23} {'ratio':>6}")
    rows = []
    for size in sizes:
        trials, seconds, cpu, peak, floor_cpu = dry_run(size)
        rows.append((trials, cpu))
        print(f"{trials:>7} {seconds:>10.2f} {cpu:>7.2f} {1000 * cpu / trials:>16.2f} "
              f"{peak / 2**20:>9.0f} {floor_cpu:>23.2f} {cpu / floor_cpu:>6.2f}", flush=True)
    (small, cpu_small), (large, cpu_large) = rows[0], rows[-1]
    growth = (cpu_large / large) / (cpu_small / small)
    print(f"CPU per trial, largest over smallest plan: {growth:.2f} (1.00: linear; below: fixed "
          f"start-up cost spread thinner); goal: {large} trials in <= {GOAL_S:.0f} s")
    trials, seconds, cpu, peak = noop_rerun(noop)
    print(f"no-op re-run of a finished {trials}-trial run (fabricated files): {seconds:.2f} s "
          f"({cpu:.2f} s CPU), peak {peak / 2**20:.0f} MiB (goal: <= {GOAL_S:.0f} s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--noop", type=int, default=1000, help="trials of the no-op re-run")
    args = parser.parse_args()
    main(args.sizes, args.noop)
