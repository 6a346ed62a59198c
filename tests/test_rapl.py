"""CPU energy from RAPL (fwbench.measure.telemetry.rapl), on a FAKE powercap tree in a tmp folder:
this machine (a VM) has no /sys/class/powercap, like most VMs and containers. The tree has the
kernel's layout and file names; a thread moves its counters during a real sampler run."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from fwbench.measure.telemetry import Sampler, load_samples, measure_idle, summarize_phases
from fwbench.measure.telemetry.rapl import RaplReader

MAX_UJ = 262_143_328_850  # a real package zone's max_energy_range_uj


def zone(root: Path, name: str, directory: str, energy_uj: int = 0, max_uj: int = MAX_UJ) -> Path:
    path = root / directory
    path.mkdir(parents=True, exist_ok=True)
    (path / "name").write_text(f"{name}\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return path


def two_socket_tree(root: Path, *, dram: bool = True) -> dict[str, Path]:
    """Two packages with core and (optionally) DRAM subzones, and an MMIO duplicate."""
    zones = {"pkg0": zone(root, "package-0", "intel-rapl:0", 1_000_000),
             "pkg1": zone(root, "package-1", "intel-rapl:1", 5_000_000),
             "core0": zone(root, "core", "intel-rapl:0:0", 7)}
    zone(root, "package-0", "intel-rapl-mmio:0", 999)  # the same counter again: never counted
    zone(root, "psys", "intel-rapl:2", 3)                # the platform: not the CPU
    if dram:
        zones["dram0"] = zone(root, "dram", "intel-rapl:0:1", 100)
        zones["dram1"] = zone(root, "dram", "intel-rapl:1:1", 200)
    return zones


def set_uj(path: Path, value: int) -> None:
    """Atomically, as a sysfs read never sees half a number."""
    (path / ".energy_uj").write_text(f"{value}\n")
    os.replace(path / ".energy_uj", path / "energy_uj")


def test_package_and_dram_summed_over_sockets_since_open(tmp_path):
    zones = two_socket_tree(tmp_path)
    rapl = RaplReader(tmp_path)
    rapl.open()
    assert rapl.unavailable == {}
    assert rapl.read() == {"cpu_package_energy_mj": 0.0, "cpu_dram_energy_mj": 0.0}
    set_uj(zones["pkg0"], 3_000_000)   # +2 J
    set_uj(zones["pkg1"], 5_500_000)   # +0.5 J
    set_uj(zones["dram0"], 100_100)    # +0.1 J
    assert rapl.read() == {"cpu_package_energy_mj": 2500.0, "cpu_dram_energy_mj": 100.0}
    assert sorted(z["zone"] for z in rapl.report()["zones"]) == [
        "intel-rapl:0", "intel-rapl:0:1", "intel-rapl:1", "intel-rapl:1:1"]


def test_wraparound_at_max_energy_range(tmp_path):
    pkg = zone(tmp_path, "package-0", "intel-rapl:0", MAX_UJ - 1_000_000)
    rapl = RaplReader(tmp_path)
    rapl.open()
    set_uj(pkg, MAX_UJ - 10)           # +999,990 uJ
    assert rapl.read()["cpu_package_energy_mj"] == 999.99
    set_uj(pkg, 2_000_000)             # wrapped: +10 uJ to the top, then 2,000,000 more
    assert rapl.read()["cpu_package_energy_mj"] == pytest.approx(999.99 + 2000.01)


def test_absent_powercap_records_why(tmp_path):
    rapl = RaplReader(tmp_path / "nothing")
    rapl.open()
    assert rapl.read() == {}
    assert set(rapl.unavailable) == {"cpu_package_energy_mj", "cpu_dram_energy_mj"}
    assert "does not exist" in rapl.unavailable["cpu_package_energy_mj"]
    (tmp_path / "empty").mkdir()
    rapl = RaplReader(tmp_path / "empty")
    rapl.open()
    assert "no intel-rapl zone" in rapl.unavailable["cpu_dram_energy_mj"]


def test_no_dram_zone_leaves_the_package(tmp_path):
    two_socket_tree(tmp_path, dram=False)
    rapl = RaplReader(tmp_path)
    rapl.open()
    assert list(rapl.unavailable) == ["cpu_dram_energy_mj"]
    assert "does not measure DRAM" in rapl.unavailable["cpu_dram_energy_mj"]
    assert list(rapl.read()) == ["cpu_package_energy_mj"]


def test_root_only_counters_name_the_fix(tmp_path, monkeypatch):
    two_socket_tree(tmp_path)
    real = Path.read_text

    def read_text(self, *args, **kwargs):  # what a non-root user meets on Linux >= 5.10
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    rapl = RaplReader(tmp_path)
    rapl.open()
    reason = rapl.unavailable["cpu_package_energy_mj"]
    assert "readable only by root" in reason and "chmod a+r" in reason


def test_the_machine_here_records_a_reason_or_reads_rapl():
    rapl = RaplReader()
    rapl.open()
    assert rapl.zones or set(rapl.unavailable) == {"cpu_package_energy_mj", "cpu_dram_energy_mj"}


class Cpu:
    """Moves the fake counters at a fixed power, as the CPU would (every 2 ms)."""

    def __init__(self, zones: dict[str, Path], package_w: float, dram_w: float):
        self.zones, self.rates = zones, {"pkg0": package_w, "dram0": dram_w}
        self.start = {k: int((zones[k] / "energy_uj").read_text()) for k in self.rates}
        self.t0 = time.perf_counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.wait(0.002):
            elapsed = time.perf_counter() - self.t0
            for key, watts in self.rates.items():
                set_uj(self.zones[key], self.start[key] + int(watts * 1e6 * elapsed))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def test_phase_energy_and_idle_subtraction_through_the_sampler(tmp_path):
    """A real sampler run over the fake tree: 40 W package, 5 W DRAM while 'busy'; idle at
    10 W and 2 W measured the same way; each phase's CPU energy and energy above idle."""
    tree = tmp_path / "powercap"
    zones = two_socket_tree(tree)
    with Cpu(zones, package_w=10.0, dram_w=2.0):
        idle = measure_idle(0.5, period_s=0.05, powercap_root=str(tree))
    assert idle["cpu_package_power_w"] == pytest.approx(10.0, rel=0.1)
    assert idle["cpu_dram_power_w"] == pytest.approx(2.0, rel=0.1)

    out = tmp_path / "trial-0.telemetry.csv"
    with Cpu(zones, package_w=40.0, dram_w=5.0):
        with Sampler(out, period_s=0.05, gpu_uuids=[], powercap_root=tree) as sampler:
            time.sleep(0.1)
            markers = {"cold_start": time.perf_counter_ns()}
            time.sleep(0.2)
            markers["warmup"] = time.perf_counter_ns()
            time.sleep(0.2)
            markers["measure"] = time.perf_counter_ns()
            time.sleep(1.0)
            markers["end"] = time.perf_counter_ns()
            time.sleep(0.1)
    host = [r for r in load_samples(out) if r["device"] == "cpu"]
    assert all(r["cpu_package_energy_mj"] is not None for r in host)
    assert "cpu_package_energy_mj" not in sampler.meta["unavailable"]
    assert len(sampler.meta["cpu"]["rapl"]["zones"]) == 4

    s = summarize_phases(out, markers, idle=idle)
    measure = s["phases"]["measure"]
    duration = measure["duration_s"]
    assert measure["cpu_energy_source"] == "rapl_sampled"
    assert measure["cpu_package_energy_j"] == pytest.approx(40.0 * duration, rel=0.1)
    assert measure["cpu_dram_energy_j"] == pytest.approx(5.0 * duration, rel=0.1)
    assert measure["cpu_package_power_mean_w"] == pytest.approx(40.0, rel=0.1)
    assert measure["cpu_package_energy_above_idle_j"] == pytest.approx(
        measure["cpu_package_energy_j"] - idle["cpu_package_power_w"] * duration)
    # Phases under 10 sampling periods (0.5 s here) are flagged, with the reason.
    assert sorted(s["cpu_energy_flags"]) == ["cold_start", "warmup"]
    assert s["phases"]["warmup"]["cpu_package_energy_j"] is None
    assert "shorter than 10 samples" in s["cpu_energy_flags"]["warmup"]
