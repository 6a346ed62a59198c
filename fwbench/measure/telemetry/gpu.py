"""GPU readings through NVML (nvidia-ml-py, module ``pynvml``), devices matched by UUID.

Every NVML call goes through the module object that ``load_nvml`` returns, so a test can hand in
a fake built from the real binding. Nothing here fails a trial: a source NVML cannot give becomes
an entry in ``unavailable`` with the reason, an error while sampling an empty cell and a count.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

# Which NVML binding to use: None imports pynvml; "module:function" (or, in this process only,
# a callable) is a factory returning a module-like object with pynvml's names: tests pass a fake.
NvmlSpec = str | Callable[[], Any] | None

NVML_MISSING = ("nvidia-ml-py is not installed, so no GPU can be read "
                "(pip install nvidia-ml-py)")


def load_nvml(spec: NvmlSpec = None) -> tuple[Any, str | None]:
    """Initialise NVML: ``(module, None)``, or ``(None, why it cannot be used)``.

    Usage::

        nvml, reason = load_nvml()
        if nvml is None:
            print("no GPU telemetry:", reason)
    """
    if callable(spec):
        nvml = spec()
    elif spec:
        module_name, _, function = spec.partition(":")
        nvml = getattr(importlib.import_module(module_name), function)()
    else:
        try:
            import pynvml as nvml
        except ImportError:
            return None, NVML_MISSING
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return None, _init_reason(nvml, exc)
    return nvml, None


def _init_reason(nvml, exc) -> str:
    if isinstance(exc, nvml.NVMLError_LibraryNotFound):
        return ("NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver on this machine, "
                "or it is not mounted into the container (Apptainer needs --nv)")
    if isinstance(exc, nvml.NVMLError_DriverNotLoaded):
        return "NVIDIA driver not loaded (nvmlInit: Driver Not Loaded); no GPU to read"
    return f"nvmlInit failed: {exc}"


def normalize_uuid(uuid: str) -> str:
    """NVML's spelling of a GPU UUID: PyTorch prints it without the ``GPU-`` prefix."""
    uuid = str(uuid).strip()
    if uuid.startswith(("GPU-", "MIG-")):
        return uuid
    return f"GPU-{uuid}"


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# --- one reader per column group; alternatives in order of preference ---------------------

def _power(nvml, h):
    return (nvml.nvmlDeviceGetPowerUsage(h),)


def _power_instant(nvml, h):
    value = nvml.nvmlDeviceGetFieldValues(h, [nvml.NVML_FI_DEV_POWER_INSTANT])[0]
    if value.nvmlReturn != nvml.NVML_SUCCESS:
        raise nvml.NVMLError(value.nvmlReturn)
    return (_field_value(nvml, value),)


def _field_value(nvml, value):
    member = {nvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
              nvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
              nvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
              nvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
              nvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
              nvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
              nvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal"}[value.valueType]
    return getattr(value.value, member)


def _energy(nvml, h):
    return (nvml.nvmlDeviceGetTotalEnergyConsumption(h),)


def _utilization(nvml, h):
    rates = nvml.nvmlDeviceGetUtilizationRates(h)
    return rates.gpu, rates.memory


def _memory(nvml, h):
    return (nvml.nvmlDeviceGetMemoryInfo(h).used,)


def _temperature_v(nvml, h):
    return (nvml.nvmlDeviceGetTemperatureV(h, nvml.NVML_TEMPERATURE_GPU),)


def _temperature(nvml, h):
    # Deprecated in NVML 13 but the only call older drivers have.
    return (nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),)


def _clocks(nvml, h):
    return (nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
            nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM))


def _clock_events(nvml, h):
    return (nvml.nvmlDeviceGetCurrentClocksEventReasons(h),)


def _throttle_reasons(nvml, h):
    # The name before driver 535; same bits.
    return (nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h),)


def _pstate(nvml, h):
    return (nvml.nvmlDeviceGetPerformanceState(h),)


