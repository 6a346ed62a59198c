"""Framework backends, imported lazily by name so the core never imports a framework."""

from __future__ import annotations

import importlib

from fwbench.errors import FwbenchError

_BACKENDS = {
    "pytorch": ("fwbench.measure.frameworks.pytorch", "PyTorchBackend", "torch torchvision"),
    "tensorflow": ("fwbench.measure.frameworks.tensorflow", "TensorFlowBackend",
                   "tensorflow keras"),
}


def get_backend(name: str):
    """The backend class for ``name``; says what to install when the framework is missing."""
    try:
        module, cls, packages = _BACKENDS[name]
    except KeyError:
        raise FwbenchError(f"unknown framework {name!r}; known: {', '.join(_BACKENDS)}") from None
    try:
        return getattr(importlib.import_module(module), cls)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in packages.split():
            raise
        raise FwbenchError(
            f"framework {name!r} is not installed ({exc.name} missing): pip install {packages}"
        ) from None
