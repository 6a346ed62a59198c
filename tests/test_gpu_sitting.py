"""scripts/gpu_sitting.py, the first GPU sitting's one command, in what a machine without a GPU
can check: its plan is valid (PyTorch alone on CUDA, config.yaml's reference models), it stops
cleanly without a GPU, and (with FWBENCH_GPU_REHEARSAL=1, as `make test-cuda-images` sets) its
whole flow on the CPU writes a run folder that `fwbench rebuild` turns into a report."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "gpu_sitting.py"


def sitting(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


def test_its_plan_is_the_reference_sweep_on_cuda_for_pytorch_alone(tmp_path):
    proc = sitting(str(tmp_path), "--check")
    assert proc.returncode == 0, proc.stderr[-2000:]
    plan = json.loads(proc.stdout)
    assert plan["run"] == "gpu-sitting" and plan["trials"] == 16      # 4 cells, 4 trials each
    assert sorted(c.split("/")[3] + "/" + c.split("/")[4].split("-")[0] for c in plan["cells"]) \
        == ["lenet5/infer", "lenet5/train", "resnet18/infer", "resnet18/train"]
    assert all(c.startswith("throughput/cuda/pytorch/") for c in plan["cells"])


def test_without_a_gpu_it_stops_in_one_line_and_records_why(tmp_path):
    proc = sitting(str(tmp_path))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("gpu-sitting:")]
    assert line.startswith("gpu-sitting: no GPU here: ")
    record = json.loads((tmp_path / "sitting.json").read_text())
    assert record["steps"]["preflight"]["ok"] is False
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("FWBENCH_GPU_REHEARSAL") != "1",
                    reason="a few minutes: FWBENCH_GPU_REHEARSAL=1 (make test-cuda-images)")
def test_its_flow_on_the_cpu_writes_a_run_folder_that_rebuilds(tmp_path):
    proc = sitting(str(tmp_path), "--rehearse-cpu", "--models", "lenet5", "--trials", "2",
                   "--pairs", "3", timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "sitting.json").read_text())
    trials = record["steps"]["sweep"]["trials"]
    assert len(trials) == 4 and all(t["status"] == "ok" for t in trials)
    aa = record["steps"]["aa_control"]
    assert aa["pairs"] == 3 and aa["interval"][0] <= aa["ratio"] <= aa["interval"][1]
    print(f"\nA/A on the CPU: ratio {aa['ratio']:.4f}, interval {aa['interval']}")
    rebuild = subprocess.run([sys.executable, "-m", "fwbench", "rebuild",
                              str(tmp_path / "results" / "gpu-sitting")], capture_output=True,
                             text=True, timeout=1200, cwd=tmp_path)
    assert rebuild.returncode == 0, rebuild.stderr[-3000:]
    assert (tmp_path / "results" / "gpu-sitting" / "report" / "report.html").is_file()


def test_a_driver_older_than_its_torch_needs_stops_the_sitting(monkeypatch, tmp_path):
    """The fake NVML of tests/fakes/nvml.py at the boundary (a GPU, driver 570.86.15), and
    PyTorch told it sees a GPU: the preflight stops, naming both versions."""
    import torch

    from fwbench.measure import gpu_host
    from fwbench.measure.telemetry.gpu import load_nvml
    from tests.fakes.nvml import FakeGpu, FakeNvml

    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    import gpu_sitting

    monkeypatch.setattr(gpu_host, "load_nvml",
                        lambda spec=None: load_nvml(lambda: FakeNvml([FakeGpu()],
                                                                     driver="570.86.15")))
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 92400)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "fake GPU")
    with pytest.raises(gpu_sitting.Stop) as stopped:
        gpu_sitting.preflight(False, None, tmp_path)
    assert stopped.value.code == 2
    assert "needs NVIDIA driver >= 580.65.06" in str(stopped.value)
    assert "this host has 570.86.15" in str(stopped.value)
