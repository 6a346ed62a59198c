"""TensorFlow measuring one cell: settings, model, data on the device, one step, synchronization."""

from __future__ import annotations

import os
from functools import partial

import keras
import tensorflow as tf

from fwbench.errors import BackendError
from fwbench.measure import cuda_driver
from fwbench.measure.frameworks.base import LOSS_SCALE_INITIAL, Backend, compiled_record
from fwbench.measure.frameworks.tensorflow import models, steps
from fwbench.plan.models import OPTIMIZER, synthetic_batch
from fwbench.plan.profiles import check_precision, layout_for, matched_factors

PRECISIONS = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
# Keras mode: Keras's train_on_batch and predict_on_batch trace the step into a tf.function.
KERAS_COMPILER = "Keras (train_on_batch, predict_on_batch: tf.function, no XLA)"


def runs_ahead(device: str) -> bool:
    """Whether ``device`` returns before its work is done: only a GPU, or a CPU with asynchronous
    execution turned on (sync_devices' documentation). Elsewhere syncing would only add its own
    ~20 µs to every timed CPU step, a cost PyTorch's CPU synchronize does not have."""
    return device == "cuda" or not tf.config.experimental.get_synchronous_execution()


class TensorFlowBackend(Backend):
    NAME = "tensorflow"

    @staticmethod
    def check_available(device: str) -> str | None:
        if device == "cuda" and not tf.config.list_physical_devices("GPU"):
            return "TensorFlow sees no GPU (tf.config.list_physical_devices('GPU') is empty)"
        return None

    def configure(self) -> dict:
        c = self.cell
        tf.config.threading.set_intra_op_parallelism_threads(self.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        keras.utils.set_random_seed(self.seed)
        gpus = tf.config.list_physical_devices("GPU")
        check_precision(c.precision, c.device,
                        _bf16_supported(gpus) if c.device == "cuda" else True)
        keras.mixed_precision.set_global_policy(PRECISIONS[c.precision])
        # Each matched factor takes the same value as in the PyTorch backend. Autotuning, op
        # determinism (off) and the NHWC layout are already TensorFlow's defaults.
        matched = matched_factors(c.profile)
        if "tf32" in matched:
            tf.config.experimental.enable_tensor_float_32_execution(False)
        if "memory_growth" in matched:
            for gpu in gpus:
                tf.config.experimental.set_memory_growth(gpu, True)
        growth = [tf.config.experimental.get_memory_growth(gpu) for gpu in gpus]
        layout, layout_reason = layout_for(self.NAME, c.device, c.precision,
                                           force_nhwc="layout" in matched)
        synchronous = tf.config.experimental.get_synchronous_execution()
        return {
            "threads_intra": tf.config.threading.get_intra_op_parallelism_threads(),
            "threads_inter": tf.config.threading.get_inter_op_parallelism_threads(),
            "precision": c.precision,
            "loss_scale_initial": LOSS_SCALE_INITIAL if c.precision == "fp16" else None,
            "mode": c.framework_mode,
            "layout": layout,
            "layout_reason": layout_reason,
            # On a GPU, the layout optimizer's kernels are not observable from here: its switch
            # is recorded instead.
            "layout_optimizer": tf.config.optimizer.get_experimental_options().get(
                "layout_optimizer", True),
            "tf32_matmul": tf.config.experimental.tensor_float_32_execution_enabled(),
            "tf32_convolution": tf.config.experimental.tensor_float_32_execution_enabled(),
            "cudnn_autotune": os.environ.get("TF_CUDNN_USE_AUTOTUNE", "1") != "0",
            "deterministic": _op_determinism(),
            "memory_growth": (all(growth) if growth else None),
            "device": c.device,
            "synchronous_execution": synchronous,
            "synchronization": (cuda_driver.SYNCHRONIZATION if c.device == "cuda" and synchronous
                                else "tf.test.experimental.sync_devices" if runs_ahead(c.device)
                                else None),
        }

    def load(self) -> None:
        c = self.cell
        self.device = "/GPU:0" if c.device == "cuda" else "/CPU:0"
        self.runs_ahead = runs_ahead(c.device)
        self.synchronous = tf.config.experimental.get_synchronous_execution()
        with tf.device(self.device):
            try:
                self.model = models.build_model(c.model, c.input_shape, c.num_classes)
            except ValueError as exc:
                raise BackendError(f"building {c.model} failed: {exc}") from exc
            self.loss_fn = models.loss_fn(c.model)
            self.optimizer = models.optimizer(OPTIMIZER)
            if c.precision == "fp16":
                self.optimizer = keras.optimizers.LossScaleOptimizer(
                    self.optimizer, initial_scale=LOSS_SCALE_INITIAL)
            x, y = synthetic_batch(c.batch_size, c.input_shape, c.num_classes, self.seed,
                                   model=c.model)
            self.x, self.y = models.batch_tensors(c.model, x, y, self.device)
        if c.device == "cuda":
            tf.config.experimental.reset_memory_stats("GPU:0")

    def step(self):
        c = self.cell
        if c.framework_mode == "keras":
            return self._keras_step()
        if c.phase == "train":
            fn = steps.train_step(self.model, self.loss_fn, self.optimizer)
            args = (self.x, self.y)
        else:
            fn = steps.infer_step(self.model)
            args = (self.x,)
        fn, record = steps.compiled(fn, c.framework_mode, c.phase)
        self.compiled = {c.phase: record}
        return partial(fn, *args)

    def _keras_step(self):
        """Keras's own loop: what fit and predict run per batch (train_on_batch,
        predict_on_batch), a tf.function Keras traces itself."""
        model, x, y = self.model, self.x, self.y
        model.compile(optimizer=self.optimizer, loss=self.loss_fn, jit_compile=False)
        self.compiled = {self.cell.phase: compiled_record(self.cell.phase, KERAS_COMPILER)}
        if self.cell.phase == "train":
            return lambda: model.train_on_batch(x, y)
        return lambda: model.predict_on_batch(x)

    def device_scope(self):
        # Entered once around the timed calls: entering it in each call cost every step its
        # own context switch (a few µs, at LeNet's 0.15 ms steps).
        return tf.device(self.device)

    def synchronize(self) -> None:
        # Synchronous execution has enqueued every kernel when a call returns, so the driver's
        # wait (the same as PyTorch's) suffices; asynchronous execution must flush first.
        if self.cell.device == "cuda" and self.synchronous:
            cuda_driver.context_synchronize()
        elif self.runs_ahead:
            tf.test.experimental.sync_devices()

    def peak_memory(self) -> dict:
        if self.cell.device != "cuda":
            return {"device_peak_bytes": None, "source": "CPU: see the process's peak RSS"}
        return {"device_peak_bytes": tf.config.experimental.get_memory_info("GPU:0")["peak"],
                "source": "tf.config.experimental.get_memory_info('GPU:0')['peak']"}

    @staticmethod
    def build_info() -> dict:
        """What TensorFlow says it was built with (build-time versions, not what is loaded)."""
        return {
            "version": tf.__version__,
            "path": tf.__file__,
            "git_version": tf.version.GIT_VERSION,
            "compiler": tf.version.COMPILER_VERSION,
            "built_with_cuda": tf.test.is_built_with_cuda(),
            "build_info": {k: _plain(v) for k, v in tf.sysconfig.get_build_info().items()},
        }

    def versions(self) -> dict:
        from tensorflow.python.util import _pywrap_util_port

        build = tf.sysconfig.get_build_info()
        return {
            "framework_version": tf.__version__,
            "cuda": build.get("cuda_version"),
            "cudnn": build.get("cudnn_version"),
            "cpu_math": {
                "blas": "Eigen",
                "onednn": _pywrap_util_port.IsMklEnabled()
                or os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0",
                "instruction_set": None,
                # oneDNN names its ISA only with ONEDNN_VERBOSE set before its first primitive,
                # which would log every op the trial times; TensorFlow has no switch for later
                "onednn_isa": None,
            },
        }


def _op_determinism() -> bool:
    from tensorflow.python.framework import config as framework_config

    return framework_config.is_op_determinism_enabled()


def _bf16_supported(gpus) -> bool:
    details = [tf.config.experimental.get_device_details(gpu) for gpu in gpus]
    return bool(details) and all(d.get("compute_capability", (0, 0)) >= (8, 0) for d in details)


def _plain(value):
    """A build-info value as JSON holds it."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)
