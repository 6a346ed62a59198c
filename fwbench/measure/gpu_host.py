"""What a GPU run needs of its host, checked before it measures: a GPU that NVML can see (else a
config with CUDA devices is refused before any job starts), and an NVIDIA driver at least as new
as each image's CUDA runtime needs (else the run stops, naming both versions).

Both read the host through NVML (``fwbench.measure.telemetry.gpu.load_nvml``), so a test hands
in the fake of tests/fakes/nvml.py at that boundary and nothing else. The minimum driver of an
image comes from the CUDA runtime its requirements lock pins
(``fwbench.environment.cuda_stack.lock_stack``), the value its label records at build time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from fwbench import SOURCE_DIR
from fwbench.environment import cuda_stack, images
from fwbench.measure.telemetry.gpu import NvmlSpec, load_nvml
from fwbench.plan.frameworks import FRAMEWORKS

# Without these in the environment, no CUDA device is visible to a framework, whatever NVML sees.
HIDDEN = ("", "-1", "none", "NoDevFiles")


def host_gpus(nvml_spec: NvmlSpec = None,
              environ: Mapping[str, str] = os.environ) -> tuple[int, str | None, str | None]:
    """(GPUs visible to a job, the driver version, why none is visible or None), through NVML
    and ``CUDA_VISIBLE_DEVICES``."""
    nvml, reason = load_nvml(nvml_spec)
    if nvml is None:
        return 0, None, reason
    try:
        driver = nvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        count = nvml.nvmlDeviceGetCount()
    except nvml.NVMLError as exc:
        return 0, None, f"NVML could not list the GPUs: {exc}"
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass
    if not count:
        return 0, driver, f"NVML reports no GPU on this machine (driver {driver})"
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in HIDDEN:
        return 0, driver, f"CUDA_VISIBLE_DEVICES={visible!r} hides the machine's {count} GPU(s)"
    return count, driver, None


def refuse_cuda_without_gpu(devices: Iterable[str], nvml_spec: NvmlSpec = None,
                            environ: Mapping[str, str] = os.environ) -> None:
    """Stop before any job starts when trials on ``devices`` are still to measure and one is
    ``cuda`` while no GPU is visible here: each would only record that it found none. The
    workflow calls it when jobs are about to run (``onstart``, never in a dry-run) with the
    devices of the trials still missing, so rebuilding a finished GPU run works anywhere."""
    if "cuda" not in set(devices):
        return
    count, _, reason = host_gpus(nvml_spec, environ)
    if not count:
        raise SystemExit(
            f"fwbench: the config asks for CUDA devices (devices: [..., cuda]) and no GPU is "
            f"visible here: {reason}. Run on a GPU machine (docs/gpu.md), or set `devices: "
            "[cpu]` (--config 'devices=[cpu]').")


def image_minimums(frameworks: Iterable[str] = tuple(FRAMEWORKS),
                   lock_path: str | os.PathLike | None = None,
                   variant: str = "cuda") -> dict[str, str]:
    """The oldest driver each framework's image needs, by framework: from the requirements lock
    the image lock names (images built here), else from ``containers/<framework>/requirements-
    <variant>.lock``. A framework whose image carries no CUDA runtime is left out."""
    entries = {}
    path = Path(lock_path) if lock_path else images.default_lock_path()
    try:
        entries = images.load_lock(path)["images"] if path.exists() else {}
    except images.ImageError:
        entries = {}
    found = {}
    for framework in frameworks:
        lock = (entries.get(framework) or {}).get("lock") or \
            f"containers/{framework}/requirements-{variant}.lock"
        minimum = cuda_stack.lock_stack(SOURCE_DIR / lock)["driver_minimum"]
        if minimum:
            found[framework] = minimum
    return found


def driver_problems(driver: str, minimums: Mapping[str, str],
                    subject: str = "the {} image") -> list[str]:
    """One sentence per image (``subject`` names it) whose CUDA needs a newer driver than
    ``driver``."""
    return [f"{subject.format(name)} needs NVIDIA driver >= {minimum} (its CUDA runtime), this "
            f"host has {driver}" for name, minimum in sorted(minimums.items())
            if cuda_stack.version_key(driver) < cuda_stack.version_key(minimum)]


def driver_check(nvml_spec: NvmlSpec = None, minimums: Mapping[str, str] | None = None,
                 environ: Mapping[str, str] = os.environ) -> tuple[str, str, str]:
    """``fwbench doctor``'s line: (name, status, advice). ``fail`` when a GPU is there and its
    driver is older than an image's CUDA needs; ``ok`` naming both otherwise; ``ok`` with why
    when there is no GPU (a CPU run needs no driver)."""
    minimums = image_minimums() if minimums is None else minimums
    wanted = ", ".join(f"{f} >= {m}" for f, m in sorted(minimums.items()))
    count, driver, reason = host_gpus(nvml_spec, environ)
    if not count:    # a CPU run needs no driver; a CUDA config is refused before its jobs
        return "NVIDIA driver", "ok", f"no GPU run possible here ({reason}); images need {wanted}"
    problems = driver_problems(driver, minimums)
    if problems:
        return "NVIDIA driver", "fail", (
            "; ".join(problems) + ": install a newer driver (the images' CUDA cannot start on "
            "this one), or measure on another GPU host")
    return "NVIDIA driver", "ok", f"{driver} on {count} GPU(s); images need {wanted}"


def require_driver(nvml_spec: NvmlSpec = None, minimums: Mapping[str, str] | None = None,
                   environ: Mapping[str, str] = os.environ) -> None:
    """Stop a GPU run before it measures when the driver is older than an image needs."""
    name, status, advice = driver_check(nvml_spec, minimums, environ)
    if status == "fail":
        raise SystemExit(f"fwbench: {name}: {advice}")
