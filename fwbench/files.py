"""Files written whole or not at all: a result, a table, a lock or the report is either the
previous version or the new one, never half of it, when a job is killed mid-write. And the one
CSV writer, which writes every number at a stated precision."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, flush it to disk, then rename it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# Significant digits of every float in a CSV the workflow writes. The last bits of a float that
# went through a linear-algebra kernel depend on the kernel the processor picks (OpenBLAS's
# Haswell and Sandybridge kernels give 0.4069914124315368 and 0.406991412431537 for one p-value
# here); ten digits are far more than any figure or table shows and drop those bits, so the
# statistics rebuild to the same bytes on any x86-64 machine.
CSV_DIGITS = 10


def write_csv(frame, path: str | os.PathLike) -> None:
    """Write a pandas DataFrame to ``path`` atomically, without its index, every float rounded
    to CSV_DIGITS significant digits and written as Python writes a float (5.0 stays "5.0",
    so it reads back as a float), in a float column or among text."""
    mixed = frame.select_dtypes(include="object").columns
    frame = frame.assign(**{c: frame[c].map(_rounded_if_float) for c in mixed})
    write_atomic(path, frame.to_csv(index=False, lineterminator="\n", float_format=_rounded))


def _rounded(value: float) -> str:
    return repr(float(f"{value:.{CSV_DIGITS}g}"))


def _rounded_if_float(value):
    return _rounded(value) if isinstance(value, float) and value == value else value


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def staged_directory(target: Path):
    """A fresh folder next to ``target`` that replaces it when the block ends without error."""
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    stage.chmod(0o777 & ~_umask())
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
    os.replace(stage, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
