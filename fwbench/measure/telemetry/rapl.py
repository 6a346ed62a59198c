"""CPU energy from RAPL (Running Average Power Limit) through Linux's powercap interface.

The kernel exposes one zone per CPU package and, where the CPU measures it, a DRAM subzone::

    /sys/class/powercap/intel-rapl:<n>/        name "package-<n>", energy_uj, max_energy_range_uj
    /sys/class/powercap/intel-rapl:<n>:<m>/    name "core", "uncore" or "dram"

(AMD Zen CPUs appear as ``intel-rapl`` too, usually without DRAM.) ``energy_uj`` counts
microjoules and wraps to 0 after ``max_energy_range_uj``; the reader adds each step's increase,
wrap included, so it must read more often than the counter wraps (minutes at full power; the
sampler reads every 100 ms). ``intel-rapl-mmio`` zones repeat the package counter through
another interface and are skipped, so no energy is counted twice. Absent zones, or counters only
root may read (Linux 5.10 and later, after CVE-2020-8694), become reasons, never errors.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

POWERCAP_ROOT = "/sys/class/powercap"
# Column <- zone name (a package zone's name is "package-<n>").
COLUMNS = {"package": "cpu_package_energy_mj", "dram": "cpu_dram_energy_mj"}
UPDATE_S = 0.001  # RAPL's energy status registers update about every millisecond (Intel SDM, RAPL)


@dataclass
class _Zone:
    path: Path
    domain: str                 # "package" or "dram"
    max_uj: int
    last_uj: int
    total_uj: int = 0


class RaplReader:
    """Package and DRAM energy since ``open()``, summed over sockets, in mJ.

    Usage::

        rapl = RaplReader()               # root="/sys/class/powercap"; tests pass a tmp tree
        rapl.open()
        rapl.read()      # {"cpu_package_energy_mj": 812.4, "cpu_dram_energy_mj": 95.1}
        rapl.unavailable # {"cpu_dram_energy_mj": "..."} for what cannot be read, and why
    """

    def __init__(self, root: str | os.PathLike = POWERCAP_ROOT):
        self.root = Path(root)
        self.zones: list[_Zone] = []
        self.unavailable: dict[str, str] = {}
        self.errors: dict[str, str] = {}

    def open(self) -> None:
        if not self.root.is_dir():
            self._none(f"{self.root} does not exist: this kernel exposes no powercap energy "
                       "counters (usual in virtual machines and containers; on bare metal, "
                       "`modprobe intel_rapl_msr`)")
            return
        zones = sorted(p for p in self.root.iterdir() if p.name.startswith("intel-rapl:"))
        if not zones:
            self._none(f"no intel-rapl zone under {self.root}: this CPU or kernel offers no "
                       "RAPL (on bare metal, `modprobe intel_rapl_msr`)")
            return
        denied = []
        for path in zones:
            name = _read_text(path / "name")
            domain = "package" if name and name.startswith("package") else name
            if domain not in COLUMNS:
                continue
            try:
                zone = _Zone(path, domain, int(_read_text(path / "max_energy_range_uj")),
                             int((path / "energy_uj").read_text()))
            except PermissionError:
                denied.append(path.name)
                continue
            except (OSError, ValueError, TypeError) as exc:
                self.errors[path.name] = f"unreadable: {exc}"
                continue
            self.zones.append(zone)
        found = {z.domain for z in self.zones}
        for domain, column in COLUMNS.items():
            if domain in found:
                continue
            if denied:
                self.unavailable[column] = (
                    f"{self.root}/intel-rapl:*/energy_uj is readable only by root (Linux 5.10 and "
                    f"later, CVE-2020-8694): let this user read it, e.g. `sudo chmod a+r "
                    f"{self.root}/intel-rapl:*/energy_uj {self.root}/intel-rapl:*:*/energy_uj`")
            elif domain == "dram":
                self.unavailable[column] = ("no dram zone: this CPU does not measure DRAM "
                                            "energy (client CPUs and AMD usually do not)")
            else:
                self.unavailable[column] = (f"no package zone under {self.root}"
                                            + (f" ({'; '.join(self.errors.values())})"
                                               if self.errors else ""))

    def _none(self, reason: str) -> None:
        for column in COLUMNS.values():
            self.unavailable[column] = reason

    def read(self) -> dict[str, float]:
        """Energy of each domain since ``open()``, in mJ; a zone that fails is left out."""
        totals: dict[str, float] = {}
        failed = set()
        for zone in self.zones:
            try:
                now = int((zone.path / "energy_uj").read_text())
            except (OSError, ValueError) as exc:
                self.errors[zone.path.name] = f"read failed: {exc}"
                failed.add(zone.domain)
                continue
            step = now - zone.last_uj
            if step < 0:  # the counter wrapped past max_energy_range_uj
                step += zone.max_uj
            zone.total_uj += step
            zone.last_uj = now
            totals[zone.domain] = totals.get(zone.domain, 0) + zone.total_uj
        return {COLUMNS[d]: round(uj / 1000.0, 3) for d, uj in totals.items() if d not in failed}

    def report(self) -> dict:
        return {"zones": [{"zone": z.path.name, "domain": z.domain,
                           "max_energy_range_uj": z.max_uj} for z in self.zones],
                "errors": dict(self.errors)}


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
