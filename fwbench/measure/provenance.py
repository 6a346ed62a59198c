"""Where a number came from: the software and the machine of a trial, recorded beside it.

Two halves, because the trial's parent process never imports a framework:

- :func:`environment` — parent side, framework-free: image reference and digest (or
  ``container: none``), Python and every installed package with its version, OS and kernel, CPU,
  memory, GPUs and driver through NVML, the environment variables that change behaviour, and the
  workflow's git commit and dirty flag, and the hash of what measures
  (fwbench.environment.source).
  ``fwbench.measure.trial.run_trial`` writes it to ``trial-<k>.env.json``, merged with the child's
  versions.
- :func:`framework_runtime` — child side, after the framework ran: its build information (the
  versions it was *built* against) and the CUDA, cuDNN and BLAS libraries *actually loaded*, read
  from the process's mapped shared objects (``/proc/self/maps``).

Nothing here fails a trial: what cannot be read is recorded as unavailable, with the reason.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import socket
import sys
from pathlib import Path

from fwbench.environment.source import git_state, measuring_code
from fwbench.plan import frameworks

# Environment variables that change what a framework does or how fast: threads, devices,
# allocators, determinism, precision, compilers, library search paths and caches. Recorded
# with their values when set (none of these carries a secret).
BEHAVIOUR_VARIABLES = re.compile(
    r"^(CUDA_\w+|NVIDIA_\w+|CUBLAS_\w+|CUDNN_\w+|NCCL_\w+|TF_\w+|XLA_FLAGS|TPU_\w+|"
    r"PYTORCH_\w+|TORCH_\w+|TORCHINDUCTOR_\w+|TORCHDYNAMO_\w+|TRITON_\w+|KERAS_\w+|"
    r"OMP_\w+|KMP_\w+|GOMP_\w+|MKL_\w+|OPENBLAS_\w+|GOTO_NUM_THREADS|VECLIB_MAXIMUM_THREADS|"
    r"NUMEXPR_\w+|DNNL_\w+|ONEDNN_\w+|LD_LIBRARY_PATH|LD_PRELOAD|MALLOC_\w+|"
    r"PYTHONHASHSEED|PYTHONNOUSERSITE|PYTHONPATH|PYTHONOPTIMIZE|PYTHONDONTWRITEBYTECODE|"
    r"PYTHONMALLOC|XDG_CACHE_HOME|MPLCONFIGDIR|FWBENCH_\w+)$")
# Never recorded, whatever the prefix: Terraform's TF_TOKEN_*/TF_VAR_*/TF_CLI_*, and anything
# that looks like a credential.
SECRET_VARIABLES = re.compile(r"^TF_(TOKEN|VAR|CLI|LOG)|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|"
                              r"API_?KEY|AUTH", re.IGNORECASE)

# Shared objects worth naming when loaded: the CUDA stack, the framework cores, BLAS/threading.
LIBRARY_NAMES = re.compile(
    r"^lib(cuda|cudart|cudnn\w*|cublas\w*|cufft\w*|curand|cusolver\w*|cusparse\w*|cupti|"
    r"nccl|nvrtc\w*|nvJitLink|nvjitlink|nvToolsExt|nvidia-ml|nvshmem\w*|cusparseLt|cufile\w*|"
    r"torch\w*|c10\w*|tensorflow\w*|tf_\w+|xla\w*|"
    r"mkl\w*|openblas\w*|gomp|iomp5|omp|dnnl|mkldnn\w*|tcmalloc\w*|jemalloc)[.-]")


def environment(nvml_spec=None) -> dict:
    """The machine, software and settings of this process, for ``trial-<k>.env.json``.

    Framework-free (the parent process never imports torch or tensorflow). ``container`` is
    ``"none"`` natively, else the image (``fwbench.environment.images.check_runtime``): the
    reference and the content digest its engine gave it (``engine``: podman, docker, apptainer, or
    registry), the image file Apptainer ran, and the label written into the image at build time.
    Inside a container everything else here is read there: its Python, its packages, its OS.
    ``nvml_spec`` is passed to :func:`fwbench.measure.telemetry.gpu.load_nvml` (tests hand in a
    fake).

    Usage::

        env = {**provenance.environment(), **result["versions"]}
    """
    from fwbench.environment.images import runtime_container
    from fwbench.measure.telemetry.machine import machine_state

    cpu = cpu_info()
    container = runtime_container()
    image = container if isinstance(container, dict) else {}
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_model": cpu["model"],
        "cpu_count": cpu["logical_cores"],
        "container": container,
        "python_build": python_info(),
        "packages": packages(),
        "os": os_info(),
        "cpu": cpu,
        "memory_bytes": memory_bytes(),
        "gpus": gpu_info(nvml_spec),
        # governor, turbo, SMT; GPU power limit, persistence, clocks, ECC, MIG (docs/telemetry.md)
        "machine_state": machine_state(nvml=nvml_spec),
        "environment_variables": behaviour_variables(),
        "workflow": {**git_state(), "measuring_code": measuring_code(image.get("digest"))},
    }


def python_info() -> dict:
    return {
        "version": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "compiler": platform.python_compiler(),
        "executable": sys.executable,
        "prefix": sys.prefix,
    }


def packages() -> dict[str, str]:
    """Every installed distribution visible to this interpreter, name -> version.

    Name and version are read from the head of each package's metadata file: parsing the whole
    file as an e-mail message (``dist.metadata``), twice, cost 50 ms of every trial.
    """
    found = {}
    for dist in importlib.metadata.distributions():
        head = _metadata_head(dist)
        if head.get("Name") and head.get("Version"):
            found.setdefault(_normalize(head["Name"]), head["Version"])
    return dict(sorted(found.items()))


def _metadata_head(dist) -> dict[str, str]:
    """The single-line fields before the first blank line of a package's METADATA (PKG-INFO)."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    head = {}
    for line in text.splitlines():
        if not line:
            break
        key, sep, value = line.partition(":")
        if sep and not key.startswith((" ", "\t")):
            head.setdefault(key.strip(), value.strip())
    return head


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def os_info() -> dict:
    release = {}
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                release[key] = value.strip().strip('"')
    except OSError:
        pass
    libc, libc_version = platform.libc_ver()
    return {
        "name": release.get("PRETTY_NAME") or platform.system(),
        "id": release.get("ID"),
        "version_id": release.get("VERSION_ID"),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "machine": platform.machine(),
        "libc": f"{libc} {libc_version}".strip() or None,
    }


