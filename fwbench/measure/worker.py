"""Child side of the supervisor: call one function and write how it ended.

``python -m fwbench.measure.worker module:function settings.json outcome.json``. Exceptions become a
status (``oom`` when the framework ran out of memory, ``unsupported`` when the cell cannot run
here, else ``error``), and the process exits with code 1, so the supervisor of a group (the ranks
of a distributed trial) knows at once; a crash writes nothing, and the supervisor reports it. The
outcome is a ``Result``: the status and message, the child's part of the trial's timeline
(``timeline_ns``: when its Python started, when the entry's module was imported, and what the
entry stamped itself), and what the entry returned (``payload``).

Once the outcome is written the process ends at once (``os._exit``), without the interpreter's
teardown: PyTorch's and TensorFlow's took 1.1 and 1.4 s of every trial (``make bench-trial``),
and nothing is left to do. It imports only the standard library before the entry, so the
child's start-up stays what Python's is.
"""

from __future__ import annotations

import time

STARTED_NS = time.time_ns()  # Python's start-up ends here (fwbench.measure.trial's timeline)

import ctypes  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402

from fwbench.errors import Unsupported  # noqa: E402

_OOM = re.compile(r"out of memory|can't allocate memory|cannot allocate memory|failed to allocate"
                  r"|std::bad_alloc|OOM when allocating", re.IGNORECASE)


@dataclass(frozen=True)
class Result:
    """How a child ended, as it writes it: ``payload`` is what its entry returned (empty unless
    ``status`` is ok), ``timeline_ns`` the stamps it took."""

    status: str
    message: str = ""
    timeline_ns: dict[str, int] = field(default_factory=dict)
    payload: dict = field(default_factory=dict)


def classify(exc: BaseException) -> str:
    """The status a trial that raised ``exc`` ends with."""
    if isinstance(exc, Unsupported):
        return "unsupported"
    names = {cls.__name__ for cls in type(exc).__mro__}
    oom_types = {"MemoryError", "OutOfMemoryError", "ResourceExhaustedError"}
    if names & oom_types or _OOM.search(str(exc)):
        return "oom"
    return "error"


def main(entry: str, settings_path: str, out_path: str) -> int:
    """Call ``entry`` and write its outcome; the exit code: 0 when it returned, else 1."""
    module, function = entry.split(":")
    with open(settings_path) as f:
        settings = json.load(f)
    timeline = {"child_python_started": STARTED_NS}
    try:
        call = getattr(importlib.import_module(module), function)
        timeline["child_imported"] = time.time_ns()
        payload = call(settings)
        timeline.update(payload.pop("timeline_ns", {}))
        result = Result("ok", "", timeline, payload)
    except Exception as exc:  # every failure of the measured code is a result
        traceback.print_exc()
        message = f"{type(exc).__name__}: {exc}".strip()
        result = Result(classify(exc), message[:2000], timeline)
    _write_atomic(result, out_path)
    return 0 if result.status == "ok" else 1


def read_result(path) -> Result:
    """The outcome a child wrote (``main``)."""
    with open(path) as f:
        return Result(**json.load(f))


def _write_atomic(result: Result, path: str) -> None:
    """A partial file is never read as an outcome: the supervisor sees none, and a crash."""
    with open(f"{path}.tmp", "w") as f:
        json.dump(asdict(result), f)
    os.replace(f"{path}.tmp", path)


def exit_now(code: int = 0) -> None:
    """End the process without the interpreter's teardown, losing no output on the way."""
    sys.stdout.flush()
    sys.stderr.flush()
    ctypes.CDLL(None).fflush(None)  # what C and C++ code left in stdio's buffers
    os._exit(code)


if __name__ == "__main__":
    exit_now(main(*sys.argv[1:]))