READERS: tuple[tuple[tuple[str, ...], tuple[Callable, ...]], ...] = (
    (("gpu_power_mw",), (_power,)),
    (("gpu_power_instant_mw",), (_power_instant,)),
    (("gpu_energy_mj",), (_energy,)),
    (("gpu_util_pct", "gpu_mem_util_pct"), (_utilization,)),
    (("gpu_mem_used_bytes",), (_memory,)),
    (("gpu_temp_c",), (_temperature_v, _temperature)),
    (("gpu_sm_clock_mhz", "gpu_mem_clock_mhz"), (_clocks,)),
    (("gpu_clocks_event_reasons",), (_clock_events, _throttle_reasons)),
    (("gpu_pstate",), (_pstate,)),
)
GPM_COLUMNS = ("gpu_sm_active_pct", "gpu_sm_occupancy_pct")


class _Gpm:
    """SM activity and occupancy from NVML's GPM metrics, between consecutive samples."""

    def __init__(self, nvml, handle):
        if not nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
            raise nvml.NVMLError(nvml.NVML_ERROR_NOT_SUPPORTED)
        self.nvml, self.handle = nvml, handle
        self.prev = nvml.nvmlGpmSampleAlloc()
        self.cur = nvml.nvmlGpmSampleAlloc()
        nvml.nvmlGpmSampleGet(handle, self.prev)

    def __call__(self, nvml, handle):
        nvml.nvmlGpmSampleGet(handle, self.cur)
        get = nvml.c_nvmlGpmMetricsGet_t()
        get.version = nvml.NVML_GPM_METRICS_GET_VERSION
        get.numMetrics = 2
        get.sample1, get.sample2 = self.prev, self.cur
        get.metrics[0].metricId = nvml.NVML_GPM_METRIC_SM_UTIL
        get.metrics[1].metricId = nvml.NVML_GPM_METRIC_SM_OCCUPANCY
        nvml.nvmlGpmMetricsGet(get)
        self.prev, self.cur = self.cur, self.prev
        values = []
        for metric in get.metrics[:2]:
            if metric.nvmlReturn != nvml.NVML_SUCCESS:
                raise nvml.NVMLError(metric.nvmlReturn)
            values.append(round(metric.value, 2))
        return tuple(values)

    def close(self):
        for sample in (self.prev, self.cur):
            try:
                self.nvml.nvmlGpmSampleFree(sample)
            except self.nvml.NVMLError:
                pass


@dataclass
class Device:
    """One GPU being read: its identity and the readers that worked when it was opened."""

    uuid: str
    index: int
    name: str
    handle: Any
    readers: list[tuple[tuple[str, ...], Callable]] = field(default_factory=list)
    gpm: _Gpm | None = None


@dataclass
class _ErrorCount:
    message: str
    first_t_ns: int
    last_t_ns: int
    count: int = 1


