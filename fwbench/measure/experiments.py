"""The real-data experiments, child side: `epoch` (florencio2019) and `convergence` (tian2020,
sumanjali2024). Framework-neutral drivers; the framework is imported lazily, after the thread
variables are set, through fwbench.measure.frameworks.<framework>.data (the input pipeline and the
training loop over it).

- ``run_epoch``: a fixed number of training steps (600 at batch 100 is florencio2019's one MNIST
  epoch) timed as a whole, ``iterations`` times in one trial after a cold run, then the test set
  classified ``iterations`` times after a cold pass. ``iteration_ns``: one value per timed
  training run; ``inference_ns``: one per timed pass.
- ``run_convergence``: ``epochs`` epochs, each a training pass then a validation pass over the
  test set; per epoch the training loss, validation accuracy, epoch time and training time
  without validation. The first epoch is the cold start (tian2020 reports it apart); later
  epochs' training times are ``iteration_ns``. Time to the target accuracy, and the confusion
  matrix of the last validation.

Both frameworks start from PyTorch's initialisation of the model at ``seed`` (a weights file
written in the PyTorch image by ``write_initial_weights``, or built in the trial when torch is
importable) and see identical batches (fwbench.measure.data.Batches).

Settings: the trial's (fwbench.plan.contract.TrialSettings), whose ``data`` block
(fwbench.plan.contract.Data) the plan built and checked.

Usage::

    payload = run_convergence(plan.trial_settings(trial))   # in the measuring child
    download_data("cifar10", "data")                         # the data rule, before any trial
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import math
import os
import resource
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from fwbench.errors import ConfigError, FwbenchError, Unsupported
from fwbench.measure import data as datasets
from fwbench.measure.child import configure_backend, progress, trial_entry
from fwbench.measure.data_files import DATASETS
from fwbench.measure.payload import TrialPayload
from fwbench.measure.supervisor import supervise
from fwbench.plan.cells import Cell
from fwbench.plan.contract import Data, TrialSettings
from fwbench.plan.models import OPTIMIZERS, check_input

__all__ = ["run_epoch", "run_convergence", "download_data", "data_settings",
           "write_initial_weights", "read_initial_weights", "weights_digest", "confusion_matrix",
           "learning_rate_at"]

_SHAPES = {tuple(spec.input_shape): name for name, spec in DATASETS.items()}


def download_data(name: str, data_dir: str | None = None, **kwargs) -> dict:
    """The data rule's entry: fetch and verify ``name`` (fwbench.measure.data.download_data)."""
    return datasets.download_data(name, data_dir, **kwargs)


def data_settings(data: Data | None, cell: Cell) -> dict:
    """A trial's ``data`` block (built and checked by the plan) as its cell trains with it: the
    cell's optimizer (an axis of the sweep), never the run's list of them, and the data set its
    input shape names where the block names none (Unsupported where no data set has it)."""
    opts = {**asdict(data or Data()), "optimizer": cell.optimizer}
    if opts["dataset"] is None:
        opts["dataset"] = _SHAPES.get(tuple(cell.input_shape))
        if opts["dataset"] is None:
            raise Unsupported(f"no real data set has {list(cell.input_shape)} images; fwbench "
                              f"reads {', '.join(f'{n} {list(s)}' for s, n in _SHAPES.items())}")
    if opts["optimizer"] not in OPTIMIZERS:
        raise ConfigError(f"cell {cell.id}: optimizer must be one of {sorted(OPTIMIZERS)}, "
                          f"got {opts['optimizer']!r}")
    return opts


def recipe(opts: dict) -> dict:
    """The optimizer recipe (fwbench.plan.models.OPTIMIZERS) with the data settings' overrides."""
    r = dict(OPTIMIZERS[opts["optimizer"]])
    if opts["learning_rate"] is not None:
        r["learning_rate"] = float(opts["learning_rate"])
    if opts["momentum"] is not None:
        if r["name"] != "sgd":
            raise ConfigError(f"data.momentum applies to sgd, not {r['name']}")
        r["momentum"] = float(opts["momentum"])
    return r


