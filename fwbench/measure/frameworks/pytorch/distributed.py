"""PyTorch over several devices or processes: DataParallel and DistributedDataParallel.

The mirror image of frameworks/tensorflow/distributed.py: the same class, the same methods in the
same order. fwbench.measure.distributed drives it (one Replica per rank) and does the timing.

- ``dp``: torch.nn.DataParallel in one process; the global batch sits on cuda:0 and is scattered
  over ``world_size`` GPUs every step (patel2023's Listing 2). CUDA only: without CUDA,
  DataParallel calls the module unchanged, which would measure one device under another name.
- ``ddp``: torch.nn.parallel.DistributedDataParallel, one process per device, started torchrun
  style (MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK, WORLD_SIZE in the environment); NCCL on CUDA,
  gloo on the CPU. Each rank takes its shard of the seeded global batch through a
  DistributedSampler, as patel2023's Listing 1 does.
"""

from __future__ import annotations

import os
from functools import partial

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DistributedSampler

from fwbench.errors import BackendError, Unsupported
from fwbench.measure import cuda_driver
from fwbench.measure.frameworks.pytorch import models, steps
from fwbench.measure.frameworks.pytorch.backend import PyTorchBackend
from fwbench.plan.models import OPTIMIZER, synthetic_batch

STRATEGIES = {"dp": "single_process", "ddp": "multi_process"}


def check_available(strategy: str, device: str, world_size: int) -> str | None:
    """Why ``strategy`` cannot run over ``world_size`` devices of kind ``device``, or None."""
    if strategy not in STRATEGIES:
        return f"PyTorch has no strategy {strategy!r}; it runs {', '.join(STRATEGIES)}"
    if strategy == "dp" and device != "cuda":
        return ("DataParallel needs CUDA devices: on the CPU it calls the module unchanged, so "
                "it would measure one device under another name")
    if device == "cuda":
        have = torch.cuda.device_count()
        if have < world_size:
            return f"{strategy} over {world_size} GPUs needs {world_size}; PyTorch sees {have}"
    return None


def _samples(x, y, index):
    """Rows ``index`` of a synthetic batch (CTC targets are a tuple of arrays)."""
    return x[index], tuple(t[index] for t in y) if isinstance(y, tuple) else y[index]


