"""How busy the processors outside a trial's own were while it was timed, from its telemetry: the
other work on the machine, which a trial's own numbers cannot show (the shipping gate's quiet
check, fwbench.analysis.gate, reads it from the trials table).

The measurement itself works beside the trial: the sampler, the supervisor, the workflow that
started them. On a 2-core machine that alone kept the other processor 1-12 % busy. Where the
side file records that work (``apparatus_cpu_pct``, telemetry schema 2), it is left out, so
what remains is work that is not the measurement's."""

from __future__ import annotations

import csv
import os
import re

# A side file's per-processor column (docs/telemetry.md): cpu<i>_util_pct.
PER_PROCESSOR = re.compile(r"cpu(\d+)_util_pct")
# Why a trial has no outside share: its threads took every processor, so nothing ran beside it.
NO_OUTSIDE = "no processor lies outside the trial's"
OTHER_WORK = "whole machine, the measurement's own processes left out"


def outside_busy(samples: str | os.PathLike | None, markers_ns: dict, *, threads: int,
                 processors: int | None, own_cpus=None,
                 util_mean: float | None = None) -> tuple[float | None, str]:
    """The mean busy share (%) of the processors outside the trial's own from its ``measure``
    marker to its ``end`` (every timed step), and how it was read.

    Where the side file records the measurement's own work: the whole machine's busy time less
    it, over the processors outside the trial's ``threads``; the other work, wherever it ran.
    Otherwise per processor where the side file has them: the processors the trial was confined
    to (``own_cpus``, when it names all ``threads`` of them) are left out; otherwise, per sample,
    its ``threads`` busiest ones, so the trial's threads are never counted as other work.
    Without them, from the whole machine's share (each sample's, else the trial's
    ``util_mean``) over ``processors``, the trial's own taken as fully busy: a lower bound.
    None, with the reason, when nothing says it."""
    if processors is not None and processors <= threads:
        return None, NO_OUTSIDE
    rows = _timed_rows(samples, markers_ns) if samples else []
    other = [float(r["cpu_util_pct"]) - float(r["apparatus_cpu_pct"]) for r in rows
             if r.get("cpu_util_pct") and r.get("apparatus_cpu_pct")]
    if other and processors is not None:
        # The window's mean before the floor at 0: one sample's 10 ms tick can fall either way.
        mean = sum(other) / len(other)
        return max(0.0, mean * processors / (processors - threads)), OTHER_WORK
    per_processor = [_outside(row, threads, own_cpus) for row in rows]
    per_processor = [v for v in per_processor if v is not None]
    if per_processor:
        how = ("per processor, the trial's own as recorded" if _named(own_cpus, threads) else
               "per processor, the trial's own taken as the busiest")
        return sum(per_processor) / len(per_processor), how
    machine = [float(r["cpu_util_pct"]) for r in rows if r.get("cpu_util_pct")]
    if not machine and util_mean is not None:
        machine = [util_mean]
    if not machine or processors is None:
        return None, "the telemetry recorded no CPU utilization"
    outside = [max(0.0, (u * processors / 100 - threads) / (processors - threads) * 100)
               for u in machine]
    return sum(outside) / len(outside), "whole machine, the trial's own taken as fully busy"


def _timed_rows(samples, markers_ns: dict) -> list[dict]:
    start, end = markers_ns.get("measure"), markers_ns.get("end")
    if start is None or end is None or not os.path.exists(samples):
        return []
    with open(samples, newline="") as f:
        return [row for row in csv.DictReader(f)
                if row["device"] == "cpu" and start <= int(row["t_ns"]) < end]


def _outside(row: dict, threads: int, own_cpus) -> float | None:
    """One sample's mean busy share of the processors outside the trial's own."""
    busy = {int(m.group(1)): float(value) for key, value in row.items()
            if value and (m := PER_PROCESSOR.fullmatch(key))}
    if len(busy) <= threads:
        return None
    if _named(own_cpus, threads) and set(own_cpus) <= busy.keys():
        others = [v for cpu, v in busy.items() if cpu not in own_cpus]
    else:
        others = sorted(busy.values())[:-threads]
    return sum(others) / len(others)


def _named(own_cpus, threads: int) -> bool:
    return own_cpus is not None and len(own_cpus) == threads
