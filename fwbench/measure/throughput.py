"""The `throughput` and `ablation` experiments, child side: single steps and blocks of the cell's
backend on synthetic in-memory data, timed by fwbench.measure.harness, with the energy counter
read at each phase marker.

Usage (in the trial's child, through fwbench.measure.child.ENTRIES)::

    payload = run_throughput(settings)   # settings with the cell's warm-up (run_trial adds it)
"""

from __future__ import annotations

import resource
import time

from fwbench.measure import provenance, telemetry
from fwbench.measure.child import load_backend, progress, stamp, trial_entry
from fwbench.measure.harness import measure, trial_schedule
from fwbench.measure.payload import TrialPayload
from fwbench.plan.contract import TrialSettings


@trial_entry
def run_throughput(settings: TrialSettings) -> TrialPayload:
    """Measure the cell in ``settings``; returns what the result records."""
    timeline: dict[str, int] = {}
    backend, in_force = load_backend(settings, timeline)
    cell = settings.cell
    progress(f"{cell.id} trial {settings.trial}: measuring")
    energy: dict[str, dict] = {}
    uuids = list(settings.gpu_uuids)

    def read_energy(marker: str) -> None:
        energy[marker] = telemetry.read_energy_mj(uuids)

    step = backend.step()
    with backend.device_scope():
        m = measure(step, backend.synchronize, trial_schedule(settings),
                    on_marker=read_energy if uuids else None)
    # The harness's markers on the wall clock: its monotonic clock's offset, read once.
    offset = time.time_ns() - time.perf_counter_ns()
    timeline.update({name: ns + offset for name, ns in m.markers_ns.items()})
    payload = TrialPayload(
        cold_start_ns=m.cold_start_ns,
        warmup_ns=m.warmup_ns,
        warmup_steady=settings.warmup_steady,
        iteration_ns=m.iteration_ns,
        stop_reason=m.stop_reason,
        block_size=m.block_size,
        block_ns=m.block_ns,
        markers_ns=m.markers_ns,
        energy_mj=energy or None,
        settings_in_force={**in_force, "compiled": backend.compiled},
        versions={**backend.versions(), **provenance.framework_runtime(cell.framework)},
        peak_memory=backend.peak_memory(),
        peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        details={"sync_ns": m.sync_ns, "pilot_blocks": m.pilot_blocks},
        timeline_ns=timeline,  # the payload's own dict: stamped once more, below
    )
    stamp(timeline, "payload_ready")
    return payload