def learning_rate_at(epoch: int, epochs: int, base: float, schedule: str) -> float:
    """The learning rate of 0-based ``epoch``: constant, or cosine from ``base`` towards 0."""
    if schedule == "cosine":
        return base * 0.5 * (1 + math.cos(math.pi * epoch / epochs))
    return base


def confusion_matrix(labels: np.ndarray, predictions: np.ndarray, classes: int) -> list[list[int]]:
    """Rows: true class; columns: predicted class."""
    matrix = np.zeros((classes, classes), np.int64)
    np.add.at(matrix, (labels, predictions), 1)
    return matrix.tolist()


# --- initial weights, framework-neutral ----------------------------------------------------------

def write_initial_weights(model: str, input_shape, num_classes: int, seed: int, path) -> dict:
    """PyTorch's initialisation of ``model`` at ``seed`` as .npz (run where torch is installed;
    the TensorFlow trials read it without torch). Returns the weights."""
    from fwbench.measure.frameworks.pytorch.data import export_initial_weights

    weights = export_initial_weights(model, tuple(input_shape), num_classes, seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.npz")
    header = json.dumps({"modules": weights["modules"], "meta": weights["meta"]})
    arrays = {f"w/{k}": v for k, v in weights["arrays"].items()}
    np.savez(tmp, __header__=np.array(header), **arrays)
    os.replace(tmp, path)
    return weights


def read_initial_weights(path) -> dict:
    """The weights ``write_initial_weights`` saved."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            header = json.loads(str(npz["__header__"]))
            arrays = {k[2:]: npz[k] for k in npz.files if k.startswith("w/")}
    except (OSError, ValueError, KeyError) as exc:
        raise FwbenchError(f"initial weights {path}: cannot read ({exc}); write them with "
                           "fwbench.measure.experiments.write_initial_weights") from exc
    return {"arrays": arrays, **header}


def weights_digest(weights: dict) -> str:
    """SHA-256 over every array (name, dtype, shape, bytes): equal on both sides of a pair."""
    digest = hashlib.sha256()
    for name in sorted(weights["arrays"]):
        a = np.ascontiguousarray(weights["arrays"][name])
        digest.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def _initial_weights(opts: dict, settings: TrialSettings) -> tuple[dict, dict]:
    cell, seed = settings.cell, settings.seed
    path = opts["initial_weights"]
    if path:
        weights = read_initial_weights(path)
        meta = weights["meta"]
        wanted = {"model": cell.model, "input_shape": list(cell.input_shape),
                  "num_classes": cell.num_classes}
        if {k: meta[k] for k in wanted} != wanted:
            raise ConfigError(f"data.initial_weights {path} holds {meta['model']} "
                              f"{meta['input_shape']} with {meta['num_classes']} classes; the "
                              f"cell needs {wanted}")
        source = f"file {path} (PyTorch's initialisation at seed {meta['seed']})"
    elif cell.framework == "pytorch":
        from fwbench.measure.frameworks.pytorch.data import export_initial_weights

        weights = export_initial_weights(cell.model, cell.input_shape, cell.num_classes, seed)
        source = f"PyTorch's initialisation at seed {seed}, built in this trial"
    else:
        weights = _weights_from_pytorch_process(settings)
        source = (f"PyTorch's initialisation at seed {seed}, built for this trial in a separate "
                  "PyTorch process")
    return weights, {"source": source, "sha256": weights_digest(weights),
                     "seed": weights["meta"]["seed"]}


def _weights_from_pytorch_process(settings: TrialSettings) -> dict:
    """PyTorch's initialisation, made in a child process started by the trial's launcher (within
    the trial's timeout and memory limit): torch (triton) imported into a process that already
    runs TensorFlow can crash it, and its libraries have no place in a TensorFlow trial's
    provenance."""
    if importlib.util.find_spec("torch") is None:
        raise FwbenchError(
            "initial weights: torch is not installed here, and both frameworks start from "
            "PyTorch's initialisation: write them with "
            "fwbench.measure.experiments.write_initial_weights "
            "in the PyTorch image and set data.initial_weights")
    cell = settings.cell
    with tempfile.TemporaryDirectory(prefix="fwbench-weights-") as tmp:
        path = Path(tmp, "weights.npz")
        outcome = supervise(WEIGHTS_ENTRY, {
            "model": cell.model, "input_shape": list(cell.input_shape),
            "num_classes": cell.num_classes, "seed": settings.seed, "path": str(path)},
            timeout_s=settings.timeout_s, memory_limit_mb=settings.memory_limit_mb)
        if outcome.status != "ok":
            raise FwbenchError(f"initial weights: the PyTorch process ended {outcome.status}: "
                               f"{outcome.message}")
        return read_initial_weights(path)


def initial_weights_entry(job: Mapping) -> dict:
    """The weights process's entry (the worker calls it): ``write_initial_weights(**job)``."""
    write_initial_weights(**job)
    return {}


WEIGHTS_ENTRY = "fwbench.measure.experiments:initial_weights_entry"


# --- the trial ------------------------------------------------------------------------------------

@dataclass
class _Run:
    """Everything one real-data trial holds: settings, data, framework trainer, markers."""

    cell: Cell
    opts: dict
    data: datasets.ImageData
    augment: datasets.Augment | None
    trainer: object
    layout: str
    seed: int
    in_force: dict
    versions: dict
    weights_info: dict
    recipe: dict
    uuids: list
    pipeline: str

    def __post_init__(self):
        self.markers: dict[str, int] = {}
        self.energy: dict[str, dict] = {}

    def mark(self, name: str) -> None:
        self.trainer.synchronize()
        self.markers[name] = time.perf_counter_ns()
        if self.uuids:
            from fwbench.measure import telemetry

            self.energy[name] = telemetry.read_energy_mj(self.uuids)

    def timed(self, work):
        """(nanoseconds, result) of ``work()``, the device synchronized on both sides."""
        self.trainer.synchronize()
        start = time.perf_counter_ns()
        result = work()
        self.trainer.synchronize()
        return time.perf_counter_ns() - start, result

    def train_batches(self, start: int, count: int):
        return datasets.Batches.steps(self.data, self.cell.batch_size, start=start, count=count,
                                      seed=self.seed, augment=self.augment, layout=self.layout)

    def epoch_batches(self, epoch: int):
        return datasets.Batches.epoch(self.data, self.cell.batch_size, epoch=epoch,
                                      seed=self.seed, augment=self.augment, layout=self.layout)

    def test_batches(self):
        size = self.opts["eval_batch_size"] or self.cell.batch_size
        return datasets.Batches.evaluation(self.data, size, layout=self.layout)

    def accuracy(self, predictions: np.ndarray) -> float:
        return float(np.mean(predictions == self.data.test_labels))

    def payload(self, *, cold_start_ns: int, iteration_ns: list[int], stop_reason: str,
                **details) -> TrialPayload:
        """The fields every trial result has, then the experiment's own (``details``)."""
        return TrialPayload(
            cold_start_ns=cold_start_ns,
            iteration_ns=iteration_ns,
            stop_reason=stop_reason,
            markers_ns=self.markers,
            energy_mj=self.energy or None,
            settings_in_force={
                **self.in_force,
                "compiled": self.trainer.compiled,
                "experiment": self.cell.experiment,
                "dataset": self.data.name,
                "data_source": self.data.source,
                "optimizer": {**self.recipe, "weight_decay": self.opts["weight_decay"],
                              "schedule": self.opts["schedule"]},
                "augmentation": self.augment.describe() if self.augment else None,
                "batch_order_seed": self.seed,
                "input_pipeline": self.pipeline,
                "eval_batch_size": self.opts["eval_batch_size"] or self.cell.batch_size,
            },
            versions=self.versions,
            peak_memory=self.trainer.peak_memory(),
            peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            details={
                "data_source": self.data.source,
                "data": self.data.describe(),
                "optimizer": {**self.recipe, "weight_decay": self.opts["weight_decay"],
                              "schedule": self.opts["schedule"]},
                "initial_weights": self.weights_info,
                **details,
            },
        )


def _start(settings: TrialSettings, experiment: str) -> _Run:
    cell = settings.cell
    if cell.experiment != experiment:
        raise ConfigError(f"run_{experiment} got a cell of experiment {cell.experiment!r}")
    opts = data_settings(settings.data, cell)
    reason = check_input(cell.model, cell.input_shape, batch_size=cell.batch_size, phase="train")
    if reason:
        raise Unsupported(reason)
    data = datasets.load(opts["dataset"], opts["data_dir"], allow_subset=opts["allow_subset"])
    if tuple(data.input_shape) != tuple(cell.input_shape):
        raise Unsupported(f"{data.name} images are {list(data.input_shape)}; the cell asks for "
                          f"{list(cell.input_shape)}")
    if cell.num_classes != len(data.classes):
        raise Unsupported(f"{data.name} has {len(data.classes)} classes; the cell asks for "
                          f"{cell.num_classes}")
    augment = opts["augment"]
    augment = (DATASETS[data.name].augment if augment is None else augment)
    augment = datasets.Augment() if augment else None

    from fwbench.measure import provenance

    backend, in_force = configure_backend(settings)
    framework = importlib.import_module(f"fwbench.measure.frameworks.{cell.framework}.data")
    weights, weights_info = _initial_weights(opts, settings)
    r = recipe(opts)
    trainer = framework.Trainer(cell, r, weights, weight_decay=float(opts["weight_decay"]),
                                channels_last=in_force.get("layout", "").startswith("NHWC"),
                                pipeline=opts["pipeline"])
    del weights
    progress(f"{cell.id} trial {settings.trial}: {experiment} on {data.source} "
             f"({len(data.train_labels)} training, {len(data.test_labels)} test images)")
    return _Run(cell, opts, data, augment, trainer, framework.LAYOUT, settings.seed, in_force,
                {**backend.versions(), **provenance.framework_runtime(cell.framework)},
                weights_info, r, list(settings.gpu_uuids),
                framework.INPUT_PIPELINE if opts["pipeline"] == "framework" else
                "numpy batches (fwbench.measure.data.Batches) converted in the training loop, "
                "no loader")


@trial_entry
def run_epoch(settings: TrialSettings) -> TrialPayload:
    """florencio2019's measurement: ``steps`` training steps timed as one run, a cold run then
    ``iterations`` timed runs (training goes on from run to run), then the test set classified
    once cold and ``iterations`` times timed."""
    run = _start(settings, "epoch")
    steps, runs = run.opts["steps"], settings.iterations
    trainer = run.trainer
    records = []

    def train_run(k: int) -> int:
        ns, losses = run.timed(lambda: trainer.train(run.train_batches(k * steps, steps)))
        values = trainer.loss_values(losses)
        records.append({"run": k, "train_ns": ns, "train_loss": float(values.mean()),
                        "final_loss": float(values[-1]), "samples": steps * run.cell.batch_size})
        return ns

    run.mark("cold_start")
    cold = train_run(0)
    run.mark("warmup")
    run.mark("measure")
    times = [train_run(k) for k in range(1, runs + 1)]
    run.mark("blocks")  # the test-set passes: florencio2019's inference time
    inference_cold, predictions = run.timed(lambda: trainer.evaluate(run.test_batches()))
    inference = [run.timed(lambda: trainer.evaluate(run.test_batches()))[0] for _ in range(runs)]
    pipeline_ns, _ = run.timed(lambda: trainer.load_only(run.train_batches(runs * steps, steps)))
    run.mark("end")
    return run.payload(
        cold_start_ns=cold,
        iteration_ns=times,
        stop_reason=f"{runs} timed runs of {steps} steps after one cold run",
        steps=steps,
        runs=records,
        inference_cold_ns=inference_cold,
        inference_ns=inference,
        input_pipeline_ns=pipeline_ns,
        test_accuracy=run.accuracy(predictions),
        confusion_matrix=confusion_matrix(run.data.test_labels, predictions,
                                          len(run.data.classes)),
    )


@trial_entry
def run_convergence(settings: TrialSettings) -> TrialPayload:
    """tian2020's and sumanjali2024's measurement: ``epochs`` epochs of training, each followed
    by validation on the test set; per-epoch loss, accuracy and times; time to the target."""
    run = _start(settings, "convergence")
    epochs, target = run.opts["epochs"], run.opts["target_accuracy"]
    base = run.recipe["learning_rate"]
    trainer = run.trainer
    records, trained_ns = [], 0
    reached = None
    predictions = None
    run.mark("cold_start")
    for epoch in range(epochs):
        if epoch == 1:
            run.mark("warmup")
            run.mark("measure")
        learning_rate = learning_rate_at(epoch, epochs, base, run.opts["schedule"])
        trainer.set_learning_rate(learning_rate)
        start = time.perf_counter_ns()
        # run.timed calls the lambda at once, so it sees this epoch (bugbear cannot tell).
        train_ns, losses = run.timed(lambda: trainer.train(run.epoch_batches(epoch)))  # noqa: B023
        val_ns, predictions = run.timed(lambda: trainer.evaluate(run.test_batches()))
        epoch_ns = time.perf_counter_ns() - start
        values = trainer.loss_values(losses)
        accuracy = run.accuracy(predictions)
        trained_ns += train_ns
        records.append({"epoch": epoch + 1, "learning_rate": learning_rate,
                        "train_loss": float(values.mean()), "val_accuracy": accuracy,
                        "epoch_ns": epoch_ns, "train_ns": train_ns, "val_ns": val_ns,
                        "steps": len(losses) if run.cell.framework_mode != "keras" else None})
        if reached is None and target is not None and accuracy >= target:
            reached = {"time_to_accuracy_ns": trained_ns, "epochs_to_accuracy": epoch + 1,
                       "time_to_accuracy_with_validation_ns":
                           sum(r["epoch_ns"] for r in records)}
        progress(f"epoch {epoch + 1}/{epochs}: loss {values.mean():.4f}, "
                 f"accuracy {accuracy:.4f}, {train_ns / 1e9:.1f} s training")
    if epochs == 1:
        run.mark("warmup")
        run.mark("measure")
    run.mark("blocks")  # the input pipeline alone over one more epoch's batches
    pipeline_ns, _ = run.timed(lambda: trainer.load_only(run.epoch_batches(epochs)))
    run.mark("end")
    return run.payload(
        cold_start_ns=records[0]["train_ns"],
        iteration_ns=[r["train_ns"] for r in records[1:]],
        stop_reason=f"{epochs} epochs",
        epochs=records,
        inference_cold_ns=records[0]["val_ns"],
        inference_ns=[r["val_ns"] for r in records[1:]],
        input_pipeline_ns=pipeline_ns,
        target_accuracy=target,
        time_to_accuracy_ns=(reached or {}).get("time_to_accuracy_ns"),
        time_to_accuracy_with_validation_ns=(reached or {}).get(
            "time_to_accuracy_with_validation_ns"),
        epochs_to_accuracy=(reached or {}).get("epochs_to_accuracy"),
        final_accuracy=records[-1]["val_accuracy"],
        best_accuracy=max(r["val_accuracy"] for r in records),
        confusion_matrix=confusion_matrix(run.data.test_labels, predictions,
                                          len(run.data.classes)),
    )