# The instruction-set extensions that decide which kernels oneDNN, Eigen, ATen and numpy pick.
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx_vnni", "avx512f", "avx512bw", "avx512vl",
             "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")


def cpu_info(cpuinfo: str | os.PathLike = "/proc/cpuinfo",
             sysfs_root: str | os.PathLike = "/sys") -> dict:
    """The processor: its identity (vendor, family, model, stepping, microcode: a VM's model
    name often says only "AMD EPYC"), its cache sizes, the instruction-set extensions that pick
    the frameworks' kernels, and its ``kind`` (``processor_kind``), which a run never mixes."""
    fields, cores = {}, set()
    physical = core = None
    try:
        for line in Path(cpuinfo).read_text().splitlines():
            key, _, value = (part.strip() for part in line.partition(":"))
            if key and key not in fields:
                fields[key] = value
            if key == "physical id":
                physical = value
            elif key == "core id":
                core = value
            elif not key and core is not None:
                cores.add((physical, core))
                physical = core = None
        if core is not None:
            cores.add((physical, core))
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    flags = set(fields.get("flags", "").split())
    info = {
        "model": fields.get("model name") or platform.processor() or "unknown",
        "logical_cores": os.cpu_count(),
        "physical_cores": len(cores) or None,
        "usable_cores": usable,
        "architecture": platform.machine(),
        "vendor": fields.get("vendor_id"),
        "family": _integer(fields.get("cpu family")),
        "model_number": _integer(fields.get("model")),
        "stepping": _integer(fields.get("stepping")),
        "microcode": fields.get("microcode"),
        "isa": [flag for flag in ISA_FLAGS if flag in flags],
        "caches": _caches(Path(sysfs_root, "devices/system/cpu/cpu0/cache")),
    }
    return {**info, "kind": processor_kind(info)}


def processor_kind(cpu: dict) -> str:
    """What a verdict holds for: vendor, family and model, and the widest vector extensions
    (``AuthenticAMD family 25 model 17, AVX-512``). Two hosts of one kind run the same kernels;
    stepping and microcode are recorded, not part of the kind."""
    isa = set(cpu.get("isa") or ())
    widest = ("AVX-512 and AMX" if "amx_tile" in isa else "AVX-512" if "avx512f" in isa
              else "AVX2" if "avx2" in isa else "no AVX2")
    if cpu.get("vendor") is None:
        return f"{cpu.get('model') or 'unknown'}, {widest}"
    return f"{cpu['vendor']} family {cpu.get('family')} model {cpu.get('model_number')}, {widest}"


def _integer(value: str | None) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _caches(folder: Path) -> dict[str, str]:
    """Cache sizes as sysfs gives them (``{"L1d": "32K", "L2": "1024K", ...}``)."""
    caches = {}
    for index in sorted(folder.glob("index*")):
        try:
            level, kind, size = ((index / name).read_text().strip()
                                 for name in ("level", "type", "size"))
        except OSError:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        caches[f"L{level}{suffix}"] = size
    return caches


def memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def gpu_info(nvml_spec=None) -> dict:
    """Driver version, GPU count, and each GPU's name, UUID and memory, through NVML."""
    from fwbench.measure.telemetry.gpu import load_nvml

    nvml, reason = load_nvml(nvml_spec)
    if nvml is None:
        return {"available": False, "reason": reason, "count": 0, "devices": []}
    try:
        count = nvml.nvmlDeviceGetCount()
        devices = []
        for index in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            devices.append({
                "index": index,
                "name": _text(nvml.nvmlDeviceGetName(handle)),
                "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
                "memory_total_bytes": int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
            })
        return {"available": True, "reason": None,
                "driver": _text(nvml.nvmlSystemGetDriverVersion()),
                "count": count, "devices": devices,
                "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    except nvml.NVMLError as exc:
        return {"available": False, "reason": f"NVML query failed: {exc}", "count": 0,
                "devices": []}
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def behaviour_variables(environ=None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    return {k: v for k, v in sorted(environ.items())
            if BEHAVIOUR_VARIABLES.match(k) and not SECRET_VARIABLES.search(k)}


# --- child side: after the framework ran ------------------------------------------------------

def framework_runtime(framework: str) -> dict:
    """Build information of the already-imported framework and the libraries this process loaded.

    Call it in the measuring child, after the backend ran, so that lazily loaded libraries
    (cuDNN, cuBLAS) are mapped. Never imports a framework that is not imported yet.

    Usage (``fwbench.measure.throughput.run_throughput``)::

        versions = {**backend.versions(), **provenance.framework_runtime(cell.framework)}
    """
    return {"framework_build": framework_build(framework), "loaded_libraries": loaded_libraries()}


def framework_build(framework: str) -> dict:
    """What the framework says it was built with (its backend's ``build_info``), where this
    process has imported it; never imports it."""
    if frameworks.get(framework).module not in sys.modules:
        return {"unavailable": f"{framework} is not imported in this process"}
    from fwbench.measure.frameworks import get_backend

    return get_backend(framework).build_info()


def loaded_libraries(maps: str | os.PathLike = "/proc/self/maps") -> list[dict]:
    """The CUDA, cuDNN, framework and BLAS shared objects mapped into this process.

    Each entry: ``name`` (file name as mapped), ``path``, ``realpath``, and ``version`` read from
    the real file name (``libcudnn.so.9.1.0`` -> ``9.1.0``; None when the name carries none).
    """
    try:
        lines = Path(maps).read_text().splitlines()
    except OSError:
        return []
    seen, found = set(), []
    for line in lines:
        parts = line.split(maxsplit=5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        path = parts[5].removesuffix(" (deleted)")
        name = os.path.basename(path)
        if path in seen or ".so" not in name or not LIBRARY_NAMES.match(name):
            continue
        seen.add(path)
        real = os.path.realpath(path)
        found.append({"name": name, "path": path, "realpath": real,
                      "version": _so_version(os.path.basename(real)) or _so_version(name)})
    owners = _library_owners([e["path"] for e in found] + [e["realpath"] for e in found])
    for entry in found:
        entry["package"] = (owners.get(os.path.normpath(entry["path"]))
                            or owners.get(entry["realpath"]))
    return sorted(found, key=lambda e: e["name"])


def _library_owners(paths) -> dict[str, str]:
    """Path of each given shared object -> ``name==version`` of the installed package shipping it
    (pip's CUDA wheels name their libraries by soname only: libcudnn.so.9).

    Read from the packages' RECORD files as text: a package is opened only when its RECORD names
    the folder a library sits in, and only the lines naming a library's file become paths (parsing
    TensorFlow's 15,000 files as paths cost 0.3 s of every trial).
    """
    wanted = {os.path.normpath(p) for p in paths}
    tops, names = set(), {os.path.basename(p) for p in wanted}
    for path in wanted:
        parts = Path(path).parts
        for marker in ("site-packages", "dist-packages"):
            if marker in parts and parts.index(marker) + 1 < len(parts):
                tops.add(parts[parts.index(marker) + 1])
    owners, endings = {}, tuple(names)
    for dist in importlib.metadata.distributions():
        record = dist.read_text("RECORD") or ""
        if not any(f"{top}/" in record for top in tops):
            continue
        owner = None
        for line in record.splitlines():
            file = line.rsplit(",", 2)[0]
            if not file.endswith(endings) or os.path.basename(file) not in names:
                continue
            path = os.path.normpath(dist.locate_file(file))
            if path in wanted:
                if owner is None:
                    head = _metadata_head(dist)
                    owner = f"{_normalize(head.get('Name') or '?')}=={head.get('Version')}"
                owners[path] = owner
    return owners


def _so_version(name: str) -> str | None:
    match = re.search(r"\.so\.(\d+(?:\.\d+)*)$", name)
    return match.group(1) if match else None
