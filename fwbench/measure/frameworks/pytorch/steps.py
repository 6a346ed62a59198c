"""PyTorch's one training step and one inference batch, written once for every experiment.

The throughput backend, the real-data trainer and the distributed replica all build their step
here, and ``compiled`` compiles what they built, whole, and says so: the compile scope a trial
records is the one that ran. Mirror image of frameworks/tensorflow/steps.py.

Usage::

    train = train_step(model, loss_fn, optimizer, device_type="cpu", precision="fp32")
    train, record = compiled(train, "compile", "train")   # torch.compile over the whole step
    loss = train(x, y)
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from fwbench.measure.frameworks.base import LOSS_SCALE_INITIAL, compiled_record

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
# The framework modes that compile the step, and with what.
COMPILERS = {"compile": "torch.compile"}


def train_step(model, loss_fn, optimizer, *, device_type: str, precision: str,
               weight_decay: float = 0.0):
    """``step(x, y) -> loss``: zero the gradients, forward and loss under autocast (mixed
    precision), backward through the fp16 loss scaler (from 2**15, as Keras), the optimizer's
    update. ``weight_decay`` adds (wd / 2)·Σ w² over the trainable weights to the loss that is
    differentiated (the L2 term PyTorch's SGD weight_decay applies); the loss returned is the
    data loss, detached."""
    amp_dtype = PRECISIONS[precision]
    scaler = torch.amp.GradScaler(device_type, init_scale=LOSS_SCALE_INITIAL,
                                  enabled=amp_dtype == torch.float16)
    trainable = [p for p in model.parameters() if p.requires_grad]

    def step(x, y):
        optimizer.zero_grad(set_to_none=True)
        with _autocast(device_type, amp_dtype):
            loss = loss_fn(model(x), y)
        total = loss
        if weight_decay:
            total = loss + weight_decay / 2 * sum(p.float().square().sum() for p in trainable)
        scaler.scale(total).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    return step


def infer_step(model, *, device_type: str, precision: str):
    """``step(x) -> outputs``: the forward pass under autocast (mixed precision)."""
    amp_dtype = PRECISIONS[precision]

    def step(x):
        with _autocast(device_type, amp_dtype):
            return model(x)

    return step


def compiled(step, mode: str, phase: str):
    """``step`` as the framework mode runs it, and the record of what is compiled (None: eager).

    Compiled mode compiles the whole step, optimizer included, as XLA compiles TensorFlow's:
    Dynamo the forward and the optimizer's update, AOTAutograd the backward. An inference step
    runs under torch.inference_mode, outside the compiled region."""
    record = compiled_record(phase, COMPILERS[mode]) if mode in COMPILERS else None
    if record:
        step = torch.compile(step)
    if phase == "infer":
        step = torch.inference_mode()(step)
    return step, record


def _autocast(device_type: str, dtype):
    return nullcontext() if dtype is None else torch.autocast(device_type, dtype=dtype)
