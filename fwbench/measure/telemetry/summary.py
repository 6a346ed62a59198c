"""Per-phase summaries of a telemetry side file, for the trial result's "telemetry" field.

Phases are the spans between the harness's markers (``markers_ns``, same clock as ``t_ns``):
cold_start → warmup → measure → end. GPU energy comes, in order of preference, from the NVML
energy counter read by the harness at the markers, from the counter as sampled, or from
integrating power over time; ``energy_source`` says which. CPU energy comes from RAPL's counters
as sampled. Either is reported only over a window of at least ``ENERGY_WINDOW_UPDATES`` updates
of the reading it rests on (a reading is stale by up to one update at each end, so the error is
at most about one update's energy: 10 % at 10 updates); a shorter window is flagged with the
reason. Energy above idle subtracts the idle power of the trial's own GPUs only.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections import defaultdict
from dataclasses import dataclass

from fwbench.measure.telemetry.columns import SCHEMA_VERSION, decode_clock_event_reasons
from fwbench.measure.telemetry.rapl import COLUMNS as RAPL_COLUMNS, UPDATE_S as RAPL_UPDATE_S
from fwbench.measure.telemetry.sampler import sidecar_path

ENERGY_WINDOW_UPDATES = 10
# NVML's energy counter updates on a period of its own; measure_idle measures it per GPU. When
# a trial's idle baseline has no measurement, this is assumed: the 100 ms update of the power
# readings that Yang et al. (SC24, "Accurate and convenient energy measurements for GPUs")
# measured on A100 and H100.
ASSUMED_COUNTER_UPDATE_S = 0.1
# nvmlDeviceGetPowerUsage on Ampere and newer: a 1-second moving average.
AVERAGED_POWER_S = 1.0

PHASES = (("cold_start", "cold_start", "warmup"),
          ("warmup", "warmup", "measure"),
          ("measure", "measure", "blocks"),
          ("blocks", "blocks", "end"))
# Markers of harnesses without blocks (the experiments' drivers): measure runs to the end.
_NO_BLOCKS = (("measure", "measure", "end"),)
_TEXT = {"device", "gpu_uuid"}


def load_samples(source) -> list[dict]:
    """Rows of a side file (path), a pandas DataFrame, or a list of dicts, with empty cells
    as None and numbers as int or float."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, newline="") as f:
            return [{k: _number(k, v) for k, v in row.items()} for row in csv.DictReader(f)]
    if hasattr(source, "to_dict"):
        source = source.to_dict("records")
    return [{k: _number(k, v) for k, v in row.items()} for row in source]


def _number(key, value):
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return None
    if key in _TEXT or not isinstance(value, str):
        return value
    try:
        return int(value)
    except ValueError:
        return float(value)


@dataclass(frozen=True)
class _Series:
    """One trial's samples, split and prepared once for every phase."""
    host: list
    gpu: list
    uuids: list
    power: dict
    power_field: str | None
    period_s: float | None
    update_s: float | None
    idle_w: dict | None
    idle: dict | None
    rapl: list


def _phase(series: _Series, markers_ns: dict, start_key: str, end_key: str, energy_readings,
           batch_size, count) -> tuple[dict, str | None, str | None]:
    """One phase's summary between two markers, with its GPU and CPU energy flags."""
    start, end = markers_ns[start_key], markers_ns[end_key]
    phase = {"duration_s": (end - start) / 1e9,
             "n_samples": sum(start <= r["t_ns"] < end for r in series.host)}
    flag = cpu_flag = None
    if series.uuids:
        phase.update(_gpu_phase(series.gpu, series.uuids, series.power, series.power_field,
                                start, end))
        phase.update(_energy(series.gpu, series.uuids, series.power, energy_readings, start_key,
                             end_key, start, end))
        resolution = _resolution_s(phase["energy_source"], series.update_s, series.period_s,
                                   series.power_field)
        flag = _short_window(phase, resolution)
        if flag:
            phase["energy_j"] = None
        phase.update(_per_sample(phase, batch_size, count, series.idle_w))
    phase.update(_cpu_phase(series.host, start, end))
    if series.rapl:
        cpu, cpu_flag = _cpu_energy(series.host, series.rapl, start, end, phase["duration_s"],
                                    series.period_s, series.idle)
        phase.update(cpu)
    return phase, flag, cpu_flag


