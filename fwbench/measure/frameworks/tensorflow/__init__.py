"""TensorFlow backend: a mirror image of fwbench.measure.frameworks.pytorch."""

from fwbench.measure.frameworks.tensorflow.backend import TensorFlowBackend

__all__ = ["TensorFlowBackend"]
