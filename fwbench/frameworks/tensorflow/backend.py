"""TensorFlow measuring one cell: settings, model, data on the device, one step, synchronization."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from fwbench.errors import BackendError, Unsupported
from fwbench.frameworks.base import Backend
from fwbench.frameworks.tensorflow import models
from fwbench.models import OPTIMIZER


class TensorFlowBackend(Backend):
    NAME = "tensorflow"

    @staticmethod
    def check_available(device: str) -> str | None:
        if device == "cuda" and not tf.config.list_physical_devices("GPU"):
            return "TensorFlow sees no GPU (tf.config.list_physical_devices('GPU') is empty)"
        return None

    def configure(self) -> dict:
        tf.config.threading.set_intra_op_parallelism_threads(self.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        tf.keras.utils.set_random_seed(self.seed)
        if self.cell.precision != "fp32":
            raise Unsupported(f"precision {self.cell.precision!r} is not implemented for TensorFlow")
        return {
            "threads_intra": tf.config.threading.get_intra_op_parallelism_threads(),
            "threads_inter": tf.config.threading.get_inter_op_parallelism_threads(),
            "precision": self.cell.precision,
            "mode": self.cell.framework_mode,
            "layout": "NHWC",
            "device": self.cell.device,
        }

    def load(self) -> None:
        c = self.cell
        self.device = "/GPU:0" if c.device == "cuda" else "/CPU:0"
        with tf.device(self.device):
            try:
                self.model = models.build_model(c.model, c.input_shape, c.num_classes)
            except ValueError as exc:
                raise BackendError(f"building {c.model} failed: {exc}") from exc
            self.loss_fn = models.loss_fn()
            self.optimizer = models.optimizer(OPTIMIZER)
            x, y = self.batch()
            self.x = tf.constant(np.transpose(x, (0, 2, 3, 1)))
            self.y = tf.constant(y)

    def step(self):
        model, x, y, loss_fn, opt = self.model, self.x, self.y, self.loss_fn, self.optimizer

        def train():
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        def infer():
            return model(x, training=False)

        fn = train if self.cell.phase == "train" else infer
        if self.cell.framework_mode == "function":
            fn = tf.function(fn)

        def run():
            with tf.device(self.device):
                return fn()

        return run

    def synchronize(self) -> None:
        tf.test.experimental.sync_devices()

    def versions(self) -> dict:
        build = tf.sysconfig.get_build_info()
        return {
            "framework_version": tf.__version__,
            "cuda": build.get("cuda_version"),
            "cudnn": build.get("cudnn_version"),
        }
