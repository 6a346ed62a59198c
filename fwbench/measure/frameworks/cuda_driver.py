"""The one device-level wait both backends close a timed CUDA region with.

``torch.cuda.synchronize`` and ``tf.test.experimental.sync_devices`` wait for the same thing at
different costs (TensorFlow's runs a collective no-op on every device before it waits), which
would charge TensorFlow more per timed step. Both frameworks run their kernels in the device's
primary context (PyTorch through the runtime API; TensorFlow's StreamExecutor retains it with
cuDevicePrimaryCtxRetain), so the CUDA driver's ``cuCtxSynchronize`` on that context waits for
all of either framework's work, at the same cost on both sides.
"""

from __future__ import annotations

import ctypes
import functools


class _Driver:
    def __init__(self, ordinal: int):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self._check(self.lib.cuInit(0), "cuInit")
        device = ctypes.c_int()
        self._check(self.lib.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
        self.context = ctypes.c_void_p()
        self._check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), device),
                    "cuDevicePrimaryCtxRetain")

    @staticmethod
    def _check(code: int, call: str) -> None:
        if code != 0:
            raise RuntimeError(f"CUDA driver call {call} failed with CUresult {code}")

    def synchronize(self) -> None:
        lib = self.lib
        self._check(lib.cuCtxPushCurrent_v2(self.context), "cuCtxPushCurrent")
        try:
            self._check(lib.cuCtxSynchronize(), "cuCtxSynchronize")
        finally:
            lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))


@functools.cache
def _driver(ordinal: int) -> _Driver:
    return _Driver(ordinal)


def context_synchronize(ordinal: int = 0) -> None:
    """Block until every operation in the primary context of CUDA device ``ordinal`` is done."""
    _driver(ordinal).synchronize()


SYNCHRONIZATION = ("CUDA driver cuCtxSynchronize on the device's primary context "
                   "(fwbench.measure.frameworks.cuda_driver), the same call in both frameworks")
