"""Child side of the supervisor: call one function and write how it ended.

``python -m fwbench.worker module:function settings.json outcome.json``. Exceptions become a
status (``oom`` when the framework ran out of memory, ``unsupported`` when the cell cannot run
here, else ``error``); a crash writes nothing, and the supervisor reports it.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
import traceback

from fwbench.errors import Unsupported
from fwbench.results import write_json

_OOM = re.compile(r"out of memory|can't allocate memory|cannot allocate memory|failed to allocate"
                  r"|std::bad_alloc|OOM when allocating", re.IGNORECASE)


def classify(exc: BaseException) -> str:
    """The status a trial that raised ``exc`` ends with."""
    if isinstance(exc, Unsupported):
        return "unsupported"
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"MemoryError", "OutOfMemoryError", "ResourceExhaustedError"} or _OOM.search(str(exc)):
        return "oom"
    return "error"


def main(entry: str, settings_path: str, out_path: str) -> None:
    module, function = entry.split(":")
    with open(settings_path) as f:
        settings = json.load(f)
    try:
        payload = getattr(importlib.import_module(module), function)(settings)
        payload = {"status": "ok", "message": "", **payload}
    except Exception as exc:  # every failure of the measured code is a result
        traceback.print_exc()
        message = f"{type(exc).__name__}: {exc}".strip()
        payload = {"status": classify(exc), "message": message[:2000]}
    write_json(payload, out_path)


if __name__ == "__main__":
    main(*sys.argv[1:])
