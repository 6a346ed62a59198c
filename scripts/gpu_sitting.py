"""The first GPU sitting, in one command, on an NVIDIA machine with PyTorch and NVML (no
TensorFlow, no network needed):

    python scripts/gpu_sitting.py OUT_DIR [--budget 540] [--wheels DIR]

Within the budget (seconds, default 540: under 10 minutes with start-up), in this order, each
step recorded in OUT_DIR/sitting.json with its seconds and its checks:

0. preflight: the Python packages a trial imports (a missing one is installed from --wheels,
   made here with --bundle, else named), a GPU that NVML and PyTorch both see, and the host's
   driver against the oldest the PyTorch image's CUDA needs (fwbench.measure.gpu_host: the run
   stops, naming both versions, when it is older). Without a GPU: one line, exit 2.
1. the harness's CUDA path (scripts/verify_gpu_harness.py): a spin kernel of known duration timed
   by CUDA events and by fwbench's harness with the driver's wait, torch.cuda.synchronize and
   none -> OUT_DIR/harness.json;
2. NVML telemetry (scripts/verify_gpu_telemetry.py): the idle baseline with and without a
   context, the thermal guard, a matmul workload under the sampler, the machine's state ->
   OUT_DIR/telemetry/;
3. a PyTorch GPU sweep of the reference models (config.yaml's lenet5 and resnet18, its shapes,
   phases and batch, devices [cuda], 4 trials a cell), run as the workflow's jobs run it (the
   idle baseline, each cell's calibration and warm-up, then the trials in planned order, each
   `python -m fwbench trial` in a fresh process) -> OUT_DIR/results/gpu-sitting/, a run folder
   `fwbench rebuild` turns into a report (here, or back on a machine with the workflow);
4. an A/A control on the GPU: one PyTorch cell (resnet18 training) in both slots of 8 pairs,
   the starting slot swapped each pair; the ratio slot A / slot B of the trials' median step
   times (geometric mean over pairs) and its 95 % paired t interval, which should cover 1
   -> OUT_DIR/aa/.

Exit status: 0 when every check passed and every trial ended ok, 1 otherwise, 2 without a GPU
(or with a driver too old), 3 when a package is missing. `--rehearse-cpu` runs steps 0, 3 and 4
on the CPU with fewer trials (what `make test` can check on a machine without a GPU), and
`--check` only validates the plan. docs/gpu.md says how to take it to a GPU machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))               # fwbench from this work tree
sys.path.insert(1, str(ROOT / "scripts"))   # verify_gpu_harness, verify_gpu_telemetry

RUN = "gpu-sitting"
# What a trial imports beyond the standard library and PyTorch (module: the distribution
# --bundle fetches).
NEEDED = {"numpy": "numpy", "scipy": "scipy", "yaml": "pyyaml", "jsonschema": "jsonschema",
          "psutil": "psutil", "pynvml": "nvidia-ml-py", "ruptures": "ruptures",
          "torchvision": "torchvision"}
# --bundle: these and their dependencies, as wheels for CPython 3.10 to 3.13 on Linux x86_64;
# ruptures (fix-warmup's change points) without its own, numpy and scipy, which come with a
# PyTorch machine and would add 150 MB.
BUNDLE = ["pyyaml==6.0.3", "jsonschema==4.26.0", "psutil==7.2.2", "nvidia-ml-py==13.615.71"]
BUNDLE_WITHOUT_DEPS = ["ruptures==1.1.10"]
BUNDLE_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
AA_CELL = ("resnet18", "train")
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228}   # Student t, two-sided 95 %, by degrees of freedom


def log(message: str) -> None:
    print(f"[gpu-sitting {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def sitting_config(device: str = "cuda", trials: int = 4, models: list[str] | None = None
                   ) -> dict:
    """config.yaml's reference sweep (models, shapes, phases, batch, iterations, blocks,
    warm-up), PyTorch alone on ``device``, ``trials`` a cell, as run ``gpu-sitting``;
    ``models``: only these of config.yaml's."""
    import yaml

    from fwbench.plan.config import validate

    reference = yaml.safe_load((ROOT / "config.yaml").read_text())
    chosen = {name: spec for name, spec in reference["models"].items()
              if not models or name in models}
    # The sitting runs its own A/A control (step 4) and its trials as asked: no sizing rule.
    statistics = {k: v for k, v in reference["statistics"].items() if k != "sizing"}
    return validate({**reference, "run": RUN, "frameworks": ["pytorch"], "devices": [device],
                     "controls": [], "statistics": statistics, "trials": trials,
                     "models": chosen})


