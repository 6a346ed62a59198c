"""Run functions in fresh, supervised child processes and report how each ended.

One launcher for one process or many: a trial's child, and each rank process of a distributed
trial (fwbench.measure.distributed), start, end and are classified by the same code. The parent
imports no framework. It enforces the timeout and address-space limit, and turns every way a
child can end (result, exception, signal, timeout, killed after another child of the group
failed) into a status, so a failed trial becomes a result row and the sweep goes on. If the
parent loses its own parent (the run was killed), or is told to stop, it kills the children and
writes nothing.

Each child's temporary directory (``TMPDIR``) is the parent's own, removed when the child ends:
the child skips the interpreter's teardown, and with it the clean-up that frameworks leave to
``atexit`` (TensorFlow's AutoGraph leaves one source file per converted function), so nothing
piles up in /tmp over a sweep, and no trial finds what an earlier one cached there.
"""

from __future__ import annotations

import collections
import ctypes
import json
import math
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

from fwbench.measure.worker import read_result
from fwbench.workflow.host import NUMPY_DISPATCH

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


@dataclass(frozen=True)
class Child:
    """One process to supervise: the function it calls ("module:function"), the JSON settings it
    is called with, and what its environment adds."""

    entry: str
    settings: dict
    env: dict[str, str] = field(default_factory=dict)


def supervise(entry: str, settings: dict, *, timeout_s: float, memory_limit_mb: int | None,
              env: dict[str, str] | None = None,
              on_start: Callable[[int], None] | None = None) -> Outcome:
    """Call ``entry`` ("module:function") with ``settings`` in a child process.

    ``on_start`` receives the child's pid as soon as it exists (the telemetry sampler watches it).

    Usage::

        outcome = supervise("fwbench.measure.throughput:run_throughput", settings,
                            timeout_s=600, memory_limit_mb=None)
        outcome.status   # ok, oom, timeout, unsupported, error or crashed
    """
    (outcome,) = supervise_group([Child(entry, settings, env or {})], timeout_s=timeout_s,
                                 memory_limit_mb=memory_limit_mb, on_start=on_start)
    return outcome


def supervise_group(children: list[Child], *, timeout_s: float = math.inf,
                    memory_limit_mb: int | None = None, grace_s: float = math.inf,
                    on_start: Callable[[int], None] | None = None) -> list[Outcome]:
    """Run ``children`` side by side; their outcomes, in order.

    Once one has failed (ended with a non-zero code), the others get ``grace_s`` to finish (they
    may be waiting in a collective for the one that is gone), then are killed: status
    ``killed``. ``memory_limit_mb`` None keeps the limit this process has.
    """
    with tempfile.TemporaryDirectory(prefix="fwbench-") as tmp:
        procs, outs, timelines, tails = [], [], [], []
        try:
            for k, child in enumerate(children):
                folder = Path(tmp, str(k)) if len(children) > 1 else Path(tmp)
                folder.mkdir(exist_ok=True)
                out = folder / "outcome.json"
                procs.append(_start(child, folder, out, memory_limit_mb))
                outs.append(out)
                timelines.append({"child_started": time.time_ns()})
                tails.append(_tee_stderr(procs[-1]))
                if on_start:
                    on_start(procs[-1].pid)
            ends = _wait(procs, timeout_s, grace_s)
            exited = time.time_ns()
        finally:
            for proc in procs:
                _kill(proc)
            for tail in tails:
                tail.thread.join(timeout=5)
            for proc in procs:
                proc.stderr.close()
        return [_outcome(end, proc.returncode, out, tail.lines, timeout_s, memory_limit_mb,
                         {**timeline, "child_exited": exited})
                for end, proc, out, tail, timeline in zip(ends, procs, outs, tails, timelines)]


def _start(child: Child, folder: Path, out: Path, memory_limit_mb: int | None):
    settings_path = folder / "settings.json"
    settings_path.write_text(json.dumps(child.settings))
    cmd = [sys.executable, "-m", "fwbench.measure.worker", child.entry, str(settings_path),
           str(out)]
    # numpy as it comes: the workflow fixes its kernels for the host jobs only
    env = {k: v for k, v in os.environ.items() if k != NUMPY_DISPATCH}
    return subprocess.Popen(
        cmd, env={**env, **child.env, "TMPDIR": str(folder)}, stderr=subprocess.PIPE,
        text=True, start_new_session=True, preexec_fn=lambda: _child_limits(memory_limit_mb))


def _outcome(end: str | None, returncode: int | None, out_path: Path, lines,
             timeout_s: float, memory_limit_mb: int | None, timeline: dict) -> Outcome:
    """How one child ended, from how the wait ended it (``_wait``) and what it wrote."""
    if end == "timeout":
        return Outcome("timeout", f"trial exceeded timeout_s={timeout_s:g} s and was killed",
                       {}, None, timeline)
    if out_path.exists():
        result = read_result(out_path)
        return Outcome(result.status, result.message, result.payload, returncode,
                       {**timeline, **result.timeline_ns})
    if end == "killed":
        return Outcome("killed", "killed after another process of the trial failed", {},
                       returncode, timeline)
    return Outcome("crashed", _crash_message(returncode, memory_limit_mb, lines), {},
                   returncode, timeline)


def _child_limits(memory_limit_mb: int | None) -> None:
    # The child dies with the supervisor, whatever kills it.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if memory_limit_mb:
        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _wait(procs: list[subprocess.Popen], timeout_s: float, grace_s: float) -> list[str | None]:
    """Wait for every child; per child, None when it ended by itself, else why it was killed
    (``timeout``, or ``killed`` at the end of the grace after another one failed).

    Woken by a child's exit itself where Linux offers pid file descriptors (Popen.wait with a
    timeout polls, up to 50 ms late); every POLL_S it checks the deadlines and its own parent.
    """
    parent = os.getppid()
    deadline, grace = time.monotonic() + timeout_s, math.inf
    ends: list[str | None] = [None] * len(procs)
    exited = _pidfds(procs)
    try:
        while any(p.poll() is None for p in procs):
            if exited:
                select.select([fd for p, fd in zip(procs, exited) if p.returncode is None], [],
                              [], POLL_S)
            else:
                time.sleep(POLL_S)
            if os.getppid() != parent:
                raise Interrupted("the workflow that started this trial is gone")
            if grace == math.inf and any(p.poll() not in (None, 0) for p in procs):
                grace = time.monotonic() + grace_s
            now = time.monotonic()
            if now > deadline or now > grace:
                for k, proc in enumerate(procs):
                    if proc.poll() is None:
                        _kill(proc)
                        ends[k] = "timeout" if now > deadline else "killed"
        return ends
    finally:
        for fd in exited:
            os.close(fd)


def _pidfds(procs: list[subprocess.Popen]) -> list[int]:
    """A pid file descriptor per child, readable once it exits; none where Linux has none."""
    fds: list[int] = []
    try:
        for proc in procs:
            fds.append(os.pidfd_open(proc.pid))
    except (AttributeError, OSError):
        for fd in fds:
            os.close(fd)
        return []
    return fds


def _kill(proc: subprocess.Popen) -> None:
    """Kill a child that is still running, with its process group, and reap it."""
    if proc.poll() is None:
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
