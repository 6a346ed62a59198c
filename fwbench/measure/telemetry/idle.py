"""Idle readings before a trial, and the thermal guard that waits for the device to cool."""

from __future__ import annotations

import time
from collections.abc import Callable

from fwbench.measure.cuda_driver import ContextHolder, hold_cuda_contexts
from fwbench.measure.telemetry.collector import Collector
from fwbench.measure.telemetry.gpu import NvmlSpec, counter_update_s
from fwbench.measure.telemetry.rapl import COLUMNS as RAPL_COLUMNS, POWERCAP_ROOT


def measure_idle(duration_s: float = 2.0, *, period_s: float = 0.1,
                 gpu_uuids: list[str] | None = None, nvml: NvmlSpec = None,
                 hold_context: ContextHolder = hold_cuda_contexts, counter_probe_s: float = 1.0,
                 powercap_root: str = POWERCAP_ROOT) -> dict:
    """Power and temperature with nothing running, sampled in this process, per GPU.

    It is the baseline for ``energy_above_idle_j`` (a trial subtracts its own GPUs' idle power
    only) and for ``wait_for_idle_temperature``. A CUDA context is held on every GPU read while
    sampling (``hold_context``), because a trial holds one and a GPU with a context idles
    higher; ``context`` says whether it could be. Then each GPU's energy counter is read back to
    back for ``counter_probe_s`` to measure how often it updates. CPU package and DRAM idle
    power come from RAPL where the kernel offers it. Usage::

        idle = measure_idle(2.0, gpu_uuids=uuids)
        idle["gpus"]["GPU-..."]["power_w"], idle["context"]["held"], idle["cpu_temp_c"]
    """
    rows = []
    with Collector(gpu_uuids=gpu_uuids, nvml=nvml, powercap_root=powercap_root) as collector:
        devices = collector.gpus.devices
        with hold_context([d.uuid for d in devices]) as context:
            t0 = time.perf_counter_ns()
            slot = 0
            while True:
                rows += collector.sample(slot)
                slot += 1
                due = t0 + round(slot * period_s * 1e9)
                if due - t0 > duration_s * 1e9:
                    break
                time.sleep(max(due - time.perf_counter_ns(), 0) / 1e9)
            updates = (counter_update_s(collector.gpus.nvml, {d.uuid: d.handle for d in devices},
                                        counter_probe_s) if devices and counter_probe_s else {})
        report = collector.report()
    host = [r for r in rows if r["device"] == "cpu"]
    gpus = {}
    for info in report["gpus"]:
        mine = [r for r in rows if r.get("gpu_uuid") == info["uuid"]]
        field = ("gpu_power_instant_mw" if info["power_instant"] else "gpu_power_mw")
        power = _mean([r[field] for r in mine if r.get(field) is not None])
        gpus[info["uuid"]] = {
            "power_w": None if power is None else round(power / 1000.0, 3),
            "power_field": field,
            "temp_c": _mean([r["gpu_temp_c"] for r in mine if r.get("gpu_temp_c") is not None]),
            "energy_counter_update_s": updates.get(info["uuid"]),
            "context_held": info["uuid"] in context["held"],
        }
    powers = [g["power_w"] for g in gpus.values()]
    return {
        "t_ns": t0,
        "duration_s": round((rows[-1]["t_ns"] - t0) / 1e9, 3),
        "n_samples": len(host),
        # All GPUs together, for a reader; a trial subtracts only its own GPUs' power_w.
        "power_w": round(sum(powers), 3) if powers and None not in powers else None,
        "gpus": gpus,
        "context": context,
        **_rapl_power(host),
        "cpu_temp_c": _mean([r["cpu_temp_c"] for r in host if r.get("cpu_temp_c") is not None]),
        "cpu_util_pct": _mean([r["cpu_util_pct"] for r in host[1:]
                               if r.get("cpu_util_pct") is not None]),
        "unavailable": {k: v for k, v in report["unavailable"].items()
                        if k != "proc_rss_bytes"},
    }


