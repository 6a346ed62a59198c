"""What every measuring child shares, whatever its experiment: the entry table, the checked start,
the thread variables, the processors a CPU cell may use, and loading the cell's backend.

A trial's parent (fwbench.measure.trial) picks the child's entry from ``ENTRIES``; the supervisor
runs it in a fresh process (fwbench.measure.worker). Each entry is wrapped by ``trial_entry``, so
every child starts the same way: its settings checked (a bad file fails here, naming the field),
then the thread variables set before any framework import — Snakemake exports OMP_NUM_THREADS set
to the job's threads, which PyTorch obeys and TensorFlow ignores, so both are told explicitly.
Every experiment imports from here, never from the parent's module.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable, Mapping

from fwbench.errors import Unsupported
from fwbench.measure.payload import TrialPayload
from fwbench.plan.contract import TrialSettings
from fwbench.plan.frameworks import FRAMEWORKS

# The child's entry per experiment ("module:function", imported only in the child).
THROUGHPUT = "fwbench.measure.throughput:run_throughput"
ENTRIES = {
    "throughput": THROUGHPUT,
    "ablation": THROUGHPUT,
    "epoch": "fwbench.measure.experiments:run_epoch",
    "convergence": "fwbench.measure.experiments:run_convergence",
    "distributed": "fwbench.measure.distributed:run_distributed",
}
# The BLAS libraries' thread variables; each framework adds its own (fwbench.plan.frameworks).
BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def thread_environment(threads: int) -> dict[str, str]:
    """Variables a framework reads at import to size its thread pools: every framework's, so
    that a child sets the same whatever it runs."""
    own = FRAMEWORKS.values()
    intra = [*BLAS_THREAD_VARIABLES, *(v for f in own for v in f.intra_op_variables)]
    inter = [v for f in own for v in f.inter_op_variables]
    return {**{name: str(threads) for name in intra}, **{name: "1" for name in inter}}


def start(settings: Mapping | TrialSettings) -> TrialSettings:
    """The first thing a measuring process does: its settings checked (JSON is read as
    TrialSettings), its threads set."""
    checked = (settings if isinstance(settings, TrialSettings)
               else TrialSettings.from_dict(settings))
    os.environ.update(thread_environment(checked.threads))
    return checked


def trial_entry(measure: Callable[..., TrialPayload]) -> Callable[..., dict]:
    """``measure(settings: TrialSettings) -> TrialPayload`` as the worker calls it: JSON settings
    in, checked where the child starts (``start``), the payload's JSON out."""
    @functools.wraps(measure)
    def entry(settings: Mapping, **options) -> dict:
        return measure(start(settings), **options).to_dict()

    return entry


def stamp(timeline: dict, name: str) -> None:
    """Record when the trial reached ``name``, on the wall clock all its processes share."""
    timeline[name] = time.time_ns()


def confine(threads: int) -> None:
    """Confine this process, and every thread it starts from now on, to ``threads`` of the
    processors it may use (the last ones), before the framework starts its own threads.

    With one thread, TensorFlow still hands every tf.function call to a thread of its own and
    waits for it. Unconfined, that thread wakes an idle processor: on this project's 2-core VM a
    LeNet-5 training step paid about 20 % for it, and how much depended on what the other
    processor was doing (docs/statistics.md, "A verdict that survives a second run"). A cluster
    confines a job to its CPUs anyway; a local trial now measures the same thing.
    """
    if hasattr(os, "sched_setaffinity"):  # Linux; elsewhere the trial records every processor
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[-threads:])


def processors_in_use() -> list[int] | None:
    """Every processor some thread of this process may run on, read from each thread."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    cpus = set()
    for task in os.listdir("/proc/self/task"):
        try:
            cpus |= os.sched_getaffinity(int(task))
        except OSError:  # the thread ended while being read
            continue
    return sorted(cpus)


def load_backend(settings: TrialSettings, timeline: dict | None = None):
    """The cell's backend, configured and loaded; Unsupported when the cell cannot run here.

    Call after ``start``: this imports the framework. A CPU cell's process is first confined to
    its threads' count of processors (``confine``). Returns the backend and the settings in
    force, with ``cpus``: the processors its threads may use once the model is built.
    ``timeline`` gains when the framework import started and ended, and when the model was
    built.
    """
    from fwbench.plan.models import check_input

    cell = settings.cell
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
    if cell.device == "cpu":
        confine(settings.threads)
    backend, in_force = configure_backend(settings, timeline)
    backend.load()
    stamp(timeline, "model_built")
    return backend, {**in_force, "cpus": processors_in_use()}


def configure_backend(settings: TrialSettings, timeline: dict | None = None):
    """The cell's backend with its settings applied (threads, precision, profile), not loaded;
    Unsupported when the framework cannot use the cell's device here."""
    from fwbench.measure.frameworks import get_backend  # imports the framework, after the variables

    cell = settings.cell
    timeline = {} if timeline is None else timeline
    stamp(timeline, "framework_import_started")
    backend_cls = get_backend(cell.framework)
    stamp(timeline, "framework_imported")
    reason = backend_cls.check_available(cell.device)
    if reason:
        raise Unsupported(reason)
    backend = backend_cls(cell, threads=settings.threads, seed=settings.seed)
    return backend, backend.configure()


def progress(message: str) -> None:
    """A line in the trial's log, at once."""
    print(message, file=sys.stderr, flush=True)
