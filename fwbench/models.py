"""Framework-neutral model specs, the seeded synthetic batch, and the training recipe.

Loss, optimizer and their hyper-parameters are defined here once, so both frameworks mean the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ModelSpec:
    """What the config may name: a model, its task and the smallest input it accepts."""

    name: str
    task: str
    canonical_shape: tuple[int, int, int]
    min_size: int


MODELS = {
    "lenet5": ModelSpec("lenet5", "image classification", (1, 28, 28), 12),
    "resnet18": ModelSpec("resnet18", "image classification", (3, 224, 224), 1),
}

# Cross-entropy from logits, averaged over the batch; SGD with momentum.
OPTIMIZER = {"name": "sgd", "learning_rate": 0.01, "momentum": 0.9}


def check_input(model: str, input_shape: tuple[int, ...]) -> str | None:
    """The reason ``input_shape`` is too small for ``model``, or None."""
    spec = MODELS[model]
    _, height, width = input_shape
    if min(height, width) < spec.min_size:
        return (f"{model} needs inputs of at least {spec.min_size}x{spec.min_size} pixels, "
                f"got {height}x{width}")
    return None


def synthetic_batch(batch_size: int, input_shape: tuple[int, ...], num_classes: int,
                    seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded standard-normal images (NCHW, float32) and integer labels."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch_size, *input_shape), dtype=np.float32)
    y = rng.integers(0, num_classes, size=batch_size, dtype=np.int64)
    return x, y
