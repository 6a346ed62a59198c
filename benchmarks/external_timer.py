"""fwbench's throughput per cell against each framework's own timer: what a user who times the
framework their own way gets for the same cell.

    python benchmarks/external_timer.py [--config config.yaml] [--rounds 3] [--cells resnet18]

For every cell of the config's plan (throughput cells, `idiomatic` mode), rounds alternate two
fresh processes per framework, in an order that swaps every round:

- fwbench: one trial through the command the workflow runs (``python -m fwbench trial`` with the
  plan's settings, but the peers' warm-up of 30 steps and 2 s of timed blocks, so both sides
  time the same window of a process's life); its value is its throughput, the mean time per
  step over its timed blocks (sum of ``block_ns`` over the steps they hold);
- the peer: a plain script with the same model builder, batch, shapes, threads and optimizer
  that times the step as each framework's documentation shows, also as a mean time per step
  over blocks: PyTorch with ``torch.utils.benchmark.Timer.blocked_autorange`` (its mean),
  TensorFlow with ``timeit`` around one ``tf.function`` called with the batch, as a loop over
  batches calls it (``Timer.autorange`` sizes the blocks, the mean of ``repeat`` over its
  ``number`` is its value).

It prints, per cell, the median over rounds of each side and of the rounds' fwbench/peer
ratios (the two sides of a round run back to back, so a round's ratio leaves out how the
machine's speed moved between rounds), then per framework the geometric mean of the cells'
ratios. Goal (issue 15): every ratio in [0.9, 1.1]; the exit status is 1 when one is outside.
``--profile defaults+layout`` makes fwbench force NHWC on PyTorch while the peer runs PyTorch's
own NCHW: the layout gap ``matched`` used to add.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # fwbench from this work tree

from fwbench.measure.child import thread_environment  # noqa: E402
from fwbench.plan.cells import Cell  # noqa: E402
from fwbench.plan.config import load  # noqa: E402
from fwbench.plan.sweep import Plan  # noqa: E402

GOAL = (0.9, 1.1)
# Both sides warm up as many steps and time their blocks for as long: on a host where one
# process's step drifts by 10-20 % from one window to the next, timers that time different
# windows differ by that much whatever their method.
WARMUP_STEPS = 30
PEER_SECONDS = 2.0  # timed per process, after the warm-up


# --- the peers: each framework timed its own way, in a fresh process --------------------------

def peer_pytorch(cell: Cell, threads: int, seed: int) -> float:
    """Mean seconds per step over torch.utils.benchmark.Timer's blocks (it syncs CUDA itself)."""
    import torch
    import torch.utils.benchmark as benchmark

    from fwbench.measure.frameworks.pytorch import models
    from fwbench.plan.models import OPTIMIZER, synthetic_batch

    torch.set_num_threads(threads)
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
    return timer.blocked_autorange(min_run_time=PEER_SECONDS).mean


def peer_tensorflow(cell: Cell, threads: int, seed: int) -> float:
    """Mean seconds per call of one tf.function of the batch over timeit's blocks."""
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
    number, block_s = timer.autorange()
    repeat = max(5, math.ceil(PEER_SECONDS / block_s))
    return statistics.fmean(timer.repeat(repeat=repeat, number=number)) / number


PEERS = {"pytorch": peer_pytorch, "tensorflow": peer_tensorflow}


# --- the comparison ------------------------------------------------------------------------

def run_fwbench(settings: dict, folder: Path) -> float:
    """Mean seconds per step over the timed blocks of one real trial, through the workflow's
    command."""
    files = {k: folder / f"trial.{k}" for k in ("json", "env.json", "telemetry.csv")}
    subprocess.run([sys.executable, "-m", "fwbench", "trial", "--settings", json.dumps(settings),
                    "--result", str(files["json"]), "--env", str(files["env.json"]),
                    "--telemetry", str(files["telemetry.csv"])], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)
    result = json.loads(files["json"].read_text())
    if result["status"] != "ok":
        raise SystemExit(f"fwbench trial of {settings['cell_id']} ended {result['status']}: "
                         f"{result['message']}")
    steps = result["block_size"] * len(result["block_ns"])
    return sum(result["block_ns"]) / steps / 1e9


def run_peer(settings: dict) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--peer", json.dumps(settings)], check=True, cwd=ROOT,
        capture_output=True, text=True,
        env={**os.environ, **thread_environment(settings["threads"]), "TF_CPP_MIN_LOG_LEVEL": "2"})
    return float(out.stdout.strip().splitlines()[-1])


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
        chosen[cell] = {**plan.trial_settings(trial), "warmup_max": WARMUP_STEPS,
                        "blocks_run_time_s": PEER_SECONDS}
    return chosen


def main(config_path: str, rounds: int, only: list[str], profile: str | None) -> int:
    config = load(config_path)
    if profile:
        config["profiles"] = [profile]
    chosen = cells_to_time(Plan.from_config(config), only)
    if not chosen:
        raise SystemExit("no throughput cell in idiomatic mode matches; see --cells")
    times: dict[Cell, dict[str, list[float]]] = {c: {"fwbench": [], "peer": []} for c in chosen}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(rounds):
            for i, (cell, settings) in enumerate(chosen.items()):
                sides = ("fwbench", "peer") if (k + i) % 2 == 0 else ("peer", "fwbench")
                for side in sides:
                    seconds = (run_fwbench(settings, Path(tmp)) if side == "fwbench"
                               else run_peer(settings))
                    times[cell][side].append(seconds)
                print(f"round {k + 1}/{rounds} {cell.id}: fwbench "
                      f"{times[cell]['fwbench'][-1] * 1e3:.3f} ms, peer "
                      f"{times[cell]['peer'][-1] * 1e3:.3f} ms", file=sys.stderr, flush=True)
    return report(times, rounds, config["threads"])


def report(times: dict, rounds: int, threads: int) -> int:
    print(f"fwbench's mean time per step over blocks against each framework's own timer "
          f"({rounds} rounds of fresh processes per side, {threads} thread(s); goal: ratio in "
          f"[{GOAL[0]}, {GOAL[1]}])")
    print(f"{'cell':64s} {'fwbench ms':>11s} {'peer ms':>9s} {'ratio':>7s}")
    ratios: dict[str, list[float]] = {}
    outside = 0
    for cell, sides in times.items():
        ours, peer = statistics.median(sides["fwbench"]), statistics.median(sides["peer"])
        # The two sides of a round ran back to back: their ratio leaves out how the machine's
        # speed moved between rounds, as the workflow's pairs do.
        ratio = statistics.median(a / b for a, b in zip(sides["fwbench"], sides["peer"]))
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
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per side and cell")
    parser.add_argument("--cells", nargs="*", default=[],
                        help="time only cells whose id contains one of these (e.g. resnet18)")
    parser.add_argument("--profile", help="run fwbench's side with this settings profile")
    parser.add_argument("--peer", help=argparse.SUPPRESS)  # a peer process: the trial's settings
    args = parser.parse_args()
    if args.peer:
        s = json.loads(args.peer)
        print(PEERS[s["cell"]["framework"]](Cell.from_dict(s["cell"]), s["threads"], s["seed"]))
        sys.exit(0)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    sys.exit(main(args.config, args.rounds, args.cells, args.profile))
