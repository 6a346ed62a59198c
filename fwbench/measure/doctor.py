"""`fwbench doctor`: what a run needs and what would disturb its measurements, checked before it
starts, as pyperf's `system show` does. A missing package or a full disk stops a run hours in,
after the trials; a busy core, a powersave governor or turbo only make its numbers noisier,
so they warn and never block. Each check is a small function returning (name, status, advice).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path

from fwbench import SOURCE_DIR
from fwbench.measure.telemetry.machine import SYSFS_ROOT, cpu_state
from fwbench.plan import frameworks

OK, WARN, FAIL, NOT_VISIBLE = "ok", "warn", "fail", "not visible"
Check = tuple[str, str, str]

GB = 1e9
# A run's folder takes 5-17 MB (the shipped runs), its logs and Snakemake's records a few more;
# the framework images take 8 GB (CPU) to 13 GB (CUDA), each held twice with Podman or Docker
# (in the engine and as an archive: docs/containers.md).
DISK_NEEDED = 1 * GB
DISK_FOR_IMAGES = 26 * GB
# A trial of the default run peaks under 1 GB, of the CPU presets up to 3.8 GB (dai2022-cpu).
MEMORY_WANTED = 4 * GB
# Host side: the workflow and the report; beside them, each framework for native trials.
HOST_PACKAGES = ("snakemake", "pandas", "pyarrow", "scipy", "jinja2", "yaml", "jsonschema",
                 "psutil")
ENGINES = ("apptainer", "podman", "docker")
SHIM = SOURCE_DIR / "scripts" / "containers" / "apptainer"
# Another process busy on this share of one core or more disturbs a trial.
BUSY_CORES = 0.5


def python_version(version=sys.version_info) -> Check:
    found = ".".join(map(str, version[:3]))
    if tuple(version[:2]) == (3, 11):
        return "Python", OK, found
    return "Python", WARN, (f"{found}: requirements.lock pins wheels for Python 3.11; create "
                            ".venv with python3.11 (`make PYTHON=python3.11 run`)")


def packages(containers: bool = False, find=importlib.util.find_spec) -> Check:
    """The packages the host imports (the frameworks too, unless trials run in images)."""
    wanted = HOST_PACKAGES + (() if containers else tuple(frameworks.each("module").values()))
    missing = [name for name in wanted if find(name) is None]
    if missing:
        return "Python packages", FAIL, (f"missing {', '.join(missing)} in {sys.prefix}: "
                                         "`make .venv/.installed`, then run .venv/bin/fwbench")
    return "Python packages", OK, ", ".join(wanted)


def pango() -> Check:
    """WeasyPrint loads Pango when imported; without it the last job, the report, fails."""
    try:
        import weasyprint
    except (ImportError, OSError) as exc:
        return "Pango (WeasyPrint)", FAIL, (
            f"WeasyPrint cannot load ({str(exc).splitlines()[0][:120]}): `apt-get install "
            "libpango-1.0-0 libpangoft2-1.0-0` (Debian/Ubuntu), then `pip install weasyprint`")
    return "Pango (WeasyPrint)", OK, f"WeasyPrint {weasyprint.__version__} writes the PDF"


def disk(path: str | os.PathLike = ".", containers: bool = False, usage=shutil.disk_usage) -> Check:
    free = usage(path).free
    where = f"{free / GB:.1f} GB free at {Path(path).resolve()}"
    if free < DISK_NEEDED:
        return "free disk", FAIL, f"{where}: a run needs {DISK_NEEDED / GB:.0f} GB; free some"
    if containers and free < DISK_FOR_IMAGES:
        return "free disk", WARN, (f"{where}: building both images (`make images`) takes up to "
                                   f"{DISK_FOR_IMAGES / GB:.0f} GB")
    return "free disk", OK, where


def memory(meminfo: str | os.PathLike = "/proc/meminfo") -> Check:
    try:
        fields = dict(line.split(":", 1) for line in Path(meminfo).read_text().splitlines())
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return "memory", NOT_VISIBLE, f"no MemAvailable in {meminfo}"
    found = f"{available / GB:.1f} GB available"
    if available < MEMORY_WANTED:
        return "memory", WARN, (f"{found}: a preset's trial takes up to 3.8 GB, and one that "
                                "runs out is recorded as `oom`; close other programs")
    return "memory", OK, found


def container_engine(containers: bool = False, which=shutil.which) -> Check:
    """Apptainer, or Podman or Docker through the shim that answers for it (docs/containers.md),
    which must then come first on PATH as `apptainer`."""
    apptainer = which("apptainer")
    shim = bool(apptainer) and Path(apptainer).resolve() == SHIM.resolve()
    found = [name for name in ENGINES if which(name) and not (shim and name == "apptainer")]
    if not containers:
        return "container engine", OK, ("not needed without --use-singularity (found: "
                                        f"{', '.join(found) or 'none'})")
    if apptainer and not shim:
        return "container engine", OK, f"apptainer ({apptainer})"
    if found and shim:
        return "container engine", OK, f"{found[0]}, through the shim {SHIM}"
    if found:
        return "container engine", FAIL, (f"{found[0]} needs the shim as `apptainer`: put "
                                          f"{SHIM.parent} first on PATH (make run-containers does)")
    return "container engine", FAIL, ("--use-singularity needs Apptainer, Podman or Docker "
                                      "(docs/containers.md); or run natively, without it")


def load_average(loadavg=os.getloadavg, cores: int | None = None) -> Check:
    cores = cores or os.cpu_count() or 1
    load = loadavg()[0]
    found = f"{load:.2f} over the last minute on {cores} cores"
    if load >= 1:
        return "load average", WARN, (f"{found}: other processes ran; measure on a quiet "
                                      "machine, or expect noisier trials")
    return "load average", OK, found


def busy_cores(before: list[int], after: list[int]) -> float:
    """Cores' worth of time spent busy between two readings of /proc/stat's `cpu` line (user,
    nice, system, idle, iowait, irq, softirq, steal, ...): everything but idle and iowait, steal
    included (another virtual machine took it)."""
    delta = [b - a for a, b in zip(before, after)]
    total = sum(delta[:8])
    idle = delta[3] + delta[4]
    return (total - idle) / total if total else 0.0


def _cpu_times(stat: str | os.PathLike) -> list[int]:
    first = Path(stat).read_text().splitlines()[0].split()
    return [int(v) for v in first[1:]]


def cpu_busy(stat: str | os.PathLike = "/proc/stat", interval_s: float = 1.0,
             cores: int | None = None) -> Check:
    """The share of the CPUs other processes keep busy now, over ``interval_s`` (this one
    sleeps)."""
    cores = cores or os.cpu_count() or 1
    try:
        before = _cpu_times(stat)
        time.sleep(interval_s)
        busy = busy_cores(before, _cpu_times(stat)) * cores
    except (OSError, IndexError, ValueError):
        return "CPU busy now", NOT_VISIBLE, f"no cpu line in {stat}"
    found = f"{busy:.2f} of {cores} cores busy over {interval_s:g} s"
    if busy >= BUSY_CORES:
        return "CPU busy now", WARN, (f"{found}: other processes keep a core busy; stop them "
                                      "(`top`) before measuring")
    return "CPU busy now", OK, found


def governor(state: dict) -> Check:
    value = state.get("scaling_governor")
    if value is None:
        return "frequency governor", NOT_VISIBLE, "no cpufreq under /sys (usual in VMs)"
    if value == "performance":
        return "frequency governor", OK, value
    return "frequency governor", WARN, (f"{value}: clocks follow the load; `sudo cpupower "
                                        "frequency-set -g performance` (or pyperf system tune)")


# How to turn turbo off, by where fwbench.measure.telemetry.machine read it.
TURBO_OFF = {
    "intel_pstate/no_turbo": "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo",
    "cpufreq/boost": "echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/boost",
    "cpufreq/policy*/boost": "echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/policy*/boost",
}


def turbo(state: dict) -> Check:
    value = state.get("turbo")
    if value is None:
        return "turbo", NOT_VISIBLE, "neither intel_pstate/no_turbo nor cpufreq/boost (VMs)"
    if value is False:
        return "turbo", OK, "off"
    return "turbo", WARN, (f"{'on' if value is True else value}: clocks follow temperature; for "
                           f"steadier timings `{TURBO_OFF[state['turbo_source']]}`")


def smt(state: dict) -> Check:
    control = state.get("smt_control")
    if control in (None, "notsupported", "notimplemented"):
        return "SMT", NOT_VISIBLE, f"smt/control: {control or 'absent'} (usual in VMs)"
    if state.get("smt_active"):
        return "SMT", OK, (f"{control}, active: a busy sibling thread slows a trial, so keep the "
                           "machine quiet")
    return "SMT", OK, control


def nvidia_driver(nvml_spec=None) -> Check:
    """The host's NVIDIA driver (NVML) against the oldest each image's CUDA needs: `fail` names
    both versions when it is older (fwbench.measure.gpu_host); `ok` where there is no GPU."""
    from fwbench.measure.gpu_host import driver_check
    return driver_check(nvml_spec)


def checks(path: str | os.PathLike = ".", containers: bool = False,
           sysfs_root: str | os.PathLike = SYSFS_ROOT) -> list[Check]:
    """Every check, in the order `fwbench doctor` prints them."""
    state = cpu_state(sysfs_root)
    return [python_version(), packages(containers), pango(), disk(path, containers), memory(),
            container_engine(containers), nvidia_driver(), load_average(), cpu_busy(),
            governor(state), turbo(state), smt(state)]


def blocks(found: list[Check]) -> bool:
    """Whether something would make a run fail."""
    return any(status == FAIL for _, status, _ in found)


def line(check: Check) -> str:
    name, status, advice = check
    return f"  {status:<12}{name}: {advice}"


def verdict(found: list[Check]) -> str:
    warnings = sum(status == WARN for _, status, _ in found)
    if blocks(found):
        return "fwbench doctor: a run would fail here: fix what says `fail`"
    return ("fwbench doctor: nothing blocks a run"
            + (f" ({warnings} warning{'s' * (warnings > 1)}: noisier measurements)"
               if warnings else ""))
