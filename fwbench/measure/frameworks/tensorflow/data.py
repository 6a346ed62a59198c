"""TensorFlow on real data: the input pipeline (tf.data over fwbench.measure.data.Batches) and the
training and evaluation loops of the `epoch` and `convergence` experiments. Mirror image of
frameworks/pytorch/data.py: the same names in the same order.

Every decision about the data (order, crop offsets, flips) is taken in numpy by
fwbench.measure.data.Batches; tf.data applies them with tensor ops inside its graph (gather, pad,
crop, flip, normalize — the idiomatic tf.data way, no Python call per batch), so this pipeline and
the torch DataLoader deliver bit-identical batches (here NHWC, Keras's layout; tested). No
prefetching (prefetch injection and autotuning off), as the DataLoader runs with num_workers=0:
loading is part of the timed epoch in both.

The model starts from PyTorch's initialisation (``weights``, numpy: see
frameworks/pytorch/data.py export_initial_weights), copied across by
fwbench/measure/frameworks/transfer.py; this image needs no torch for that.

Usage::

    trainer = Trainer(cell, OPTIMIZERS["sgd"], weights)
    losses = trainer.train(Batches.epoch(data, 100, epoch=0, seed=0, layout=LAYOUT))
    trainer.synchronize()
    trainer.loss_values(losses)               # numpy, one loss per step (Keras mode: the mean)
    predictions = trainer.evaluate(Batches.evaluation(data, 100, layout=LAYOUT))
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from fwbench.errors import BackendError, Unsupported
from fwbench.measure.frameworks import transfer
from fwbench.measure.frameworks.base import LOSS_SCALE_INITIAL, compiled_record
from fwbench.measure.frameworks.tensorflow import models, steps
from fwbench.measure.frameworks.tensorflow.backend import (
    KERAS_COMPILER,
    TensorFlowBackend,
    runs_ahead,
)

LAYOUT = "NHWC"
INPUT_PIPELINE = ("tf.data: from_tensor_slices over fwbench.measure.data.Batches' plan, batches "
                  "assembled by tensor ops in one sequential map; no prefetch (inject_prefetch "
                  "and autotune off), deterministic")


def loader(batches, device: str | None = None) -> tf.data.Dataset:
    """A tf.data pipeline yielding ``batches`` in order, built from tensor ops: the plan
    (sample order, crop offsets, flips) comes from numpy, the gathering, cropping, flipping and
    normalizing run inside the tf.data graph (no Python per batch), bit-identical to
    ``batches[i]`` (tested)."""
    with tf.device("/CPU:0"):
        images, labels = _host_tensor(batches.images), _host_tensor(batches.labels)
        scale, shift = (tf.constant(v) for v in batches.normalization)
        if batches.shuffle:
            index, offsets, flips = batches.plans()
            slices = (index,) if offsets is None else (index, offsets, flips)
        else:
            slices = (tf.data.Dataset.range(len(batches.labels)).batch(batches.batch_size),)
        pad = batches.augment.pad if batches.augment else 0
        _, _, height, width = batches.images.shape
        nhwc = batches.layout == "NHWC"

        def assemble(index, offsets=None, flips=None):
            x = tf.gather(images, index)  # uint8 (B, C, H, W)
            if offsets is not None:
                x = tf.pad(x, [[0, 0], [0, 0], [pad, pad], [pad, pad]])
                rows = offsets[:, :1] + tf.range(height, dtype=offsets.dtype)
                cols = offsets[:, 1:] + tf.range(width, dtype=offsets.dtype)
                x = tf.gather(x, rows, axis=2, batch_dims=1)
                x = tf.gather(x, cols, axis=3, batch_dims=1)
                x = tf.where(flips[:, None, None, None], tf.reverse(x, axis=[3]), x)
            x = tf.cast(x, tf.float32) * scale - shift
            if nhwc:
                x = tf.transpose(x, [0, 2, 3, 1])
            return x, tf.gather(labels, index)

        dataset = (slices[0] if isinstance(slices[0], tf.data.Dataset)
                   else tf.data.Dataset.from_tensor_slices(slices))
        dataset = dataset.map(assemble)
    options = tf.data.Options()
    options.deterministic = True
    options.experimental_optimization.inject_prefetch = False
    options.autotune.enabled = False
    return dataset.with_options(options)


def host_batches(batches, device: str | None = None, pipeline: str = "framework"):
    """``batches`` as host tensors: through tf.data (``framework``, the default), or straight
    from numpy (``numpy``: the same Python loop in both frameworks, so the host-side work is
    equal and only the framework's compute differs)."""
    if pipeline == "numpy":
        return ((tf.constant(x), tf.constant(y)) for x, y in batches)
    return loader(batches, device)


_HOST: dict[int, tuple[np.ndarray, tf.Tensor]] = {}


def _host_tensor(array: np.ndarray) -> tf.Tensor:
    """The data set's array as a host tensor, copied once per trial (not once per epoch)."""
    key = id(array)
    if key not in _HOST or _HOST[key][0] is not array:
        if len(_HOST) >= 4:
            _HOST.pop(next(iter(_HOST)))
        _HOST[key] = (array, tf.constant(array))
    return _HOST[key][1]


def keras_weights(weights: dict, keras_model) -> list:
    """(Keras variable, value) for every weight of ``keras_model`` from PyTorch's numpy weights,
    through fwbench/measure/frameworks/transfer.py (which reads torch modules: numpy stand-ins
    here)."""
    return transfer.keras_values(_ModuleTree(weights), keras_model)


class Trainer:
    """One model training on real batches in this framework, the cell's mode and precision.

    ``weight_decay`` adds (wd / 2)·Σ w² over the trainable weights to the loss, as on the
    PyTorch side; the loss reported stays the data loss. Keras mode trains with ``fit`` and
    predicts with ``predict`` (Keras's own loops), one epoch-mean loss per ``train``.
    """

    def __init__(self, cell, recipe: dict, weights: dict, *, weight_decay: float = 0.0,
                 channels_last: bool = True, pipeline: str = "framework"):
        self.cell = cell
        self.pipeline = pipeline
        self.device = "/GPU:0" if cell.device == "cuda" else "/CPU:0"
        self.runs_ahead = runs_ahead(cell.device)
        self.mode = cell.framework_mode
        if self.mode == "keras" and weight_decay:
            raise Unsupported("weight decay is added to the loss in fwbench's own loops; Keras "
                              "mode (fit) does not carry it: use mode eager or idiomatic")
        with tf.device(self.device):
            try:
                self.model = models.build_model(cell.model, cell.input_shape, cell.num_classes)
            except ValueError as exc:
                raise BackendError(f"building {cell.model} failed: {exc}") from exc
            for variable, value in keras_weights(weights, self.model):
                variable.assign(value)
            self.loss_fn = models.loss_fn(cell.model)
            self.optimizer = models.optimizer(recipe)
            if cell.precision == "fp16":
                self.optimizer = keras.optimizers.LossScaleOptimizer(
                    self.optimizer, initial_scale=LOSS_SCALE_INITIAL)
            self.optimizer.build(self.model.trainable_variables)
        if self.mode == "keras":  # fit and predict: Keras's own loops, which Keras traces
            self.model.compile(optimizer=self.optimizer, loss=self.loss_fn, jit_compile=False)
            self.compiled = {phase: compiled_record(phase, KERAS_COMPILER)
                             for phase in ("train", "infer")}
        else:
            images = tf.TensorSpec((None, *self.model.input_shape[1:]), tf.float32)
            self._step, train = steps.compiled(
                steps.train_step(self.model, self.loss_fn, self.optimizer,
                                 weight_decay=weight_decay),
                self.mode, "train", input_signature=[images, tf.TensorSpec((None,), tf.int64)])
            self._predict, infer = steps.compiled(steps.infer_step(self.model), self.mode,
                                                  "infer", input_signature=[images])
            self.compiled = {"train": train, "infer": infer}
        if cell.device == "cuda":
            tf.config.experimental.reset_memory_stats("GPU:0")

    def set_learning_rate(self, learning_rate: float) -> None:
        self.optimizer.learning_rate = learning_rate

    def train(self, batches) -> list:
        """One pass of training steps over ``batches``; the losses, still tensors."""
        with tf.device(self.device):
            if self.mode == "keras":  # fit wants a tf.data.Dataset or numpy, not a generator
                data = (loader(batches) if self.pipeline == "framework"
                        else tf.data.Dataset.from_generator(
                            lambda: iter(batches), output_signature=_signature(batches)))
                history = self.model.fit(data, epochs=1, verbose=0, shuffle=False)
                return [history.history["loss"][0]]
            return [self._step(x, y) for x, y in host_batches(batches, None, self.pipeline)]

    def load_only(self, batches) -> int:
        """Run ``batches`` through the input pipeline onto the device, no model: the pipeline's
        own share of a timed run. Returns the number of batches."""
        count = 0
        with tf.device(self.device):
            for x, y in host_batches(batches, None, self.pipeline):
                tf.identity(x)
                tf.identity(y)
                count += 1
        return count

    def loss_values(self, losses: list) -> np.ndarray:
        """The losses of ``train`` as float64 numpy (a device sync)."""
        return np.array([float(loss) for loss in losses], dtype=np.float64)

    def evaluate(self, batches) -> np.ndarray:
        """The predicted class of every sample of ``batches``, in order (inference mode)."""
        with tf.device(self.device):
            if self.mode == "keras":
                images = (loader(batches).map(lambda x, y: x) if self.pipeline == "framework"
                          else np.concatenate([x for x, _ in batches]))
                return np.argmax(self.model.predict(images, verbose=0,
                                                    batch_size=batches.batch_size), axis=1)
            # Kept on the device until the end, as on the PyTorch side: one transfer, one sync.
            return tf.concat([tf.argmax(self._predict(x), axis=1) for x, _ in
                              host_batches(batches, None, self.pipeline)], axis=0).numpy()

    # The backend's, on the same attributes (cell, device, runs_ahead).
    synchronize = TensorFlowBackend.synchronize
    peak_memory = TensorFlowBackend.peak_memory


def _signature(batches):
    return (tf.TensorSpec((None, *batches.sample_shape), tf.float32),
            tf.TensorSpec((None,), tf.int64))


# --- PyTorch's weights without torch: numpy stand-ins for the modules transfer.py reads ----------

class _Tensor:
    """A numpy array answering ``.detach().cpu().numpy()`` like a torch tensor."""

    def __init__(self, array: np.ndarray):
        self._array = array

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self) -> np.ndarray:
        return self._array


