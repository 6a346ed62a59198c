"""Telemetry: a time series of what the hardware did while a trial ran. Framework-free.

fwbench.measure.telemetry
 ├── columns    the side file's columns, units and meanings (one registry)
 ├── gpu        NVML readings by GPU UUID; energy counter at the harness's markers
 ├── host       psutil readings: CPU per core and total, steal, temperature, process memory
 ├── rapl       CPU package and DRAM energy from RAPL (/sys/class/powercap), where offered
 ├── collector  one sample of both
 ├── sampler    Sampler: runs the sampler process around a trial; writes
 │              trial-<k>.telemetry.csv and its sidecar trial-<k>.telemetry.json
 ├── process    the sampler process itself (python -m fwbench.measure.telemetry.process)
 ├── summary    per-phase power, energy, utilization and temperature for the result JSON
 ├── idle       idle baseline (per GPU, a CUDA context held: fwbench.measure.cuda_driver)
 │              and the thermal guard
 └── machine    the machine's state: governor, turbo, SMT; GPU power limit, clocks, ECC, MIG
"""

from fwbench.measure.telemetry.gpu import (
    load_nvml,
    normalize_uuid,
    read_energy_mj,
    visible_gpu_uuids,
)
from fwbench.measure.telemetry.idle import measure_idle, wait_for_idle_temperature
from fwbench.measure.telemetry.sampler import (
    SAMPLING_PERIOD_S,
    Sampler,
    TelemetryError,
    sidecar_path,
)
from fwbench.measure.telemetry.summary import load_samples, summarize_phases

__all__ = [
    "SAMPLING_PERIOD_S",
    "Sampler",
    "TelemetryError",
    "load_nvml",
    "load_samples",
    "measure_idle",
    "normalize_uuid",
    "read_energy_mj",
    "sidecar_path",
    "summarize_phases",
    "visible_gpu_uuids",
    "wait_for_idle_temperature",
]
