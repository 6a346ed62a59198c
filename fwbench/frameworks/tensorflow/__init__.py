"""TensorFlow backend: a mirror image of fwbench.frameworks.pytorch."""

from fwbench.frameworks.tensorflow.backend import TensorFlowBackend

__all__ = ["TensorFlowBackend"]
