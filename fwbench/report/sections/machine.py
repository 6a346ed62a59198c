"""The machine the trials ran on, described for a person: processors, GPU, operating system,
host, and the CPU and GPU settings the trials recorded (fwbench.measure.telemetry.machine), in
words; what the machine did not expose is said once."""

from __future__ import annotations

import re

import pandas as pd

from fwbench.analysis.claims import wording
from fwbench.report.formatting import count

SMT = {"on": "on", "off": "off", "forceoff": "forced off", "notsupported":
       "not supported by the processor or the virtual machine", "notimplemented":
       "not reported by the kernel"}
CPU_SETTINGS = {"cpu_governor": "frequency governor", "cpu_scaling_driver": "scaling driver",
                "cpu_turbo": "turbo boost"}
GPU_SETTINGS = {"gpu_power_limit_w": ("power limit", " W"),
                "gpu_persistence_mode": ("persistence mode", ""),
                "gpu_applications_clock_sm_mhz": ("application SM clock", " MHz"),
                "gpu_applications_clock_mem_mhz": ("application memory clock", " MHz"),
                "gpu_ecc": ("ECC", ""), "gpu_mig": ("MIG", ""),
                "gpu_compute_mode": ("compute mode", "")}


def _values(trials: pd.DataFrame, column: str) -> str:
    return wording.join(wording.unique(trials, column))


def holds_for(trials: pd.DataFrame, subject: str) -> str:
    """``subject`` ("The ratios hold") scoped to the kind of processor every trial recorded: a
    verdict holds for the processor that produced it; "" where the trials recorded none, or
    several (the gate and the abstract say so)."""
    if "cpu_kind" not in trials or trials.empty or trials["cpu_kind"].isna().any():
        return ""
    kinds = wording.unique(trials, "cpu_kind")
    return (f"{subject} for the kind of processor the run was measured on, {kinds[0]}."
            if len(kinds) == 1 else "")


def kind_unrecorded(trials: pd.DataFrame) -> str:
    """What the trials recorded of a processor whose kind (vendor, family, model) they lack:
    "recorded the processor only as AMD EPYC, not its family and model"."""
    names = wording.unique(trials, "cpu_model")
    if names:
        return (f"recorded the processor only as {wording.join(names)}, not its family and "
                "model")
    return "did not record their processor"


def describe(trials: pd.DataFrame) -> str:
    """A few sentences on the machine; "" when the trials recorded none of it."""
    cpus, model = _values(trials, "cpu_count"), _values(trials, "cpu_model")
    kind = _values(trials, "cpu_kind") if "cpu_kind" in trials else ""
    named = "; ".join(v for v in (model, kind) if v)
    hardware = []
    if cpus or named:
        hardware.append(f"{count(cpus, 'logical processor') if cpus else 'processors'}"
                        + (f" ({named})" if named else ""))
    gpu = _values(trials, "device_name")
    gpu_used = "device" in trials and trials["device"].astype(str).eq("cuda").any()
    if gpu:
        driver = _values(trials, "driver")
        hardware.append(f"the GPU {gpu}" + (f" (NVIDIA driver {driver})" if driver else ""))
    system, host = _values(trials, "platform"), _values(trials, "hostname")
    clauses = [f"The trials ran on {wording.join(hardware) or 'an undescribed machine'}"]
    if not gpu and not gpu_used:
        clauses.append("with no GPU")
    if system:
        clauses.append(f"under {_platform(system)}")
    if host:
        clauses.append(f"on the host {host}")
    if hardware or system or host:
        sentences = [", ".join(clauses) + "."]
    else:
        sentences = [] if gpu_used else ["No GPU used."]
    smt = wording.unique(trials, "cpu_smt")
    if smt:
        sentences.append("Simultaneous multithreading: "
                         + wording.join(SMT.get(v, v) for v in smt) + ".")
    settings = [f"{name} {_values(trials, c)}" for c, name in CPU_SETTINGS.items()
                if _values(trials, c)]
    if gpu_used:
        settings += [f"{name} {_values(trials, c)}{unit}" for c, (name, unit)
                     in GPU_SETTINGS.items() if _values(trials, c)]
    if settings:
        sentences.append(wording.join(settings)[:1].upper() + wording.join(settings)[1:] + ".")
    hidden = [name for c, name in CPU_SETTINGS.items() if c in trials and not _values(trials, c)]
    if hidden:
        sentences.append(f"The machine does not expose its {wording.join(hidden)}, so the "
                         "trials could not record them.")
    return " ".join(sentences) or "The trials recorded no description of the machine."


def _platform(text: str) -> str:
    """"Linux-6.18.44-fc-v657-x86_64-with-glibc2.36" as "Linux 6.18.44 (x86-64, glibc 2.36)"."""
    found = re.match(r"(Linux|Darwin|Windows)-(\d+(?:\.\d+)*)\S*?-(x86_64|aarch64|arm64|AMD64)"
                     r"(?:-with-(glibc|libc)(\S+))?$", text)
    if not found:
        return text
    system, release, arch, libc, version = found.groups()
    arch = arch.replace("x86_64", "x86-64").replace("AMD64", "x86-64")
    return f"{system} {release} ({arch}" + (f", {libc} {version})" if libc else ")")
