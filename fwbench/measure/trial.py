"""One trial: the parent supervises and samples telemetry, a fresh child process measures.

Parent (``run_trial``, no framework import): thermal guard, telemetry sampler, the supervised
child, then the result, provenance and side files. Child (``measure_trial``): thread variables
set before the framework is imported — Snakemake exports OMP_NUM_THREADS set to the job's
threads, which PyTorch obeys and TensorFlow ignores, so both are told explicitly — then the
backend, the harness, and the energy counter read at each phase marker.

Both sides stamp the trial's timeline (wall-clock ``time.time_ns()``, comparable across
processes), and the parent prints it to the job's log as it ends (``TIMELINE_PREFIX``):
where a trial's seconds go besides the framework's import and the measurement
(``benchmarks/trial_stages.py``, ``make bench-trial``). Names in order: ``job_started`` (the job's
shell, ``$EPOCHREALTIME``), ``python_started`` (first line of ``python -m fwbench``),
``trial_started``, ``sampler_started``, ``sampler_ready``, ``child_started``,
``child_python_started``, ``child_imported``, ``framework_import_started``,
``framework_imported``, ``model_built``, the harness's markers
(``cold_start`` … ``end``), ``payload_ready``, ``child_exited``, ``sampler_stopped``,
``provenance_read``, ``result_ready``, ``written``, ``ended``.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import sys
import time
from datetime import datetime, timezone

# Only what both sides need is imported here: the measuring child imports this module before
# the framework, so each side imports its own modules where it starts (run_trial: jsonschema,
# yaml and the supervisor; load_backend: numpy).
from fwbench.environment import source
from fwbench.errors import Unsupported
from fwbench.measure import calibration, provenance, telemetry
from fwbench.measure.harness import Schedule, measure
from fwbench.plan.cells import REAL_DATA, Cell

ENTRY = "fwbench.measure.trial:measure_trial"
# Experiments other than `throughput` measure through their own drivers, in the same child.
EXPERIMENTS = {
    "epoch": "fwbench.measure.experiments:run_epoch",
    "convergence": "fwbench.measure.experiments:run_convergence",
    "distributed": "fwbench.measure.distributed:run_distributed",
}
TIMELINE_PREFIX = "fwbench: trial timeline "
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "TF_NUM_INTRAOP_THREADS")


def thread_environment(threads: int) -> dict[str, str]:
    """Variables a framework reads at import to size its thread pools."""
    return {**{name: str(threads) for name in THREAD_VARIABLES}, "TF_NUM_INTEROP_THREADS": "1"}


# --- parent side ------------------------------------------------------------------------

def run_trial(settings: dict, result_path, env_path, telemetry_path, idle_path=None,
              timeline: dict | None = None, warmup_path=None) -> dict:
    """Measure one trial in a supervised child; write its result, provenance and telemetry.

    ``warmup_path``: the cell's warm-up record (fwbench.measure.calibration), which fixes the
    steps this trial warms up; without it, ``warmup_max``. A calibration trial
    (``Plan.calibration_settings``) takes none. ``timeline`` holds the stamps taken before this
    call (the job's shell, Python's start-up); the whole timeline is printed to stderr at the end.

    Usage::

        run_trial(plan.trial_settings(trial), "trial-1.json", "trial-1.env.json",
                  "trial-1.telemetry.csv", "results/default/environment/idle.json",
                  warmup_path=plan.warmup_path(trial.cell))
    """
    from fwbench import workflow
    from fwbench.environment import images
    from fwbench.measure import results
    from fwbench.measure.supervisor import supervise

    timeline = {**(timeline or {}), "trial_started": time.time_ns()}
    settings = with_warmup(settings, warmup_path)
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
    stamp(timeline, "sampler_started")
    sampler = telemetry.Sampler(telemetry_path, period_s=options["period_s"], gpu_uuids=uuids)
    with sampler:
        stamp(timeline, "sampler_ready")
        outcome = supervise(ENTRY, {**settings, "gpu_uuids": uuids},
                            timeout_s=settings["timeout_s"],
                            memory_limit_mb=settings["memory_limit_mb"],
                            env=thread_environment(settings["threads"]), on_start=sampler.watch)
    stamp(timeline, "sampler_stopped")
    ended = _now()
    timeline.update(outcome.timeline_ns)
    env = provenance.environment()
    stamp(timeline, "provenance_read")
    result = results.make_result(settings, outcome, started_at=started, ended_at=ended,
                                 workflow={**env["workflow"],
                                           "session": source.workflow_session()})
    result["thermal_guard"] = guard
    samples = results.samples_per_iteration(settings["cell"], outcome.payload)
    result["telemetry"] = _summary(sampler, outcome, uuids, idle, samples)
    results.validate_trial(result)
    stamp(timeline, "result_ready")
    results.write_json({**env, **result["versions"]}, env_path)
    results.write_json(result, result_path)
    stamp(timeline, "written")
    workflow.report_progress(result_path)  # the sweep's progress line, in a workflow job
    stamp(timeline, "ended")
    _progress(TIMELINE_PREFIX + json.dumps(timeline))
    return result


def with_warmup(settings: dict, warmup_path=None) -> dict:
    """``settings`` with the warm-up the trial takes (``warmup``): its cell's record, else the
    fallback. A calibration trial, and a real-data trial (which times whole runs), take none."""
    if settings.get("calibration") or settings["cell"]["experiment"] in REAL_DATA:
        return settings
    record = (calibration.read_warmup(warmup_path) if warmup_path
              else calibration.uncalibrated(settings["warmup_max"]))
    keep = ("iterations", "steady", "class", "found", "reason")
    return {**settings, "warmup": {k: record[k] for k in keep}}


def stamp(timeline: dict, name: str) -> None:
    """Record when the trial reached ``name``, on the wall clock all its processes share."""
    timeline[name] = time.time_ns()


def _summary(sampler, outcome, uuids, idle, samples: int) -> dict | None:
    markers = outcome.payload.get("markers_ns")
    if not markers:
        return None
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
    from fwbench.measure import results

    idle = telemetry.measure_idle(duration_s, period_s=period_s)
    results.write_json(idle, path)
    return idle


# --- child side -------------------------------------------------------------------------

def load_backend(cell: Cell, settings: dict, timeline: dict | None = None):
    """The cell's backend, configured and loaded; Unsupported when the cell cannot run here.

    Call after the thread variables are set: this imports the framework. Returns the backend and
    the settings in force. ``timeline`` gains when the framework import started and ended, and
    when the model was built.
    """
    from fwbench.plan.models import check_input

    timeline = {} if timeline is None else timeline
    reason = check_input(cell.model, cell.input_shape, batch_size=cell.batch_size,
                         phase=cell.phase)
    if not reason and "+" in cell.profile:
        # Only an ablation step (base+factor…) can be refused; the module costs pandas' import
        # (0.2 s), which no other trial pays.
        from fwbench.plan.ablation import unsupported_reason
        reason = unsupported_reason(cell)
    if reason:
        raise Unsupported(reason)
    backend, in_force = configure_backend(cell, settings, timeline)
    backend.load()
    stamp(timeline, "model_built")
    return backend, in_force


def configure_backend(cell: Cell, settings: dict, timeline: dict | None = None):
    """The cell's backend with its settings applied (threads, precision, profile), not loaded;
    Unsupported when the framework cannot use the cell's device here."""
    from fwbench.measure.frameworks import get_backend  # imports the framework, after the variables

    timeline = {} if timeline is None else timeline
    stamp(timeline, "framework_import_started")
    backend_cls = get_backend(cell.framework)
    stamp(timeline, "framework_imported")
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
    timeline: dict[str, int] = {}
    backend, in_force = load_backend(cell, settings, timeline)
    _progress(f"{cell.id} trial {settings['trial']}: measuring")
    energy: dict[str, dict] = {}
    uuids = settings["gpu_uuids"]

    def read_energy(marker: str) -> None:
        energy[marker] = telemetry.read_energy_mj(uuids)

    step = backend.step()
    with backend.device_scope():
        m = measure(step, backend.synchronize, Schedule.from_settings(settings),
                    on_marker=read_energy if uuids else None)
    # The harness's markers on the wall clock: its monotonic clock's offset, read once.
    offset = time.time_ns() - time.perf_counter_ns()
    payload = {
        "cold_start_ns": m.cold_start_ns,
        "warmup_ns": m.warmup_ns,
        "warmup_steady": calibration.warmup_steady(settings),
        "iteration_ns": m.iteration_ns,
        "stop_reason": m.stop_reason,
        "block_size": m.block_size,
        "block_ns": m.block_ns,
        "markers_ns": m.markers_ns,
        "sync_ns": m.sync_ns,
        "pilot_blocks": m.pilot_blocks,
        "energy_mj": energy or None,
        "settings_in_force": {**in_force, "compiled": backend.compiled},
        "versions": {**backend.versions(), **provenance.framework_runtime(cell.framework)},
        "peak_memory": backend.peak_memory(),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    timeline.update({name: ns + offset for name, ns in m.markers_ns.items()})
    stamp(timeline, "payload_ready")
    return {**payload, "timeline_ns": timeline}


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