def summarize_phases(samples, markers_ns: dict[str, int],
                     energy_readings: dict[str, dict[str, int | None]] | None = None,
                     batch_size: int | None = None, iterations: int | None = None, *,
                     warmup_iterations: int | None = None, idle: dict | None = None,
                     gpu_uuids: list[str] | None = None, meta: dict | None = None) -> dict:
    """Power, energy, utilization and temperature of each phase of one trial.

    Args:
        samples: the side file's path, a DataFrame of it, or its rows.
        markers_ns: the harness's markers (cold_start, warmup, measure, end).
        energy_readings: ``{marker: read_energy_mj(uuids)}`` taken by the harness at markers.
        batch_size, iterations: for energy per sample of the measure phase (``iterations``
            measured steps) and, with ``warmup_iterations``, of the warm-up.
        idle: ``measure_idle()``'s result, taken before the trial.
        gpu_uuids: GPUs to summarize (default: every GPU in the file).
        meta: the sidecar; read from beside ``samples`` when that is a path.

    Usage::

        summary = summarize_phases("trial-0.telemetry.csv", result["markers_ns"], energy,
                                   batch_size=32, iterations=100, idle=idle)
        summary["phases"]["measure"]["energy_j"], summary["phases"]["measure"]["energy_source"]
    """
    if meta is None and isinstance(samples, (str, os.PathLike)):
        side = sidecar_path(samples)
        meta = json.loads(side.read_text()) if side.exists() else None
    rows = load_samples(samples)
    host = [r for r in rows if r["device"] == "cpu"]
    gpu = [r for r in rows if r["device"] == "gpu"
           and (gpu_uuids is None or r["gpu_uuid"] in gpu_uuids)]
    uuids = sorted({r["gpu_uuid"] for r in gpu})
    power_field = _power_field(gpu)
    period_s = meta.get("period_s") if meta else _median_step_s(host)
    update_s, update_source = _counter_update_s(idle, uuids)
    idle_w, idle_note = _idle_gpu_power(idle, uuids)
    series = _Series(host, gpu, uuids, _power_series(gpu, uuids, power_field), power_field,
                     period_s, update_s, idle_w, idle,
                     [c for c in RAPL_COLUMNS.values() if any(r.get(c) is not None for r in host)])
    counts = {"cold_start": 1, "warmup": warmup_iterations, "measure": iterations}
    phases, flags, cpu_flags = {}, {}, {}
    phase_marks = PHASES if "blocks" in markers_ns else PHASES[:2] + _NO_BLOCKS
    for name, start_key, end_key in phase_marks:
        if start_key not in markers_ns or end_key not in markers_ns:
            continue
        phase, flag, cpu_flag = _phase(series, markers_ns, start_key, end_key, energy_readings,
                                       batch_size, counts.get(name))
        if flag:
            flags[name] = flag
        if cpu_flag:
            cpu_flags[name] = cpu_flag
        phases[name] = _rounded(phase)
    rapl = series.rapl
    out = {
        "schema_version": SCHEMA_VERSION,
        "period_s": period_s,
        "gpus": uuids,
        "power_field": power_field if uuids else None,
        "unavailable": meta.get("unavailable", {}) if meta else {},
        "idle": idle,
        "phases": phases,
    }
    if uuids:
        out.update({
            "energy_window_updates": ENERGY_WINDOW_UPDATES,
            "energy_counter_update_s": update_s,
            "energy_counter_update_source": update_source,
            "energy_flags": flags,
            "idle_gpu_power_w": idle_w,
            "idle_note": idle_note,
            "idle_context_held": ((idle or {}).get("context") or {}).get("held"),
        })
    if rapl:
        out["cpu_energy_flags"] = cpu_flags
    return out


