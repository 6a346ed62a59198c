"""How much the harness inflates the iteration time it reports: harness against a bare loop.

    python benchmarks/harness_overhead.py [--blocks 20] [--iterations 200]

A small real model (LeNet-5 inference, batch 16, one thread, through the PyTorch backend a trial
uses) is timed two ways inside one process: by fwbench.measure.harness.measure (the wall time of its
timing loop, from the `measure` marker to the `blocks` marker, per iteration: every
synchronization, clock read and append included), and by a bare loop (one clock read before and
after back-to-back steps, divided by their count). Blocks of the two alternate in a seeded order
within each pair, so drift hits both sides. The figure is the median over pairs of
harness/bare with a distribution-free 95% interval. Goal (issue 4): at most 1.01 on the CPU.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # fwbench from this work tree

from fwbench.analysis.estimators import median_ci  # noqa: E402
from fwbench.measure.child import thread_environment  # noqa: E402
from fwbench.measure.harness import Schedule, measure  # noqa: E402
from fwbench.plan.cells import Cell  # noqa: E402

GOAL = 1.01


def main(blocks: int, iterations: int, seed: int = 0) -> float:
    import os

    os.environ.update(thread_environment(1))
    from fwbench.measure.frameworks import get_backend

    cell = Cell("throughput", "cpu", "pytorch", "lenet5", "infer", 16, (1, 28, 28), "fp32",
                "eager", "matched")
    backend = get_backend("pytorch")(cell, threads=1, seed=seed)
    backend.configure()
    backend.load()
    step, sync = backend.step(), backend.synchronize

    def harness() -> float:
        m = measure(step, sync, Schedule(iterations=iterations))
        return (m.markers_ns["blocks"] - m.markers_ns["measure"]) / iterations

    def bare() -> float:
        step()  # the harness times a cold-start call first; give the bare loop the same
        start = time.perf_counter_ns()
        for _ in range(iterations):
            step()
        return (time.perf_counter_ns() - start) / iterations

    for _ in range(20):
        step()
    rng = random.Random(seed)
    ratios = []
    for pair in range(blocks):
        times = {}
        for name in rng.sample(["harness", "bare"], 2):
            times[name] = harness() if name == "harness" else bare()
        ratios.append(times["harness"] / times["bare"])
        print(f"pair {pair:2d}: harness {times['harness'] / 1e6:.4f} ms, "
              f"bare {times['bare'] / 1e6:.4f} ms, ratio {ratios[-1]:.4f}", file=sys.stderr)
    ci = median_ci(ratios)
    print(f"harness overhead (CPU, PyTorch LeNet-5 inference, batch 16, 1 thread, {blocks} "
          f"interleaved pairs of {iterations} iterations):")
    print(f"  harness/bare iteration time = {ci.estimate:.4f}, {ci.level:.1%} CI "
          f"[{ci.low:.4f}, {ci.high:.4f}] ({ci.method}); goal <= {GOAL}")
    return ci.estimate


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=20, help="interleaved pairs (>= 10)")
    parser.add_argument("--iterations", type=int, default=200, help="iterations per block")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.blocks < 10:
        parser.error(f"--blocks must be at least 10, got {args.blocks}")
    main(args.blocks, args.iterations, args.seed)