class Replica:
    """One rank of a ``ddp`` trial, or the one process of a ``dp`` trial.

    Usage::

        replica = Replica(cell, "ddp", world_size=2, rank=0, threads=1, seed=0)
        in_force = replica.configure()   # joins the process group
        replica.load()
        step = replica.step()
        replica.gather(123)              # [123, <rank 1's value>]
        replica.close()
    """

    def __init__(self, cell, strategy: str, *, world_size: int, rank: int, threads: int,
                 seed: int):
        self.cell, self.strategy = cell, strategy
        self.world_size, self.rank, self.seed = world_size, rank, seed
        self.backend = PyTorchBackend(cell, threads=threads, seed=seed)
        self.compiled: dict | None = None  # set by step: what it compiles, as the backend's
        self.local_rank = int(os.environ.get("LOCAL_RANK", rank))

    def configure(self) -> dict:
        reason = check_available(self.strategy, self.cell.device, self.world_size)
        if reason:
            raise Unsupported(reason)
        in_force = self.backend.configure()
        cuda = self.cell.device == "cuda"
        if cuda:
            torch.cuda.set_device(self.local_rank if self.strategy == "ddp" else 0)
        self.device = torch.device("cuda", torch.cuda.current_device()) if cuda else (
            torch.device("cpu"))
        communication = None
        if self.strategy == "ddp":
            communication = "nccl" if cuda else "gloo"
            dist.init_process_group(communication, init_method="env://", rank=self.rank,
                                    world_size=self.world_size)
        elif cuda:
            communication = "scatter/gather over CUDA peer copies (DataParallel)"
        return {**in_force, "strategy": self.strategy, "world_size": self.world_size,
                "communication": communication,
                "devices": self._device_names()}

    def _device_names(self) -> list[str]:
        if self.strategy == "dp":
            return [f"cuda:{i}" for i in range(self.world_size)]
        return [str(self.device)]

    def load(self) -> None:
        c = self.cell
        if c.phase != "train":
            raise Unsupported("the distributed experiment times training steps; data-parallel "
                              "inference needs no gradient synchronization")
        global_batch = c.batch_size * self.world_size
        x, y = synthetic_batch(global_batch, c.input_shape, c.num_classes, self.seed, model=c.model)
        if self.strategy == "ddp":
            # As in patel2023's Listing 1: this rank's samples come from a DistributedSampler.
            sampler = DistributedSampler(range(global_batch), num_replicas=self.world_size,
                                         rank=self.rank, shuffle=False)
            self.indices = list(sampler)
            x, y = _samples(x, y, np.asarray(self.indices))
        else:
            self.indices = list(range(global_batch))
        try:
            module = models.build_model(c.model, c.input_shape, c.num_classes).to(self.device)
        except RuntimeError as exc:
            raise BackendError(f"building {c.model} failed: {exc}") from exc
        if self.backend.channels_last:
            module = module.to(memory_format=torch.channels_last)
        module.train()
        self.module = module
        if self.strategy == "ddp":
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.model = nn.parallel.DistributedDataParallel(module, device_ids=ids)
        else:
            self.model = nn.DataParallel(module, device_ids=list(range(self.world_size)))
        self.loss_fn = models.loss_fn(c.model)
        self.optimizer = models.optimizer(self.model, OPTIMIZER)
        self.x, self.y = models.batch_tensors(c.model, x, y, self.device)
        if self.backend.channels_last and self.x.dim() == 4:
            self.x = self.x.contiguous(memory_format=torch.channels_last)
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def step(self):
        fn = steps.train_step(self.model, self.loss_fn, self.optimizer,
                              device_type=self.device.type, precision=self.cell.precision)
        # DDP all-reduces (averages) the gradients in the step's backward.
        fn, record = steps.compiled(fn, self.cell.framework_mode, "train")
        self.compiled = {"train": record}
        return partial(fn, self.x, self.y)

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            # The driver's wait on each GPU of this process, as in the harness and on TensorFlow's
            # side (and as the settings in force record).
            for name in self._device_names():
                cuda_driver.context_synchronize(torch.device(name).index)

    def barrier(self) -> None:
        if self.strategy == "ddp":
            dist.barrier(device_ids=[self.device.index] if self.device.type == "cuda" else None)

    def gather(self, value: int) -> list[int]:
        """``value`` of every rank, in rank order, on every rank."""
        if self.strategy != "ddp":
            return [int(value)]
        mine = torch.tensor([int(value)], dtype=torch.int64, device=self.device)
        every = [torch.zeros_like(mine) for _ in range(self.world_size)]
        dist.all_gather(every, mine)
        return [int(t.item()) for t in every]

    def probe(self) -> dict:
        """The synchronized gradient of one step, and the weights before and after that step.

        For the tests: after DDP's backward every rank holds the average over ranks of the
        shard gradients, which must equal one process's gradient over the whole global batch.
        """
        initial = [p.detach().cpu().numpy().copy() for p in self.module.parameters()]
        self.optimizer.zero_grad(set_to_none=True)
        self.loss_fn(self.model(self.x), self.y).backward()
        gradients = [p.grad.detach().cpu().numpy().copy() for p in self.module.parameters()]
        self.step()()
        after = [p.detach().cpu().numpy().copy() for p in self.module.parameters()]
        return {"indices": self.indices, "initial": initial, "gradients": gradients,
                "after_step": after, "learning_rate": OPTIMIZER["learning_rate"]}

    def peak_memory(self) -> dict:
        if self.device.type != "cuda":
            return {"device_peak_bytes": None, "source": "CPU: see the process's peak RSS"}
        indices = range(self.world_size) if self.strategy == "dp" else [self.device.index]
        peaks = [torch.cuda.max_memory_allocated(i) for i in indices]
        return {"device_peak_bytes": max(peaks), "per_device_bytes": peaks,
                "source": "torch.cuda.max_memory_allocated"}

    def versions(self) -> dict:
        versions = self.backend.versions()
        versions["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if (
            self.device.type == "cuda") else None
        versions["gloo"] = dist.is_gloo_available()
        return versions

    def close(self) -> None:
        if self.strategy == "ddp" and dist.is_initialized():
            dist.destroy_process_group()

