"""TensorFlow over several devices or processes: MirroredStrategy and MultiWorkerMirroredStrategy.

The mirror image of frameworks/pytorch/distributed.py: the same class, the same methods in the
same order. fwbench.measure.distributed drives it (one Replica per rank) and does the timing.

- ``mirrored``: tf.distribute.MirroredStrategy in one process over ``world_size`` GPUs, NCCL
  all-reduce (the counterpart of DataParallel). CUDA only, like DataParallel: on the CPU it needs
  logical devices that share one thread pool, so it would measure one device under another name.
- ``multiworker``: tf.distribute.MultiWorkerMirroredStrategy, one process per device (the
  counterpart of DistributedDataParallel); the cluster comes from TF_CONFIG (localhost ports),
  collectives are NCCL on CUDA and gRPC ring all-reduce on the CPU.

Each replica takes the shard of the seeded global batch that PyTorch's DistributedSampler gives
the rank of the same number (fwbench.measure.distributed.shard_indices). The loss of a replica is
its batch mean divided by the number of replicas, and the optimizer sums the gradients over
replicas: the gradient of the global mean.
"""

from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

from fwbench.errors import BackendError, Unsupported
from fwbench.measure import cuda_driver
from fwbench.measure.distributed import shard_indices
from fwbench.measure.frameworks.base import LOSS_SCALE_INITIAL
from fwbench.measure.frameworks.tensorflow import models, steps
from fwbench.measure.frameworks.tensorflow.backend import TensorFlowBackend
from fwbench.measure.frameworks.tensorflow.steps import _float32
from fwbench.plan.models import OPTIMIZER, synthetic_batch

STRATEGIES = {"mirrored": "single_process", "multiworker": "multi_process"}


def check_available(strategy: str, device: str, world_size: int) -> str | None:
    """Why ``strategy`` cannot run over ``world_size`` devices of kind ``device``, or None."""
    if strategy not in STRATEGIES:
        return f"TensorFlow has no strategy {strategy!r}; it runs {', '.join(STRATEGIES)}"
    if strategy == "mirrored" and device != "cuda":
        return ("MirroredStrategy needs GPUs: on the CPU its replicas would be logical devices "
                "sharing one thread pool, so it would measure one device under another name")
    if device == "cuda":
        have = len(tf.config.list_physical_devices("GPU"))
        need = world_size if strategy == "mirrored" else 1  # a worker sees its own GPU only
        if have < need:
            seen = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
            return (f"{strategy} over {world_size} GPUs needs {need} visible to this process; "
                    f"TensorFlow sees {have} (CUDA_VISIBLE_DEVICES={seen})")
    return None


def _samples(x, y, index):
    """Rows ``index`` of a synthetic batch (CTC targets are a tuple of arrays)."""
    return x[index], tuple(t[index] for t in y) if isinstance(y, tuple) else y[index]


