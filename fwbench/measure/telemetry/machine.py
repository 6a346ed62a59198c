"""The machine's settings that change how fast it runs, recorded with every trial.

CPU, from sysfs: the cpufreq governor and driver, turbo (``intel_pstate/no_turbo`` or
``cpufreq/boost``) and SMT (``smt/control``). GPU, from NVML: power limit, persistence mode,
application clocks, ECC, MIG and compute mode. Two trials compared with each other should agree
on all of these; ``machine_columns`` flattens them for the trials table, where the report can
check that they do. Nothing here fails: what the system does not expose is a reason under
``unavailable``.
"""

from __future__ import annotations

import os
from pathlib import Path

from fwbench.measure.telemetry.gpu import NvmlSpec, load_nvml

SYSFS_ROOT = "/sys"


def machine_state(*, sysfs_root: str | os.PathLike = SYSFS_ROOT, nvml: NvmlSpec = None) -> dict:
    """``{"cpu": {...}, "gpus": [...], "gpu_unavailable": why no GPU was read or None}``.

    Usage (``fwbench.measure.provenance.environment`` records it in every trial's env.json)::

        state = machine_state()
        state["cpu"]["scaling_governor"], state["gpus"][0]["power_limit_w"]
    """
    gpus, why = gpu_state(nvml)
    return {"cpu": cpu_state(sysfs_root), "gpus": gpus, "gpu_unavailable": why}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_state(sysfs_root: str | os.PathLike = SYSFS_ROOT) -> dict:
    """Governor, driver, energy/performance preference, turbo and SMT, where sysfs has them."""
    cpu = Path(sysfs_root) / "devices" / "system" / "cpu"
    out: dict = {"unavailable": {}}
    policies = sorted((cpu / "cpufreq").glob("policy*"), key=lambda p: int(p.name[6:] or 0))
    if not policies:  # older kernels: per-CPU cpufreq folders only
        policies = sorted(cpu.glob("cpu[0-9]*/cpufreq"), key=lambda p: int(p.parent.name[3:]))
    for field, file in (("scaling_governor", "scaling_governor"),
                        ("scaling_driver", "scaling_driver"),
                        ("energy_performance_preference", "energy_performance_preference")):
        values = {_name(p): _read(p / file) for p in policies}
        values = {k: v for k, v in values.items() if v is not None}
        if not values:
            out[field] = None
            out["unavailable"][field] = (
                f"no {cpu}/cpufreq/policy*/{file}: " + ("the kernel exposes no CPU frequency "
                                                        "scaling (usual in virtual machines)"
                                                        if not policies else "not offered by "
                                                        "this cpufreq driver"))
            continue
        distinct = sorted(set(values.values()))
        out[field] = distinct[0] if len(distinct) == 1 else "mixed"
        if len(distinct) > 1:
            out[f"{field}_per_policy"] = values
    out.update(_turbo(cpu, policies, out["unavailable"]))
    control, active = _read(cpu / "smt" / "control"), _read(cpu / "smt" / "active")
    out["smt_control"] = control
    out["smt_active"] = None if active is None else active == "1"
    if control is None:
        out["unavailable"]["smt_control"] = f"no {cpu}/smt/control (kernel older than 4.19)"
    return out


def _name(policy: Path) -> str:
    return policy.name if policy.name.startswith("policy") else policy.parent.name


def _turbo(cpu: Path, policies: list[Path], unavailable: dict) -> dict:
    no_turbo = _read(cpu / "intel_pstate" / "no_turbo")
    if no_turbo is not None:
        return {"turbo": no_turbo == "0", "turbo_source": "intel_pstate/no_turbo"}
    boost = _read(cpu / "cpufreq" / "boost")
    if boost is not None:
        return {"turbo": boost == "1", "turbo_source": "cpufreq/boost"}
    per_policy = {_name(p): _read(p / "boost") for p in policies}
    per_policy = {k: v for k, v in per_policy.items() if v is not None}
    if per_policy:  # amd-pstate exposes boost per policy
        values = set(per_policy.values())
        return {"turbo": (values == {"1"}) if len(values) == 1 else "mixed",
                "turbo_source": "cpufreq/policy*/boost"}
    unavailable["turbo"] = ("neither intel_pstate/no_turbo nor cpufreq/boost exists: the kernel "
                            "does not expose turbo (usual in virtual machines)")
    return {"turbo": None, "turbo_source": None}


# --- GPUs -----------------------------------------------------------------------------------

