"""Where a trial's seconds go: one cell of the default config per framework, run through
Snakemake as a user's run runs it, split into stages by the timeline each trial prints.

    python benchmarks/trial_stages.py [--trials 3] [--model resnet18] [--phase train] [--batch 4]

The default config (config.yaml) narrowed to one model, phase and batch size, both frameworks,
``--trials`` trials each, runs with ``snakemake --cores 1`` in a temporary folder. Every trial's
job log ends with its timeline (``fwbench.measure.trial.TIMELINE_PREFIX``): wall-clock stamps taken
by the job's shell (bash's ``$EPOCHREALTIME``), the trial process, the measuring child and the
harness's markers. A stage is the time between two stamps, so the stages add up to the trial.
Each cell's calibration trial and warm-up job run before the first trial and are not counted.
Snakemake's share is the gap from the previous trial's last stamp to this job's shell: the previous
trial process's exit, Snakemake's bookkeeping and scheduling, and bash's start (the first job, after
the idle baseline, has none). Each figure is the median over a framework's trials; the totals are
medians of per-trial totals. A backend may import libraries while it builds the model (PyTorch's
resnet18: torchvision); a separate process run with ``-X importtime`` measures those imports, shown
under the model build and as the overhead without them. Goal (issue 16): at most 1 s per trial
beyond the framework's import and the measurement (cold start, warm-up and timed work).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # fwbench from this work tree

from fwbench.measure.trial import TIMELINE_PREFIX  # noqa: E402
from fwbench.plan.config import validate  # noqa: E402
from fwbench.plan.sweep import Plan  # noqa: E402

GOAL_S = 1.0
FRAMEWORKS = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}
PREVIOUS = "previous_trial_ended"
BUILD = "model build (configure, load)"
# (stage, from stamp, to stamp), in the order a trial passes them.
STAGES = [
    ("Snakemake: previous trial's exit, job start", PREVIOUS, "job_started"),
    ("Python start-up (trial process)", "job_started", "python_started"),
    ("fwbench imports (trial process)", "python_started", "trial_started"),
    ("runtime check, idle baseline, guard", "trial_started", "sampler_started"),
    ("telemetry start", "sampler_started", "sampler_ready"),
    ("child process spawn", "sampler_ready", "child_started"),
    ("Python start-up (measuring child)", "child_started", "child_python_started"),
    ("fwbench imports (measuring child)", "child_python_started", "child_imported"),
    ("cell checks", "child_imported", "framework_import_started"),
    ("framework import", "framework_import_started", "framework_imported"),
    (BUILD, "framework_imported", "model_built"),
    ("step set-up, sync calibration", "model_built", "cold_start"),
    ("cold start (first iteration)", "cold_start", "warmup"),
    ("warm-up", "warmup", "measure"),
    ("timed work (iterations, blocks)", "measure", "end"),
    ("provenance (measuring child)", "end", "payload_ready"),
    ("child's outcome, exit, reaped", "payload_ready", "child_exited"),
    ("telemetry stop", "child_exited", "sampler_stopped"),
    ("provenance (trial process)", "sampler_stopped", "provenance_read"),
    ("telemetry summary, validation", "provenance_read", "result_ready"),
    ("writing result and env files", "result_ready", "written"),
    ("progress line", "written", "ended"),
]
IMPORT = "framework import"
TIMED = "timed work (iterations, blocks)"
MEASUREMENT = {"cold start (first iteration)", "warm-up", TIMED}
TOTAL = "total per trial"
MEASURED = "measurement (cold start, warm-up, timed work)"
BEYOND = "beyond framework import and measurement"
FRACTION = "timed work / total"
BUILD_IMPORTS = "  of which imports (-X importtime probe)"
BEYOND_LESS_IMPORTS = "  the same, less the model build's imports"
# Run with -X importtime in a fresh process: the modules a backend imports while it builds the
# model (PyTorch's resnet18 imports torchvision there, and with it torch._dynamo).
PROBE = """
import json, sys
from fwbench.measure.child import configure_backend, start
backend, _ = configure_backend(start(json.loads(sys.argv[1])))
print("fwbench-probe: load", file=sys.stderr, flush=True)
backend.load()
"""


def stages_config(trials: int, model: str, phase: str, batch: int) -> dict:
    """The default config narrowed to one cell per framework."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    if model not in config["models"]:
        raise SystemExit(f"--model {model}: not in config.yaml ({', '.join(config['models'])})")
    return {**config, "run": "stages", "models": {model: config["models"][model]},
            "phases": [phase], "batch_sizes": [batch], "frameworks": list(FRAMEWORKS),
            "trials": trials}


def run_workflow(workdir: Path, config: dict) -> None:
    """``snakemake --cores 1`` up to every trial's result, as a user's run does it."""
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    targets = Plan.from_config(validate(config)).trial_paths()
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        [str(bin_dir / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory",
         str(workdir), "--configfile", str(workdir / "config.yaml"), "--cores", "1",
         *targets],
        cwd=workdir, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"snakemake failed:\n{proc.stderr[-3000:]}")