# --- 0. preflight ------------------------------------------------------------------------

def missing_modules() -> list[str]:
    return [m for m in NEEDED if importlib.util.find_spec(m) is None]


def install_from(wheels: Path, site: Path, modules: list[str]) -> None:
    """pip install --no-index the missing distributions from a folder made by --bundle into
    ``site``, put first on this process's path and every child's PYTHONPATH."""
    names = [NEEDED[m] for m in modules]
    bare = {spec.split("==")[0] for spec in BUNDLE_WITHOUT_DEPS}
    for group, flags in (([n for n in names if n not in bare], []),
                         ([n for n in names if n in bare], ["--no-deps"])):
        if group:
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index",
                            "--find-links", str(wheels), "--target", str(site), *flags,
                            *group], check=True)
    sys.path.insert(1, str(site))
    EXTRA_PATH.append(str(site))
    importlib.invalidate_caches()


def preflight(rehearse: bool, wheels: Path | None, out: Path) -> dict:
    missing = missing_modules()
    if missing and wheels:
        log(f"installing {', '.join(NEEDED[m] for m in missing)} from {wheels}")
        install_from(wheels, out / ".site", missing)
        missing = missing_modules()
    if missing:
        raise Stop(3, f"missing Python packages: {', '.join(NEEDED[m] for m in missing)}; "
                      "bring them along (python scripts/gpu_sitting.py --bundle DIR here, then "
                      "--wheels DIR there; docs/gpu.md)")
    import torch

    from fwbench.measure import gpu_host

    found = {"python": sys.version.split()[0], "torch": torch.__version__,
             "torch_cuda": torch.version.cuda,
             "cudnn": torch.backends.cudnn.version()}
    count, driver, reason = gpu_host.host_gpus()
    found.update(gpus=count, driver=driver, nvml=reason)
    if rehearse:
        return found
    if not count or not torch.cuda.is_available():
        raise Stop(2, f"no GPU here: {reason or 'torch.cuda.is_available() is False'}; the "
                      "sitting needs an NVIDIA GPU (docs/gpu.md)")
    # The driver against the CUDA of the torch measured here (the PyTorch image's, 13.0, when
    # it is the locked torch==2.14.1); a CUDA the table does not know is noted, not enforced:
    # torch.cuda.is_available() already showed that this driver runs it.
    from fwbench.environment.cuda_stack import DRIVER_MINIMUM

    cuda = ".".join(str(torch.version.cuda).split(".")[:2])
    minimums = {f"torch {torch.__version__} (CUDA {cuda})": DRIVER_MINIMUM[cuda]} \
        if cuda in DRIVER_MINIMUM else {}
    problems = gpu_host.driver_problems(driver, minimums, subject="{}")
    found.update(device=torch.cuda.get_device_name(0), driver_minimum=minimums or
                 f"none known for CUDA {cuda}", image_minimums=gpu_host.image_minimums(),
                 driver_ok=not problems)
    if problems:
        raise Stop(2, "; ".join(problems))
    return found


