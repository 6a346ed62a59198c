"""PyTorch measuring one cell: settings, model, data on the device, one step, synchronization."""

from __future__ import annotations

import torch

from fwbench.errors import BackendError, Unsupported
from fwbench.frameworks.base import Backend
from fwbench.frameworks.pytorch import models
from fwbench.models import OPTIMIZER


class PyTorchBackend(Backend):
    NAME = "pytorch"

    @staticmethod
    def check_available(device: str) -> str | None:
        if device == "cuda" and not torch.cuda.is_available():
            return "PyTorch sees no CUDA device (torch.cuda.is_available() is False)"
        return None

    def configure(self) -> dict:
        torch.set_num_threads(self.threads)
        torch.set_num_interop_threads(1)
        torch.manual_seed(self.seed)
        if self.cell.precision != "fp32":
            raise Unsupported(f"precision {self.cell.precision!r} is not implemented for PyTorch")
        return {
            "threads_intra": torch.get_num_threads(),
            "threads_inter": torch.get_num_interop_threads(),
            "precision": self.cell.precision,
            "mode": self.cell.framework_mode,
            "layout": "NCHW",
            "device": self.cell.device,
        }

    def load(self) -> None:
        c = self.cell
        self.device = torch.device(c.device)
        try:
            self.model = models.build_model(c.model, c.input_shape, c.num_classes).to(self.device)
        except RuntimeError as exc:
            raise BackendError(f"building {c.model} failed: {exc}") from exc
        self.model.train(c.phase == "train")
        self.loss_fn = models.loss_fn()
        self.optimizer = models.optimizer(self.model, OPTIMIZER)
        x, y = self.batch()
        self.x = torch.from_numpy(x).to(self.device)
        self.y = torch.from_numpy(y).to(self.device)

    def step(self):
        model, x, y, loss_fn, opt = self.model, self.x, self.y, self.loss_fn, self.optimizer

        def train():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss

        @torch.inference_mode()
        def infer():
            return model(x)

        return train if self.cell.phase == "train" else infer

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def versions(self) -> dict:
        return {
            "framework_version": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        }
