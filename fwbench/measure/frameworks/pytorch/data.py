"""PyTorch on real data: the input pipeline (a torch DataLoader over fwbench.measure.data.Batches)
and the training and evaluation loops of the `epoch` and `convergence` experiments. Mirror image of
frameworks/tensorflow/data.py: the same names in the same order.

Every decision about the data (order, crop offsets, flips, normalization) is taken in numpy by
fwbench.measure.data.Batches, so this pipeline and tf.data deliver identical batches. The DataLoader
runs in the training process (num_workers=0) without prefetching, as tf.data does on the other
side: loading is part of the timed epoch in both, and equal work in both.

Usage::

    weights = export_initial_weights("lenet5", (1, 28, 28), 10, seed=0)   # numpy, framework-free
    trainer = Trainer(cell, OPTIMIZERS["sgd"], weights)
    losses = trainer.train(Batches.epoch(data, 100, epoch=0, seed=0, layout=LAYOUT))
    trainer.synchronize()
    trainer.loss_values(losses)               # numpy, one loss per step
    predictions = trainer.evaluate(Batches.evaluation(data, 100, layout=LAYOUT))
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader

from fwbench.errors import BackendError
from fwbench.measure.frameworks.pytorch import models, steps
from fwbench.measure.frameworks.pytorch.backend import PyTorchBackend

# The layout fwbench.measure.data.Batches emits for this framework; channels_last is applied on the
# device.
LAYOUT = "NCHW"
INPUT_PIPELINE = ("torch.utils.data.DataLoader(batch_size=None, num_workers=0) over "
                  "fwbench.measure.data.Batches; no prefetch; pinned memory on CUDA")
# Module attributes the weight transfer reads besides tensors (recurrent and attention layers).
_ATTRIBUTES = ("hidden_size", "num_layers", "bidirectional", "embed_dim", "num_heads")


def loader(batches, device: torch.device) -> DataLoader:
    """A DataLoader yielding ``batches`` in order, as tensors (each item already a batch)."""
    return DataLoader(batches, batch_size=None, shuffle=False, num_workers=0,
                      pin_memory=device.type == "cuda")


def host_batches(batches, device: torch.device, pipeline: str = "framework"):
    """``batches`` as host tensors: through the DataLoader (``framework``, the default), or
    straight from numpy (``numpy``: the same Python loop in both frameworks, so the host-side
    work is equal and only the framework's compute differs)."""
    if pipeline == "numpy":
        return ((torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches)
    return loader(batches, device)


def export_initial_weights(model: str, input_shape, num_classes: int, seed: int) -> dict:
    """PyTorch's initialisation of ``model`` from ``seed``, as numpy: every parameter and buffer
    (``arrays``, keyed like the state dict) and the module each belongs to (``modules``: name,
    type, tensor names, the attributes the weight transfer reads). Both frameworks start from
    this (fwbench.measure.experiments saves it as .npz for the TensorFlow image, which has no
    torch)."""
    torch.manual_seed(seed)
    net = models.build_model(model, input_shape, num_classes)
    arrays, modules = {}, []
    for name, module in net.named_modules():
        params = [n for n, _ in module.named_parameters(recurse=False)]
        buffers = [n for n, b in module.named_buffers(recurse=False) if b is not None]
        if not params and not buffers:
            continue
        for n in params + buffers:
            arrays[f"{name}.{n}" if name else n] = getattr(module, n).detach().cpu().numpy().copy()
        attrs = {a: getattr(module, a) for a in _ATTRIBUTES
                 if isinstance(getattr(module, a, None), (bool, int))}
        modules.append({"name": name, "type": type(module).__name__, "params": params,
                        "buffers": buffers, "attrs": attrs})
    return {"arrays": arrays, "modules": modules,
            "meta": {"model": model, "input_shape": list(input_shape), "num_classes": num_classes,
                     "seed": seed, "initialised_by": f"torch {torch.__version__}"}}


class Trainer:
    """One model training on real batches in this framework, the cell's mode and precision.

    ``weights`` is export_initial_weights' dict; ``weight_decay`` adds (wd / 2)·Σ w² over the
    trainable weights to the loss (the L2 term PyTorch's SGD weight_decay applies), the same in
    both frameworks; the loss reported stays the data loss.
    """

    def __init__(self, cell, recipe: dict, weights: dict, *, weight_decay: float = 0.0,
                 channels_last: bool = False, pipeline: str = "framework"):
        self.cell = cell
        self.pipeline = pipeline
        self.device = torch.device(cell.device)
        self.model = models.build_model(cell.model, cell.input_shape, cell.num_classes)
        state = {k: torch.from_numpy(np.array(v)) for k, v in weights["arrays"].items()}
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.endswith("num_batches_tracked")]
        if missing or unexpected:
            raise BackendError(f"initial weights do not fit {cell.model}: missing {missing[:5]}, "
                               f"unexpected {unexpected[:5]}")
        self.model.to(self.device)
        self.channels_last = channels_last
        if channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.loss_fn = models.loss_fn(cell.model)
        self.optimizer = models.optimizer(self.model, recipe)
        mode, device_type = cell.framework_mode, self.device.type
        self._step, train = steps.compiled(
            steps.train_step(self.model, self.loss_fn, self.optimizer, device_type=device_type,
                             precision=cell.precision, weight_decay=weight_decay),
            mode, "train")
        self._predict, infer = steps.compiled(
            steps.infer_step(self.model, device_type=device_type, precision=cell.precision),
            mode, "infer")
        self.compiled = {"train": train, "infer": infer}
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def set_learning_rate(self, learning_rate: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate

    def train(self, batches) -> list:
        """One pass of training steps over ``batches``; the losses, still on the device."""
        self.model.train()
        losses = []
        for x, y in host_batches(batches, self.device, self.pipeline):
            losses.append(self._step(self._put(x), y.to(self.device, non_blocking=True)))
        return losses

    def load_only(self, batches) -> int:
        """Run ``batches`` through the input pipeline onto the device, no model: the pipeline's
        own share of a timed run. Returns the number of batches."""
        count = 0
        for x, y in host_batches(batches, self.device, self.pipeline):
            self._put(x)
            y.to(self.device, non_blocking=True)
            count += 1
        return count

    def loss_values(self, losses: list) -> np.ndarray:
        """The losses of ``train`` as float64 numpy (a device sync)."""
        if not losses:
            return np.zeros(0)
        return torch.stack(losses).double().cpu().numpy()

    def evaluate(self, batches) -> np.ndarray:
        """The predicted class of every sample of ``batches``, in order (inference mode)."""
        self.model.eval()
        predictions = [self._predict(self._put(x)).argmax(1)
                       for x, _ in host_batches(batches, self.device, self.pipeline)]
        self.model.train()
        return torch.cat(predictions).cpu().numpy()

    def _put(self, x):
        x = x.to(self.device, non_blocking=True)
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last else x

    # The backend's, on the same attributes (cell, device).
    synchronize = PyTorchBackend.synchronize
    peak_memory = PyTorchBackend.peak_memory
