"""Host readings through psutil: CPU utilization per core and in total, steal and iowait, the
measurement's own share of it, CPU temperature where the machine exposes a sensor, the watched
process's memory, and CPU package and DRAM energy from RAPL where the kernel offers it
(``rapl``)."""

from __future__ import annotations

import os
import time

import psutil

from fwbench.measure.telemetry.columns import core_column
from fwbench.measure.telemetry.rapl import POWERCAP_ROOT, RaplReader

# hwmon chips that measure the CPU package, in order of preference; others (acpitz, nvme, ...)
# are not the CPU and are never used as its temperature.
CPU_SENSOR_CHIPS = ("coretemp", "k10temp", "zenpower", "cpu_thermal", "cpu-thermal",
                    "soc_thermal", "x86_pkg_temp")
_BUSY = ("user", "nice", "system", "irq", "softirq")
# guest time is already counted in user and nice on Linux.
_TOTAL = _BUSY + ("idle", "iowait", "steal")


def find_cpu_sensor(temperatures: dict) -> tuple[str | None, str | None]:
    """``(chip, None)`` for the CPU sensor to read, or ``(None, why there is none)``."""
    for chip in CPU_SENSOR_CHIPS:
        if temperatures.get(chip):
            return chip, None
    if not temperatures:
        return None, ("no temperature sensors: psutil.sensors_temperatures() is empty "
                      "(usual in virtual machines and containers)")
    return None, ("no CPU temperature sensor among psutil.sensors_temperatures(): "
                  f"{', '.join(sorted(temperatures))}")


def _read_sensors() -> dict:
    read = getattr(psutil, "sensors_temperatures", None)
    return read() if read else {}


class HostReader:
    """Reads one host row per sample. Utilization is over the time since the previous read.

    Usage::

        host = HostReader(pid=os.getpid())
        host.open()
        row = host.read()   # {"cpu_util_pct": ..., "cpu0_util_pct": ..., "proc_rss_bytes": ...}
    """

    def __init__(self, pid: int | None = None, *, children_refresh_s: float = 1.0,
                 powercap_root: str | os.PathLike = POWERCAP_ROOT):
        self.pid = pid
        self.rapl = RaplReader(powercap_root)
        self.children_refresh_s = children_refresh_s
        self.n_cores = psutil.cpu_count() or 1
        self.unavailable: dict[str, str] = {}
        self.notes: dict[str, object] = {}
        self.sensor: str | None = None
        self._times = None
        self._process = None
        self._children: list[psutil.Process] = []
        self._children_at = 0.0
        self._lineage: list[psutil.Process] = []
        self._own_cpu_s: dict[int, float] = {}

    def open(self) -> None:
        self._times = psutil.cpu_times(percpu=True)
        # The processes that started this one (the trial's supervisor, the workflow above it),
        # never the machine's init: their work is the measurement's own, not other work.
        self._lineage = [psutil.Process(), *(p for p in psutil.Process().parents() if p.pid > 1)]
        self._apparatus_cpu_s()
        if not hasattr(psutil, "sensors_temperatures"):
            self.unavailable["cpu_temp_c"] = "psutil cannot read temperatures on this platform"
        else:
            self.sensor, reason = find_cpu_sensor(_read_sensors())
            if reason:
                self.unavailable["cpu_temp_c"] = reason
        self.rapl.open()
        self.unavailable.update(self.rapl.unavailable)
        self.watch(self.pid)

    def watch(self, pid: int | None) -> None:
        """Watch ``pid`` (and its children) from now on; None watches nothing."""
        self.pid, self._process, self._children, self._children_at = pid, None, [], 0.0
        if pid is None:
            self.unavailable["proc_rss_bytes"] = "no process watched"
            return
        self.unavailable.pop("proc_rss_bytes", None)
        try:
            self._process = psutil.Process(pid)
        except psutil.NoSuchProcess:
            self.unavailable["proc_rss_bytes"] = f"watched process {pid} did not exist"

    def read(self) -> dict:
        row: dict = {"t_ns": time.perf_counter_ns(), "device": "cpu"}
        row.update(self._cpu())
        row["cpu_temp_c"] = self.temperature()
        row["host_mem_used_bytes"] = psutil.virtual_memory().used
        row.update(self.rapl.read())
        row.update(self._process_memory(row["t_ns"]))
        return row

    def _cpu(self) -> dict:
        now = psutil.cpu_times(percpu=True)
        before, self._times = self._times, now
        out = {}
        total_delta = {name: 0.0 for name in _TOTAL}
        for i, (a, b) in enumerate(zip(before, now)):
            delta = {name: max(getattr(b, name, 0.0) - getattr(a, name, 0.0), 0.0)
                     for name in _TOTAL}
            for name, value in delta.items():
                total_delta[name] += value
            out[core_column(i)] = _share(delta, _BUSY)
        out["cpu_util_pct"] = _share(total_delta, _BUSY)
        elapsed = sum(total_delta.values())
        own = self._apparatus_cpu_s()
        out["apparatus_cpu_pct"] = round(100.0 * own / elapsed, 2) if elapsed > 0 else None
        out["cpu_steal_pct"] = _share(total_delta, ("steal",))
        out["cpu_iowait_pct"] = _share(total_delta, ("iowait",))
        return out

    def _apparatus_cpu_s(self) -> float:
        """CPU seconds the measurement's own processes ran since the previous call: this
        sampler, the processes that started it, and the watched process with its children. A
        process seen for the first time counts from then on; one that ended is dropped."""
        processes = {p.pid: p for p in (*self._lineage, self._process, *self._children) if p}
        now = {}
        for process in processes.values():
            try:
                times = process.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            now[process.pid] = times.user + times.system
        spent = sum(max(0.0, cpu_s - self._own_cpu_s[pid]) for pid, cpu_s in now.items()
                    if pid in self._own_cpu_s)
        self._own_cpu_s = now
        return spent

    def temperature(self) -> float | None:
        """Hottest reading of the CPU sensor chip, or None."""
        if self.sensor is None:
            return None
        entries = _read_sensors().get(self.sensor) or []
        values = [e.current for e in entries if e.current is not None]
        return max(values) if values else None

    def _process_memory(self, t_ns: int) -> dict:
        if self._process is None:
            return {}
        now = time.monotonic()
        try:
            if now - self._children_at >= self.children_refresh_s:
                # children() scans every process on the machine: not at every sample.
                self._children = [c for c in self._process.children(recursive=True)
                                  if c.pid != os.getpid()]  # not the sampler itself
                self._children_at = now
            rss, count = self._process.memory_info().rss, 1
        except psutil.NoSuchProcess:
            self.notes.setdefault("watched_process_exited_t_ns", t_ns)
            return {}
        except psutil.AccessDenied as exc:
            self.notes.setdefault("watched_process_access_denied", str(exc))
            return {}
        for child in self._children:
            try:
                rss += child.memory_info().rss
                count += 1
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return {"proc_rss_bytes": rss, "proc_count": count}

    def report(self) -> dict:
        return {"cpu": {"cores": self.n_cores, "temp_sensor": self.sensor, "pid": self.pid,
                        "rapl": self.rapl.report(), **self.notes},
                "unavailable": dict(self.unavailable)}


def _share(delta: dict, names) -> float | None:
    total = sum(delta[n] for n in _TOTAL)
    if total <= 0:
        return None
    return round(100.0 * sum(delta[n] for n in names) / total, 2)