class GpuReader:
    """Reads every requested GPU once per sample, one row each.

    ``uuids`` None reads every GPU NVML sees (NVML ignores CUDA_VISIBLE_DEVICES); an empty list
    reads none. Usage::

        gpus = GpuReader(["GPU-8c3f..."])
        gpus.open()
        rows = gpus.read()          # [{"gpu_uuid": ..., "gpu_power_mw": ..., ...}]
        gpus.report()["unavailable"]
        gpus.close()
    """

    def __init__(self, uuids: list[str] | None = None, *, nvml: NvmlSpec = None):
        self.requested = None if uuids is None else [normalize_uuid(u) for u in uuids]
        self.spec = nvml
        self.nvml = None
        self.devices: list[Device] = []
        self.unavailable: dict[str, str] = {}
        self.errors: dict[tuple[str, str], _ErrorCount] = {}
        self.reads = 0

    def open(self) -> None:
        if self.requested == []:
            self.unavailable["gpu"] = "no GPU requested for this trial"
            return
        self.nvml, reason = load_nvml(self.spec)
        if self.nvml is None:
            self.unavailable["gpu"] = reason
            return
        try:
            self._open_devices()
        except self.nvml.NVMLError as exc:
            self.unavailable["gpu"] = f"NVML could not list the GPUs: {exc}"
            self.devices = []
        for device in self.devices:
            self._probe(device)

    def _open_devices(self) -> None:
        nvml = self.nvml
        by_uuid = {}
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            by_uuid[_text(nvml.nvmlDeviceGetUUID(handle))] = (index, handle)
        if not by_uuid:
            self.unavailable["gpu"] = "NVML reports no GPU on this machine"
            return
        wanted = list(by_uuid) if self.requested is None else self.requested
        missing = [u for u in wanted if u not in by_uuid]
        if missing:
            self.unavailable["gpu"] = (f"requested GPU {', '.join(missing)} not found by NVML, "
                                       f"which sees {', '.join(by_uuid)}")
        for uuid in wanted:
            if uuid in by_uuid:
                index, handle = by_uuid[uuid]
                name = _text(nvml.nvmlDeviceGetName(handle))
                self.devices.append(Device(uuid, index, name, handle))

    def _probe(self, device: Device) -> None:
        """Keep, per column group, the first reader this device answers; note the others."""
        nvml = self.nvml
        for columns, alternatives in READERS:
            reasons = []
            for reader in alternatives:
                try:
                    reader(nvml, device.handle)
                except nvml.NVMLError as exc:
                    reasons.append(f"{reader.__name__.strip('_')}: {exc}")
                    continue
                except AttributeError as exc:  # an older binding without this call
                    reasons.append(f"nvidia-ml-py lacks it ({exc})")
                    continue
                device.readers.append((columns, reader))
                break
            else:
                self._note(columns, f"{device.uuid}: {'; '.join(reasons)}")
        try:
            device.gpm = _Gpm(nvml, device.handle)
        except nvml.NVMLError as exc:
            self._note(GPM_COLUMNS, f"{device.uuid}: GPM metrics unavailable ({exc}); "
                                    "NVML has them on Hopper and newer")
        except AttributeError as exc:
            self._note(GPM_COLUMNS, f"nvidia-ml-py lacks GPM ({exc})")

    def _note(self, columns, reason: str) -> None:
        _append(self.unavailable, columns, reason)

    def read(self) -> list[dict]:
        """One row per device; a failing call leaves its cells empty and is counted."""
        rows = []
        self.reads += 1
        for device in self.devices:
            t_ns = time.perf_counter_ns()
            row = {"t_ns": t_ns, "device": "gpu", "gpu_uuid": device.uuid,
                   "gpu_index": device.index}
            readers = list(device.readers)
            if device.gpm is not None:
                readers.append((GPM_COLUMNS, device.gpm))
            for columns, reader in readers:
                try:
                    row.update(zip(columns, reader(self.nvml, device.handle)))
                except self.nvml.NVMLError as exc:
                    self._count_error(columns[0], device.uuid, str(exc), t_ns)
            rows.append(row)
        return rows

    def _count_error(self, column: str, uuid: str, message: str, t_ns: int) -> None:
        record = self.errors.get((column, uuid))
        if record is None:
            self.errors[(column, uuid)] = _ErrorCount(message, t_ns, t_ns)
        else:
            record.count += 1
            record.last_t_ns = t_ns

    def report(self) -> dict:
        """Devices read, sources unavailable (why), and errors met while sampling."""
        unavailable = dict(self.unavailable)
        errors = []
        for (column, uuid), e in self.errors.items():
            errors.append({"column": column, "gpu_uuid": uuid, "error": e.message,
                           "count": e.count, "reads": self.reads,
                           "first_t_ns": e.first_t_ns, "last_t_ns": e.last_t_ns})
            group = next((cols for cols, _ in READERS if cols[0] == column), None) or (
                GPM_COLUMNS if column in GPM_COLUMNS else (column,))
            _append(unavailable, group,
                            f"{uuid}: NVML error while sampling, {e.count} of {self.reads} "
                            f"reads failed ({e.message}), first at t_ns={e.first_t_ns}")
        return {
            "gpus": [{"uuid": d.uuid, "index": d.index, "name": d.name,
                      "power_instant": any(c == ("gpu_power_instant_mw",) for c, _ in d.readers),
                      "gpm": d.gpm is not None} for d in self.devices],
            "unavailable": unavailable,
            "errors": errors,
        }

    def temperatures(self) -> dict[str, float | None]:
        """GPU temperature by UUID, None where unreadable (the thermal guard's probe)."""
        out = {}
        for device in self.devices:
            reader = next((r for c, r in device.readers if c == ("gpu_temp_c",)), None)
            try:
                out[device.uuid] = reader(self.nvml, device.handle)[0] if reader else None
            except self.nvml.NVMLError:
                out[device.uuid] = None
        return out

    def close(self) -> None:
        if self.nvml is None:
            return
        for device in self.devices:
            if device.gpm is not None:
                device.gpm.close()
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass
        self.nvml = None


