"""The telemetry side file's columns: one registry of names, units and meanings.

Every column name ends with its unit (``_mw``, ``_mj``, ``_pct``, ``_c``, ``_mhz``, ``_bytes``,
``_ns``) or is an identifier. The sidecar JSON and docs/telemetry.md are built from this table.
"""

from __future__ import annotations

from dataclasses import dataclass

# Version history of the side files (CSV columns and sidecar JSON):
# 1 — first version.
# 2 — apparatus_cpu_pct: the measurement's own share of the machine.
SCHEMA_VERSION = 2


@dataclass(frozen=True)
class Column:
    name: str
    unit: str
    description: str


COMMON = (
    Column("slot", "count", "scheduled sample number: taken at t0_ns + slot * period (sidecar)"),
    Column("t_ns", "ns", "time.perf_counter_ns() when this row's reads began; on Linux "
           "CLOCK_MONOTONIC, the clock of the harness's markers_ns"),
    Column("device", "id", "'cpu' (the host row of a sample) or 'gpu' (one row per GPU)"),
    Column("gpu_uuid", "id", "NVML UUID of the GPU (GPU rows)"),
    Column("gpu_index", "id", "NVML index (PCI bus order; not necessarily the CUDA index)"),
)

GPU = (
    Column("gpu_power_mw", "mW", "nvmlDeviceGetPowerUsage: board power; on Ampere and newer a "
           "1-second moving average, so it lags and smooths steps"),
    Column("gpu_power_instant_mw", "mW", "NVML_FI_DEV_POWER_INSTANT: instantaneous board power, "
           "where the device and driver have the field"),
    Column("gpu_energy_mj", "mJ", "nvmlDeviceGetTotalEnergyConsumption: energy since the driver "
           "was loaded (Volta and newer); differences give a phase's energy"),
    Column("gpu_util_pct", "%", "nvmlDeviceGetUtilizationRates.gpu: share of the last sample "
           "period in which at least one kernel ran; not SM occupancy"),
    Column("gpu_mem_util_pct", "%", "nvmlDeviceGetUtilizationRates.memory: share of the period "
           "in which device memory was read or written"),
    Column("gpu_mem_used_bytes", "B", "nvmlDeviceGetMemoryInfo.used: device memory in use by "
           "all processes and the driver"),
    Column("gpu_temp_c", "°C", "GPU core temperature"),
    Column("gpu_sm_clock_mhz", "MHz", "current SM clock"),
    Column("gpu_mem_clock_mhz", "MHz", "current memory clock"),
    Column("gpu_clocks_event_reasons", "bitmask", "nvmlDeviceGetCurrentClocksEventReasons: why "
           "clocks are below maximum (throttle reasons); bits in docs/telemetry.md"),
    Column("gpu_pstate", "P-state", "performance state, 0 (maximum) to 15 (minimum)"),
    Column("gpu_sm_active_pct", "%", "GPM SM activity: share of SMs busy, averaged over the sample "
           "period (Hopper and newer; empty on a GPU's first row)"),
    Column("gpu_sm_occupancy_pct", "%", "GPM SM occupancy: resident warps against the maximum, "
           "averaged over the sample period (Hopper and newer)"),
)

HOST = (
    Column("cpu_util_pct", "%", "all cores: share of CPU time running code (user, nice, system, "
           "irq, softirq) since the previous sample; idle, iowait and steal excluded"),
    Column("apparatus_cpu_pct", "%", "all cores: share of CPU time the measurement's own "
           "processes ran since the previous sample (the sampler, the processes that started "
           "it, the watched process and its children), on cpu_util_pct's scale"),
    Column("cpu_steal_pct", "%", "all cores: share of time the hypervisor gave to other guests"),
    Column("cpu_iowait_pct", "%", "all cores: share of time idle while waiting for I/O"),
    Column("cpu_temp_c", "°C", "hottest CPU package sensor psutil exposes (sidecar names it)"),
    Column("host_mem_used_bytes", "B", "psutil.virtual_memory().used"),
    Column("cpu_package_energy_mj", "mJ", "RAPL package energy (all sockets) since the sampler "
           "started, wraparound corrected; differences give a phase's CPU energy"),
    Column("cpu_dram_energy_mj", "mJ", "RAPL DRAM energy (all sockets) since the sampler "
           "started, where the CPU measures it"),
    Column("proc_rss_bytes", "B", "resident memory of the watched process and its children"),
    Column("proc_count", "count", "the watched process and its live children"),
)

CORE_UNIT, CORE_DESCRIPTION = "%", "one core, same definition as cpu_util_pct"

GPU_NAMES = tuple(c.name for c in GPU)
HOST_NAMES = tuple(c.name for c in HOST)


def core_column(i: int) -> str:
    """Name of core ``i``'s utilization column."""
    return f"cpu{i}_util_pct"


def header(n_cores: int) -> list[str]:
    """The CSV header for a machine with ``n_cores`` logical CPUs."""
    return ([c.name for c in COMMON + GPU + HOST]
            + [core_column(i) for i in range(n_cores)])


def describe(n_cores: int) -> dict[str, dict[str, str]]:
    """Unit and meaning of every column, as written to the sidecar."""
    out = {c.name: {"unit": c.unit, "description": c.description} for c in COMMON + GPU + HOST}
    for i in range(n_cores):
        out[core_column(i)] = {"unit": CORE_UNIT, "description": CORE_DESCRIPTION}
    return out


# Clock event (throttle) reason bits, from nvml.h; kept here so host-side summaries can decode
# the bitmask without the NVML binding.
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def decode_clock_event_reasons(mask: int) -> list[str]:
    """Names of the bits set in a clocks-event-reasons bitmask."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    return names + ([f"other_0x{unknown:x}"] if unknown else [])
