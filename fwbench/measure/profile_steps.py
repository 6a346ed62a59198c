"""The profiled run's child (supervised like a trial, fwbench.measure.profiling): build the
cell's backend, warm up, time a few steps unprofiled, then profile a few with the framework's own
profiler and reduce the trace (fwbench.measure.trace)."""

from __future__ import annotations

from fwbench.measure.child import ENTRIES, THROUGHPUT, load_backend, trial_entry
from fwbench.measure.payload import TrialPayload
from fwbench.measure.trace import breakdown
from fwbench.plan.contract import TrialSettings

DEFAULT_STEPS = 5
# A profiled step slower than this many unprofiled steps is flagged: the profiler's own cost
# (one record per operator) then inflates the host share noticeably.
OVERHEAD_WARNING = 1.5

@trial_entry
def profile_trial(settings: TrialSettings) -> TrialPayload:
    """Child side (supervised like a trial): build the cell's backend as a throughput trial does
    (fwbench.measure.throughput), warm up, time a few unprofiled steps, then profile
    ``profile_steps`` steps (one more, dropped, absorbs the profiler's start-up) with the
    framework's own profiler. The breakdown is the payload's detail ``profile``."""
    import importlib
    import tempfile
    import time

    from fwbench.errors import Unsupported
    from fwbench.measure import provenance

    cell = settings.cell
    if ENTRIES[cell.experiment] != THROUGHPUT:
        raise Unsupported(f"profiling covers the single-step experiments (throughput, ablation); "
                          f"the {cell.experiment} experiment runs its own loop "
                          f"({ENTRIES[cell.experiment]})")
    backend, in_force = load_backend(settings)
    step, sync = backend.step(), backend.synchronize
    steps = settings.profile_steps or DEFAULT_STEPS
    for _ in range(max(settings.warmup_min, 2) + 1):  # cold start and warm-up
        step()
    sync()
    unprofiled = []
    for _ in range(steps):
        sync()
        start = time.perf_counter_ns()
        step()
        sync()
        unprofiled.append(time.perf_counter_ns() - start)
    with tempfile.TemporaryDirectory(prefix="fwbench-profile-") as workdir:
        profiler = importlib.import_module(f"fwbench.measure.frameworks.{cell.framework}.profiler")
        trace = profiler.capture(step, sync, steps=steps + 1, device=cell.device,
                                 workdir=workdir)
    trace.steps = trace.steps[1:]  # the first profiled step pays the profiler's start-up
    result = breakdown(trace)
    unprofiled_ns = sorted(unprofiled)[len(unprofiled) // 2]
    result["unprofiled_ns_per_step"] = unprofiled_ns
    result["profiler_overhead"] = (result["wall_ns_per_step"] / unprofiled_ns
                                   if unprofiled_ns else None)
    if result["profiler_overhead"] and result["profiler_overhead"] > OVERHEAD_WARNING:
        result["notes"].append(
            f"a profiled step took {result['profiler_overhead']:.2f}x an unprofiled one: the "
            "profiler's own cost inflates the host overhead share")
    return TrialPayload(
        settings_in_force=in_force,
        versions={**backend.versions(), **provenance.framework_runtime(cell.framework)},
        details={"profile": result})
