"""How much the telemetry sampler slows a CPU trial: the ratio of median iteration times with
the sampler on and off.

    python benchmarks/telemetry_overhead.py [--blocks 20] [--iterations 100] [--period 0.1]

A small real PyTorch CNN trains on the CPU with one thread. Blocks alternate between sampler on
and off, in a seeded random order within each pair, all in one process, so drift hits both
sides. Each block's median iteration time is its value; the figure is the median over pairs of
on/off, with a distribution-free confidence interval (order statistics of the paired ratios).
Goal (issue 5): at most 1.02 on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # fwbench from this work tree

from fwbench.analysis.estimators import median_ci  # noqa: E402
from fwbench.measure.telemetry import Sampler  # noqa: E402

GOAL = 1.02


def main(blocks: int = 20, iterations: int = 100, period_s: float = 0.1, seed: int = 0) -> float:
    import torch  # here, not at the top: the sampler process must never import it
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(16 * 8 * 8, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))

    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    def block() -> float:
        for _ in range(5):
            step()
        times = []
        for _ in range(iterations):
            start = time.perf_counter_ns()
            step()
            times.append(time.perf_counter_ns() - start)
        return statistics.median(times)

    rng = random.Random(seed)
    ratios, on_ms, off_ms, busy = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(blocks):
            medians = {}
            for sampler_on in rng.sample([True, False], 2):
                if sampler_on:
                    with Sampler(Path(tmp, f"trial-{pair}.telemetry.csv"), period_s=period_s,
                                 pid=os.getpid(), gpu_uuids=[]) as sampler:
                        medians[True] = block()
                    s = sampler.meta["sampler"]
                    busy.append(s["busy_ns"] / (s["stopped_ns"] - s["t0_ns"]))
                else:
                    medians[False] = block()
            ratios.append(medians[True] / medians[False])
            on_ms.append(medians[True] / 1e6)
            off_ms.append(medians[False] / 1e6)
            print(f"pair {pair:2d}: on {on_ms[-1]:.3f} ms, off {off_ms[-1]:.3f} ms, "
                  f"ratio {ratios[-1]:.4f}", file=sys.stderr)
    ratio = statistics.median(ratios)
    ci = median_ci(ratios)
    low, high, level = ci.low, ci.high, ci.level
    print(f"telemetry sampler overhead (CPU, 1 thread, period {period_s * 1000:g} ms, "
          f"{blocks} interleaved pairs of {iterations} iterations, "
          f"{len(os.sched_getaffinity(0))} cores):")
    print(f"  median iteration on/off = {ratio:.4f}, {level:.1%} CI [{low:.4f}, {high:.4f}]"
          f"  (median step {statistics.median(off_ms):.3f} ms off, "
          f"{statistics.median(on_ms):.3f} ms on; goal <= {GOAL})")
    print(f"  the sampler spent {statistics.median(busy):.2%} of the time taking samples "
          "(median over blocks)")
    return ratio


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=20, help="interleaved on/off pairs (>= 10)")
    parser.add_argument("--iterations", type=int, default=100, help="timed steps per block")
    parser.add_argument("--period", type=float, default=0.1, help="sampling period in seconds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.blocks < 10:
        parser.error(f"--blocks must be at least 10, got {args.blocks}")
    main(args.blocks, args.iterations, args.period, args.seed)