def _rapl_power(host: list[dict]) -> dict:
    """Mean CPU package and DRAM power over the idle window, from RAPL's counters."""
    out = {}
    for column in RAPL_COLUMNS.values():
        series = [(r["t_ns"], r[column]) for r in host if r.get(column) is not None]
        power = None
        if len(series) >= 2 and series[-1][0] > series[0][0]:
            power = round((series[-1][1] - series[0][1]) / (series[-1][0] - series[0][0]) * 1e6, 3)
        out[column.replace("_energy_mj", "_power_w")] = power
    return out


def wait_for_idle_temperature(within_c: float, timeout_s: float, *, idle: dict | None,
                              gpu_uuids: list[str] | None = None, poll_s: float = 1.0,
                              nvml: NvmlSpec = None,
                              clock: Callable[[], float] = time.monotonic,
                              sleep: Callable[[float], None] = time.sleep) -> dict:
    """Wait, at most ``timeout_s``, until every GPU (or, with no GPU thermometer, the CPU) is
    within ``within_c`` °C of its idle temperature from ``measure_idle``.

    Never raises for lack of a sensor or baseline: the result says what happened. Usage::

        guard = wait_for_idle_temperature(5, 300, idle=idle, gpu_uuids=uuids)
        guard["reached"], guard["waited_s"], guard["start_temp_c"]
    """
    out = {"within_c": within_c, "timeout_s": timeout_s, "sensor": None, "reached": None,
           "waited_s": 0.0, "start_temp_c": None, "end_temp_c": None, "devices": {},
           "reason": None}
    with Collector(gpu_uuids=gpu_uuids, nvml=nvml) as collector:
        baseline, read = _targets(collector, idle)
        if not baseline:
            out["reason"] = _no_target_reason(collector, idle)
            return out
        out["sensor"] = "gpu" if "cpu" not in baseline else "cpu"
        started = clock()
        first = None
        while True:
            now = read()
            first = first or now
            known = {k: v for k, v in now.items() if v is not None}
            if not known:
                out["reason"] = "temperature became unreadable while waiting"
                break
            if all(v <= baseline[k] + within_c for k, v in known.items()):
                out["reached"] = True
                break
            if clock() - started >= timeout_s:
                out["reached"] = False
                out["reason"] = f"still above idle + {within_c:g} °C after {timeout_s:g} s"
                break
            sleep(poll_s)
        out["waited_s"] = round(clock() - started, 3)
    out["devices"] = {k: {"idle_temp_c": baseline[k], "start_temp_c": first.get(k),
                          "end_temp_c": now.get(k)} for k in baseline}
    out["start_temp_c"] = max((v for v in first.values() if v is not None), default=None)
    out["end_temp_c"] = max((v for v in now.values() if v is not None), default=None)
    return out


def _targets(collector: Collector, idle: dict | None):
    """Idle temperature per sensor key, and a function reading those sensors now."""
    if not idle:
        return {}, None
    temps = collector.temperatures()
    idle_gpus = idle.get("gpus") or {}
    gpu = {u: idle_gpus[u]["temp_c"] for u, t in temps["gpu"].items()
           if t is not None and idle_gpus.get(u, {}).get("temp_c") is not None}
    if gpu:
        return gpu, lambda: {u: t for u, t in collector.gpus.temperatures().items() if u in gpu}
    if temps["cpu"] is not None and idle.get("cpu_temp_c") is not None:
        return {"cpu": idle["cpu_temp_c"]}, lambda: {"cpu": collector.host.temperature()}
    return {}, None


def _no_target_reason(collector: Collector, idle: dict | None) -> str:
    if not idle:
        return "no idle baseline to compare with (pass measure_idle()'s result as idle=)"
    unavailable = collector.report()["unavailable"]
    why = "; ".join(f"{k}: {unavailable[k]}" for k in ("gpu", "gpu_temp_c", "cpu_temp_c")
                    if k in unavailable)
    return f"no temperature readable now and at idle ({why or 'no idle temperature recorded'})"


def _mean(values) -> float | None:
    return round(sum(values) / len(values), 3) if values else None
