"""One trial, inside the child process: set threads, load the backend, measure, report.

Thread variables are set before the framework is imported: Snakemake exports OMP_NUM_THREADS set
to the job's threads, which PyTorch obeys and TensorFlow ignores, so both are told explicitly.
"""

from __future__ import annotations

import os
import resource
import sys

from fwbench.cells import Cell
from fwbench.errors import Unsupported
from fwbench.harness import Adaptive, measure
from fwbench.models import check_input

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "TF_NUM_INTRAOP_THREADS")


def thread_environment(threads: int) -> dict[str, str]:
    """Variables a framework reads at import to size its thread pools."""
    return {**{name: str(threads) for name in THREAD_VARIABLES}, "TF_NUM_INTEROP_THREADS": "1"}


def measure_trial(settings: dict) -> dict:
    """Measure the cell in ``settings``; returns the fields the result records."""
    cell = Cell.from_dict(settings["cell"])
    os.environ.update(thread_environment(settings["threads"]))
    reason = check_input(cell.model, cell.input_shape)
    if reason:
        raise Unsupported(reason)

    from fwbench.frameworks import get_backend  # imports the framework, after the variables

    backend_cls = get_backend(cell.framework)
    reason = backend_cls.check_available(cell.device)
    if reason:
        raise Unsupported(reason)
    backend = backend_cls(cell, threads=settings["threads"], seed=settings["seed"])
    in_force = backend.configure()
    backend.load()
    _progress(f"{cell.id} trial {settings['trial']}: measuring")
    adaptive = settings["adaptive"]
    m = measure(backend.step(), backend.synchronize, iterations=settings["iterations"],
                warmup_min=settings["warmup_min"], warmup_max=settings["warmup_max"],
                blocks=settings["blocks"], block_size=settings["block_size"],
                adaptive=Adaptive(**adaptive) if adaptive else None)
    return {
        "cold_start_ns": m.cold_start_ns,
        "warmup_ns": m.warmup_ns,
        "warmup_steady": m.warmup_steady,
        "iteration_ns": m.iteration_ns,
        "stop_reason": m.stop_reason,
        "block_size": m.block_size,
        "block_ns": m.block_ns,
        "markers_ns": m.markers_ns,
        "settings_in_force": in_force,
        "versions": backend.versions(),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
