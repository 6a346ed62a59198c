"""The CUDA stack of the images, without building them: what each requirements lock pins, the
oldest NVIDIA driver each needs, how a stack read inside an image is compared with its lock,
what the frameworks say where there is no GPU, and what a GPU host is checked for before it
measures (its driver, through the fake NVML of tests/fakes/nvml.py, and a refused CUDA config).
The images themselves: tests/test_cuda_images.py (`make test-cuda-images`)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
import yaml

from fwbench.analysis.versions import audit_items
from fwbench.environment import cuda_stack
from fwbench.measure import doctor, gpu_host
from tests.conftest import REPO, TINY_CONFIG, snakemake
from tests.fakes.nvml import FakeGpu, FakeNvml, no_gpu, no_library

# What the locks pin (containers/<framework>/requirements-cuda.lock), and the drivers: NVIDIA's
# CUDA Toolkit release notes, "Toolkit Driver Version" of CUDA 13.0 GA and 12.9 GA (Linux).
PINNED = {
    "pytorch": {"cuda_runtime": "13.0", "cudnn": "9.24.0", "nccl": "2.30.7",
                "driver_minimum": "580.65.06"},
    "tensorflow": {"cuda_runtime": "12.9", "cudnn": "9.28.0", "nccl": "2.32.3",
                   "driver_minimum": "575.51.03"},
}


def write_label():
    spec = importlib.util.spec_from_file_location("write_label",
                                                  REPO / "containers" / "write_label.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_each_cuda_lock_pins_its_stack_and_driver(framework):
    lock = REPO / "containers" / framework / "requirements-cuda.lock"
    assert cuda_stack.lock_stack(lock) == PINNED[framework]


def test_the_cpu_tensorflow_image_pins_no_cuda_and_needs_no_driver():
    lock = REPO / "containers" / "tensorflow" / "requirements-cpu.lock"
    assert cuda_stack.lock_stack(lock) == {"cuda_runtime": None, "cudnn": None, "nccl": None,
                                       "driver_minimum": None}


def test_the_label_writer_and_the_library_share_one_driver_table():
    assert write_label().DRIVER_MINIMUM == cuda_stack.DRIVER_MINIMUM


def test_the_native_torch_reports_what_the_pytorch_image_lock_pins():
    """The label writer's reading, run on the host's torch (the same wheels as the image):
    torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.nccl.version() and the
    libraries' own versions equal the lock's pins. No GPU needed."""
    proc = subprocess.run([sys.executable, str(REPO / "containers" / "write_label.py"),
                           "--stack", "--framework", "pytorch"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    stack = json.loads(proc.stdout)
    assert stack["framework"] == {"cuda": "13.0", "cudnn": "9.24.0", "nccl": "2.30.7"}
    assert cuda_stack.stack_problems("pytorch", stack, PINNED["pytorch"]) == []


def _stack(framework, **build):
    pinned = PINNED[framework]
    libraries = {k: pinned[k] for k in ("cuda_runtime", "cudnn", "nccl")}
    default = ({"cuda": "13.0", "cudnn": "9.24.0", "nccl": "2.30.7"} if framework == "pytorch"
               else {"is_cuda_build": True, "cuda": "12.5.1", "cudnn": "9"})
    return {"framework": {**default, **build}, "libraries": libraries,
            "driver_minimum": pinned["driver_minimum"]}


def test_a_stack_is_compared_with_its_lock():
    assert cuda_stack.stack_problems("pytorch", _stack("pytorch"), PINNED["pytorch"]) == []
    assert cuda_stack.stack_problems("tensorflow", _stack("tensorflow"), PINNED["tensorflow"]) == []
    [problem] = cuda_stack.stack_problems("pytorch", _stack("pytorch", cudnn="9.10.2"),
                                      PINNED["pytorch"])
    assert "cudnn 9.10.2" in problem and "9.24.0" in problem
    # TensorFlow's build info names the CUDA it was compiled with: not newer than the runtime,
    # and of its major; cuDNN by its major.
    assert cuda_stack.stack_problems("tensorflow", _stack("tensorflow", cuda="13.0"),
                                 PINNED["tensorflow"])
    assert cuda_stack.stack_problems("tensorflow", _stack("tensorflow", is_cuda_build=False),
                                 PINNED["tensorflow"])
    wrong = {**_stack("tensorflow"), "libraries": {**_stack("tensorflow")["libraries"],
                                                    "nccl": "2.21.5"}}
    assert cuda_stack.stack_problems("tensorflow", wrong, PINNED["tensorflow"]) == [
        "nccl library is 2.21.5, the lock pins 2.32.3"]


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_without_a_gpu_each_framework_says_so_in_one_line(framework):
    """`python -m fwbench.environment.images gpu`: one line, no traceback, on this machine
    (no NVIDIA driver). TensorFlow's own import lines stay in the child's stderr."""
    proc = subprocess.run([sys.executable, "-m", "fwbench.environment.images", "gpu",
                           "--framework", framework], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert proc.returncode == 0
    assert proc.stderr == "" and "Traceback" not in proc.stdout
    [line] = proc.stdout.splitlines()
    assert line.startswith(f"{framework}: no GPU visible (")


def test_the_audit_lists_the_images_cuda_stack():
    label = {"variant": "cuda", "cuda_stack": _stack("pytorch")}
    items = dict(audit_items({"container": {"digest": "sha256:" + "a" * 64, "label": label}}))
    assert items["image CUDA runtime"] == "13.0" and items["image cuDNN"] == "9.24.0"
    assert items["image NCCL"] == "2.30.7"
    assert items["image minimum NVIDIA driver"] == "580.65.06"
    assert items["image framework build nccl"] == "2.30.7"
    assert not [i for i in dict(audit_items({"container": "none"})) if "CUDA runtime" in i]


# --- a GPU host, checked before it measures (fake NVML at the boundary) --------------------

def gpu_with_driver(driver: str):
    return lambda: FakeNvml([FakeGpu()], driver=driver)


MINIMUMS = {"pytorch": "580.65.06", "tensorflow": "575.51.03"}


def test_a_driver_older_than_an_images_cuda_stops_with_both_versions():
    name, status, advice = gpu_host.driver_check(gpu_with_driver("570.86.15"), MINIMUMS)
    assert status == "fail"
    assert "pytorch image needs NVIDIA driver >= 580.65.06" in advice
    assert "tensorflow image needs NVIDIA driver >= 575.51.03" in advice
    assert "570.86.15" in advice
    with pytest.raises(SystemExit, match="580.65.06.*570.86.15"):
        gpu_host.require_driver(gpu_with_driver("570.86.15"), MINIMUMS)
    # Between the two: only the PyTorch image's CUDA 13.0 is too new for it.
    _, status, advice = gpu_host.driver_check(gpu_with_driver("575.57.08"), MINIMUMS)
    assert status == "fail" and "pytorch" in advice and "tensorflow" not in advice


def test_a_new_enough_driver_passes_and_doctor_prints_it():
    _, status, advice = gpu_host.driver_check(gpu_with_driver("580.95.05"), MINIMUMS)
    assert status == "ok" and advice.startswith("580.95.05 on 1 GPU(s)")
    gpu_host.require_driver(gpu_with_driver("580.95.05"), MINIMUMS)
    check = doctor.nvidia_driver(gpu_with_driver("535.54.03"))   # minimums from the locks
    assert check[1] == doctor.FAIL and "580.65.06" in check[2] and "535.54.03" in check[2]
    assert doctor.blocks([check])


def test_without_a_gpu_the_driver_check_does_not_block():
    for fake in (no_library, no_gpu):
        _, status, advice = gpu_host.driver_check(fake, MINIMUMS)
        assert status == "ok" and advice.startswith("no GPU run possible here")


def test_minimums_come_from_the_locks_the_images_were_built_from(tmp_path):
    assert gpu_host.image_minimums(lock_path=tmp_path / "none.lock") == MINIMUMS
    assert gpu_host.image_minimums(["tensorflow"], tmp_path / "none.lock", variant="cpu") == {}


def test_a_cuda_config_is_refused_without_a_visible_gpu():
    gpu_host.refuse_cuda_without_gpu(["cpu"], no_library)             # CPU only: not asked
    for fake in (no_library, no_gpu):
        with pytest.raises(SystemExit, match="no GPU is visible here"):
            gpu_host.refuse_cuda_without_gpu(["cpu", "cuda"], fake)
    one = gpu_with_driver("580.95.05")
    gpu_host.refuse_cuda_without_gpu(["cuda"], one, environ={})
    with pytest.raises(SystemExit, match="CUDA_VISIBLE_DEVICES"):
        gpu_host.refuse_cuda_without_gpu(["cuda"], one, environ={"CUDA_VISIBLE_DEVICES": ""})


def test_the_workflow_refuses_cuda_trials_here_before_any_job(tmp_path):
    """This machine has no NVIDIA driver: a run with `devices: [cpu, cuda]` stops before any
    job starts, naming the reason; its dry-run still plans (it runs nothing)."""
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**TINY_CONFIG,
                                                          "devices": ["cpu", "cuda"]}))
    dry = snakemake(tmp_path, "--cores", "1", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "device=cuda" in dry.stdout or "/cuda/" in dry.stdout
    run = snakemake(tmp_path, "--cores", "1")
    assert run.returncode != 0
    out = run.stdout + run.stderr
    assert "asks for CUDA devices" in out and "no GPU is visible here" in out
    assert "Traceback" not in out
    assert not list(tmp_path.glob("results/**/*.json"))              # no job ran
    assert not (tmp_path / "results" / "tiny" / "config.yaml").exists()



def test_the_trials_table_takes_a_cuda_tensorflow_beside_pytorch(tmp_path):
    """PyTorch reports cuDNN as a number (92400), a CUDA build of TensorFlow as text ("9", its
    build info): the trials table still writes to Parquet, the column as text (a run in the
    CUDA images stopped at collect_tables before this). Runs with one kind keep their type."""
    import shutil

    import pandas as pd

    from fwbench.analysis.tables import collect_tables, write_tables

    cells = REPO / "results" / "reference" / "cells" / "throughput" / "cpu"
    paths = []
    for framework in ("pytorch", "tensorflow"):
        source = next((cells / framework / "lenet5").glob("infer-*")) / "trial-1.json"
        target = tmp_path / framework / "trial-1.json"
        target.parent.mkdir()
        for suffix in (".json", ".env.json", ".telemetry.csv", ".telemetry.json"):
            shutil.copy(source.with_suffix(suffix), target.with_suffix(suffix))
        paths.append(target)
    native = collect_tables(paths)["trials"]
    assert pd.api.types.is_numeric_dtype(native["cudnn"])               # unchanged
    env = json.loads(paths[1].with_suffix(".env.json").read_text())
    paths[1].with_suffix(".env.json").write_text(json.dumps({**env, "cudnn": "9"}))
    tables = collect_tables(paths)
    assert sorted(tables["trials"]["cudnn"]) == ["9", "92400"]
    outputs = {name: tmp_path / f"{name}.parquet" for name in tables}
    write_tables(tables, outputs)
    assert sorted(pd.read_parquet(outputs["trials"])["cudnn"]) == ["9", "92400"]
