"""FAKE NVML — a stand-in for the NVIDIA driver's library on machines without an NVIDIA GPU.

It stands only at the NVML boundary and is built from the real binding (nvidia-ml-py's
``pynvml``): every ``nvml*`` function is ``mock.create_autospec`` of the real one, so a call
with a wrong signature raises TypeError, and a name the real module lacks raises AttributeError
here too. Constants, NVMLError classes and ctypes structures are the real ones. A real function
the fake does not implement raises AssertionError, so a new call is noticed, not ignored.

The zero-argument factories at the bottom are scenarios; a test names one as
``"<this module>:<factory>"`` so that the sampler process can build the same fake.
"""

from __future__ import annotations

import time
import types
from dataclasses import dataclass, field
from unittest import mock

import pynvml

UUID_A = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
UUID_B = "GPU-bbbbbbbb-5555-6666-7777-888888888888"


@dataclass
class FakeGpu:
    """What one fake GPU answers. ``None`` for a reading means the device does not support it."""

    uuid: str = UUID_A
    name: str = "NVIDIA H100 80GB HBM3 (fake)"
    power_mw: int = 250_000
    power_instant: bool = True
    temperatures_c: list[int] | None = field(default_factory=lambda: [40])
    temperature_v: bool = True          # has nvmlDeviceGetTemperatureV (newer drivers)
    gpm: bool = True
    fail_from_power_read: int | None = None   # the n-th power read and all calls after it fail
    power_read_s: float = 0.0           # how long a power reading blocks
    util: tuple[int, int] = (97, 41)
    mem_used_bytes: int = 12 * 2**30
    clocks_mhz: tuple[int, int] = (1980, 2619)
    clock_event_reasons: int = 0x4     # sw_power_cap
    pstate: int = 0
    gpm_values: tuple[float, float] = (88.5, 41.25)
    energy_update_s: float = 0.0       # the energy counter's update period (0: every read)
    power_limit_mw: int = 700_000       # machine state (fwbench.measure.telemetry.machine)
    power_limit_default_mw: int = 700_000
    persistence: bool = True
    applications_clocks_mhz: tuple[int, int] = (1980, 2619)
    default_applications_clocks_mhz: tuple[int, int] = (1755, 2619)
    ecc: tuple[bool, bool] | None = (True, True)      # current, pending; None: not supported
    mig: tuple[bool, bool] | None = (False, False)
    compute_mode: int = pynvml.NVML_COMPUTEMODE_DEFAULT
    power_reads: int = 0
    lost: bool = False
    started_ns: int = field(default_factory=time.perf_counter_ns)


class _Handle:
    def __init__(self, gpu: FakeGpu):
        self.gpu = gpu


def _error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


