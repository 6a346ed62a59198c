"""Beyond one device: data-parallel training over N devices or processes, child side.

Framework-neutral: no framework is imported here at import time. A distributed cell names a
strategy pair (as a cell names a mode pair) and a world size, the number of devices or processes:

    pair             pytorch                           tensorflow
    single_process   DataParallel (dp)                 MirroredStrategy (mirrored)
    multi_process    DistributedDataParallel (ddp)     MultiWorkerMirroredStrategy (multiworker)

The cell's batch size is per device: every strategy steps over a global batch of
batch_size × world_size samples (weak scaling), each device or rank on its own shard, which is what
patel2023's DDP listing does (a DistributedSampler under a per-process batch size).

Child side, inside the supervised trial process::

    run_distributed(settings) -> payload
     ├── single_process: one Replica in this process over world_size devices
     └── multi_process:  world_size rank processes (``run_rank_process``), started, waited for
                         and classified by the trial's own launcher (fwbench.measure.supervisor),
                         torchrun-style environment for PyTorch (MASTER_ADDR/PORT, RANK,
                         LOCAL_RANK, WORLD_SIZE; gloo on the CPU, NCCL on CUDA), TF_CONFIG on
                         localhost ports for TensorFlow; each rank runs measure_ranks, rank 0
                         reports every rank's times

The strategies themselves are named in fwbench.plan.strategies; scaling efficiency and strategy
comparisons over the trials table are fwbench.analysis.scaling. docs/distributed.md describes the
method and the cluster profile.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path

from fwbench.errors import BackendError, Unsupported
from fwbench.measure.child import start, trial_entry
from fwbench.measure.harness import Measurement, Schedule, run, trial_schedule
from fwbench.measure.payload import RankJob, RankRecord, TrialPayload
from fwbench.measure.supervisor import Child, supervise_group
from fwbench.plan import frameworks
from fwbench.plan.contract import TrialSettings
from fwbench.plan.strategies import (
    MULTI_PROCESS,
    resolve_strategy,
    strategy_pair,
    unsupported_reason,
)

# After one rank fails, the others get this long to finish before they are killed (they may be
# waiting in a collective for the rank that is gone).
RANK_GRACE_S = 10.0
RANK_ENTRY = "fwbench.measure.distributed:run_rank_process"
# How a multi-process trial's ranks found each other, by the registry's ``rank_launch``.
LAUNCHERS = {"torchrun": "torchrun-style environment, one process per device",
             "tf_config": "TF_CONFIG cluster on localhost, one worker per device"}


def shard_indices(global_batch: int, world_size: int, rank: int) -> list[int]:
    """The samples of ``rank``: what torch's DistributedSampler(shuffle=False) yields, for a global
    batch that world_size divides (rank, rank + world_size, …)."""
    return list(range(rank, global_batch, world_size))


# --- child side: the synchronized timing loop -------------------------------------------------

def measure_ranks(
    step: Callable[[], object],
    synchronize: Callable[[], None],
    barrier: Callable[[], None],
    gather: Callable[[int], list[int]],
    schedule: Schedule,
    *,
    on_marker: Callable[[str], None] | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> Measurement:
    """fwbench.measure.harness.measure for several ranks: the same phases and rules, each timed
    region framed by a barrier shared by all ranks and ended when this rank's device is idle.
    ``gather(value)`` returns every rank's value; every region keeps them all, in rank order,
    and every decision (the budgets, the block size) reads the slowest, so all ranks step
    equally often and no collective is left waiting. A step is over when its slowest rank is.
    """

    def timed(steps: int) -> list[int]:
        synchronize()
        barrier()
        start = clock()
        for _ in range(steps):
            step()
        synchronize()
        return gather(clock() - start)

    return run(timed, synchronize, schedule, on_marker=on_marker, clock=clock,
               before_marker=barrier)


# --- child side: one rank ----------------------------------------------------------------------

def run_rank(settings: TrialSettings, rank: int, *, probe: bool = False,
             leave_dir: str | None = None) -> RankRecord:
    """Measure one rank of the distributed trial in ``settings``; with ``probe``, first take one
    step that records the synchronized gradient (the Replica classes' ``probe``, for tests).
    ``leave_dir``: the folder where the ranks of a multi-process trial meet before they exit
    (``_leave_together``)."""
    cell = settings.cell
    strategy = resolve_strategy(cell.strategy, cell.framework)
    module = importlib.import_module(f"fwbench.measure.frameworks.{cell.framework}.distributed")
    replica = module.Replica(cell, strategy, world_size=cell.world_size, rank=rank,
                             threads=settings.threads, seed=settings.seed)
    in_force = replica.configure()
    replica.load()
    probed = _listify(replica.probe()) if probe else None
    energy: dict[str, dict] = {}
    uuids = list(settings.gpu_uuids)
    on_marker = None
    if rank == 0 and uuids:
        from fwbench.measure import telemetry

        def on_marker(marker: str) -> None:
            energy[marker] = telemetry.read_energy_mj(uuids)

    step = replica.step()
    m = measure_ranks(step, replica.synchronize, replica.barrier, replica.gather,
                      trial_schedule(settings), on_marker=on_marker)
    replica.barrier()
    if leave_dir:
        _leave_together(leave_dir, rank, cell.world_size)
    record = RankRecord(
        rank=rank, measurement=asdict(m), energy_mj=energy or None,
        settings_in_force={**in_force, "compiled": replica.compiled},
        versions=replica.versions(), peak_memory=replica.peak_memory(),
        peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        probe=probed)
    replica.close()
    return record


def _leave_together(folder: str, rank: int, world_size: int) -> None:
    """Return once every rank is past the last barrier. A barrier's last exchange leaves one
    rank still receiving from another when the other returns, and a rank that then exits takes
    its end of the exchange with it: with two TensorFlow workers on one loaded core, rank 1's
    barrier failed with "Connection reset by peer" from rank 0's exited server. Each rank says
    here that it is past, outside the frameworks, and waits for the others (at most the grace
    the launcher gives the ranks after one fails)."""
    Path(folder, f"rank-{rank}").touch()
    deadline = time.monotonic() + RANK_GRACE_S
    while len(list(Path(folder).glob("rank-*"))) < world_size:
        if time.monotonic() > deadline:
            raise BackendError(f"rank {rank}: not every rank of {world_size} got past the last "
                               f"barrier within {RANK_GRACE_S:g} s")
        time.sleep(0.005)


def run_rank_process(job: Mapping) -> dict:
    """A rank process's entry (the worker calls it): ``job`` is a RankJob's JSON, checked first
    as every child's settings are; returns the rank's record as JSON."""
    job = RankJob.from_dict(job)
    return run_rank(start(job.settings), job.rank, probe=job.probe,
                    leave_dir=job.leave_dir).to_dict()


def _listify(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _listify(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_listify(v) for v in value]
    return value


# --- child side: the driver --------------------------------------------------------------------

@trial_entry
def run_distributed(settings: TrialSettings, *, probe: bool = False) -> TrialPayload:
    """Measure the distributed trial in ``settings``; returns the trial payload.

    ``settings``: a trial's (fwbench.plan.sweep), whose cell carries ``strategy`` (a pair name or
    the framework's own) and ``world_size``. Single-process strategies run here; multi-process
    ones start ``world_size`` rank processes and wait for all of them. ``iteration_ns`` (and cold
    start, warm-up, blocks) is, per step, the maximum over ranks; ``per_rank_ns`` keeps every
    rank's own times. Raises Unsupported with the reason when the strategy cannot run here.
    ``probe`` (for tests) takes one step recording the synchronized gradient before measuring,
    and adds every rank's record of it as ``probe``.

    Usage (in the trial's child, through fwbench.measure.child.ENTRIES)::

        payload = run_distributed(settings)
        payload["iteration_ns"], payload["per_rank_ns"], payload["world_size"]
    """
    from fwbench.plan.models import check_input

    cell = settings.cell
    strategy = resolve_strategy(cell.strategy, cell.framework)
    reason = unsupported_reason(cell.to_dict()) or check_input(cell.model, cell.input_shape)
    if reason:
        raise Unsupported(reason)
    if strategy in MULTI_PROCESS:
        records = _launch(settings, probe)
        launcher = LAUNCHERS[frameworks.get(cell.framework).rank_launch]
    else:
        records = [run_rank(settings, 0, probe=probe)]
        launcher = "one process driving every device"
    payload = _payload(records, settings, strategy, launcher)
    if probe:
        payload.details["probe"] = [r.probe for r in records]
    return payload


def _payload(records: list[RankRecord], settings: TrialSettings, strategy: str,
             launcher: str) -> TrialPayload:
    lead = records[0]
    m = lead.measurement

    def slowest(times):
        return [max(t) for t in times]

    per_device_batch, world_size = settings.cell.batch_size, settings.cell.world_size
    peaks = [r.peak_memory.get("device_peak_bytes") for r in records]
    known = [p for p in peaks if p is not None]
    return TrialPayload(
        cold_start_ns=max(m["cold_start_ns"]),
        warmup_ns=slowest(m["warmup_ns"]),
        warmup_steady=settings.warmup_steady,
        iteration_ns=slowest(m["iteration_ns"]),
        stop_reason=m["stop_reason"],
        block_size=m["block_size"],
        block_ns=slowest(m["block_ns"]),
        markers_ns=m["markers_ns"],
        energy_mj=lead.energy_mj,
        settings_in_force={**lead.settings_in_force, "launcher": launcher,
                           "per_device_batch_size": per_device_batch,
                           "global_batch_size": per_device_batch * world_size,
                           "iteration_statistic": "max over ranks"},
        versions=lead.versions,
        peak_memory={"device_peak_bytes": max(known) if known else None,
                     "per_rank_bytes": peaks, "source": lead.peak_memory.get("source")},
        peak_rss_bytes=max(r.peak_rss_bytes for r in records),
        details={
            "pilot_blocks": m["pilot_blocks"],
            # The strategy actually run and every rank's own times.
            "strategy": strategy,
            "strategy_pair": strategy_pair(strategy),
            "world_size": world_size,
            "global_batch_size": per_device_batch * world_size,
            "iteration_statistic": "max over ranks",
            "per_rank_ns": [list(t) for t in zip(*m["iteration_ns"])],
            "per_rank_cold_start_ns": m["cold_start_ns"],
            "per_rank_block_ns": [list(t) for t in zip(*m["block_ns"])] if m["block_ns"] else [],
            "per_rank_peak_rss_bytes": [r.peak_rss_bytes for r in records],
        },
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_environment(framework: str, device: str, rank: int, world_size: int,
                     ports: list[int]) -> dict[str, str]:
    """The variables a rank process starts with, as its framework's ranks find each other
    (its registry's ``rank_launch``): torchrun's, or a TF_CONFIG cluster.

    A TF_CONFIG worker sees only its own GPU (each worker of MultiWorkerMirroredStrategy uses
    every GPU it sees); a torchrun rank picks cuda:LOCAL_RANK.
    """
    if frameworks.get(framework).rank_launch == "torchrun":
        return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(ports[0]), "RANK": str(rank),
                "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
                "LOCAL_WORLD_SIZE": str(world_size)}
    env = {"TF_CONFIG": json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
        "task": {"type": "worker", "index": rank}})}
    if device == "cuda":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        gpus = visible.split(",") if visible else [str(i) for i in range(world_size)]
        env["CUDA_VISIBLE_DEVICES"] = gpus[rank] if rank < len(gpus) else "-1"
    return env


def _launch(settings: TrialSettings, probe: bool) -> list[RankRecord]:
    """Every rank's record, from world_size rank processes run by the trial's launcher; the
    first rank that failed (one that was killed after another failed, last) fails the trial."""
    cell = settings.cell
    world_size = cell.world_size
    torchrun = frameworks.get(cell.framework).rank_launch == "torchrun"
    ports = [_free_port() for _ in range(1 if torchrun else world_size)]
    with tempfile.TemporaryDirectory(prefix="fwbench-ranks-") as leave_dir:
        ranks = [Child(RANK_ENTRY, RankJob(settings, rank, probe, leave_dir).to_dict(),
                       rank_environment(cell.framework, cell.device, rank, world_size, ports))
                 for rank in range(world_size)]
        outcomes = supervise_group(ranks, grace_s=RANK_GRACE_S)
    failed = [(o.status == "killed", rank, o) for rank, o in enumerate(outcomes)
              if o.status != "ok"]
    if failed:
        _, rank, first = min(failed, key=lambda f: f[:2])
        if first.status == "unsupported":
            raise Unsupported(first.message)
        raise BackendError(f"rank {rank} of {world_size}: {first.message}")
    return [RankRecord.from_dict(o.payload) for o in outcomes]
