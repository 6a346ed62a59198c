"""The interface both framework backends implement, method for method.

frameworks/pytorch/backend.py and frameworks/tensorflow/backend.py are mirror images: the same
methods in the same order, so a diff between them shows only framework calls.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import ClassVar

from fwbench.plan.cells import Cell

# fp16 loss scaling starts here in both frameworks (Keras's default; PyTorch's is 2**16).
LOSS_SCALE_INITIAL = 2.0 ** 15

# What a compiled step holds, the same in both frameworks: frameworks/<fw>/steps.py builds the one
# training step and the one inference batch every experiment runs, and its ``compiled`` compiles
# them whole and returns this record of it, which the trial keeps with its settings in force.
STEP_SCOPES = {
    "train": "the whole training step: forward, loss, backward and the optimizer's update",
    "infer": "the forward pass of one batch",
}


def compiled_record(phase: str, compiler: str) -> dict:
    """What a compiled ``phase`` step holds (``STEP_SCOPES``) and what compiled it."""
    return {"scope": STEP_SCOPES[phase], "compiler": compiler}


class Backend:
    """One framework measuring one cell inside one trial process.

    Usage::

        backend = get_backend(cell.framework)(cell, threads=1, seed=0)
        in_force = backend.configure()   # threads, precision, layout … actually set
        backend.load()                   # model, optimizer and data on the device
        step = backend.step()            # one training step or one inference batch
        backend.compiled                 # what of it is compiled, and by what
        with backend.device_scope():     # entered once, around every timed call
            step()
            backend.synchronize()
        backend.peak_memory()
    """

    NAME: ClassVar[str]

    def __init__(self, cell: Cell, *, threads: int, seed: int):
        self.cell = cell
        self.threads = threads
        self.seed = seed
        # Set by ``step``: {phase: compiled_record(...) or None (eager)}.
        self.compiled: dict | None = None

    @staticmethod
    def check_available(device: str) -> str | None:
        """The reason this framework cannot run on ``device`` here, or None."""
        raise NotImplementedError("Backend must implement check_available")

    def configure(self) -> dict:
        """Apply the cell's settings profile and return every setting actually in force."""
        raise NotImplementedError("Backend must implement configure")

    def load(self) -> None:
        """Build the model, loss, optimizer and the seeded synthetic batch on the device."""
        raise NotImplementedError("Backend must implement load")

    def step(self) -> Callable[[], object]:
        """A callable running one iteration of the cell's phase in the cell's mode (and setting
        ``compiled``)."""
        raise NotImplementedError("Backend must implement step")

    def device_scope(self) -> AbstractContextManager:
        """The context the step runs in, entered once around all of them (never inside a timed
        call): the framework's device placement where it has one."""
        raise NotImplementedError("Backend must implement device_scope")

    def synchronize(self) -> None:
        """Block until every launched operation on the device has finished."""
        raise NotImplementedError("Backend must implement synchronize")

    def peak_memory(self) -> dict:
        """Peak device memory of this trial, from the framework's own allocator."""
        raise NotImplementedError("Backend must implement peak_memory")

    def versions(self) -> dict:
        """Framework version, build facts, and the math libraries in use."""
        raise NotImplementedError("Backend must implement versions")

    @staticmethod
    def build_info() -> dict:
        """What the framework says it was built with (build-time versions, not what is
        loaded), for the trial's provenance (fwbench.measure.provenance.framework_build)."""
        raise NotImplementedError("Backend must implement build_info")
