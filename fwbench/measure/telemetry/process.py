"""The sampler process: ``python -m fwbench.measure.telemetry.process``, started by ``Sampler``.

Reads its settings as the first line on stdin, lowers its priority, samples on a fixed schedule
into the temporary CSV the parent named, and answers on stdout: ``ready`` after the first
sample, ``done`` (with the schedule and the sources report) after ``stop``, or ``error``.
If stdin closes (the parent is gone) it removes its file and exits.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

from fwbench.measure.telemetry.collector import Collector
from fwbench.measure.telemetry.columns import header
from fwbench.measure.telemetry.sampler import _LineReader


def _main() -> int:
    # Ctrl-C reaches the whole process group; the parent decides when sampling ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    events = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # a stray print must not corrupt the protocol
    commands = _LineReader(0)
    config = commands.readline(60.0)
    if config is None:
        return 2
    try:
        return _run(config, commands, events)
    except Exception as exc:
        traceback.print_exc()
        events.write(json.dumps({"event": "error",
                                 "message": f"{type(exc).__name__}: {exc}"}) + "\n")
        Path(config["tmp_csv"]).unlink(missing_ok=True)
        return 1


def _run(config: dict, commands: _LineReader, events) -> int:
    if config["nice"]:
        os.nice(config["nice"])
    period_ns = round(config["period_s"] * 1e9)
    collector = Collector(pid=config["pid"], gpu_uuids=config["gpu_uuids"],
                          nvml=config["nvml"], powercap_root=config["powercap_root"]).open()
    with open(config["tmp_csv"], "w", newline="") as f:
        names = header(collector.host.n_cores)
        writer = csv.DictWriter(f, fieldnames=names, restval="", extrasaction="raise")
        writer.writeheader()
        t0 = time.perf_counter_ns()
        slot, samples, missed, late_max, busy, stopping = 0, 0, 0, 0, 0, False
        while True:
            began = time.perf_counter_ns()
            late_max = max(late_max, began - (t0 + slot * period_ns))
            writer.writerows(collector.sample(slot))
            samples += 1
            busy += time.perf_counter_ns() - began
            if samples == 1:
                events.write(json.dumps({"event": "ready", "t0_ns": t0, "pid": os.getpid(),
                                         "report": collector.report()}) + "\n")
            if stopping:
                break
            now = time.perf_counter_ns()
            next_slot = max(slot + 1, (now - t0) // period_ns + 1)
            missed += next_slot - slot - 1
            slot = next_slot
            while (now := time.perf_counter_ns()) < t0 + slot * period_ns:
                message = commands.readline((t0 + slot * period_ns - now) / 1e9)
                if message is None and commands.eof:
                    # The parent is gone: nobody will rename the file.
                    Path(config["tmp_csv"]).unlink(missing_ok=True)
                    return 3
                if message and message.get("cmd") == "watch":
                    collector.watch(message["pid"])
                elif message and message.get("cmd") == "stop":
                    stopping = True
        f.flush()
        os.fsync(f.fileno())
    collector.close()
    # busy_ns: time spent taking samples; cpu_time_s: the process's CPU time, start-up included.
    schedule = {"t0_ns": t0, "stopped_ns": time.perf_counter_ns(), "samples": samples,
                "missed_slots": missed, "max_late_ns": late_max, "busy_ns": busy,
                "cpu_time_s": round(time.process_time(), 4)}
    events.write(json.dumps({"event": "done", "schedule": schedule,
                             "report": collector.report()}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
