"""The CUDA driver API through ctypes, no framework: the one wait both backends close a timed
CUDA region with, and the context the idle baseline holds.

- ``context_synchronize``: ``torch.cuda.synchronize`` and ``tf.test.experimental.sync_devices``
  wait for the same thing at different costs (TensorFlow's runs a collective no-op on every
  device before it waits), which would charge TensorFlow more per timed step. Both frameworks run
  their kernels in the device's primary context (PyTorch through the runtime API; TensorFlow's
  StreamExecutor retains it with cuDevicePrimaryCtxRetain), so the driver's ``cuCtxSynchronize``
  on that context waits for all of either framework's work, at the same cost on both sides.
- ``hold_cuda_contexts``: a GPU with a context draws more at rest than one without (the driver
  leaves the lowest performance state while a context lives). A trial holds one the whole time,
  so the idle baseline it subtracts is measured with one held too. GPUs are matched by UUID
  (``cuDeviceGetUuid``), since CUDA's device numbers are not NVML's.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

SYNCHRONIZATION = ("CUDA driver cuCtxSynchronize on the device's primary context "
                   "(fwbench.measure.cuda_driver), the same call in both frameworks")
METHOD = "cuDevicePrimaryCtxRetain (CUDA driver API, through ctypes)"
# What measure_idle calls: uuids -> a context manager yielding {"method", "held", "reason"}.
ContextHolder = Callable[[list[str]], AbstractContextManager]


class CudaDriverError(RuntimeError):
    pass


def _check(code: int, call: str) -> None:
    if code != 0:
        raise CudaDriverError(f"CUDA driver call {call} failed with CUresult {code}")


def _driver() -> ctypes.CDLL:
    """libcuda, initialised."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise CudaDriverError(f"the CUDA driver (libcuda.so.1) cannot be loaded ({exc})") from None
    _check(lib.cuInit(0), "cuInit")
    return lib


def _device(lib, ordinal: int) -> ctypes.c_int:
    device = ctypes.c_int()
    _check(lib.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
    return device


def _retain_primary_context(lib, device) -> ctypes.c_void_p:
    context = ctypes.c_void_p()
    _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    return context


@functools.cache
def _primary_context(ordinal: int) -> tuple[ctypes.CDLL, ctypes.c_void_p]:
    lib = _driver()
    return lib, _retain_primary_context(lib, _device(lib, ordinal))


def context_synchronize(ordinal: int = 0) -> None:
    """Block until every operation in the primary context of CUDA device ``ordinal`` is done."""
    lib, context = _primary_context(ordinal)
    _check(lib.cuCtxPushCurrent_v2(context), "cuCtxPushCurrent")
    try:
        _check(lib.cuCtxSynchronize(), "cuCtxSynchronize")
    finally:
        lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))


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
            raise CudaDriverError("no GPU to hold a context on")
        lib = _driver()
        count = ctypes.c_int()
        _check(lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        for ordinal in range(count.value):
            device = _device(lib, ordinal)
            uuid = _uuid(lib, device)
            if uuid in uuids:
                _retain_primary_context(lib, device)
                retained.append(device)
                state["held"].append(uuid)
        missing = [u for u in uuids if u not in state["held"]]
        if missing:
            state["reason"] = (f"CUDA does not see {', '.join(missing)} (check "
                               "CUDA_VISIBLE_DEVICES): no context held there")
    except CudaDriverError as exc:
        state["reason"] = f"{exc}: idle measured without a CUDA context"
    try:
        yield state
    finally:
        for device in retained:
            lib.cuDevicePrimaryCtxRelease_v2(device)