def _median_step_s(host) -> float | None:
    """The sampling period, from the host rows, when no sidecar gives it."""
    steps = sorted(b["t_ns"] - a["t_ns"] for a, b in zip(host, host[1:]))
    return steps[len(steps) // 2] / 1e9 if steps else None


def _counter_update_s(idle, uuids) -> tuple[float, str]:
    """The slowest update period of the trial GPUs' energy counters, and where it comes from."""
    gpus = (idle or {}).get("gpus") or {}
    measured = [gpus.get(u, {}).get("energy_counter_update_s") for u in uuids]
    if measured and None not in measured:
        return max(measured), "measured at idle (measure_idle)"
    return ASSUMED_COUNTER_UPDATE_S, (
        "assumed: the idle baseline measured no update period for "
        + ", ".join(u for u, m in zip(uuids, measured) if m is None))


def _idle_gpu_power(idle, uuids) -> tuple[float | None, str | None]:
    """Idle power of the trial's own GPUs (not every GPU of the machine), or why there is none."""
    if not idle:
        return None, "no idle baseline"
    gpus = idle.get("gpus") or {}
    missing = [u for u in uuids if (gpus.get(u) or {}).get("power_w") is None]
    if missing:
        return None, f"the idle baseline has no power for {', '.join(missing)}"
    return sum(gpus[u]["power_w"] for u in uuids), None


def _resolution_s(source, update_s, period_s, power_field) -> float | None:
    """How finely the energy reading behind ``source`` resolves time."""
    period_s = period_s or 0.0
    if source == "counter_at_markers":
        return update_s
    if source == "counter_sampled":
        return max(update_s, period_s)
    if source == "integrated_power":
        return max(period_s, AVERAGED_POWER_S if power_field == "gpu_power_mw" else 0.0)
    return None


def _short_window(phase, resolution) -> str | None:
    if phase.get("energy_j") is None or resolution is None:
        return None
    need = ENERGY_WINDOW_UPDATES * resolution
    if phase["duration_s"] >= need:
        return None
    return (f"{phase['duration_s']:.3f} s is shorter than {ENERGY_WINDOW_UPDATES} updates of "
            f"{phase['energy_source']} ({resolution:g} s each, {need:g} s): energy not reported")


def _cpu_energy(host, columns, start, end, duration_s, period_s, idle) -> tuple[dict, str | None]:
    """RAPL package and DRAM energy of a phase from the sampled counters, above idle too."""
    out, flag = {"cpu_energy_source": "rapl_sampled"}, None
    need = ENERGY_WINDOW_UPDATES * max(RAPL_UPDATE_S, period_s or 0.0)
    if duration_s < need:
        flag = (f"{duration_s:.3f} s is shorter than {ENERGY_WINDOW_UPDATES} samples of the RAPL "
                f"counters ({need:g} s): CPU energy not reported")
    for column in columns:
        domain = column.removeprefix("cpu_").removesuffix("_energy_mj")
        series = [(r["t_ns"], r[column]) for r in host if r.get(column) is not None]
        e0, e1 = _interpolate(series, start), _interpolate(series, end)
        joules = None if flag or e0 is None or e1 is None else (e1 - e0) / 1000.0
        idle_w = (idle or {}).get(f"cpu_{domain}_power_w")
        out[f"cpu_{domain}_energy_j"] = joules
        out[f"cpu_{domain}_power_mean_w"] = None if joules is None else joules / duration_s
        out[f"cpu_{domain}_energy_above_idle_j"] = (
            None if joules is None or idle_w is None else joules - idle_w * duration_s)
    return out, flag


def _power_field(gpu: list[dict]) -> str | None:
    # The instant field where every row has it; the plain reading (a 1 s average on Ampere
    # and newer) otherwise. Never a mix.
    if gpu and all(r.get("gpu_power_instant_mw") is not None for r in gpu):
        return "gpu_power_instant_mw"
    if any(r.get("gpu_power_mw") is not None for r in gpu):
        return "gpu_power_mw"
    return None


def _power_series(gpu, uuids, field) -> list[tuple[int, float]]:
    """(t_ns, total W over the GPUs) per sample slot where every GPU has a reading."""
    if field is None:
        return []
    by_slot = defaultdict(dict)
    for r in gpu:
        if r.get(field) is not None:
            by_slot[r["slot"]][r["gpu_uuid"]] = r
    series = []
    for slot in sorted(by_slot):
        got = by_slot[slot]
        if len(got) == len(uuids):
            t = sum(r["t_ns"] for r in got.values()) // len(got)
            series.append((t, sum(r[field] for r in got.values()) / 1000.0))
    return series


def _gpu_phase(gpu, uuids, power, field, start, end) -> dict:
    inside = [r for r in gpu if start <= r["t_ns"] < end]
    watts = [w for t, w in power if start <= t < end]
    reasons = set()
    for r in inside:
        if r.get("gpu_clocks_event_reasons") is not None:
            reasons.update(decode_clock_event_reasons(int(r["gpu_clocks_event_reasons"])))
    return {
        "power_mean_w": _mean(watts),
        "power_max_w": max(watts, default=None),
        "gpu_util_mean_pct": _mean(_values(inside, "gpu_util_pct")),
        "gpu_mem_util_mean_pct": _mean(_values(inside, "gpu_mem_util_pct")),
        "gpu_sm_active_mean_pct": _mean(_values(inside, "gpu_sm_active_pct")),
        "gpu_sm_occupancy_mean_pct": _mean(_values(inside, "gpu_sm_occupancy_pct")),
        "gpu_sm_clock_mean_mhz": _mean(_values(inside, "gpu_sm_clock_mhz")),
        "gpu_mem_used_max_bytes": max(_values(inside, "gpu_mem_used_bytes"), default=None),
        "gpu_temp_start_c": _start_value(gpu, "gpu_temp_c", start, end, uuids),
        "gpu_temp_max_c": max(_values(inside, "gpu_temp_c"), default=None),
        "clock_event_reasons": sorted(reasons),
    }


def _energy(gpu, uuids, power, readings, start_key, end_key, start, end) -> dict:
    if readings and start_key in readings and end_key in readings:
        a, b = readings[start_key], readings[end_key]
        if all(a.get(u) is not None and b.get(u) is not None for u in uuids):
            return {"energy_j": sum(b[u] - a[u] for u in uuids) / 1000.0,
                    "energy_source": "counter_at_markers"}
    total = 0.0
    for uuid in uuids:
        series = [(r["t_ns"], r["gpu_energy_mj"]) for r in gpu
                  if r["gpu_uuid"] == uuid and r.get("gpu_energy_mj") is not None]
        e0, e1 = _interpolate(series, start), _interpolate(series, end)
        if e0 is None or e1 is None:
            break
        total += (e1 - e0) / 1000.0
    else:
        return {"energy_j": total, "energy_source": "counter_sampled"}
    joules = _integrate(power, start, end)
    if joules is not None:
        return {"energy_j": joules, "energy_source": "integrated_power"}
    return {"energy_j": None, "energy_source": None}


def _per_sample(phase, batch_size, iterations, idle_w) -> dict:
    energy = phase["energy_j"]
    out = {"energy_per_sample_j": None, "energy_above_idle_j": None}
    if energy is not None and batch_size and iterations:
        out["energy_per_sample_j"] = energy / (batch_size * iterations)
    if energy is not None and idle_w is not None:
        out["energy_above_idle_j"] = energy - idle_w * phase["duration_s"]
    return out


def _cpu_phase(host, start, end) -> dict:
    inside = [r for r in host if start <= r["t_ns"] < end]
    return {
        "cpu_util_mean_pct": _mean(_values(inside, "cpu_util_pct")),
        "cpu_steal_mean_pct": _mean(_values(inside, "cpu_steal_pct")),
        "cpu_temp_start_c": _start_value(host, "cpu_temp_c", start, end, None),
        "cpu_temp_max_c": max(_values(inside, "cpu_temp_c"), default=None),
        "proc_rss_max_bytes": max(_values(inside, "proc_rss_bytes"), default=None),
    }


def _start_value(rows, column, start, end, uuids):
    """The reading at the phase's start: the last sample before it, else the first inside;
    the hottest device when there are several."""
    keys = uuids or [None]
    found = []
    for key in keys:
        mine = [r for r in rows if (key is None or r.get("gpu_uuid") == key)
                and r.get(column) is not None and r["t_ns"] < end]
        before = [r for r in mine if r["t_ns"] <= start]
        pick = before[-1] if before else (mine[0] if mine else None)
        if pick is not None:
            found.append(pick[column])
    return max(found, default=None)


def _interpolate(series: list[tuple[int, float]], t: int) -> float | None:
    """Linear interpolation at ``t``; None unless samples lie on both sides (or at ``t``)."""
    for (t0, v0), (t1, v1) in zip(series, series[1:]):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    if series and series[0][0] == t:
        return series[0][1]
    return None


def _integrate(series: list[tuple[int, float]], start: int, end: int) -> float | None:
    """Trapezoidal ∫ power dt over [start, end] in joules; None unless samples bracket it."""
    p0, p1 = _interpolate(series, start), _interpolate(series, end)
    if p0 is None or p1 is None:
        return None
    points = [(start, p0)] + [(t, w) for t, w in series if start < t < end] + [(end, p1)]
    return sum((t1 - t0) / 1e9 * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(points, points[1:]))


def _values(rows, column) -> list:
    return [r[column] for r in rows if r.get(column) is not None]


def _mean(values) -> float | None:
    return sum(values) / len(values) if values else None


def _rounded(d: dict) -> dict:
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in d.items()}

