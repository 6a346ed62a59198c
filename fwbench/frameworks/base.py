"""The interface both framework backends implement, method for method.

frameworks/pytorch/backend.py and frameworks/tensorflow/backend.py are mirror images: the same
methods in the same order, so a diff between them shows only framework calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from fwbench.cells import Cell
from fwbench.errors import Unsupported

# fp16 loss scaling starts here in both frameworks (Keras's default; PyTorch's is 2**16).
LOSS_SCALE_INITIAL = 2.0 ** 15

# The settings a profile can set alike in both frameworks; `defaults` sets none of them. A profile
# named "defaults+layout+tf32" matches only those (the ablation's steps).
FACTORS = ("tf32", "cudnn_autotune", "layout", "determinism", "memory_growth")
# What `matched` sets: what changes numerics or resources. Not the layout: forcing one layout on
# both moves a framework off the path its documentation recommends (PyTorch channels_last on a
# CPU made resnet18 inference 1.6x slower); each side runs its recommended layout (layout_for),
# and forcing NHWC on both stays an ablation factor.
MATCHED = ("tf32", "cudnn_autotune", "determinism", "memory_growth")


def matched_factors(profile: str) -> frozenset[str]:
    """The factors a profile name sets to their matched value."""
    if profile == "matched":
        return frozenset(MATCHED)
    base, *extra = profile.split("+")
    unknown = set(extra) - set(FACTORS)
    if base != "defaults" or unknown:
        raise ValueError(f"profile must be 'matched', 'defaults' or 'defaults+<factor>…' with "
                         f"factors from {FACTORS}, got {profile!r}")
    return frozenset(extra)


def check_precision(precision: str, device: str, bf16_supported: bool) -> None:
    """Raise Unsupported when ``precision`` cannot run as mixed precision on ``device``."""
    if precision == "fp16" and device == "cpu":
        raise Unsupported("fp16 mixed precision needs a GPU: neither framework has fast fp16 "
                          "CPU kernels, so a CPU number would measure emulation")
    if precision == "bf16" and not bf16_supported:
        raise Unsupported(f"bf16 is not supported on this {device} device")


def layout_for(framework: str, device: str, precision: str, *, force_nhwc: bool) -> tuple[str, str]:
    """(layout, why): the image layout a framework runs for a device and precision.

    Each framework's documented recommendation, unless the ablation's ``layout`` factor forces
    NHWC on both sides. PyTorch's performance tuning guide recommends channels_last for
    convolutions under mixed precision on Tensor Cores and leaves contiguous NCHW as the default
    elsewhere; Keras builds NHWC everywhere and lets TensorFlow's graph optimizer pick a GPU
    kernel layout.
    """
    if framework == "tensorflow":
        why = "Keras's layout (data_format channels_last)"
        if device == "cuda":
            why += "; TensorFlow's layout optimizer may run GPU convolutions in NCHW"
        return "NHWC (channels_last)", why
    if force_nhwc:
        return "NHWC (channels_last)", "forced by the profile's layout factor (NHWC in both)"
    if device == "cuda" and precision in ("bf16", "fp16"):
        return "NHWC (channels_last)", ("PyTorch's recommendation for convolutions under mixed "
                                        "precision on Tensor Cores")
    return "NCHW", "PyTorch's default (contiguous NCHW), recommended for this device and precision"


class Backend:
    """One framework measuring one cell inside one trial process.

    Usage::

        backend = get_backend(cell.framework)(cell, threads=1, seed=0)
        in_force = backend.configure()   # threads, precision, layout … actually set
        backend.load()                   # model, optimizer and data on the device
        step = backend.step()            # one training step or one inference batch
        backend.synchronize()
        backend.peak_memory()
    """

    NAME: ClassVar[str]

    def __init__(self, cell: Cell, *, threads: int, seed: int):
        self.cell = cell
        self.threads = threads
        self.seed = seed

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
        """A callable running one iteration of the cell's phase in the cell's mode."""
        raise NotImplementedError("Backend must implement step")

    def synchronize(self) -> None:
        """Block until every launched operation on the device has finished."""
        raise NotImplementedError("Backend must implement synchronize")

    def peak_memory(self) -> dict:
        """Peak device memory of this trial, from the framework's own allocator."""
        raise NotImplementedError("Backend must implement peak_memory")

    def versions(self) -> dict:
        """Framework version, build facts, and the math libraries in use."""
        raise NotImplementedError("Backend must implement versions")
