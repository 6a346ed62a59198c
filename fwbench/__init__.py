"""fwbench: PyTorch against TensorFlow, measured so that a reviewer can trust the numbers."""

__version__ = "0.1.0"