class Stop(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


# --- 3. the sweep, as the workflow's jobs run it -------------------------------------------

def _fwbench(*args: str, log_path: Path, timeout: float) -> None:
    """``python -m fwbench ARGS`` in the sitting's folder, fwbench from this work tree, its
    output in ``log_path`` (as the workflow's job logs)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), *EXTRA_PATH, os.environ.get("PYTHONPATH")) if p)}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as f:
        subprocess.run([sys.executable, "-m", "fwbench", *args], cwd=RUN_DIR_PARENT[0],
                       env=env, stdout=f, stderr=subprocess.STDOUT, check=True, timeout=timeout)


RUN_DIR_PARENT: list[Path] = [ROOT]   # the folder holding results/ (the sitting's OUT_DIR)
EXTRA_PATH: list[str] = []            # packages installed from --wheels


def sweep(out: Path, config: dict, deadline: float) -> dict:
    """The plan's jobs in the order a local Snakemake run takes them: the idle baseline; per
    cell group, its cells' calibrations and warm-ups, then its trials in planned order (a pair's
    second member right after its first)."""
    from fwbench.plan.config import save
    from fwbench.plan.sweep import Plan
    from fwbench.workflow.progress import write_planned

    RUN_DIR_PARENT[0] = out
    plan = Plan.from_config(config)
    save(config, out / plan.results_dir() / "config.yaml")
    write_planned(plan.trial_paths(), out / plan.results_dir())
    logs = out / "logs" / RUN
    timeout = config["timeout_s"] + 120
    _fwbench("idle", "--out", plan.idle_path(), "--duration",
             str(config["telemetry"]["idle_s"]), "--period", str(config["telemetry"]["period_s"]),
             log_path=logs / "measure_idle.log", timeout=timeout)
    calibrated, lines = set(), []
    for trial in plan.trials:
        if time.monotonic() > deadline:
            lines.append({"trial": trial.path(plan.run), "status": "not run: out of time"})
            continue
        for cell in (c for c in plan._groups[trial.cell.pair_id] if c not in calibrated):
            calibrated.add(cell)
            settings = json.dumps(plan.calibration_settings(cell).to_dict(), sort_keys=True)
            results = []
            for name in plan.calibration_names(cell):
                results.append(plan.calibration_path(cell, name=name))
                _fwbench("trial", "--settings", settings, "--result", results[-1], "--env",
                         plan.calibration_path(cell, "env.json", name), "--telemetry",
                         plan.calibration_path(cell, "telemetry.csv", name), "--idle",
                         plan.idle_path(),
                         log_path=logs / "calibrate_cell" / cell.name / f"{name}.log",
                         timeout=timeout)
            _fwbench("fix-warmup", "--calibration", *results, "--out", plan.warmup_path(cell),
                     "--min", str(config["warmup"]["min"]), "--max",
                     str(config["warmup"]["max"]),
                     log_path=logs / "fix_warmup" / f"{cell.name}.log", timeout=timeout)
        path = trial.path(plan.run)
        settings = json.dumps(plan.trial_settings(trial).to_dict(), sort_keys=True)
        _fwbench("trial", "--settings", settings, "--result", path, "--env",
                 trial.path(plan.run, "env.json"), "--telemetry",
                 trial.path(plan.run, "telemetry.csv"), "--idle", plan.idle_path(),
                 f"--warmup={plan.warmup_path(trial.cell)}",
                 log_path=logs / "run_trial" / f"{trial.cell.name}-{trial.index}.log",
                 timeout=timeout)
        result = json.loads((out / path).read_text())
        times = result["iteration_ns"]
        lines.append({"trial": path, "status": result["status"],
                      "median_ms": statistics.median(times) / 1e6 if times else None,
                      "message": result["message"][:200]})
        log(f"{trial.cell.name} trial {trial.index}: {result['status']}"
            + (f", median {lines[-1]['median_ms']:.3f} ms" if times else ""))
    return {"run_folder": str(out / plan.results_dir()), "trials": lines,
            "rebuild": f"fwbench rebuild {out / plan.results_dir()}"}


# --- 4. the A/A control -------------------------------------------------------------------

def aa_control(out: Path, config: dict, pairs: int, deadline: float) -> dict:
    """One cell's trial settings in both slots of ``pairs`` pairs, each slot a fresh trial
    process with its own calibration's warm-up; slot A starts the even pairs, B the odd ones."""
    from fwbench.plan.sweep import Plan

    plan = Plan.from_config(config)
    matching = [t for t in plan.trials if (t.cell.model, t.cell.phase) == AA_CELL]
    trial = (matching or plan.trials)[0]     # resnet18 training, else the plan's first cell
    cell = trial.cell
    warmup = out / plan.warmup_path(cell)
    settings = plan.trial_settings(trial).to_dict()
    aa = out / "aa"
    ratios, slots = [], {"A": [], "B": []}
    for k in range(pairs):
        if time.monotonic() > deadline:
            break
        medians = {}
        for slot in ("AB" if k % 2 == 0 else "BA"):
            stem = aa / f"pair-{k + 1}-{slot}"
            _fwbench("trial", "--settings", json.dumps({**settings, "trial": k + 1},
                                                       sort_keys=True),
                     "--result", f"{stem}.json", "--env", f"{stem}.env.json", "--telemetry",
                     f"{stem}.telemetry.csv", "--idle", plan.idle_path(),
                     f"--warmup={warmup if warmup.exists() else ''}",
                     log_path=aa / f"pair-{k + 1}-{slot}.log", timeout=config["timeout_s"] + 120)
            result = json.loads(Path(f"{stem}.json").read_text())
            if result["status"] != "ok":
                raise Stop(1, f"A/A trial {stem.name}: {result['status']}: {result['message']}")
            medians[slot] = statistics.median(result["iteration_ns"])
            slots[slot].append(medians[slot])
        ratios.append(medians["A"] / medians["B"])
        log(f"A/A pair {k + 1}/{pairs}: ratio {ratios[-1]:.4f}")
    summary = {"cell": cell.id, "pairs": len(ratios), "ratios": ratios,
               "slot_median_ns": slots}
    if len(ratios) >= 2:
        logs = [math.log(r) for r in ratios]
        mean, sd = statistics.fmean(logs), statistics.stdev(logs)
        half = T_975[min(len(logs) - 1, 10)] * sd / math.sqrt(len(logs))
        summary.update(ratio=math.exp(mean), interval=[math.exp(mean - half),
                                                       math.exp(mean + half)],
                       covers_1=math.exp(mean - half) <= 1 <= math.exp(mean + half),
                       sd_log=sd)
    (aa / "aa.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


# --- 1 and 2: the existing verifications ---------------------------------------------------

def harness(out: Path) -> dict:
    import torch
    import verify_gpu_harness

    kernel = verify_gpu_harness.known_kernel(torch)
    (out / "harness.json").write_text(json.dumps(kernel, indent=1, default=str) + "\n")
    return {"ok": kernel["agrees"] and kernel["unsynchronized_sees_only_the_launch"],
            "ratio": kernel["ratio"], "events_median_ns": kernel["events_median_ns"]}


def telemetry(out: Path) -> dict:
    import verify_gpu_telemetry

    code = verify_gpu_telemetry.main(str(out / "telemetry"), seconds=3.0, period_s=0.1)
    checks = json.loads((out / "telemetry" / "summary.json").read_text())["checks"]
    return {"ok": code == 0, "failed": [n for n, c in checks.items()
                                         if c["required"] and not c["ok"]]}


# --- --bundle: the packages to take along -------------------------------------------------

def bundle(folder: Path) -> int:
    """Wheels of what a trial imports beyond PyTorch and numpy, for CPython 3.10-3.13 on Linux
    x86_64, into ``folder`` (here, with an index); the sitting installs the missing ones."""
    folder.mkdir(parents=True, exist_ok=True)
    for version in BUNDLE_PYTHONS:
        for flags, specs in (([], BUNDLE), (["--no-deps"], BUNDLE_WITHOUT_DEPS)):
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--dest",
                            str(folder), "--only-binary=:all:", "--python-version", version,
                            "--platform", "manylinux2014_x86_64", "--platform",
                            "manylinux_2_17_x86_64", "--platform", "manylinux_2_28_x86_64",
                            *flags, *specs], check=True)
    size = sum(p.stat().st_size for p in folder.glob("*.whl"))
    print(f"{len(list(folder.glob('*.whl')))} wheels, {size / 2**20:.1f} MiB in {folder}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--budget", type=float, default=540.0,
                        help="seconds for the whole sitting (default 540); steps past it are "
                        "recorded as not run")
    parser.add_argument("--trials", type=int, default=4, help="trials per cell of the sweep")
    parser.add_argument("--pairs", type=int, default=8, help="A/A pairs")
    parser.add_argument("--models", nargs="+", help="only these of config.yaml's models "
                        "(default: all, lenet5 and resnet18)")
    parser.add_argument("--wheels", type=Path, help="a folder made by --bundle: missing "
                        "packages are installed from it")
    parser.add_argument("--bundle", action="store_true",
                        help="only fetch the wheels to take along into OUT_DIR, then stop")
    parser.add_argument("--check", action="store_true",
                        help="only plan the sweep and print it (no GPU needed)")
    parser.add_argument("--rehearse-cpu", action="store_true",
                        help="steps 0, 3 and 4 on the CPU: the flow without a GPU")
    args = parser.parse_args(argv)
    if args.bundle:
        return bundle(args.out_dir)
    started = time.monotonic()
    deadline = started + args.budget
    device = "cpu" if args.rehearse_cpu else "cuda"
    out = args.out_dir.resolve()
    if args.check:
        from fwbench.plan.sweep import Plan

        plan = Plan.from_config(sitting_config(device, args.trials, args.models))
        print(json.dumps({"run": plan.run, "cells": [c.id for c in plan.cells()],
                          "trials": len(plan.trials)}, indent=1))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    record: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "device": device,
                    "budget_s": args.budget, "steps": {}}

    def step(name, function, *a):
        if time.monotonic() > deadline:
            record["steps"][name] = {"ok": False, "note": "not run: out of time"}
            return None
        t0 = time.monotonic()
        log(f"{name} ...")
        try:
            value = function(*a)
        except Stop:
            raise
        except Exception as error:   # one broken step must not cost the sitting the others
            log(f"{name} failed: {type(error).__name__}: {error}")
            value = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        record["steps"][name] = {**value, "seconds": round(time.monotonic() - t0, 1)}
        (out / "sitting.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
        return value

    try:
        step("preflight", lambda: preflight(args.rehearse_cpu, args.wheels, out))
    except Stop as stop:
        print(f"gpu-sitting: {stop}", file=sys.stderr)
        record["steps"]["preflight"] = {"ok": False, "stopped": str(stop)}
        (out / "sitting.json").write_text(json.dumps(record, indent=1) + "\n")
        return stop.code
    config = sitting_config(device, args.trials, args.models)
    if not args.rehearse_cpu:
        step("harness", harness, out)
        step("telemetry", telemetry, out)
    step("sweep", sweep, out, config, deadline)
    try:
        step("aa_control", aa_control, out, config, args.pairs, deadline)
    except Stop as stop:
        record["steps"]["aa_control"] = {"ok": False, "stopped": str(stop)}
    record["seconds"] = round(time.monotonic() - started, 1)
    steps = record["steps"]
    passed = (all(s.get("ok", True) for s in steps.values())
              and all(t["status"] == "ok" for t in (steps.get("sweep") or {}).get("trials", []))
              and (steps.get("aa_control") or {}).get("covers_1", False))
    record["passed"] = passed
    (out / "sitting.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    aa = steps.get("aa_control") or {}
    print(f"gpu-sitting: {'passed' if passed else 'FAILED'} in {record['seconds']} s; "
          f"A/A ratio {aa.get('ratio', float('nan')):.4f} "
          f"[{', '.join(f'{v:.4f}' for v in aa.get('interval', []))}]; run folder "
          f"{out / 'results' / RUN} (`fwbench rebuild` it); summary {out / 'sitting.json'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
