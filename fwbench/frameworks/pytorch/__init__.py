"""PyTorch backend: a mirror image of fwbench.frameworks.tensorflow."""

from fwbench.frameworks.pytorch.backend import PyTorchBackend

__all__ = ["PyTorchBackend"]
