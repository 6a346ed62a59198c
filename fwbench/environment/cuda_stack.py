"""The CUDA stack a framework image carries: the CUDA runtime, cuDNN and NCCL its requirements
lock pins, what the framework reports of them inside the image, the oldest NVIDIA driver each
CUDA release needs, and the framework's one line about the GPUs it sees. Read by
``python -m fwbench.environment.images stack`` and ``gpu`` inside an image, and by the GPU host
check (fwbench.measure.gpu_host)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from fwbench.plan import frameworks

# The oldest NVIDIA Linux driver each CUDA release (major.minor) needs: the "Toolkit Driver
# Version" of that release's GA in NVIDIA's CUDA Toolkit release notes (Linux x86_64). The same
# table as containers/write_label.py's, which writes it into the label at build time
# (tests/test_cuda_stack.py keeps the two equal).
DRIVER_MINIMUM = {"12.9": "575.51.03", "13.0": "580.65.06"}
# The pins of a requirements lock that carry the CUDA runtime, cuDNN and NCCL.
STACK_PACKAGES = {"cuda_runtime": re.compile(r"nvidia-cuda-runtime(-cu\d+)?"),
                  "cudnn": re.compile(r"nvidia-cudnn-cu\d+"),
                  "nccl": re.compile(r"nvidia-nccl-cu\d+")}


def version_key(version: str) -> tuple[int, ...]:
    """``"580.65.06"`` -> (580, 65, 6); text after the numbers (``-fake``) is dropped."""
    return tuple(int(part) for part in re.findall(r"\d+", str(version).split("-")[0]))


def lock_stack(requirements_lock: str | os.PathLike) -> dict:
    """What an image's requirements lock pins of its CUDA stack: the CUDA runtime (major.minor),
    cuDNN and NCCL (major.minor.patch), and the oldest driver that runtime needs; None for what
    it does not pin (the CPU variant of TensorFlow)."""
    pins = dict(re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)",
                           Path(requirements_lock).read_text(), re.M))
    found: dict = {key: None for key in STACK_PACKAGES}
    for name, version in pins.items():
        for key, pattern in STACK_PACKAGES.items():
            if pattern.fullmatch(name.lower().replace("_", "-")):
                parts = version.split(".")
                found[key] = ".".join(parts[:2] if key == "cuda_runtime" else parts[:3])
    runtime = found["cuda_runtime"]
    found["driver_minimum"] = DRIVER_MINIMUM.get(runtime) if runtime else None
    return found


def stack_problems(framework: str, stack: dict, pinned: dict) -> list[str]:
    """How the CUDA stack read in an image (``write_label.cuda_stack``) differs from what its
    lock pins (:func:`lock_stack`); empty when it matches. The libraries' own versions must
    equal the pins; the framework's build: PyTorch's CUDA, cuDNN and NCCL equal them too;
    TensorFlow's build info names the CUDA it was compiled with (the same major as the runtime,
    not newer) and cuDNN's major."""
    problems = []
    libraries, build = stack.get("libraries") or {}, stack.get("framework") or {}
    for key in ("cuda_runtime", "cudnn", "nccl"):
        if libraries.get(key) != pinned.get(key):
            problems.append(f"{key} library is {libraries.get(key)}, the lock pins "
                            f"{pinned.get(key)}")
    if stack.get("driver_minimum") != pinned.get("driver_minimum"):
        problems.append(f"minimum driver {stack.get('driver_minimum')}, expected "
                        f"{pinned.get('driver_minimum')} for CUDA {pinned.get('cuda_runtime')}")
    if pinned.get("cuda_runtime") is None:
        return problems
    if framework == "pytorch":
        for key, pin in (("cuda", "cuda_runtime"), ("cudnn", "cudnn"), ("nccl", "nccl")):
            if build.get(key) != pinned.get(pin):
                problems.append(f"torch reports {key} {build.get(key)}, the lock pins "
                                f"{pinned.get(pin)}")
    else:
        cuda, runtime = str(build.get("cuda") or ""), pinned["cuda_runtime"]
        if not build.get("is_cuda_build"):
            problems.append("tf.sysconfig.get_build_info() says it is not a CUDA build")
        elif (version_key(cuda)[:1] != version_key(runtime)[:1]
              or version_key(cuda)[:2] > version_key(runtime)[:2]):
            problems.append(f"TensorFlow was built with CUDA {cuda}, which the pinned runtime "
                            f"{runtime} cannot serve")
        if str(build.get("cudnn") or "").split(".")[0] != str(pinned.get("cudnn")).split(".")[0]:
            problems.append(f"TensorFlow was built with cuDNN {build.get('cudnn')}, the lock "
                            f"pins {pinned.get('cudnn')}")
    return problems


def gpu_report(framework: str, python: str = sys.executable) -> tuple[int, str]:
    """(GPU count, one line) as the framework sees it here: ``"pytorch: no GPU visible
    (torch.cuda.is_available() is False; NVML: ...)"``, or the GPUs it sees. Never a traceback:
    a framework that fails to answer gives one line naming its last error line. The framework's
    own answer (its registry's ``gpu_probe``) runs in a child process whose output is kept
    apart, so the caller prints one line whatever the framework logs (TensorFlow's absl lines)."""
    record = frameworks.get(framework)
    proc = subprocess.run([python, "-c", record.gpu_probe], capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return 0, f"{framework}: could not ask for GPUs (exit {proc.returncode}: {last[:200]})"
    count, *names = lines[-1].split("\t")
    if int(count):
        return int(count), f"{framework}: {count} GPU(s) visible: {', '.join(names)}"
    return 0, f"{framework}: no GPU visible ({record.gpu_absent}; NVML: {_nvml_says()})"


def _nvml_says() -> str:
    """What NVML says of this machine's GPUs, in a few words (never raises)."""
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return f"{exc} (no NVIDIA driver here, or it is not passed into the container)"
    try:
        count = pynvml.nvmlDeviceGetCount()
        return f"{count} GPU(s), which the framework does not see" if count else "no GPU"
    except pynvml.NVMLError as exc:
        return str(exc)
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def read_stack(framework: str, label_file: Path, python: str = sys.executable) -> dict | None:
    """The CUDA stack read now inside the image, by the label writer the image carries
    (``write_label.py --stack``, beside its label file ``label_file``); None outside an image."""
    writer = label_file.with_name("write_label.py")
    if not writer.is_file():
        return None
    proc = subprocess.run([python, str(writer), "--stack", "--framework", framework],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_stack(framework: str, label: Mapping, label_file: Path) -> dict:
    """Inside an image: its CUDA stack read now, as its label (``label``, read from
    ``label_file``) recorded it at build time, and as its requirements lock beside the label
    pins it, with ``problems`` (empty when all three agree), the oldest driver it needs, and the
    framework's one line about GPUs."""
    pinned = lock_stack(label_file.with_name("requirements.lock"))
    now = read_stack(framework, label_file) or {}
    problems = [] if label.get("cuda_stack") else ["the label records no cuda_stack (label "
                                                   f"version {label.get('label_version')})"]
    if "error" in now:
        problems.append(f"reading the stack failed: {now['error']}")
    else:
        problems += stack_problems(framework, now, pinned)
        if label.get("cuda_stack") and label["cuda_stack"] != now:
            problems.append("the label's cuda_stack differs from what the image reports now")
    count, line = gpu_report(framework)
    return {"framework": framework, "variant": label.get("variant"), "pinned": pinned,
            "label": label.get("cuda_stack"), "now": now,
            "driver_minimum": pinned["driver_minimum"], "gpus": count, "gpu_line": line,
            "problems": problems}
