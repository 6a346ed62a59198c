"""Tests that hold PyTorch and TensorFlow in one process.

torch's compiler stack loads triton on first use (torchvision imports it, so does the first
optimizer step); loading triton after TensorFlow segfaults (torch 2.14.1, TF 2.21.0). Importing it
here, before any test module imports TensorFlow, keeps the whole session safe.
"""

try:
    import torch._dynamo  # noqa: F401
    import torchvision  # noqa: F401
except ImportError:  # PyTorch not installed: the tests that need it skip
    pass