class _Driver:
    """Implementations, with the real functions' parameter names."""

    def __init__(self, gpus: list[FakeGpu], library: bool, driver: str = "570.00-fake"):
        self.gpus, self.library, self.driver_version = gpus, library, driver
        self.handles = [_Handle(g) for g in gpus]
        self.gpm_device: _Handle | None = None

    def _gpu(self, handle) -> FakeGpu:
        gpu = handle.gpu
        if gpu.lost:
            raise _error(pynvml.NVML_ERROR_GPU_IS_LOST)
        return gpu

    def nvmlInit(self):
        if not self.library:
            raise _error(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return self.driver_version

    def nvmlDeviceGetCount(self):
        return len(self.handles)

    def nvmlDeviceGetHandleByIndex(self, index):
        if not 0 <= index < len(self.handles):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.handles[index]

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for handle in self.handles:
            if handle.gpu.uuid == uuid:
                return handle
        raise _error(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetUUID(self, handle):
        return self._gpu(handle).uuid

    def nvmlDeviceGetName(self, handle):
        return self._gpu(handle).name

    def nvmlDeviceGetPowerUsage(self, handle):
        gpu = self._gpu(handle)
        time.sleep(gpu.power_read_s)
        gpu.power_reads += 1
        if gpu.fail_from_power_read is not None and gpu.power_reads >= gpu.fail_from_power_read:
            gpu.lost = True
            raise _error(pynvml.NVML_ERROR_GPU_IS_LOST)
        return gpu.power_mw

    def nvmlDeviceGetFieldValues(self, handle, fieldIds):
        gpu = self._gpu(handle)
        values = (pynvml.c_nvmlFieldValue_t * len(fieldIds))()
        for value, field_id in zip(values, fieldIds):
            value.fieldId = field_id
            if field_id == pynvml.NVML_FI_DEV_POWER_INSTANT and gpu.power_instant:
                value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                value.value.uiVal = gpu.power_mw
                value.nvmlReturn = pynvml.NVML_SUCCESS
            else:
                value.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return values

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        gpu = self._gpu(handle)
        elapsed_s = (time.perf_counter_ns() - gpu.started_ns) / 1e9
        if gpu.energy_update_s:  # the counter moves only at its updates
            elapsed_s = elapsed_s // gpu.energy_update_s * gpu.energy_update_s
        return 10**9 + int(gpu.power_mw * elapsed_s)

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._gpu(handle)
        return pynvml.c_nvmlUtilization_t(gpu=gpu.util[0], memory=gpu.util[1])

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        gpu = self._gpu(handle)
        total = 80 * 2**30
        return pynvml.c_nvmlMemory_t(total=total, free=total - gpu.mem_used_bytes,
                                     used=gpu.mem_used_bytes)

    def _temperature(self, handle):
        gpu = self._gpu(handle)
        if gpu.temperatures_c is None:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        # Each read moves along the list and stays on its last value: a device cooling down.
        return gpu.temperatures_c.pop(0) if len(gpu.temperatures_c) > 1 else gpu.temperatures_c[0]

    def nvmlDeviceGetTemperatureV(self, handle, sensor, version=pynvml.nvmlTemperature_v1):
        if not handle.gpu.temperature_v:
            raise _error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._temperature(handle)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._temperature(handle)

    def nvmlDeviceGetClockInfo(self, handle, type):
        gpu = self._gpu(handle)
        return {pynvml.NVML_CLOCK_SM: gpu.clocks_mhz[0],
                pynvml.NVML_CLOCK_MEM: gpu.clocks_mhz[1]}[type]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self._gpu(handle).clock_event_reasons

    def nvmlDeviceGetPerformanceState(self, handle):
        return self._gpu(handle).pstate

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        return self._gpu(handle).power_limit_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle):
        return self._gpu(handle).power_limit_default_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return self._gpu(handle).power_limit_mw

    def nvmlDeviceGetPersistenceMode(self, handle):
        return int(self._gpu(handle).persistence)

    def nvmlDeviceGetApplicationsClock(self, handle, type):
        clocks = self._gpu(handle).applications_clocks_mhz
        return {pynvml.NVML_CLOCK_SM: clocks[0], pynvml.NVML_CLOCK_MEM: clocks[1]}[type]

    def nvmlDeviceGetDefaultApplicationsClock(self, handle, type):
        clocks = self._gpu(handle).default_applications_clocks_mhz
        return {pynvml.NVML_CLOCK_SM: clocks[0], pynvml.NVML_CLOCK_MEM: clocks[1]}[type]

    def nvmlDeviceGetEccMode(self, handle):
        ecc = self._gpu(handle).ecc
        if ecc is None:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [int(ecc[0]), int(ecc[1])]

    def nvmlDeviceGetMigMode(self, device):
        mig = self._gpu(device).mig
        if mig is None:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [int(mig[0]), int(mig[1])]

    def nvmlDeviceGetComputeMode(self, handle):
        return self._gpu(handle).compute_mode

    def nvmlGpmQueryDeviceSupport(self, device):
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(self._gpu(device).gpm)
        return support

    def nvmlGpmSampleAlloc(self):
        return pynvml.c_nvmlGpmSample_t()

    def nvmlGpmSampleFree(self, gpmSample):
        pass

    def nvmlGpmSampleGet(self, device, gpmSample):
        self._gpu(device)
        self.gpm_device = device
        return gpmSample

    def nvmlGpmMetricsGet(self, metricsGet):
        assert metricsGet.version == pynvml.NVML_GPM_METRICS_GET_VERSION
        gpu = self._gpu(self.gpm_device)
        values = {pynvml.NVML_GPM_METRIC_SM_UTIL: gpu.gpm_values[0],
                  pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: gpu.gpm_values[1]}
        for metric in metricsGet.metrics[:metricsGet.numMetrics]:
            metric.value = values[metric.metricId]
            metric.nvmlReturn = pynvml.NVML_SUCCESS
        return metricsGet


class FakeNvml(types.ModuleType):
    """A module with pynvml's names; functions autospecced from the real ones, made on use."""

    def __init__(self, gpus: list[FakeGpu], *, library: bool = True,
                 driver: str = "570.00-fake"):
        super().__init__("fake_pynvml", __doc__)
        self.driver = _Driver(gpus, library, driver)

    def __getattr__(self, name: str):
        real = getattr(pynvml, name)  # a misnamed call fails here, as it would in pynvml
        if name.startswith("nvml") and isinstance(real, types.FunctionType):
            impl = getattr(self.driver, name, None) or _unimplemented(name)
            real = mock.create_autospec(real, side_effect=impl)
        setattr(self, name, real)
        return real


def _unimplemented(name: str):
    def call(*args, **kwargs):
        raise AssertionError(f"fake NVML does not implement {name}; add it to tests/fakes/nvml.py")
    return call


# --- scenarios -------------------------------------------------------------------------------

def no_library() -> FakeNvml:
    """No NVIDIA driver: nvmlInit cannot load libnvidia-ml.so.1."""
    return FakeNvml([], library=False)


def no_gpu() -> FakeNvml:
    """The library loads but there is no GPU."""
    return FakeNvml([])


def one_gpu() -> FakeNvml:
    """A healthy Hopper-class GPU: every reading, instant power and GPM."""
    return FakeNvml([FakeGpu()])


def lost_mid_trial() -> FakeNvml:
    """A GPU that falls off the bus at its 4th power reading (probe included)."""
    return FakeNvml([FakeGpu(fail_from_power_read=4)])


def no_temperature() -> FakeNvml:
    """A GPU without a temperature sensor."""
    return FakeNvml([FakeGpu(temperatures_c=None)])


def older_gpu() -> FakeNvml:
    """A Volta/Ampere-era GPU and driver: no instant power, no GPM, old temperature call, no
    MIG."""
    return FakeNvml([FakeGpu(name="Tesla V100 (fake)", power_instant=False, gpm=False,
                             temperature_v=False, mig=None)])


def slow_gpu() -> FakeNvml:
    """A GPU whose power reading blocks for 80 ms: longer than a 50 ms sampling period."""
    return FakeNvml([FakeGpu(power_read_s=0.08)])


def counter_every_50ms() -> FakeNvml:
    """A GPU whose energy counter updates every 50 ms, as real counters do on a period."""
    return FakeNvml([FakeGpu(energy_update_s=0.05)])


def two_gpus() -> FakeNvml:
    return FakeNvml([FakeGpu(uuid=UUID_A, power_mw=100_000),
                     FakeGpu(uuid=UUID_B, power_mw=300_000)])


def two_gpus_differing() -> FakeNvml:
    """Two GPUs set up differently: B capped at 500 W, persistence off, ECC off, MIG on."""
    return FakeNvml([FakeGpu(uuid=UUID_A),
                     FakeGpu(uuid=UUID_B, power_limit_mw=500_000, persistence=False,
                             ecc=(False, False), mig=(True, True))])
