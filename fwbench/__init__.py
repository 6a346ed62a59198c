"""fwbench: PyTorch against TensorFlow, measured so that a reviewer can trust the numbers."""

from pathlib import Path

__version__ = "0.1.0"

# The workflow fwbench runs: its Snakefile, rules/ and schemas, report/ templates and claims.
# The checkout the package sits in (and its git state); in a wheel installed without one, the
# copy of those files the wheel carries as package data (setup.py).
_PACKAGE = Path(__file__).resolve().parent
SOURCE_DIR = (_PACKAGE.parent if (_PACKAGE.parent / "Snakefile").is_file()
              else _PACKAGE / "_workflow")
