"""`fwbench doctor` (fwbench.measure.doctor): each check on made-up readings of the machine, what
blocks a run and what only warns, and the command's output and exit status here."""

from __future__ import annotations

import subprocess
import sys
from collections import namedtuple

from fwbench.measure import doctor
from fwbench.measure.doctor import FAIL, NOT_VISIBLE, OK, WARN

Usage = namedtuple("Usage", "total used free")


def status(check) -> str:
    return check[1]


def test_python_311_is_what_the_lock_pins():
    assert status(doctor.python_version((3, 11, 7))) == OK
    name, found, advice = doctor.python_version((3, 12, 1))
    assert found == WARN and "3.11" in advice


def finder(*missing: str):
    """importlib.util.find_spec, as if ``missing`` were not installed."""
    return lambda name: None if name in missing else object()


def which(*installed: str):
    return lambda name: f"/usr/bin/{name}" if name in installed else None


def test_a_missing_package_blocks_and_the_frameworks_are_not_needed_with_images():
    check = doctor.packages(find=finder("tensorflow", "pyarrow"))
    assert status(check) == FAIL and "tensorflow" in check[2] and "pyarrow" in check[2]
    assert doctor.blocks([check])
    assert status(doctor.packages(containers=True, find=finder("tensorflow"))) == OK


def test_free_disk_blocks_below_a_run_and_warns_below_the_images(tmp_path):
    def free(gb: float):
        return lambda path: Usage(0, 0, gb * doctor.GB)

    assert status(doctor.disk(tmp_path, usage=free(0.5))) == FAIL
    assert status(doctor.disk(tmp_path, usage=free(5))) == OK
    assert status(doctor.disk(tmp_path, containers=True, usage=free(5))) == WARN


def test_memory_warns_when_little_is_available(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 16000000 kB\nMemAvailable:  2000000 kB\n")
    assert status(doctor.memory(meminfo)) == WARN
    meminfo.write_text("MemTotal: 16000000 kB\nMemAvailable: 12000000 kB\n")
    assert doctor.memory(meminfo)[1:] == (OK, "12.3 GB available")
    assert status(doctor.memory(tmp_path / "absent")) == NOT_VISIBLE


def test_a_container_engine_is_needed_only_with_use_singularity():
    assert status(doctor.container_engine(which=which())) == OK
    assert status(doctor.container_engine(containers=True, which=which())) == FAIL
    assert status(doctor.container_engine(containers=True, which=which("apptainer"))) == OK
    check = doctor.container_engine(containers=True, which=which("podman"))   # no shim on PATH
    assert status(check) == FAIL and "scripts/containers first on PATH" in check[2]

    def shim_first(name):
        return str(doctor.SHIM) if name == "apptainer" else which("podman")(name)

    check = doctor.container_engine(containers=True, which=shim_first)
    assert check[1:] == (OK, f"podman, through the shim {doctor.SHIM}")


def test_load_and_busy_cores_warn_but_never_block(tmp_path):
    assert status(doctor.load_average(lambda: (0.2, 0, 0), cores=2)) == OK
    busy = doctor.load_average(lambda: (1.4, 0, 0), cores=2)
    assert status(busy) == WARN and not doctor.blocks([busy])
    # user nice system idle iowait irq softirq steal: one of two cores busy over the interval
    before = [100, 0, 0, 1000, 0, 0, 0, 0, 0, 0]
    after = [200, 0, 0, 1100, 0, 0, 0, 0, 0, 0]
    assert doctor.busy_cores(before, after) == 0.5
    assert doctor.busy_cores(before, [110, 0, 0, 1190, 0, 0, 0, 0, 0, 0]) == 0.05
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 0 1000 0 0 0 0 0 0\ncpu0 50 0 0 500 0 0 0 0 0 0\n")
    check = doctor.cpu_busy(stat, interval_s=0.01, cores=2)
    assert status(check) == OK and "0.00 of 2 cores" in check[2]
    assert status(doctor.cpu_busy(tmp_path / "absent", interval_s=0)) == NOT_VISIBLE


def test_governor_turbo_and_smt_say_what_to_do_or_that_they_are_not_visible():
    vm = {"scaling_governor": None, "turbo": None, "smt_control": "notsupported"}
    assert [status(c(vm)) for c in (doctor.governor, doctor.turbo, doctor.smt)] == [NOT_VISIBLE] * 3
    assert status(doctor.governor({"scaling_governor": "performance"})) == OK
    powersave = doctor.governor({"scaling_governor": "powersave"})
    assert status(powersave) == WARN and "cpupower frequency-set -g performance" in powersave[2]
    turbo = doctor.turbo({"turbo": True, "turbo_source": "intel_pstate/no_turbo"})
    assert status(turbo) == WARN and "intel_pstate/no_turbo" in turbo[2]
    assert status(doctor.turbo({"turbo": False, "turbo_source": "cpufreq/boost"})) == OK
    assert status(doctor.smt({"smt_control": "on", "smt_active": True})) == OK


def test_the_verdict_counts_warnings_and_names_a_failure():
    found = [("a", OK, ""), ("b", WARN, ""), ("c", NOT_VISIBLE, "")]
    assert doctor.verdict(found) == ("fwbench doctor: nothing blocks a run (1 warning: noisier "
                                     "measurements)")
    assert "fail" in doctor.verdict([*found, ("d", FAIL, "")])
    assert doctor.line(("free disk", WARN, "5 GB")) == "  warn        free disk: 5 GB"


def test_fwbench_doctor_here_prints_every_check_and_passes():
    proc = subprocess.run([sys.executable, "-m", "fwbench", "doctor", "--use-singularity"],
                          capture_output=True, text=True, timeout=120)
    *lines, verdict = proc.stdout.splitlines()
    found = {line[14:].split(":")[0]: line[2:14].strip() for line in lines}
    assert {"Python", "Python packages", "Pango (WeasyPrint)", "free disk", "memory",
            "container engine", "load average", "CPU busy now", "frequency governor", "turbo",
            "SMT"} <= set(found)
    assert set(found.values()) <= {OK, WARN, FAIL, NOT_VISIBLE}
    # Here only the engine may be missing (the test environment is the locked one).
    assert [name for name, s in found.items() if s == FAIL] in ([], ["container engine"])
    assert proc.returncode == (FAIL in found.values()) and verdict.startswith("fwbench doctor")
