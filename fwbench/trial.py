"""One trial: the parent supervises and samples telemetry, a fresh child process measures.

Parent (``run_trial``, no framework import): thermal guard, telemetry sampler, the supervised
child, then the result, provenance and side files. Child (``measure_trial``): thread variables
set before the framework is imported — Snakemake exports OMP_NUM_THREADS set to the job's
threads, which PyTorch obeys and TensorFlow ignores, so both are told explicitly — then the
backend, the harness, and the energy counter read at each phase marker.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import sys
from datetime import datetime, timezone

from fwbench import images, provenance, results, telemetry, workflow
from fwbench.cells import Cell
from fwbench.errors import Unsupported
from fwbench.harness import Adaptive, measure
from fwbench.models import check_input
from fwbench.supervisor import supervise

ENTRY = "fwbench.trial:measure_trial"
# Experiments other than `throughput` measure through their own drivers, in the same child.
EXPERIMENTS = {
    "epoch": "fwbench.experiments:run_epoch",
    "convergence": "fwbench.experiments:run_convergence",
    "distributed": "fwbench.distributed:run_distributed",
}
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "TF_NUM_INTRAOP_THREADS")


def thread_environment(threads: int) -> dict[str, str]:
    """Variables a framework reads at import to size its thread pools."""
    return {**{name: str(threads) for name in THREAD_VARIABLES}, "TF_NUM_INTEROP_THREADS": "1"}


# --- parent side ------------------------------------------------------------------------

def run_trial(settings: dict, result_path, env_path, telemetry_path, idle_path=None) -> dict:
    """Measure one trial in a supervised child; write its result, provenance and telemetry.

    Usage::

        run_trial(plan.trial_settings(trial), "trial-1.json", "trial-1.env.json",
                  "trial-1.telemetry.csv", "results/default/environment/idle.json")
    """
    images.check_runtime(settings["cell"]["framework"], settings.get("images"))  # where it runs
    cell = Cell.from_dict(settings["cell"])
    options = settings["telemetry"]
    uuids = telemetry.visible_gpu_uuids()[:cell.world_size] if cell.device == "cuda" else []
    idle = _read_json(idle_path) if idle_path else None
    guard = None
    if options["thermal_guard"]:
        guard = telemetry.wait_for_idle_temperature(**options["thermal_guard"], idle=idle,
                                                    gpu_uuids=uuids)
    started = _now()
    sampler = telemetry.Sampler(telemetry_path, period_s=options["period_s"], gpu_uuids=uuids)
    with sampler:
        outcome = supervise(ENTRY, {**settings, "gpu_uuids": uuids},
                            timeout_s=settings["timeout_s"],
                            memory_limit_mb=settings["memory_limit_mb"],
                            env=thread_environment(settings["threads"]), on_start=sampler.watch)
    ended = _now()
    result = results.make_result(settings, outcome, started_at=started, ended_at=ended,
                                 workflow={**provenance.git_state(),
                                           "session": provenance.workflow_session()})
    result["thermal_guard"] = guard
    result["telemetry"] = _summary(sampler, outcome, settings, uuids, idle)
    results.validate_trial(result)
    results.write_json({**provenance.environment(), **result["versions"]}, env_path)
    results.write_json(result, result_path)
    workflow.report_progress(result_path)  # the sweep's progress line, in a workflow job
    return result


def _summary(sampler, outcome, settings, uuids, idle) -> dict | None:
    markers = outcome.payload.get("markers_ns")
    if not markers:
        return None
    samples = results.samples_per_iteration(settings["cell"], outcome.payload)
    return telemetry.summarize_phases(
        sampler.out_csv, markers, outcome.payload.get("energy_mj"),
        samples, len(outcome.payload["iteration_ns"]),
        warmup_iterations=len(outcome.payload["warmup_ns"]), idle=idle, gpu_uuids=uuids,
        meta=sampler.meta)


def _read_json(path) -> dict:
    with open(path) as f:
        return json.load(f)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def measure_idle_baseline(path, *, duration_s: float, period_s: float) -> dict:
    """The run's idle baseline (GPU power and temperature, CPU temperature), written to ``path``."""
    idle = telemetry.measure_idle(duration_s, period_s=period_s)
    results.write_json(idle, path)
    return idle


# --- child side -------------------------------------------------------------------------

def load_backend(cell: Cell, settings: dict):
    """The cell's backend, configured and loaded; Unsupported when the cell cannot run here.

    Call after the thread variables are set: this imports the framework. Returns the backend and
    the settings in force.
    """
    from fwbench.ablation import unsupported_reason  # pandas: only in the child

    reason = (check_input(cell.model, cell.input_shape, batch_size=cell.batch_size,
                          phase=cell.phase) or unsupported_reason(cell))
    if reason:
        raise Unsupported(reason)
    backend, in_force = configure_backend(cell, settings)
    backend.load()
    return backend, in_force


def configure_backend(cell: Cell, settings: dict):
    """The cell's backend with its settings applied (threads, precision, profile), not loaded;
    Unsupported when the framework cannot use the cell's device here."""
    from fwbench.frameworks import get_backend  # imports the framework, after the variables

    backend_cls = get_backend(cell.framework)
    reason = backend_cls.check_available(cell.device)
    if reason:
        raise Unsupported(reason)
    backend = backend_cls(cell, threads=settings["threads"], seed=settings["seed"])
    return backend, backend.configure()


def measure_trial(settings: dict) -> dict:
    """Measure the cell in ``settings``; returns the fields the result records."""
    cell = Cell.from_dict(settings["cell"])
    os.environ.update(thread_environment(settings["threads"]))
    if cell.experiment in EXPERIMENTS:
        module, function = EXPERIMENTS[cell.experiment].split(":")
        return getattr(importlib.import_module(module), function)(settings)
    backend, in_force = load_backend(cell, settings)
    _progress(f"{cell.id} trial {settings['trial']}: measuring")
    energy: dict[str, dict] = {}
    uuids = settings["gpu_uuids"]

    def read_energy(marker: str) -> None:
        energy[marker] = telemetry.read_energy_mj(uuids)

    adaptive = settings["adaptive"]
    m = measure(backend.step(), backend.synchronize, iterations=settings["iterations"],
                warmup_min=settings["warmup_min"], warmup_max=settings["warmup_max"],
                blocks=settings["blocks"], block_size=settings["block_size"],
                adaptive=Adaptive(**adaptive) if adaptive else None,
                on_marker=read_energy if uuids else None)
    return {
        "cold_start_ns": m.cold_start_ns,
        "warmup_ns": m.warmup_ns,
        "warmup_steady": m.warmup_steady,
        "iteration_ns": m.iteration_ns,
        "stop_reason": m.stop_reason,
        "block_size": m.block_size,
        "block_ns": m.block_ns,
        "markers_ns": m.markers_ns,
        "sync_ns": m.sync_ns,
        "energy_mj": energy or None,
        "settings_in_force": in_force,
        "versions": {**backend.versions(), **provenance.framework_runtime(cell.framework)},
        "peak_memory": backend.peak_memory(),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
