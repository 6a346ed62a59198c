"""Framework backends, imported lazily by name so the core never imports a framework."""

from __future__ import annotations

import importlib

from fwbench.errors import FwbenchError
from fwbench.plan import frameworks


def get_backend(name: str):
    """The backend class for ``name`` (fwbench.plan.frameworks); says what to install when the
    framework is missing."""
    framework = frameworks.get(name)
    module, cls = framework.backend.split(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in framework.imports:
            raise
        raise FwbenchError(f"framework {name!r} is not installed ({exc.name} missing): "
                           f"pip install {' '.join(framework.packages)}") from None
