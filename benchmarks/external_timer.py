"""fwbench's throughput per cell against each framework's own timer: what a user who times the
framework their own way gets for the same cell.

    python benchmarks/external_timer.py [--config config.yaml] [--rounds 3] [--cells resnet18]

For every cell of the config's plan (throughput cells, `idiomatic` mode), each round is one fresh
process that builds both sides and then times them in turn, ``WINDOWS`` times each, in an order
that swaps every round:

- fwbench: the trial's own code on the trial's settings (fwbench.measure.child.load_backend, so a
  CPU cell is confined to its threads' processors as a trial is, then the step its backend
  builds, timed by fwbench.measure.harness.measure), with the peers' warm-up of 30 steps and
  ``PEER_SECONDS`` of timed blocks; its value is its throughput, the mean time per step over its
  timed blocks;
- the peer: the same model builder, batch, shapes, threads and optimizer, the step timed as each
  framework's documentation shows, also as a mean time per step over blocks: PyTorch with
  ``torch.utils.benchmark.Timer.blocked_autorange`` (its mean), TensorFlow with ``timeit`` around
  one ``tf.function`` called with the batch, as a loop over batches calls it
  (``Timer.autorange`` sizes the blocks, the mean of ``repeat`` over its ``number`` is its
  value).

Both sides share the process, so the ratio of two windows timed one after the other leaves out
what differs between processes and what the host's speed does over seconds: on this project's
VM a LeNet-5 step's level wanders by 10-20 % from one second to the next and between processes,
which rounds of two separate processes per side could not average away in a few rounds. It
prints, per cell, the median over rounds and windows of each side and of the windows'
fwbench/peer ratios, then per framework the geometric mean of the cells' ratios. Goal (issue
15): every ratio in [0.9, 1.1]; the exit status is 1 when one is outside. ``--profile
defaults+layout`` makes fwbench force NHWC on PyTorch while the peer runs PyTorch's own NCHW:
the layout gap ``matched`` used to add.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # fwbench from this work tree

from fwbench.plan.cells import Cell  # noqa: E402
from fwbench.plan.config import load  # noqa: E402
from fwbench.plan.sweep import Plan  # noqa: E402

GOAL = (0.9, 1.1)
# Both sides warm up as many steps (once per process) and time their blocks for as long.
WARMUP_STEPS = 30
PEER_SECONDS = 1.0  # timed per window, after the warm-up
WINDOWS = 4  # windows per side and process, alternating


# --- the peers: each framework timed its own way ----------------------------------------------

def peer_pytorch(cell: Cell, threads: int, seed: int) -> Callable[[], float]:
    """A window's mean seconds per step over torch.utils.benchmark.Timer's blocks (it syncs
    CUDA itself), once built and warmed up."""
    import torch
    import torch.utils.benchmark as benchmark

    from fwbench.measure.frameworks.pytorch import models
    from fwbench.plan.models import OPTIMIZER, synthetic_batch

    torch.set_num_threads(threads)
    if torch.get_num_interop_threads() != 1:  # set once per process (fwbench's side sets it)
        torch.set_num_interop_threads(1)
    torch.manual_seed(seed)
    device = torch.device(cell.device)
    model = models.build_model(cell.model, cell.input_shape, cell.num_classes).to(device)
    x, y = models.batch_tensors(cell.model, *synthetic_batch(
        cell.batch_size, cell.input_shape, cell.num_classes, seed, model=cell.model), device)
    if cell.phase == "train":
        model.train()
        optimizer, loss_fn = models.optimizer(model, OPTIMIZER), models.loss_fn(cell.model)
        stmt = "optimizer.zero_grad(); loss_fn(model(x), y).backward(); optimizer.step()"
    else:
        model.eval()
        stmt = "with torch.inference_mode(): model(x)"
        optimizer = loss_fn = None
    timer = benchmark.Timer(stmt, num_threads=threads, globals={
        "torch": torch, "model": model, "x": x, "y": y, "optimizer": optimizer,
        "loss_fn": loss_fn})
    timer.timeit(WARMUP_STEPS)  # warm-up, as a user would before timing
    return lambda: timer.blocked_autorange(min_run_time=PEER_SECONDS).mean


def peer_tensorflow(cell: Cell, threads: int, seed: int) -> Callable[[], float]:
    """A window's mean seconds per call of one tf.function of the batch over timeit's blocks,
    once built, traced and warmed up."""
    import timeit

    import keras
    import tensorflow as tf

    from fwbench.measure.frameworks.tensorflow import models
    from fwbench.plan.models import OPTIMIZER, synthetic_batch

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(seed)
    device = "/GPU:0" if cell.device == "cuda" else "/CPU:0"
    with tf.device(device):
        model = models.build_model(cell.model, cell.input_shape, cell.num_classes)
        loss_fn, optimizer = models.loss_fn(cell.model), models.optimizer(OPTIMIZER)
        x, y = models.batch_tensors(cell.model, *synthetic_batch(
            cell.batch_size, cell.input_shape, cell.num_classes, seed, model=cell.model), device)

    # A tf.function of the batch, as TensorFlow's guide writes a training step and every loop
    # over batches calls it: calling it with its inputs costs about 0.35 ms a call (LeNet-5's
    # training step here: 2.64 ms with the batch captured, 2.98 ms passed), which a
    # function that captures one fixed batch would leave out.
    @tf.function
    def train(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def infer(x):
        return model(x, training=False)

    step = (lambda: train(x, y)) if cell.phase == "train" else (lambda: infer(x))
    call = step if cell.device == "cpu" else lambda: (step(), tf.test.experimental.sync_devices())
    for _ in range(WARMUP_STEPS):  # tracing and warm-up
        call()
    timer = timeit.Timer(call)

    def window() -> float:
        number, block_s = timer.autorange()
        repeat = max(5, math.ceil(PEER_SECONDS / block_s))
        return statistics.fmean(timer.repeat(repeat=repeat, number=number)) / number

    return window


PEERS = {"pytorch": peer_pytorch, "tensorflow": peer_tensorflow}


# --- one process: both sides, alternating ------------------------------------------------------

def alternate(settings: dict, peer_first: bool) -> list[list[float]]:
    """[fwbench, peer] seconds per step of each window pair, both sides built in this process
    (fwbench's first, as its trial would be: confined before any framework starts a thread)."""
    from fwbench.measure.child import load_backend, start
    from fwbench.measure.harness import measure, trial_schedule
    from fwbench.measure.trial import with_warmup

    checked = with_warmup(start(settings))  # the thread variables, before any framework import
    backend, _ = load_backend(checked)
    step = backend.step()
    schedule = trial_schedule(checked)

    def ours() -> float:
        nonlocal schedule
        with backend.device_scope():
            m = measure(step, backend.synchronize, schedule)
        schedule = dataclasses.replace(schedule, warmup=0)  # warmed up once, as the peer
        return sum(m.block_ns) / (m.block_size * len(m.block_ns)) / 1e9

    peer = PEERS[checked.cell.framework](checked.cell, checked.threads, checked.seed)
    pairs = []
    for _ in range(WINDOWS):
        if peer_first:
            theirs, mine = peer(), ours()
        else:
            mine, theirs = ours(), peer()
        pairs.append([mine, theirs])
    return pairs


# --- the comparison ------------------------------------------------------------------------

def run_round(settings: dict, peer_first: bool) -> list[list[float]]:
    out = subprocess.run(
        [sys.executable, __file__, "--alternate", json.dumps(settings),
         *(["--peer-first"] if peer_first else [])],
        check=True, cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def cells_to_time(plan: Plan, only: list[str]) -> dict[Cell, dict]:
    """The first trial's settings of each throughput cell in idiomatic mode (the peers' step),
    warming up and timing blocks for as long as the peers do."""
    chosen = {}
    for trial in plan.trials:
        cell = trial.cell
        if cell.experiment != "throughput" or cell.mode != "idiomatic" or cell in chosen:
            continue
        if only and not any(part in cell.id for part in only):
            continue
        chosen[cell] = {**plan.trial_settings(trial).to_dict(), "warmup_max": WARMUP_STEPS,
                        "blocks_run_time_s": PEER_SECONDS}
    return chosen


def main(config_path: str, rounds: int, only: list[str], profile: str | None) -> int:
    config = load(config_path)
    if profile:
        config["profiles"] = [profile]
    chosen = cells_to_time(Plan.from_config(config), only)
    if not chosen:
        raise SystemExit("no throughput cell in idiomatic mode matches; see --cells")
    windows: dict[Cell, list[list[float]]] = {c: [] for c in chosen}
    for k in range(rounds):
        for i, (cell, settings) in enumerate(chosen.items()):
            pairs = run_round(settings, peer_first=(k + i) % 2 == 1)
            windows[cell] += pairs
            print(f"round {k + 1}/{rounds} {cell.id}: fwbench/peer "
                  + " ".join(f"{a / b:.3f}" for a, b in pairs), file=sys.stderr, flush=True)
    return report(windows, rounds, config["threads"])


def report(windows: dict, rounds: int, threads: int) -> int:
    print(f"fwbench's mean time per step over blocks against each framework's own timer "
          f"({rounds} rounds of one fresh process per cell, {WINDOWS} windows of each side "
          f"alternating in it, {threads} thread(s); goal: ratio in [{GOAL[0]}, {GOAL[1]}])")
    print(f"{'cell':64s} {'fwbench ms':>11s} {'peer ms':>9s} {'ratio':>7s}")
    ratios: dict[str, list[float]] = {}
    outside = 0
    for cell, pairs in windows.items():
        ours = statistics.median(a for a, _ in pairs)
        peer = statistics.median(b for _, b in pairs)
        # Each window pair ran one after the other in one process: its ratio leaves out how
        # the machine's speed moved between windows and between processes.
        ratio = statistics.median(a / b for a, b in pairs)
        ratios.setdefault(cell.framework, []).append(ratio)
        flag = "" if GOAL[0] <= ratio <= GOAL[1] else "  OUTSIDE"
        outside += bool(flag)
        print(f"{cell.id:64s} {ours * 1e3:11.3f} {peer * 1e3:9.3f} {ratio:7.3f}{flag}")
    for framework, values in ratios.items():
        geo = math.exp(statistics.fmean(math.log(r) for r in values))
        print(f"{framework}: geometric mean fwbench/peer {geo:.3f} over {len(values)} cells "
              f"(min {min(values):.3f}, max {max(values):.3f})")
    return 1 if outside else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "config.yaml"))
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per cell")
    parser.add_argument("--cells", nargs="*", default=[],
                        help="time only cells whose id contains one of these (e.g. resnet18)")
    parser.add_argument("--profile", help="run fwbench's side with this settings profile")
    parser.add_argument("--alternate", help=argparse.SUPPRESS)  # one round: the trial's settings
    parser.add_argument("--peer-first", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.alternate:
        print(json.dumps(alternate(json.loads(args.alternate), args.peer_first)))
        sys.exit(0)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    sys.exit(main(args.config, args.rounds, args.cells, args.profile))
