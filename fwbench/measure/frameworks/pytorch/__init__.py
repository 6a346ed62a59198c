"""PyTorch backend: a mirror image of fwbench.measure.frameworks.tensorflow."""

from fwbench.measure.frameworks.pytorch.backend import PyTorchBackend

__all__ = ["PyTorchBackend"]
