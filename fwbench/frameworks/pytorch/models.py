"""The model zoo in PyTorch: the same networks as frameworks/tensorflow/models.py."""

from __future__ import annotations

import torch
from torch import nn
from torchvision import models as tv


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """A freshly initialised ``name`` for NCHW inputs of ``input_shape`` (C, H, W)."""
    return _BUILDERS[name](input_shape, num_classes)


def _lenet5(input_shape, num_classes):
    channels, height, width = input_shape
    flat = 16 * ((height // 2 - 4) // 2) * ((width // 2 - 4) // 2)
    return nn.Sequential(
        nn.Conv2d(channels, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, num_classes),
    )


def _resnet18(input_shape, num_classes):
    model = tv.resnet18(weights=None, num_classes=num_classes)
    if input_shape[0] != 3:
        model.conv1 = nn.Conv2d(input_shape[0], 64, 7, 2, 3, bias=False)
    return model


_BUILDERS = {"lenet5": _lenet5, "resnet18": _resnet18}


def loss_fn() -> nn.Module:
    return nn.CrossEntropyLoss()


def optimizer(model: nn.Module, spec: dict) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=spec["learning_rate"], momentum=spec["momentum"])