class _Module:
    """A torch module's own tensors and attributes; its class is named like the torch class
    (transfer.py dispatches on the type's name)."""

    def __init__(self, record: dict, arrays: dict):
        prefix = f"{record['name']}." if record["name"] else ""
        self._params = [(n, _Tensor(arrays[prefix + n])) for n in record["params"]]
        self._buffers = [(n, _Tensor(arrays[prefix + n])) for n in record["buffers"]]
        for n, tensor in self._params + self._buffers:
            setattr(self, n, tensor)
        for n, value in record["attrs"].items():
            setattr(self, n, value)

    def named_parameters(self, recurse: bool = False):
        return list(self._params)

    def named_buffers(self, recurse: bool = False):
        return list(self._buffers)

    def __getattr__(self, name):  # only reached for attributes not set: an absent bias
        if name in ("weight", "bias"):
            return None
        raise AttributeError(name)


class _ModuleTree:
    """``named_modules()`` of the PyTorch model, rebuilt from export_initial_weights' record."""

    _classes: dict[str, type] = {}

    def __init__(self, weights: dict):
        self._modules = []
        by_name = {}
        for record in weights["modules"]:
            cls = self._classes.setdefault(record["type"], type(record["type"], (_Module,), {}))
            module = cls(record, weights["arrays"])
            parent, _, child = record["name"].rpartition(".")
            if parent in by_name:  # e.g. MultiheadAttention.out_proj
                setattr(by_name[parent], child, module)
            by_name[record["name"]] = module
            self._modules.append((record["name"], module))

    def named_modules(self):
        return iter(self._modules)
