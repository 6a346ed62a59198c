"""Achieved FLOP/s per cell and the fraction of the device's peak rate. Framework-free.

achieved FLOP/s = FLOPs per sample (fwbench.plan.models.flops_per_sample: the forward pass for
inference, 3x that for training, docs/models.md "FLOP convention") x samples per second (the
statistics' throughput, with its interval). The convention leaves out normalization, activations
and the optimizer, so the achieved rate, and its fraction of the peak, are lower bounds of the
work the device did. The peak of one device (or process) comes from the config key `peak_flops`,
else, on an NVIDIA GPU, from the documented peaks below by the GPU's name; a distributed cell's
peak is world_size times that.

Usage (rules/statistics.smk, summarise_flops)::

    frame = achieved_flops(cells, trials, config["models"], config["peak_flops"])
"""

from __future__ import annotations

import math
import re

import pandas as pd

from fwbench.analysis.tables import AXES
from fwbench.plan.models import flops_per_sample

__all__ = ["NVIDIA_PEAKS", "FLOPS_COLUMNS", "math_mode", "peak_rate", "achieved_flops"]

# Documented peak rates of NVIDIA data-centre GPUs in TFLOP/s: dense (without structured
# sparsity), at boost clock, per math mode: fp32 on the CUDA cores; tf32, bf16 and fp16 on the
# tensor cores (fp16 and bf16 with FP32 accumulation). None: the GPU has no such mode.
# Matched against NVML's device name (the trials' device_name), case-insensitively, first match
# first. Sources:
#   H100 SXM5, H100 PCIe: NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), Table 3
#   H200 SXM: NVIDIA H200 Tensor Core GPU datasheet (2024), its sparsity figures halved
#   A100 (SXM4 and PCIe, 40 and 80 GB): NVIDIA A100 Tensor Core GPU datasheet (2021)
#   A10, L4: NVIDIA A10 (2021) and L4 (2023) datasheets, their sparsity figures halved
#   V100 SXM2, V100 PCIe: NVIDIA Tesla V100 GPU datasheet (2020)
#   T4: NVIDIA T4 Tensor Core GPU datasheet (2019)
NVIDIA_PEAKS = (
    (r"\bH100\b.*PCIe", "H100 PCIe", {"fp32": 51.2, "tf32": 378, "bf16": 756, "fp16": 756}),
    (r"\bH100\b(?!.*NVL)", "H100 SXM5",
     {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    (r"\bH200\b(?!.*NVL)", "H200 SXM",
     {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}),
    (r"\bA100\b", "A100", {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}),
    (r"\bA10\b", "A10", {"fp32": 31.2, "tf32": 62.5, "bf16": 125, "fp16": 125}),
    (r"\bL4\b", "L4", {"fp32": 30.3, "tf32": 60, "bf16": 121, "fp16": 121}),
    (r"\bV100\b.*SXM2", "V100 SXM2", {"fp32": 15.7, "tf32": None, "bf16": None, "fp16": 125}),
    (r"\bV100\b.*PCIe", "V100 PCIe", {"fp32": 14.0, "tf32": None, "bf16": None, "fp16": 112}),
    (r"\bT4\b", "T4", {"fp32": 8.1, "tf32": None, "bf16": None, "fp16": 65}),
)

KEY_COLUMNS = ["run", "cell_id", "pair_id", *AXES]
FLOPS_COLUMNS = [
    *KEY_COLUMNS, "flops_per_sample", "achieved_flops", "achieved_ci_low", "achieved_ci_high",
    "device_name", "math", "peak_flops", "peak_source", "fraction_of_peak", "fraction_ci_low",
    "fraction_ci_high", "note",
]


def math_mode(precision: str, profile: str) -> str:
    """The arithmetic a cell's products may run in, which sets its peak: bf16 and fp16 as named;
    fp32 as TF32 on tensor cores unless the profile turns TF32 off in both frameworks (`matched`,
    or an ablation step that matches `tf32`), since TensorFlow, and PyTorch's cuDNN convolutions,
    use TF32 by default."""
    if precision != "fp32":
        return precision
    return "fp32" if profile == "matched" or "tf32" in profile.split("+")[1:] else "tf32"


def peak_rate(device: str, device_name, mode: str, configured: dict) -> tuple[float | None, str]:
    """(peak FLOP/s of one device or process, where it comes from), or (None, why none is known).

    ``configured`` is the config's `peak_flops`; a value there wins over the documented table.
    """
    if configured.get(device) is not None:
        return float(configured[device]), f"config `peak_flops.{device}`"
    if device != "cuda":
        return None, (f"no peak rate for the {device.upper()} is known: set `peak_flops.{device}`"
                      " (FLOP/s of one trial's threads) in the config")
    if not isinstance(device_name, str) or not device_name:
        return None, "the trials recorded no GPU name: set `peak_flops.cuda` in the config"
    for pattern, label, peaks in NVIDIA_PEAKS:
        if re.search(pattern, device_name, re.IGNORECASE):
            if mode == "tf32" and peaks["tf32"] is None:
                mode = "fp32"  # no tensor-core TF32 before Ampere: fp32 runs on the CUDA cores
            if peaks[mode] is None:
                return None, f"the {label} has no {mode} tensor-core mode"
            return peaks[mode] * 1e12, f"NVIDIA {label}, {mode} dense (documented)"
    return None, (f"no documented peak for the {device_name}: set `peak_flops.cuda` in the "
                  "config")


def _device_names(trials: pd.DataFrame) -> dict:
    """cell id -> the GPU name its trials recorded (the first one, when any did)."""
    if trials.empty or "device_name" not in trials:
        return {}
    named = trials[trials["device_name"].notna()]
    return named.groupby("cell_id")["device_name"].first().to_dict()


def _flops(cell, models: dict) -> tuple[float | None, str]:
    shape = tuple(int(v) for v in str(cell["input_shape"]).split("x"))
    classes = (models.get(cell["model"]) or {}).get("num_classes")
    try:
        return float(flops_per_sample(cell["model"], shape, classes, cell["phase"])), ""
    except (KeyError, ValueError) as exc:
        return None, f"no FLOP count for {cell['model']} at {cell['input_shape']}: {exc}"


def achieved_flops(cells: pd.DataFrame, trials: pd.DataFrame, models: dict,
                   peak_flops: dict) -> pd.DataFrame:
    """stats/flops.csv: per cell of the statistics' cells.csv, the achieved FLOP/s with the
    interval its throughput interval gives, the peak it is set against and the fraction of it;
    ``note`` says why a value is missing.

    ``models`` is the config's `models` (their num_classes), ``peak_flops`` its `peak_flops`.
    """
    names = _device_names(trials)
    rows = []
    for _, cell in cells.iterrows():
        row = {c: cell[c] for c in KEY_COLUMNS if c in cell.index}
        flops, note = _flops(cell, models)
        sps = [float(cell[c]) if c in cell.index and pd.notna(cell[c]) else math.nan
               for c in ("throughput_sps", "throughput_ci_low_sps", "throughput_ci_high_sps")]
        if flops is None or math.isnan(sps[0]):
            rows.append({**row, "flops_per_sample": flops,
                         "note": note or "no throughput: the cell has no ok trial"})
            continue
        achieved = [flops * v for v in sps]
        device = str(cell["device"])
        name = names.get(cell["cell_id"]) if device == "cuda" else None  # a GPU's name only
        mode = math_mode(str(cell["precision"]), str(cell["profile"]))
        peak, source = peak_rate(device, name, mode, peak_flops)
        row.update(flops_per_sample=flops, achieved_flops=achieved[0],
                   achieved_ci_low=achieved[1], achieved_ci_high=achieved[2],
                   device_name=name, math=mode)
        if peak is None:
            rows.append({**row, "note": source})
            continue
        devices = int(cell.get("world_size", 1))
        total = peak * devices
        if devices > 1:
            source += f", times {devices} devices"
        rows.append({**row, "peak_flops": total, "peak_source": source,
                     "fraction_of_peak": achieved[0] / total,
                     "fraction_ci_low": achieved[1] / total,
                     "fraction_ci_high": achieved[2] / total, "note": ""})
    return pd.DataFrame(rows, columns=FLOPS_COLUMNS)