def gpu_state(nvml_spec: NvmlSpec = None) -> tuple[list[dict], str | None]:
    """One entry per GPU NVML sees (by index), and why none could be read."""
    nvml, reason = load_nvml(nvml_spec)
    if nvml is None:
        return [], reason
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append(_gpu(nvml, handle, index))
        return gpus, None if gpus else "NVML reports no GPU on this machine"
    except nvml.NVMLError as exc:
        return [], f"NVML could not list the GPUs: {exc}"
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def _gpu(nvml, handle, index: int) -> dict:
    def text(v) -> str:
        return v.decode() if isinstance(v, bytes) else str(v)

    out = {"uuid": text(nvml.nvmlDeviceGetUUID(handle)), "index": index,
           "name": text(nvml.nvmlDeviceGetName(handle)), "unavailable": {}}

    def enabled(v) -> bool:
        return v == nvml.NVML_FEATURE_ENABLED

    modes = {nvml.NVML_COMPUTEMODE_DEFAULT: "default",
             nvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS: "exclusive_process",
             nvml.NVML_COMPUTEMODE_PROHIBITED: "prohibited"}
    readers = (
        (("power_limit_w",), lambda: (nvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000,)),
        (("power_limit_default_w",),
         lambda: (nvml.nvmlDeviceGetPowerManagementDefaultLimit(handle) / 1000,)),
        (("power_limit_enforced_w",),
         lambda: (nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000,)),
        (("persistence_mode",), lambda: (enabled(nvml.nvmlDeviceGetPersistenceMode(handle)),)),
        (("applications_clock_sm_mhz", "applications_clock_mem_mhz"),
         lambda: (nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_SM),
                  nvml.nvmlDeviceGetApplicationsClock(handle, nvml.NVML_CLOCK_MEM))),
        (("default_applications_clock_sm_mhz", "default_applications_clock_mem_mhz"),
         lambda: (nvml.nvmlDeviceGetDefaultApplicationsClock(handle, nvml.NVML_CLOCK_SM),
                  nvml.nvmlDeviceGetDefaultApplicationsClock(handle, nvml.NVML_CLOCK_MEM))),
        (("ecc_current", "ecc_pending"),
         lambda: tuple(map(enabled, nvml.nvmlDeviceGetEccMode(handle)))),
        (("mig_current", "mig_pending"),
         lambda: tuple(v == nvml.NVML_DEVICE_MIG_ENABLE
                       for v in nvml.nvmlDeviceGetMigMode(handle))),
        (("compute_mode",),
         lambda: (modes.get(nvml.nvmlDeviceGetComputeMode(handle), "unknown"),)),
    )
    for fields, read in readers:
        try:
            out.update(zip(fields, read()))
        except (nvml.NVMLError, AttributeError) as exc:
            for field in fields:
                out[field] = None
                out["unavailable"][field] = str(exc)  # e.g. Not Supported (ECC on consumer GPUs)
    return out


# --- flat, for the trials table -------------------------------------------------------------

CPU_COLUMNS = {"cpu_governor": "scaling_governor", "cpu_scaling_driver": "scaling_driver",
               "cpu_turbo": "turbo", "cpu_smt": "smt_control"}
GPU_COLUMNS = {"gpu_power_limit_w": "power_limit_w", "gpu_persistence_mode": "persistence_mode",
               "gpu_applications_clock_sm_mhz": "applications_clock_sm_mhz",
               "gpu_applications_clock_mem_mhz": "applications_clock_mem_mhz",
               "gpu_ecc": "ecc_current", "gpu_mig": "mig_current",
               "gpu_compute_mode": "compute_mode"}


def machine_columns(state: dict | None, gpu_uuids: list[str] | None = None) -> dict:
    """One typed value per setting, for a trials-table row. GPU settings are those of
    ``gpu_uuids`` (every GPU when None, none when empty); a setting that differs between them
    (or across cpufreq policies) is None there, and ``machine_note`` says what differs."""
    state = state or {}
    cpu = state.get("cpu") or {}
    gpus = [g for g in state.get("gpus") or [] if gpu_uuids is None or g["uuid"] in gpu_uuids]
    out, notes = {}, []
    for column, key in CPU_COLUMNS.items():
        value = cpu.get(key)
        if value == "mixed":
            value = None
            notes.append(f"{key} differs between cpufreq policies")
        out[column] = value
    for column, key in GPU_COLUMNS.items():
        values = list(dict.fromkeys(g.get(key) for g in gpus))
        out[column] = values[0] if len(values) == 1 else None
        if len(values) > 1:
            notes.append(f"{key} differs between the GPUs: {' / '.join(map(str, values))}")
    out["machine_note"] = "; ".join(notes) or None
    return out


def trial_machine_columns(result: dict) -> dict:
    """``machine_columns`` of a trial result with its env.json merged in as ``environment``:
    the GPU settings of the trial's own GPUs (none for a CPU trial)."""
    state = (result.get("environment") or {}).get("machine_state")
    if result["cell"]["device"] == "cpu":
        return machine_columns(state, [])
    return machine_columns(state, (result.get("telemetry") or {}).get("gpus") or None)