def _append(unavailable: dict[str, str], columns, reason: str) -> None:
    for column in columns:
        old = unavailable.get(column)
        unavailable[column] = f"{old}; {reason}" if old else reason


# --- energy at the harness's phase markers -------------------------------------------------

_energy_lock = threading.Lock()
_energy_cache: dict[NvmlSpec, tuple[Any, dict[str, Any]]] = {}


def read_energy_mj(uuids: list[str], *, nvml: NvmlSpec = None) -> dict[str, int | None]:
    """NVML's total energy counter (mJ since driver load) of each GPU; None where unreadable.

    Meant for the harness, right after a device sync at each phase marker; NVML is initialised
    once per process and the handles kept. Usage::

        sync(); markers["measure"] = time.perf_counter_ns()
        energy["measure"] = read_energy_mj(uuids)
    """
    with _energy_lock:
        if nvml not in _energy_cache:
            module, _ = load_nvml(nvml)
            _energy_cache[nvml] = (module, {})
        module, handles = _energy_cache[nvml]
    out: dict[str, int | None] = {}
    for uuid in map(normalize_uuid, uuids):
        out[uuid] = None
        if module is None:
            continue
        try:
            if uuid not in handles:
                handles[uuid] = module.nvmlDeviceGetHandleByUUID(uuid)
            out[uuid] = int(module.nvmlDeviceGetTotalEnergyConsumption(handles[uuid]))
        except module.NVMLError:
            pass
    return out


def counter_update_s(nvml, handles: dict[str, Any], duration_s: float = 1.0,
                     clock: Callable[[], int] = time.perf_counter_ns) -> dict[str, float | None]:
    """How often each GPU's energy counter changes: the median time between changes seen while
    reading it back to back for ``duration_s`` (None with fewer than two intervals seen).

    A phase's counter difference is stale by up to this period at each end, so energy is
    reported only over windows many periods long (``summary.ENERGY_WINDOW_UPDATES``).
    """
    changes: dict[str, list[int]] = {uuid: [] for uuid in handles}
    last: dict[str, int] = {}
    end = clock() + duration_s * 1e9
    while clock() < end:
        for uuid, handle in handles.items():
            try:
                value = nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            except nvml.NVMLError:
                continue
            t = clock()
            if uuid in last and value != last[uuid]:
                changes[uuid].append(t)
            last[uuid] = value
    out: dict[str, float | None] = {}
    for uuid, times in changes.items():
        steps = sorted(b - a for a, b in zip(times, times[1:]))
        out[uuid] = round(steps[len(steps) // 2] / 1e9, 4) if len(steps) >= 2 else None
    return out


def visible_gpu_uuids(cuda_visible_devices: str | None = None, *,
                      nvml: NvmlSpec = None) -> list[str]:
    """UUIDs of the GPUs a CUDA process sees under ``CUDA_VISIBLE_DEVICES`` (default: the
    environment's), in its order. UUID entries are matched by prefix, as CUDA does; integer
    entries are NVML indices, which equal CUDA's only with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.
    Empty when NVML is unavailable.
    """
    if cuda_visible_devices is None:
        cuda_visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    module, _ = load_nvml(nvml)
    if module is None:
        return []
    try:
        every = []
        for index in range(module.nvmlDeviceGetCount()):
            every.append(_text(module.nvmlDeviceGetUUID(module.nvmlDeviceGetHandleByIndex(index))))
    finally:
        module.nvmlShutdown()
    if cuda_visible_devices is None:
        return every
    out = []
    for entry in (e.strip() for e in cuda_visible_devices.split(",")):
        if entry.isdigit() and int(entry) < len(every):
            out.append(every[int(entry)])
        elif entry.startswith(("GPU-", "MIG-")):
            matches = [u for u in every if u.startswith(entry)]
            if len(matches) != 1:
                break
            out.append(matches[0])
        else:
            break  # CUDA ignores the rest of the list after an invalid entry
    return out
