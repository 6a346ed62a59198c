"""The CUDA images built for real, audited on a machine without a GPU (`make test-cuda-images`).

scripts/containers/test_cuda.sh builds both CUDA images with Podman (`containers/build.py
--variant cuda`, on the stand-in Debian base) and runs this file with $FWBENCH_CUDA_IMAGES
naming the lock it wrote. Inside each image: the label, pip check and import; the CUDA stack the
framework and its libraries report, equal to what the requirements lock pins and to what the
label recorded at build time; the oldest driver it needs; one line saying there is no GPU; NVML
telemetry recording "no GPU" as a state. Then both images are built again with `--no-cache`
and must give the same image IDs. Without those images (`make test`), everything here skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fwbench.environment import images
from tests.conftest import REPO
from tests.test_cuda_stack import PINNED

BUILT = os.environ.get("FWBENCH_CUDA_IMAGES")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not BUILT or not shutil.which("podman"),
    reason="needs the CUDA images built here: make test-cuda-images (root, Podman)")]
PODMAN = ["podman", "--runtime", "runc"]
LIMITS = (os.environ.get("APPTAINER_SHIM_ULIMITS") or "nofile=1024:1024 nproc=4096:4096").split()
FRAMEWORKS = ["pytorch", "tensorflow"]


@pytest.fixture(scope="module")
def lock() -> dict:
    return images.load_lock(BUILT)


def inside(image_id: str, *command: str) -> subprocess.CompletedProcess:
    """``command`` in the image, no network, the work tree bound read-only as fwbench's source
    (as the workflow's jobs get it), the lock's folder too."""
    limits = [a for limit in LIMITS for a in ("--ulimit", limit)]
    folder = Path(BUILT).resolve().parent
    return subprocess.run(
        [*PODMAN, "run", "--rm", "--network=none", *limits, "--volume", f"{REPO}:{REPO}:ro",
         "--volume", f"{folder}:{folder}:ro", "--env", f"PYTHONPATH={REPO}", "--workdir", "/tmp",
         "--entrypoint", json.dumps(list(command)), image_id],
        capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_cuda_image_holds_what_its_lock_says(lock, framework):
    entry = lock["images"][framework]
    package = {"pytorch": "torch", "tensorflow": "tensorflow"}[framework]
    assert entry["variant"] == "cuda" and entry["package"] == package
    proc = inside(entry["digest"], "python", "-m", "fwbench.environment.images", "check",
                  "--framework", framework, "--lock", str(Path(BUILT).resolve()))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    found = json.loads(proc.stdout)
    assert found["installed"] == found["label"]["version"] == str(entry["version"])
    assert found["pip_check"] == "No broken requirements found."
    assert found["label"]["variant"] == "cuda"
    assert found["label"]["base_image"] == "localhost/fwbench-standin-base:bookworm"  # stand-in


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_cuda_image_reports_the_stack_its_lock_pins(lock, framework):
    """`python -m fwbench.environment.images stack` inside the image: the framework's own
    readings (PyTorch: torch.version.cuda, torch.backends.cudnn.version(),
    torch.cuda.nccl.version(); TensorFlow: tf.sysconfig.get_build_info()), the libraries' own
    versions (cudaRuntimeGetVersion, cudnnGetVersion, ncclGetVersion), the oldest driver,
    each equal to the lock's pins and to the label written at build time."""
    proc = inside(lock["images"][framework]["digest"], "python", "-m",
                  "fwbench.environment.images", "stack", "--framework", framework)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    found = json.loads(proc.stdout)
    print(f"\n{framework} image {lock['images'][framework]['digest']}: "
          f"{json.dumps(found['now'], sort_keys=True)}")
    assert found["problems"] == []
    pinned = PINNED[framework]
    assert found["pinned"] == pinned
    assert found["label"] == found["now"]
    assert found["now"]["libraries"] == {k: pinned[k] for k in ("cuda_runtime", "cudnn", "nccl")}
    assert found["now"]["driver_minimum"] == found["driver_minimum"] == pinned["driver_minimum"]
    build = found["now"]["framework"]
    if framework == "pytorch":
        assert build == {"cuda": "13.0", "cudnn": "9.24.0", "nccl": "2.30.7"}
    else:
        assert build["is_cuda_build"] is True
        assert build["cuda"].split(".")[0] == "12" and build["cudnn"].split(".")[0] == "9"
    # No GPU here: the framework says so in one line, read in the same image.
    assert found["gpus"] == 0 and found["gpu_line"].startswith(f"{framework}: no GPU visible (")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_without_a_gpu_each_cuda_image_says_so_in_one_line(lock, framework):
    proc = inside(lock["images"][framework]["digest"], "python", "-m",
                  "fwbench.environment.images", "gpu", "--framework", framework)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr and proc.stderr == ""
    [line] = proc.stdout.splitlines()
    print(f"\n{line}")
    assert line.startswith(f"{framework}: no GPU visible (")


NVML_PROBE = """
import json, tempfile, time
from fwbench.measure.provenance import gpu_info
from fwbench.measure.telemetry import Sampler
out = tempfile.mkdtemp() + "/t.telemetry.csv"
with Sampler(out, period_s=0.05, gpu_uuids=None) as s:
    time.sleep(0.3)
print(json.dumps({"gpus": gpu_info(), "unavailable": s.meta["unavailable"],
                  "rows": sum(1 for _ in open(out)) - 1}))
"""


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_nvml_telemetry_in_a_cuda_image_records_no_gpu_as_a_state(lock, framework):
    """What a trial's env.json and telemetry read through NVML, inside the image with no driver:
    no GPU, with the reason, and the CPU rows sampled all the same; not an error."""
    proc = inside(lock["images"][framework]["digest"], "python", "-c", NVML_PROBE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["gpus"]["available"] is False and found["gpus"]["count"] == 0
    assert found["gpus"]["reason"].startswith("NVML library (libnvidia-ml.so.1) not found")
    assert found["unavailable"]["gpu"] == found["gpus"]["reason"]
    assert found["rows"] >= 2


def test_building_both_cuda_images_again_gives_the_same_digests(lock, tmp_path):
    """`--no-cache`: every step runs again, from the same locks and wheelhouse. The first
    build's archives are linked in: an image ID equal to the first needs no new archive."""
    for entry in lock["images"].values():
        os.link(Path(BUILT).resolve().parent / entry["file"], tmp_path / entry["file"])
    proc = subprocess.run(
        [sys.executable, str(REPO / "containers" / "build.py"), "--engine", "podman",
         "--variant", "cuda", "--base", "localhost/fwbench-standin-base:bookworm",
         "--python", "/usr/bin/python3", "--out", str(tmp_path), "--no-cache",
         "--wheelhouse", str(Path(os.environ.get("FWBENCH_WHEELHOUSE",
                                                 REPO / "containers" / "wheelhouse")))],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rebuilt = images.load_lock(tmp_path / "images.lock")["images"]
    for framework in FRAMEWORKS:
        print(f"\n{framework}: first {lock['images'][framework]['digest']}, "
              f"again {rebuilt[framework]['digest']} ({rebuilt[framework]['build_seconds']} s)")
    for archive in tmp_path.glob("*.tar"):      # gigabytes each: not kept by pytest
        archive.unlink()
    for framework in FRAMEWORKS:
        assert rebuilt[framework]["digest"] == lock["images"][framework]["digest"], framework
