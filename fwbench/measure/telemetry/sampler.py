"""The sampler process and the context manager that runs it around a trial.

The parent starts ``python -m fwbench.measure.telemetry.process`` (a fresh interpreter: never a fork
of a process that may have initialised CUDA, and it imports nothing of the parent's ``__main__``),
sends it its settings on stdin, and waits for a ready line on stdout. The sampler lowers its
priority, samples on a fixed schedule and writes rows to a temporary CSV; on ``stop`` it takes one
more scheduled sample, reports, and the parent renames the CSV into place and writes the sidecar
JSON. Protocol: one JSON object per line, commands on stdin, events on stdout.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fwbench.errors import FwbenchError
from fwbench.files import write_atomic
from fwbench.measure.telemetry.columns import SCHEMA_VERSION, describe
from fwbench.measure.telemetry.gpu import NvmlSpec
from fwbench.measure.telemetry.rapl import POWERCAP_ROOT

SAMPLING_PERIOD_S = 0.1
SAMPLER_NICE = 10
CLOCK = ("time.perf_counter_ns(): CLOCK_MONOTONIC on Linux, shared by every process on the "
         "machine, so t_ns lines up with the harness's markers_ns")


class TelemetryError(FwbenchError):
    """The sampler process failed (died, hung, or could not start)."""


def sidecar_path(out_csv: str | os.PathLike) -> Path:
    """``trial-<k>.telemetry.csv`` → ``trial-<k>.telemetry.json``."""
    return Path(out_csv).with_suffix(".json")


class Sampler:
    """Samples host and GPU telemetry in a separate, lower-priority process.

    Args:
        out_csv: the side file, ``trial-<k>.telemetry.csv``; its sidecar ``.json`` lands beside it.
        period_s: sampling period; samples are taken at ``t0 + slot * period_s``.
        pid: process whose memory is read (it and its children); may be set later by ``watch``.
        gpu_uuids: GPUs to read, by NVML UUID (``GPU-...``); None reads all, [] none.
        nvml: a ``"module:factory"`` returning a pynvml-like module (tests); None uses pynvml.
        powercap_root: where RAPL's counters are (tests pass a tmp tree).

    Usage::

        with Sampler("trial-0.telemetry.csv", period_s=0.1, gpu_uuids=uuids) as s:
            child = start_trial()
            s.watch(child.pid)
            ...                      # s.check() raises if the sampler died meanwhile
        s.meta["unavailable"]        # {"gpu": "NVML library ... not found", ...}

    Leaving the block normally stops the sampler and writes both files atomically; it raises
    TelemetryError if the sampler died. Leaving it by an exception kills the sampler and writes
    nothing.
    """

    def __init__(self, out_csv: str | os.PathLike, *, period_s: float = SAMPLING_PERIOD_S,
                 pid: int | None = None, gpu_uuids: list[str] | None = None,
                 nice: int = SAMPLER_NICE, nvml: NvmlSpec = None,
                 powercap_root: str | os.PathLike = POWERCAP_ROOT,
                 ready_timeout_s: float = 60.0, stop_timeout_s: float = 30.0):
        if not period_s > 0:
            raise ValueError(f"period_s must be > 0 seconds, got {period_s!r}")
        if nvml is not None and not isinstance(nvml, str):
            raise ValueError("nvml must be None or a 'module:factory' string the sampler "
                             f"process can import, got {nvml!r}")
        self.out_csv = Path(out_csv)
        self.config = {"period_s": period_s, "pid": pid, "gpu_uuids": gpu_uuids,
                       "nice": nice, "nvml": nvml, "powercap_root": str(powercap_root)}
        self.ready_timeout_s, self.stop_timeout_s = ready_timeout_s, stop_timeout_s
        self.ready: dict | None = None
        self.meta: dict | None = None
        self._proc: subprocess.Popen | None = None
        self._lines: _LineReader | None = None
        self._tmp: Path | None = None
        self._error: str | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> dict:
        """Start the sampler and wait until it has taken its first sample; returns its ready
        event (``t0_ns``, devices, sources unavailable)."""
        self.out_csv.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.out_csv.parent, prefix=f".{self.out_csv.name}.",
                                   suffix=".tmp")
        os.close(fd)
        self._tmp = Path(tmp)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [p for p in sys.path if p] + [os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "fwbench.measure.telemetry.process"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env=env)
        self._lines = _LineReader(self._proc.stdout.fileno())
        try:
            self._send({**self.config, "tmp_csv": str(self._tmp)})
            self.ready = self._expect("ready", self.ready_timeout_s)
        except BaseException:
            self.abort()
            raise
        return self.ready

    def watch(self, pid: int | None) -> None:
        """Read this process's memory (and its children's) from the next sample on."""
        self._send({"cmd": "watch", "pid": pid})

    def check(self) -> None:
        """Raise TelemetryError if the sampler is no longer running."""
        if self._proc is None or self._proc.poll() is not None:
            raise TelemetryError(self._death_message())

    def stop(self) -> dict:
        """Take a last scheduled sample, stop, and write the CSV and its sidecar atomically.
        Returns the sidecar's content."""
        try:
            self.check()
            self._send({"cmd": "stop"})
            done = self._expect("done", self.stop_timeout_s + self.config["period_s"])
            self._proc.wait(timeout=self.stop_timeout_s)
        except subprocess.TimeoutExpired as exc:
            self.abort()
            raise TelemetryError(f"telemetry sampler (pid {self._proc.pid}) reported but did "
                                 f"not exit within {self.stop_timeout_s:g} s; "
                                 "it was killed") from exc
        except BaseException:
            self.abort()
            raise
        os.chmod(self._tmp, 0o644)
        self.meta = self._sidecar(done)
        write_atomic(sidecar_path(self.out_csv), json.dumps(self.meta, indent=1) + "\n")
        os.replace(self._tmp, self.out_csv)
        self._tmp = None
        self._close_pipes()
        return self.meta

    def abort(self) -> None:
        """Kill the sampler and remove its temporary file; nothing is written."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        if self._proc is not None:
            self._proc.wait()
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None
        self._close_pipes()

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.stop()
        else:
            self.abort()

    # --- helpers -----------------------------------------------------------------------------

    def _sidecar(self, done: dict) -> dict:
        report = done["report"]
        return {
            "schema_version": SCHEMA_VERSION,
            "csv": self.out_csv.name,
            "clock": CLOCK,
            "period_s": self.config["period_s"],
            "sampler": {"pid": self._proc.pid, "nice": self.config["nice"],
                        **done["schedule"]},
            "gpus": report["gpus"],
            "cpu": report["cpu"],
            "unavailable": report["unavailable"],
            "errors": report["errors"],
            "columns": describe(report["cpu"]["cores"]),
        }

    def _send(self, message: dict) -> None:
        try:
            self._proc.stdin.write((json.dumps(message) + "\n").encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise TelemetryError(self._death_message()) from None

    def _expect(self, event: str, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            message = self._lines.readline(deadline - time.monotonic())
            if message is None:
                if self._proc.poll() is not None:
                    raise TelemetryError(self._death_message())
                if time.monotonic() >= deadline:
                    raise TelemetryError(
                        f"telemetry sampler (pid {self._proc.pid}) sent no {event!r} within "
                        f"{timeout_s:g} s; it was killed")
                if self._lines.eof:
                    time.sleep(0.01)  # it closed its output and is exiting
                continue
            if message.get("event") == "error":
                self._error = message["message"]
                self._proc.wait(timeout=10)
                raise TelemetryError(self._death_message())
            if message.get("event") == event:
                return message

    def _death_message(self) -> str:
        if self._proc is None:
            return "telemetry sampler was never started (call start() or use `with`)"
        code = self._proc.poll()
        how = ("is still running" if code is None else
               f"was killed by {signal.Signals(-code).name}" if code < 0 else
               f"exited with code {code}")
        message = f"telemetry sampler (pid {self._proc.pid}) {how} before it was stopped"
        if self._error:
            return f"{message}: {self._error}"
        return f"{message}; its stderr is in this log"

    def _close_pipes(self) -> None:
        if self._proc is not None:
            for pipe in (self._proc.stdin, self._proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass


class _LineReader:
    """JSON lines from a pipe, with a timeout."""

    def __init__(self, fd: int):
        self.fd, self.buffer, self.eof = fd, b"", False

    def readline(self, timeout_s: float) -> dict | None:
        """The next message; None on timeout or at end of file."""
        deadline = time.monotonic() + max(timeout_s, 0.0)
        while b"\n" not in self.buffer:
            if self.eof:
                return None
            ready, _, _ = select.select([self.fd], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.eof = True
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)
