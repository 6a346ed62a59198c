"""Write the image's label file, /opt/fwbench/image.json, at build time (run by the image's Python).

A benchmark job reads it (fwbench.environment.images.check_runtime) to make sure it runs in the
image the workflow asked for: this framework, this tag, this Python prefix, this framework version,
this lock. `python -m fwbench.environment.images check` reads it too (make test-containers).
Standard library and the image's own framework only: it runs inside the image, before anything
of fwbench is there. It also records the image's CUDA stack (cuda_stack(); `--stack --framework F`
prints it again, for `python -m fwbench.environment.images stack`).
"""

import argparse
import ctypes
import glob
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import sys
import sysconfig
from datetime import datetime, timezone
from pathlib import Path

MODULES = {"pytorch": "torch", "tensorflow": "tensorflow"}

# The oldest NVIDIA Linux driver each CUDA release (major.minor, as cudaRuntimeGetVersion gives
# it) needs: the "Toolkit Driver Version" of that release's GA in NVIDIA's CUDA Toolkit release
# notes ("CUDA Toolkit and Corresponding Driver Versions", Linux x86_64). CUDA's minor
# version compatibility may run a 12.x runtime on drivers from 525.60.13 on, with limits (no PTX
# JIT of newer PTX); fwbench asks for the release's own driver. Add a row when a lock moves.
DRIVER_MINIMUM = {"12.9": "575.51.03", "13.0": "580.65.06"}


def _library(pattern: str):
    """The first shared object of the image's nvidia-* wheels matching ``pattern``, or None."""
    for site in sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}):
        found = sorted(p for p in glob.glob(os.path.join(site, "nvidia", "*", "lib", pattern))
                       if not p.endswith(".a"))
        if found:
            return ctypes.CDLL(found[0]), found[0]
    return None, None


def library_versions() -> dict:
    """The CUDA runtime, cuDNN and NCCL the image's wheels carry, read from the libraries
    themselves (cudaRuntimeGetVersion, cudnnGetVersion, ncclGetVersion): none needs a GPU or a
    driver. A library the image lacks (the CPU variant of TensorFlow) is None."""
    out = {"cuda_runtime": None, "cudnn": None, "nccl": None}
    lib, _ = _library("libcudart.so.*")
    if lib is not None:
        value = ctypes.c_int()
        if lib.cudaRuntimeGetVersion(ctypes.byref(value)) == 0:
            out["cuda_runtime"] = f"{value.value // 1000}.{value.value % 1000 // 10}"
    lib, _ = _library("libcudnn.so.*")
    if lib is not None:
        lib.cudnnGetVersion.restype = ctypes.c_size_t
        value = lib.cudnnGetVersion()        # 9.x: major * 10000 + minor * 100 + patch
        out["cudnn"] = f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    lib, _ = _library("libnccl.so.*")
    if lib is not None:
        value = ctypes.c_int()
        if lib.ncclGetVersion(ctypes.byref(value)) == 0:
            code = value.value
            out["nccl"] = f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return out


def framework_build(framework: str) -> dict:
    """What the framework says it was built with and carries, read through its own API (imports
    it; no GPU needed). PyTorch: torch.version.cuda, torch.backends.cudnn.version(),
    torch.cuda.nccl.version(). TensorFlow: tf.sysconfig.get_build_info()'s CUDA and cuDNN."""
    if framework == "pytorch":
        import torch
        cudnn = torch.backends.cudnn.version()
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except (AttributeError, RuntimeError):
            nccl = None
        return {"cuda": torch.version.cuda,
                "cudnn": None if cudnn is None else
                f"{cudnn // 10000}.{cudnn % 10000 // 100}.{cudnn % 100}",
                "nccl": nccl}
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    info = dict(tf.sysconfig.get_build_info())
    return {"is_cuda_build": bool(info.get("is_cuda_build")),
            "cuda": info.get("cuda_version"), "cudnn": info.get("cudnn_version"),
            "cuda_compute_capabilities": info.get("cuda_compute_capabilities")}


def cuda_stack(framework: str) -> dict:
    """The image's CUDA stack, as the label records it and `python -m fwbench.environment.images
    stack` reads it again: the framework's build, the libraries' own versions, and the oldest
    driver the CUDA runtime needs (None without a CUDA runtime: the CPU variant)."""
    libraries = library_versions()
    runtime = libraries["cuda_runtime"]
    return {"framework": framework_build(framework), "libraries": libraries,
            "driver_minimum": DRIVER_MINIMUM.get(runtime) if runtime else None,
            "driver_minimum_for": f"CUDA {runtime}" if runtime else None}


def main() -> int:
    if sys.argv[1:2] == ["--stack"]:    # `--stack --framework F`: the CUDA stack read now, JSON
        stack = argparse.ArgumentParser(description="print cuda_stack() as JSON")
        stack.add_argument("--stack", action="store_true")
        stack.add_argument("--framework", required=True, choices=sorted(MODULES))
        print(json.dumps(cuda_stack(stack.parse_args().framework), sort_keys=True))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--framework", required=True, choices=sorted(MODULES))
    parser.add_argument("--variant", required=True, choices=["cuda", "cpu"])
    parser.add_argument("--image", required=True, help="repository:tag of this image")
    parser.add_argument("--base", required=True, help="the base image as the build named it")
    parser.add_argument("--base-digest", default="unknown",
                        help="the base's digest or image ID, sha256:… "
                             "(needed unless --base has one)")
    parser.add_argument("--lock", default="/opt/fwbench/requirements.lock")
    parser.add_argument("--builder", required=True, choices=["dockerfile", "apptainer"])
    parser.add_argument("--out", default="/opt/fwbench/image.json")
    args = parser.parse_args()
    base_digest = args.base.split("@", 1)[1] if "@sha256:" in args.base else args.base_digest
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", base_digest):
        parser.error("the base must be pinned: --base repository@sha256:… or --base-digest "
                     f"sha256:…, got {args.base!r} and {args.base_digest!r}")
    if ":" not in args.image.rsplit("/", 1)[-1]:
        parser.error(f"--image must be repository:tag, got {args.image!r}")
    # The distribution that installed the module: tensorflow-cpu in the cpu variant.
    package = re.sub(r"[-_.]+", "-",
                     importlib.metadata.packages_distributions()[MODULES[args.framework]][0]).lower()
    # SOURCE_DATE_EPOCH (the recipe's date, set by containers/build.py) rather than the clock:
    # the label is part of the image, and one lock and wheelhouse must give one image.
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or 0)
    label = {
        "label_version": 3,
        "framework": args.framework,
        "module": MODULES[args.framework],
        "package": package,
        "version": importlib.metadata.version(package),
        "variant": args.variant,
        "image": args.image,
        "base_image": args.base,
        "base_digest": base_digest,
        "lock_sha256": hashlib.sha256(Path(args.lock).read_bytes()).hexdigest(),
        "python": platform.python_version(),
        "prefix": sys.prefix,
        "site_packages": sysconfig.get_paths()["purelib"],
        "source_date": datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds"),
        "builder": args.builder,
        "cuda_stack": cuda_stack(args.framework),
        "pip_freeze": sorted(f"{d.metadata['Name']}=={d.version}"
                             for d in importlib.metadata.distributions()),
    }
    Path(args.out).write_text(json.dumps(label, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: v for k, v in label.items() if k != "pip_freeze"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