class Replica:
    """One worker of a ``multiworker`` trial, or the one process of a ``mirrored`` trial.

    Usage::

        replica = Replica(cell, "multiworker", world_size=2, rank=0, threads=1, seed=0)
        in_force = replica.configure()   # joins the cluster named in TF_CONFIG
        replica.load()
        step = replica.step()
        replica.gather(123)              # [123, <worker 1's value>]
        replica.close()
    """

    def __init__(self, cell, strategy: str, *, world_size: int, rank: int, threads: int,
                 seed: int):
        self.cell, self.strategy = cell, strategy
        self.world_size, self.rank, self.seed = world_size, rank, seed
        self.backend = TensorFlowBackend(cell, threads=threads, seed=seed)
        self.compiled: dict | None = None  # set by step: what it compiles, as the backend's

    def configure(self) -> dict:
        reason = check_available(self.strategy, self.cell.device, self.world_size)
        if reason:
            raise Unsupported(reason)
        in_force = self.backend.configure()  # threads before the runtime starts
        self.synchronous = in_force["synchronous_execution"]
        cuda = self.cell.device == "cuda"
        if self.strategy == "multiworker":
            implementation = tf.distribute.experimental.CommunicationImplementation
            communication = implementation.NCCL if cuda else implementation.RING
            self.distribution = tf.distribute.MultiWorkerMirroredStrategy(
                communication_options=tf.distribute.experimental.CommunicationOptions(
                    implementation=communication))
            communication = f"collective {communication.name.lower()} all-reduce"
            task = f"/task:{self.rank}/"
            self._own_devices = [d.name for d in tf.config.list_logical_devices()
                                 if task in d.name or "/job:" not in d.name]
        else:
            self.distribution = tf.distribute.MirroredStrategy(
                devices=self._device_names())
            communication = type(self.distribution.extended._cross_device_ops).__name__
        if self.distribution.num_replicas_in_sync != self.world_size:
            raise BackendError(f"{self.strategy} formed {self.distribution.num_replicas_in_sync} "
                               f"replicas; the cell asks for {self.world_size}")
        return {**in_force, "strategy": self.strategy, "world_size": self.world_size,
                "communication": communication,
                "devices": self._device_names()}

    def _device_names(self) -> list[str]:
        if self.strategy == "mirrored":
            return [f"/gpu:{i}" for i in range(self.world_size)]
        return ["/gpu:0" if self.cell.device == "cuda" else "/cpu:0"]

    def load(self) -> None:
        c = self.cell
        if c.phase != "train":
            raise Unsupported("the distributed experiment times training steps; data-parallel "
                              "inference needs no gradient synchronization")
        if c.framework_mode == "keras":
            raise Unsupported("the distributed experiment runs custom training loops "
                              "(strategy.run); Keras's own loop is not measured here")
        global_batch = c.batch_size * self.world_size
        x, y = synthetic_batch(global_batch, c.input_shape, c.num_classes, self.seed, model=c.model)
        if self.strategy == "multiworker":
            self.indices = shard_indices(global_batch, self.world_size, self.rank)
        else:
            self.indices = list(range(global_batch))

        def shard(context):
            index = np.asarray(shard_indices(global_batch, self.world_size,
                                             context.replica_id_in_sync_group))
            return models.batch_tensors(c.model, *_samples(x, y, index), None)

        with self.distribution.scope():
            try:
                self.model = models.build_model(c.model, c.input_shape, c.num_classes)
            except ValueError as exc:
                raise BackendError(f"building {c.model} failed: {exc}") from exc
            self.loss_fn = _share_of_replica(models.loss_fn(c.model),
                                             self.distribution.num_replicas_in_sync)
            self.optimizer = models.optimizer(OPTIMIZER)
            if c.precision == "fp16":
                self.optimizer = keras.optimizers.LossScaleOptimizer(
                    self.optimizer, initial_scale=LOSS_SCALE_INITIAL)
            self.optimizer.build(self.model.trainable_variables)
        values = self.distribution.experimental_distribute_values_from_function(shard)
        self.x, self.y = _unzip(values)
        if c.device == "cuda":
            for i in range(len(tf.config.list_physical_devices("GPU"))):
                tf.config.experimental.reset_memory_stats(f"GPU:{i}")

    def step(self):
        distribution, x, y = self.distribution, self.x, self.y
        # Each replica's step; its optimizer update sums the gradients over replicas.
        replica_step = steps.train_step(self.model, self.loss_fn, self.optimizer)
        fn, record = steps.compiled(lambda: distribution.run(replica_step, args=(x, y)),
                                    self.cell.framework_mode, "train")
        self.compiled = {"train": record}
        return fn

    def synchronize(self) -> None:
        if self.cell.device == "cuda" and self.synchronous:
            # The driver's wait on each GPU of this process, as in the harness and on PyTorch's
            # side (and as the settings in force record): every kernel is enqueued by now.
            for name in self._device_names():
                cuda_driver.context_synchronize(int(name.rsplit(":", 1)[1]))
            return
        if self.strategy != "multiworker":
            tf.test.experimental.sync_devices()
            return
        # sync_devices() would also visit the other workers' devices, which a worker's eager
        # context cannot run ops on; this is its body restricted to this worker's own devices.
        from tensorflow.python.eager import context
        from tensorflow.python.ops import gen_sync_ops

        for name in self._own_devices:
            with tf.device(name):
                gen_sync_ops.SyncDevice()
        context.async_wait()

    def barrier(self) -> None:
        if self.strategy == "multiworker":
            self.gather(0)

    def gather(self, value: int) -> list[int]:
        """``value`` of every worker, in worker order, on every worker."""
        if self.strategy != "multiworker":
            return [int(value)]
        if not hasattr(self, "_all_gather"):
            def replica_gather(v):
                context = tf.distribute.get_replica_context()
                return context.all_gather(tf.reshape(v, [1]), axis=0)

            self._all_gather = tf.function(
                lambda v: self.distribution.run(replica_gather, args=(v,)))
        # float64 carries every nanosecond count below 2**53 (104 days) exactly.
        out = self._all_gather(tf.constant(float(value), tf.float64))
        return [int(v) for v in self.distribution.experimental_local_results(out)[0].numpy()]

    def probe(self) -> dict:
        """The synchronized gradient of one step, and the weights before and after that step.

        For the tests: the sum over replicas of the gradients of (replica loss / replicas) must
        equal one process's gradient over the whole global batch.
        """
        model, loss_fn = self.model, self.loss_fn

        def replica_gradients(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, _float32(model(x, training=True)))
            grads = tape.gradient(loss, model.trainable_variables)
            return tf.distribute.get_replica_context().all_reduce("sum", grads)

        initial = [v.numpy().copy() for v in model.trainable_variables]
        out = self.distribution.run(replica_gradients, args=(self.x, self.y))
        gradients = [self.distribution.experimental_local_results(g)[0].numpy() for g in out]
        self.step()()
        after = [v.numpy().copy() for v in model.trainable_variables]
        return {"indices": self.indices, "initial": initial, "gradients": gradients,
                "after_step": after, "learning_rate": OPTIMIZER["learning_rate"]}

    def peak_memory(self) -> dict:
        if self.cell.device != "cuda":
            return {"device_peak_bytes": None, "source": "CPU: see the process's peak RSS"}
        count = self.world_size if self.strategy == "mirrored" else 1
        peaks = [tf.config.experimental.get_memory_info(f"GPU:{i}")["peak"] for i in range(count)]
        return {"device_peak_bytes": max(peaks), "per_device_bytes": peaks,
                "source": "tf.config.experimental.get_memory_info('GPU:<i>')['peak']"}

    def versions(self) -> dict:
        versions = self.backend.versions()
        versions["nccl"] = tf.sysconfig.get_build_info().get("nccl_version")
        versions["gloo"] = None
        return versions

    def close(self) -> None:
        # MultiWorkerMirroredStrategy has no shutdown call; the ranks leave together after the
        # last barrier (fwbench.measure.distributed._leave_together).
        pass


def _share_of_replica(loss_fn, replicas: int):
    """The loss a replica minimizes: its batch mean over ``replicas``. Keras's Loss objects divide
    by the replicas of the strategy in scope themselves (keras.losses.loss.
    scale_loss_for_distribution); the plain functions of frameworks/tensorflow/models.py do not."""
    if isinstance(loss_fn, keras.losses.Loss):
        return loss_fn
    return lambda targets, outputs: loss_fn(targets, outputs) / replicas


def _unzip(distributed):
    """(x, y) distributed values from the per-replica (x, y) pairs."""
    return distributed[0], distributed[1]
