"""One sample of everything: a host row plus one row per GPU, from sources opened once."""

from __future__ import annotations

from fwbench.measure.telemetry.gpu import GpuReader, NvmlSpec
from fwbench.measure.telemetry.host import HostReader
from fwbench.measure.telemetry.rapl import POWERCAP_ROOT


class Collector:
    """Opens the host and GPU sources and reads them together.

    Usage::

        with Collector(pid=os.getpid(), gpu_uuids=None) as c:
            rows = c.sample(slot=0)       # [{"device": "cpu", ...}, {"device": "gpu", ...}]
            c.report()["unavailable"]     # {"gpu": "NVML library ... not found", ...}
    """

    def __init__(self, *, pid: int | None = None, gpu_uuids: list[str] | None = None,
                 nvml: NvmlSpec = None, powercap_root: str = POWERCAP_ROOT):
        self.host = HostReader(pid, powercap_root=powercap_root)
        self.gpus = GpuReader(gpu_uuids, nvml=nvml)

    def open(self) -> Collector:
        self.host.open()
        self.gpus.open()
        return self

    def sample(self, slot: int) -> list[dict]:
        rows = [self.host.read(), *self.gpus.read()]
        for row in rows:
            row["slot"] = slot
        return rows

    def watch(self, pid: int | None) -> None:
        self.host.watch(pid)

    def temperatures(self) -> dict:
        """``{"gpu": {uuid: °C or None}, "cpu": °C or None}``."""
        return {"gpu": self.gpus.temperatures(), "cpu": self.host.temperature()}

    def report(self) -> dict:
        host, gpus = self.host.report(), self.gpus.report()
        return {"gpus": gpus["gpus"], "cpu": host["cpu"],
                "unavailable": {**host["unavailable"], **gpus["unavailable"]},
                "errors": gpus["errors"]}

    def close(self) -> None:
        self.gpus.close()

    def __enter__(self) -> Collector:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()
