"""Hold a CUDA context on given GPUs, through the CUDA driver API (ctypes; no framework).

A GPU with a context draws more at rest than one without: the driver leaves the lowest
performance state while a context lives. A trial holds one the whole time, so the idle baseline
it subtracts is measured with one held too (``measure_idle``). Retaining the device's primary
context is what PyTorch and TensorFlow do themselves. GPUs are matched by UUID
(``cuDeviceGetUuid``), since CUDA's device numbers are not NVML's.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

METHOD = "cuDevicePrimaryCtxRetain (CUDA driver API, through ctypes)"
# What measure_idle calls: uuids -> a context manager yielding {"method", "held", "reason"}.
ContextHolder = Callable[[list[str]], AbstractContextManager]


class _CudaError(Exception):
    pass


def _check(code: int, call: str) -> None:
    if code != 0:
        raise _CudaError(f"{call} failed with CUresult {code}")


def _uuid(lib, device) -> str:
    raw = (ctypes.c_ubyte * 16)()
    _check(lib.cuDeviceGetUuid(raw, device), "cuDeviceGetUuid")
    h = bytes(raw).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@contextmanager
def hold_cuda_contexts(uuids: list[str]) -> Iterator[dict]:
    """Retain the primary context of each GPU in ``uuids`` for the block; release it after.

    Never raises for a missing driver or GPU: the state it yields says which contexts are
    held and, when not all, why. Usage::

        with hold_cuda_contexts(["GPU-8c3f..."]) as state:
            ...                      # state["held"], state["reason"]
    """
    state = {"method": METHOD, "held": [], "reason": None}
    retained, lib = [], None
    try:
        if not uuids:
            raise _CudaError("no GPU to hold a context on")
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise _CudaError(f"the CUDA driver (libcuda.so.1) cannot be loaded ({exc})") from None
        _check(lib.cuInit(0), "cuInit")
        count = ctypes.c_int()
        _check(lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        for ordinal in range(count.value):
            device = ctypes.c_int()
            _check(lib.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
            uuid = _uuid(lib, device)
            if uuid in uuids:
                context = ctypes.c_void_p()
                _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device),
                       "cuDevicePrimaryCtxRetain")
                retained.append(device)
                state["held"].append(uuid)
        missing = [u for u in uuids if u not in state["held"]]
        if missing:
            state["reason"] = (f"CUDA does not see {', '.join(missing)} (check "
                               "CUDA_VISIBLE_DEVICES): no context held there")
    except _CudaError as exc:
        state["reason"] = f"{exc}: idle measured without a CUDA context"
    try:
        yield state
    finally:
        for device in retained:
            lib.cuDevicePrimaryCtxRelease_v2(device)

