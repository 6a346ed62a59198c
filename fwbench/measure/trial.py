"""One trial, parent side: the parent supervises and samples telemetry, a fresh child measures.

``run_trial`` (no framework import): thermal guard, telemetry sampler, the supervised child
(its entry picked from fwbench.measure.child.ENTRIES by the cell's experiment), then the result,
provenance and side files. The children share their start (fwbench.measure.child); nothing
imports this module but the command line.

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

import dataclasses
import json
import time
from collections.abc import Mapping
from datetime import datetime, timezone

from fwbench.environment import images, source
from fwbench.errors import FwbenchError
from fwbench.measure import calibration, provenance, results, telemetry
from fwbench.measure.child import ENTRIES, progress, stamp, thread_environment
from fwbench.measure.payload import TrialPayload
from fwbench.measure.supervisor import supervise
from fwbench.plan.cells import REAL_DATA
from fwbench.plan.contract import TrialSettings, Warmup
from fwbench.workflow.progress import report_progress

TIMELINE_PREFIX = "fwbench: trial timeline "


def run_trial(settings: Mapping | TrialSettings, result_path, env_path, telemetry_path,
              idle_path=None, timeline: dict | None = None, warmup_path=None) -> dict:
    """Measure one trial in a supervised child; write its result, provenance and telemetry.

    ``settings``: the trial's (``Plan.trial_settings``, or the job's params as JSON, checked here
    first: a ConfigError names a bad field). ``warmup_path``: the cell's warm-up record
    (fwbench.measure.calibration), which fixes the steps this trial warms up; without it,
    ``warmup_max``. A calibration trial (``Plan.calibration_settings``) takes none. ``timeline``
    holds the stamps taken before this call (the job's shell, Python's start-up); the whole
    timeline is printed to stderr at the end.

    Usage::

        run_trial(plan.trial_settings(trial), "trial-1.json", "trial-1.env.json",
                  "trial-1.telemetry.csv", "results/default/environment/idle.json",
                  warmup_path=plan.warmup_path(trial.cell))
    """
    timeline = {**(timeline or {}), "trial_started": time.time_ns()}
    if not isinstance(settings, TrialSettings):
        settings = TrialSettings.from_dict(settings)
    settings = with_warmup(settings, warmup_path)
    cell = settings.cell
    images.check_runtime(cell.framework, settings.to_dict().get("images"))  # where it runs
    options = settings.telemetry
    uuids = telemetry.visible_gpu_uuids()[:cell.world_size] if cell.device == "cuda" else []
    idle = _read_json(idle_path) if idle_path else None
    if idle:
        check_processor(idle, idle_path)
    guard = None
    if options.thermal_guard:
        guard = telemetry.wait_for_idle_temperature(**options.thermal_guard.to_dict(),
                                                    idle=idle, gpu_uuids=uuids)
    started = _now()
    stamp(timeline, "sampler_started")
    sampler = telemetry.Sampler(telemetry_path, period_s=options.period_s, gpu_uuids=uuids)
    with sampler:
        stamp(timeline, "sampler_ready")
        child = dataclasses.replace(settings, gpu_uuids=tuple(uuids))
        outcome = supervise(ENTRIES[cell.experiment], child.to_dict(),
                            timeout_s=settings.timeout_s,
                            memory_limit_mb=settings.memory_limit_mb,
                            env=thread_environment(settings.threads), on_start=sampler.watch)
    stamp(timeline, "sampler_stopped")
    ended = _now()
    timeline.update(outcome.timeline_ns)
    env = provenance.environment()
    stamp(timeline, "provenance_read")
    result = results.make_result(settings, outcome, started_at=started, ended_at=ended,
                                 workflow={**env["workflow"],
                                           "session": source.workflow_session()})
    result["thermal_guard"] = guard
    result["telemetry"] = _summary(sampler, TrialPayload.from_dict(outcome.payload), result,
                                   uuids, idle)
    results.validate_trial(result)
    stamp(timeline, "result_ready")
    results.write_json({**env, **result["versions"]}, env_path)
    results.write_json(result, result_path)
    stamp(timeline, "written")
    report_progress(result_path)  # the sweep's progress line, in a workflow job
    stamp(timeline, "ended")
    progress(TIMELINE_PREFIX + json.dumps(timeline))
    return result


def with_warmup(settings: TrialSettings, warmup_path=None) -> TrialSettings:
    """``settings`` with the warm-up the trial takes (``warmup``): its cell's record, else the
    fallback. A calibration trial, and a real-data trial (which times whole runs), take none."""
    if settings.calibration or settings.cell.experiment in REAL_DATA:
        return settings
    record = (calibration.read_warmup(warmup_path) if warmup_path
              else calibration.uncalibrated(settings.warmup_max))
    keep = ("iterations", "steady", "class", "found", "reason")
    return dataclasses.replace(settings, warmup=Warmup.from_dict({k: record[k] for k in keep}))


def _summary(sampler, payload: TrialPayload, result: dict, uuids, idle) -> dict | None:
    if not payload.markers_ns:
        return None
    samples = results.samples_per_iteration(result["cell"], payload.details)
    return telemetry.summarize_phases(
        sampler.out_csv, payload.markers_ns, payload.energy_mj, samples,
        len(payload.iteration_ns), warmup_iterations=len(payload.warmup_ns), idle=idle,
        gpu_uuids=uuids, meta=sampler.meta)


def _read_json(path) -> dict:
    with open(path) as f:
        return json.load(f)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def measure_idle_baseline(path, *, duration_s: float, period_s: float) -> dict:
    """The run's idle baseline (GPU power and temperature, CPU temperature), written to ``path``
    with the processor the run starts on (``check_processor``)."""
    idle = {**telemetry.measure_idle(duration_s, period_s=period_s),
            "processor": provenance.cpu_info()}
    results.write_json(idle, path)
    return idle


def check_processor(idle: dict, idle_path) -> None:
    """Refuse to measure a trial of a run that started on another kind of processor: a
    verdict holds for the processor it was measured on, and a run never pools two kinds (a
    resumed run moved to another host would). Runs whose baseline names no processor (before
    it was recorded) are not checked."""
    started = (idle.get("processor") or {}).get("kind")
    here = provenance.cpu_info()["kind"]
    if started and started != here:
        raise FwbenchError(
            f"this run started on another kind of processor ({started}, {idle_path}); this "
            f"machine is {here}. A run never pools two kinds: measure its other trials on a "
            "host of the kind it started on, or run the config again as a new run "
            "(--config run=<name>) here and put the two together with `fwbench merge`, which "
            "keeps each as an origin of its own")
