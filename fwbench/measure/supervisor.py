"""Run one function in a fresh, supervised child process and report how it ended.

The parent imports no framework. It enforces the per-trial timeout and address-space limit, and
turns every way a child can end (result, exception, signal, timeout) into a status, so a failed
trial becomes a result row and the sweep goes on. If the parent loses its own parent (the run was
killed), or is told to stop, it kills the child and writes nothing.

The child's temporary directory (``TMPDIR``) is the parent's own, removed when the child ends:
the child skips the interpreter's teardown, and with it the clean-up that frameworks leave to
``atexit`` (TensorFlow's AutoGraph leaves one source file per converted function), so nothing
piles up in /tmp over a sweep, and no trial finds what an earlier one cached there.
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

POLL_S = 0.2
_PR_SET_PDEATHSIG = 1


@dataclass
class Outcome:
    """How a child ended: its status and message, and what it returned when it got that far.

    ``timeline_ns``: when the child started and exited (wall clock, ns), and the stamps the child
    took itself (``fwbench.measure.worker``).
    """

    status: str
    message: str
    payload: dict
    returncode: int | None
    timeline_ns: dict[str, int] = field(default_factory=dict)


class Interrupted(Exception):
    """The supervisor was told to stop, or its parent died; nothing may be written."""


def supervise(entry: str, settings: dict, *, timeout_s: float, memory_limit_mb: int | None,
              env: dict[str, str] | None = None,
              on_start: Callable[[int], None] | None = None) -> Outcome:
    """Call ``entry`` ("module:function") with ``settings`` in a child process.

    ``on_start`` receives the child's pid as soon as it exists (the telemetry sampler watches it).

    Usage::

        outcome = supervise("fwbench.measure.trial:measure_trial", settings, timeout_s=600,
                            memory_limit_mb=None)
        outcome.status   # ok, oom, timeout, unsupported, error or crashed
    """
    with tempfile.TemporaryDirectory(prefix="fwbench-") as tmp:
        settings_path, out_path = Path(tmp, "settings.json"), Path(tmp, "outcome.json")
        settings_path.write_text(json.dumps(settings))
        cmd = [sys.executable, "-m", "fwbench.measure.worker", entry, str(settings_path),
               str(out_path)]
        with subprocess.Popen(
            cmd, env={**os.environ, **(env or {}), "TMPDIR": tmp}, stderr=subprocess.PIPE,
            text=True, start_new_session=True, preexec_fn=lambda: _child_limits(memory_limit_mb),
        ) as proc:
            timeline = {"child_started": time.time_ns()}
            tail = _tee_stderr(proc)
            try:
                if on_start:
                    on_start(proc.pid)
                returncode = _wait(proc, timeout_s)
                timeline["child_exited"] = time.time_ns()
            except BaseException:
                _kill(proc)
                raise
            finally:
                tail.thread.join(timeout=5)
        if returncode is None:
            return Outcome("timeout", f"trial exceeded timeout_s={timeout_s:g} s and was killed",
                           {}, None, timeline)
        if out_path.exists():
            payload = json.loads(out_path.read_text())
            timeline.update(payload.pop("timeline_ns", {}))
            return Outcome(payload.pop("status"), payload.pop("message"), payload, returncode,
                           timeline)
        return Outcome("crashed", _crash_message(returncode, memory_limit_mb, tail.lines),
                       {}, returncode, timeline)


def _child_limits(memory_limit_mb: int | None) -> None:
    # The child dies with the supervisor, whatever kills it.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if memory_limit_mb:
        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _wait(proc: subprocess.Popen, timeout_s: float) -> int | None:
    """The child's return code, or None after killing it at the timeout.

    Woken by the child's exit itself where Linux offers a pid file descriptor (Popen.wait with a
    timeout polls, up to 50 ms late); every POLL_S it checks the timeout and its own parent.
    """
    parent = os.getppid()
    deadline = time.monotonic() + timeout_s
    try:
        exited = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        exited = None
    try:
        while True:
            if exited is not None:
                select.select([exited], [], [], POLL_S)
            try:
                return proc.wait(timeout=0 if exited is not None else POLL_S)
            except subprocess.TimeoutExpired:
                pass
            if os.getppid() != parent:
                raise Interrupted("the workflow that started this trial is gone")
            if time.monotonic() > deadline:
                _kill(proc)
                return None
    finally:
        if exited is not None:
            os.close(exited)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


class _Tail:
    def __init__(self):
        self.lines: collections.deque[str] = collections.deque(maxlen=20)
        self.thread: threading.Thread


def _tee_stderr(proc: subprocess.Popen) -> _Tail:
    """Copy the child's stderr to ours (the job's log) and keep its last lines for the message."""
    tail = _Tail()

    def pump():
        for line in proc.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            tail.lines.append(line.rstrip())

    tail.thread = threading.Thread(target=pump, daemon=True)
    tail.thread.start()
    return tail


def _crash_message(returncode: int, memory_limit_mb: int | None, lines) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        message = f"trial process killed by signal {name} ({-returncode})"
        if name == "SIGKILL":
            message += "; the kernel's out-of-memory killer is a likely cause"
    else:
        message = f"trial process exited with code {returncode} without a result"
    last = [line for line in lines if line.strip()]
    return f"{message}; last output: {last[-1]}" if last else message


def stop_on_signals() -> None:
    """Turn SIGTERM and SIGINT into Interrupted, so the child is killed and nothing is written."""
    def handler(signum, frame):
        raise Interrupted(f"stopped by {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
