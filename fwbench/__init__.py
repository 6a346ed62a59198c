"""fwbench: PyTorch against TensorFlow, measured so that a reviewer can trust the numbers."""

from pathlib import Path

__version__ = "0.1.0"

# The checkout fwbench runs from: its rules/, report/ templates and git state.
SOURCE_DIR = Path(__file__).resolve().parent.parent
