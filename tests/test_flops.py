"""fwbench/analysis/flops.py: achieved FLOP/s per cell and the fraction of the device's peak."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from fwbench.analysis.flops import FLOPS_COLUMNS, achieved_flops, math_mode, peak_rate
from fwbench.plan.models import flops_per_sample

H100 = "NVIDIA H100 80GB HBM3"  # the name NVML gives the SXM5 card (tests/fixtures/telemetry)


def test_math_mode_follows_the_precision_and_whether_tf32_is_off():
    assert math_mode("fp32", "matched") == "fp32"  # matched turns TF32 off in both
    assert math_mode("fp32", "defaults") == "tf32"
    assert math_mode("fp32", "defaults+layout") == "tf32"
    assert math_mode("fp32", "defaults+layout+tf32") == "fp32"
    assert math_mode("bf16", "defaults") == "bf16" and math_mode("fp16", "matched") == "fp16"


@pytest.mark.parametrize("name, mode, tflops", [
    (H100, "fp32", 66.9), (H100, "tf32", 494.7), ("NVIDIA H100 PCIe", "bf16", 756),
    ("NVIDIA H200", "fp16", 989.5), ("NVIDIA A100-SXM4-80GB", "tf32", 156),
    ("NVIDIA A100 80GB PCIe", "bf16", 312), ("NVIDIA A10", "fp32", 31.2),
    ("NVIDIA L4", "bf16", 121), ("Tesla V100-SXM2-16GB", "fp16", 125),
    ("Tesla V100-PCIE-32GB", "tf32", 14.0),  # no TF32 before Ampere: the fp32 rate
    ("Tesla T4", "fp32", 8.1),
])
def test_documented_peaks_by_the_gpu_name(name, mode, tflops):
    rate, source = peak_rate("cuda", name, mode, {"cuda": None})
    assert rate == pytest.approx(tflops * 1e12)
    assert source.startswith("NVIDIA ") and "documented" in source


@pytest.mark.parametrize("device, name, mode, why", [
    ("cpu", None, "fp32", "set `peak_flops.cpu`"),
    ("cuda", None, "fp32", "the trials recorded no GPU name"),
    ("cuda", "NVIDIA H100 NVL", "fp32", "no documented peak for the NVIDIA H100 NVL"),
    ("cuda", "NVIDIA GH200 480GB", "fp32", "no documented peak"),
    ("cuda", "NVIDIA A100X", "fp32", "no documented peak"),
    ("cuda", "Tesla T4", "bf16", "the T4 has no bf16 tensor-core mode"),
])
def test_an_unknown_peak_says_why(device, name, mode, why):
    rate, reason = peak_rate(device, name, mode, {"cpu": None, "cuda": None})
    assert rate is None and why in reason


def test_a_configured_peak_wins_over_the_documented_one():
    assert peak_rate("cuda", H100, "fp32", {"cuda": 5e13}) == (5e13, "config `peak_flops.cuda`")
    assert peak_rate("cpu", None, "fp32", {"cpu": 1e11}) == (1e11, "config `peak_flops.cpu`")


def _cell(device, model, shape, phase, world_size=1, sps=(1000.0, 900.0, 1100.0), **axes):
    framework = axes.pop("framework", "pytorch")
    name = f"{phase}-b8-{shape}-fp32-idiomatic-matched"
    return {"run": "r", "cell_id": f"throughput/{device}/{framework}/{model}/{name}-w{world_size}",
            "pair_id": f"throughput/{device}/{model}/{name}-w{world_size}",
            "experiment": "throughput", "device": device, "framework": framework, "model": model,
            "phase": phase, "batch_size": 8, "input_shape": shape, "precision": "fp32",
            "mode": "idiomatic", "profile": "matched", "strategy": "none",
            "world_size": world_size, "throughput_sps": sps[0], "throughput_ci_low_sps": sps[1],
            "throughput_ci_high_sps": sps[2], **axes}


def test_achieved_flops_with_its_interval_and_the_fraction_of_peak():
    cells = pd.DataFrame([
        _cell("cuda", "resnet18", "3x32x32", "train"),
        _cell("cuda", "resnet18", "3x32x32", "train", world_size=2),
        _cell("cpu", "lenet5", "1x28x28", "infer"),
        _cell("cpu", "lenet5", "1x28x28", "infer", sps=(math.nan,) * 3, framework="tensorflow"),
    ])
    trials = pd.DataFrame({"cell_id": cells["cell_id"],
                           "device_name": [H100, H100, None, None]})
    models = {"resnet18": {"input_shapes": [[3, 32, 32]], "num_classes": 10},
              "lenet5": {"input_shapes": [[1, 28, 28]], "num_classes": 10}}
    frame = achieved_flops(cells, trials, models, {"cpu": None, "cuda": None})
    assert list(frame.columns) == FLOPS_COLUMNS and len(frame) == 4
    gpu, pair, cpu, failed = (frame.iloc[i] for i in range(4))
    train = flops_per_sample("resnet18", (3, 32, 32), 10, "train")
    assert gpu.flops_per_sample == train == 3 * flops_per_sample("resnet18", (3, 32, 32), 10)
    assert gpu.achieved_flops == pytest.approx(1000 * train)
    assert (gpu.achieved_ci_low, gpu.achieved_ci_high) == pytest.approx((900 * train,
                                                                         1100 * train))
    assert gpu.math == "fp32" and gpu.peak_flops == pytest.approx(66.9e12)
    assert gpu.fraction_of_peak == pytest.approx(1000 * train / 66.9e12)
    assert pair.peak_flops == pytest.approx(2 * 66.9e12) and "times 2 devices" in pair.peak_source
    assert cpu.achieved_flops > 0 and math.isnan(cpu.fraction_of_peak)
    assert "set `peak_flops.cpu`" in cpu.note
    assert math.isnan(failed.achieved_flops) and "no ok trial" in failed.note
    configured = achieved_flops(cells, trials, models, {"cpu": 1e11, "cuda": None})
    assert configured.iloc[2].fraction_of_peak == pytest.approx(cpu.achieved_flops / 1e11)


def test_a_shape_the_model_cannot_take_has_no_flop_count():
    cells = pd.DataFrame([_cell("cpu", "lenet5", "1x4x4", "infer")])
    row = achieved_flops(cells, pd.DataFrame(), {}, {}).iloc[0]
    assert math.isnan(row.achieved_flops)
    assert row.note == ("no FLOP count for lenet5 at 1x4x4: the 2x2 feature map at conv2 is "
                        "smaller than its 5x5 kernel")