def imports_in_model_build(config: dict) -> dict[str, float]:
    """Seconds each framework's model build spends importing modules, from a separate process
    run with ``-X importtime`` (the flag's own cost included): the framework's import that the
    trial's timeline counts as model build."""
    plan = Plan.from_config(validate(config))
    seconds = {}
    for trial in plan.trials:
        framework = trial.cell.framework
        if framework in seconds:
            continue
        settings = plan.trial_settings(trial).to_dict()
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", PROBE,
                               json.dumps(settings)], cwd=REPO, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        if proc.returncode != 0:
            raise SystemExit(f"model build probe failed:\n{proc.stderr[-3000:]}")
        after = proc.stderr.split("fwbench-probe: load\n", 1)[1]
        # Top-level imports only (no indentation before the name): each counts its own imports.
        top = re.findall(r"^import time:\s+\d+ \|\s+(\d+) \| \S", after, re.MULTILINE)
        seconds[framework] = sum(map(int, top)) / 1e6
    return seconds


def read_timelines(workdir: Path) -> list[tuple[str, dict]]:
    """(framework, timeline) of every trial, in the order the trials ran, each with the
    previous trial's last stamp."""
    found = []
    for log in sorted((workdir / "logs").glob("*/run_trial/**/trial-*.log")):
        lines = [l for l in log.read_text().splitlines() if l.startswith(TIMELINE_PREFIX)]
        if not lines:
            raise SystemExit(f"{log}: no timeline line; the trial failed or predates it")
        framework = next(part for part in log.parts if part in FRAMEWORKS)
        found.append((framework, json.loads(lines[-1].removeprefix(TIMELINE_PREFIX))))
    found.sort(key=lambda item: item[1]["job_started"])
    for (_, before), (_, timeline) in zip(found, found[1:]):
        timeline[PREVIOUS] = before["ended"]
    return found


def stage_seconds(timeline: dict) -> dict[str, float]:
    """Seconds per stage of one trial; a stage whose stamps are missing is left out."""
    return {name: (timeline[end] - timeline[start]) / 1e9 for name, start, end in STAGES
            if start in timeline and end in timeline}


def summarize(trials: list[tuple[str, dict]]) -> dict[str, dict[str, float]]:
    """Per framework: the median of each stage, and of each total over the trials with every
    stamp (the first job of the run has no previous trial)."""
    table = {}
    for framework in FRAMEWORKS:
        per_trial = [stage_seconds(t) for fw, t in trials if fw == framework]
        whole = [s for s in per_trial if len(s) == len(STAGES)]
        if not whole:
            raise SystemExit(f"no {framework} trial has every stamp; raise --trials")
        row = {name: statistics.median(s[name] for s in per_trial if name in s)
               for name, _, _ in STAGES}
        row[TOTAL] = statistics.median(sum(s.values()) for s in whole)
        row[MEASURED] = statistics.median(sum(s[k] for k in MEASUREMENT) for s in whole)
        row[BEYOND] = statistics.median(
            sum(v for k, v in s.items() if k not in MEASUREMENT | {IMPORT}) for s in whole)
        row[FRACTION] = statistics.median(s[TIMED] / sum(s.values()) for s in whole)
        table[framework] = row
    return table


def print_table(table: dict, header: str) -> None:
    width = 48
    rule = "  " + "-" * (width + 12 * len(table))
    print(header)
    print(f"  {'stage (seconds, median over trials)':<{width}}"
          + "".join(f"{FRAMEWORKS[fw]:>12}" for fw in table))
    names = [name for name, _, _ in STAGES]
    names.insert(names.index(BUILD) + 1, BUILD_IMPORTS)
    for name in names + [None, TOTAL, IMPORT, MEASURED, BEYOND, BEYOND_LESS_IMPORTS]:
        if name is None:
            print(rule)
        else:
            print(f"  {name:<{width}}" + "".join(f"{table[fw][name]:>12.3f}" for fw in table))
    print(f"  {FRACTION:<{width}}" + "".join(f"{table[fw][FRACTION]:>12.1%}" for fw in table))
    print(f"  goal: {BEYOND} <= {GOAL_S:g} s per trial")


def main(trials: int = 3, model: str = "resnet18", phase: str = "train", batch: int = 4,
         keep: Path | None = None) -> dict:
    config = stages_config(trials, model, phase, batch)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="fwbench-stages-") as tmp:
        workdir = keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        run_workflow(workdir, config)
        table = summarize(read_timelines(workdir))
    for framework, seconds in imports_in_model_build(config).items():
        table[framework][BUILD_IMPORTS] = seconds
        table[framework][BEYOND_LESS_IMPORTS] = table[framework][BEYOND] - seconds
    print_table(table, (
        f"one trial's stages, {model} {phase} batch {batch} on the CPU, {trials} trials per "
        f"framework through snakemake --cores 1 ({len(os.sched_getaffinity(0))} cores, "
        f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after):"))
    return table


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="trials per framework (>= 2)")
    parser.add_argument("--model", default="resnet18", help="a model of config.yaml")
    parser.add_argument("--phase", default="train", choices=("train", "infer"))
    parser.add_argument("--batch", type=int, default=4, help="batch size")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    args = parser.parse_args()
    if args.trials < 2:
        parser.error(f"--trials must be at least 2 (the first job has no previous trial), "
                     f"got {args.trials}")
    main(args.trials, args.model, args.phase, args.batch, args.keep)
