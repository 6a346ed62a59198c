"""PyTorch measuring one cell: settings, model, data on the device, one step, synchronization."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from contextlib import nullcontext
from functools import partial

import torch

from fwbench.errors import BackendError
from fwbench.measure import cuda_driver
from fwbench.measure.frameworks.base import LOSS_SCALE_INITIAL, Backend
from fwbench.measure.frameworks.pytorch import models, steps
from fwbench.plan.models import OPTIMIZER, synthetic_batch
from fwbench.plan.profiles import check_precision, layout_for, matched_factors


class PyTorchBackend(Backend):
    NAME = "pytorch"

    @staticmethod
    def check_available(device: str) -> str | None:
        if device == "cuda" and not torch.cuda.is_available():
            return "PyTorch sees no CUDA device (torch.cuda.is_available() is False)"
        return None

    def configure(self) -> dict:
        c = self.cell
        torch.set_num_threads(self.threads)
        torch.set_num_interop_threads(1)
        torch.manual_seed(self.seed)
        cuda = c.device == "cuda"
        check_precision(c.precision, c.device, torch.cuda.is_bf16_supported() if cuda else True)
        # Each matched factor takes the same value as in the TensorFlow backend.
        matched = matched_factors(c.profile)
        if "tf32" in matched:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        if "cudnn_autotune" in matched:
            torch.backends.cudnn.benchmark = True
        if "determinism" in matched:
            torch.backends.cudnn.deterministic = False
        layout, layout_reason = layout_for(self.NAME, c.device, c.precision,
                                           force_nhwc="layout" in matched)
        self.channels_last = layout.startswith("NHWC")
        return {
            "threads_intra": torch.get_num_threads(),
            "threads_inter": torch.get_num_interop_threads(),
            "precision": c.precision,
            "loss_scale_initial": LOSS_SCALE_INITIAL if c.precision == "fp16" else None,
            "mode": c.framework_mode,
            "layout": layout,
            "layout_reason": layout_reason,
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "tf32_convolution": torch.backends.cudnn.allow_tf32,
            "cudnn_autotune": torch.backends.cudnn.benchmark,
            "deterministic": torch.are_deterministic_algorithms_enabled()
            or torch.backends.cudnn.deterministic,
            "memory_growth": "on demand (caching allocator)",
            "device": c.device,
            "synchronization": cuda_driver.SYNCHRONIZATION if cuda else None,
        }

    def load(self) -> None:
        c = self.cell
        self.device = torch.device(c.device)
        try:
            self.model = models.build_model(c.model, c.input_shape, c.num_classes).to(self.device)
        except RuntimeError as exc:
            raise BackendError(f"building {c.model} failed: {exc}") from exc
        self.model.train(c.phase == "train")
        self.loss_fn = models.loss_fn(c.model)
        # Only training needs one, and building a torch.optim optimizer imports torch._dynamo
        # (about a second): inference trials are spared it.
        self.optimizer = models.optimizer(self.model, OPTIMIZER) if c.phase == "train" else None
        x, y = synthetic_batch(c.batch_size, c.input_shape, c.num_classes, self.seed, model=c.model)
        self.x, self.y = models.batch_tensors(c.model, x, y, self.device)
        if self.channels_last and self.x.dim() == 4:
            self.model = self.model.to(memory_format=torch.channels_last)
            self.x = self.x.contiguous(memory_format=torch.channels_last)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()

    def step(self):
        c = self.cell
        if c.phase == "train":
            fn = steps.train_step(self.model, self.loss_fn, self.optimizer,
                                  device_type=self.device.type, precision=c.precision)
            args = (self.x, self.y)
        else:
            fn = steps.infer_step(self.model, device_type=self.device.type, precision=c.precision)
            args = (self.x,)
        fn, record = steps.compiled(fn, c.framework_mode, c.phase)
        self.compiled = {c.phase: record}
        call = partial(fn, *args)
        if c.mode == "keras":
            # Keras's train_on_batch and predict_on_batch hand back host arrays: so does this side.
            return lambda: _to_host(call())
        return call

    def device_scope(self):
        # PyTorch places by tensor (the model and the batch are on the device already).
        return nullcontext()

    def synchronize(self) -> None:
        # The cell's device, not self.device.type: reading a torch.device attribute around
        # every CPU step measurably slowed LeNet-5 (about 0.7%, benchmarks/harness_overhead.py).
        if self.cell.device == "cuda":
            cuda_driver.context_synchronize()

    def peak_memory(self) -> dict:
        if self.device.type != "cuda":
            return {"device_peak_bytes": None, "source": "CPU: see the process's peak RSS"}
        return {"device_peak_bytes": torch.cuda.max_memory_allocated(self.device),
                "source": "torch.cuda.max_memory_allocated"}

    @staticmethod
    def build_info() -> dict:
        """What torch says it was built with (build-time versions, not what is loaded)."""
        cudnn = torch.backends.cudnn
        return {
            "version": torch.__version__,
            "path": torch.__file__,
            "git_version": getattr(torch.version, "git_version", None),
            "cuda": torch.version.cuda,
            "hip": getattr(torch.version, "hip", None),
            "cudnn": cudnn.version() if cudnn.is_available() else None,
            "cuda_available": torch.cuda.is_available(),
            "config": torch.__config__.show(),
        }

    def versions(self) -> dict:
        config = torch.__config__.show()
        blas = re.search(r"BLAS_INFO=(\w+)", config)
        return {
            "framework_version": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": (torch.backends.cudnn.version() if torch.backends.cudnn.is_available()
                      else None),
            "cpu_math": {
                "blas": blas.group(1) if blas else None,
                "onednn": torch.backends.mkldnn.is_available(),
                "instruction_set": torch.backends.cpu.get_cpu_capability(),
                "onednn_isa": _onednn_isa(),
            },
        }


def _onednn_isa() -> str | None:
    """The instruction set oneDNN dispatches to here, as its verbose header names it ("Intel
    AVX-512 with Intel DL Boost and bfloat16 support"): one small convolution with verbose
    mode on, after the measurement, its output (C's stdout) read from a file."""
    with tempfile.TemporaryFile() as captured:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(captured.fileno(), 1)
        try:
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                torch.nn.functional.conv2d(torch.ones(2, 8, 16, 16), torch.ones(8, 8, 3, 3))
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        captured.seek(0)
        found = re.search(r"^onednn_verbose,.*?,cpu,isa:(.+)$", captured.read().decode(
            errors="replace"), re.M)
    return found.group(1).strip() if found else None


def _to_host(output):
    return output.detach().cpu().numpy()
