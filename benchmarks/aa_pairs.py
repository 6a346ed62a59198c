"""A/A controls: how often a design calls two measurements of the same thing different.

    python benchmarks/aa_pairs.py [--config config.yaml] [--pairs 20] [--cells lenet5/infer]

For every framework and every CPU throughput cell of the config's plan that ``--cells``
selects, each A/A pair puts the cell's trial settings in both slots and runs them under each
design of ``benchmarks/interleaved_pairs.py``: one fresh process after the other (as the
pipeline's pairs run now), and both alive, timing their windows in turn in an order drawn per
round from ``--seed``. A slot's value is its throughput over its windows; the pair's, slot A
over slot B. Which slot starts swaps with every pair.

Per framework, cell and design it prints the A/A ratio (the geometric mean over the pairs), its
paired t interval at the family's level (Bonferroni over every A/A comparison printed), whether
that interval excludes 1 (``decided``: a false positive, since both slots measure the same
thing), the SD of the per-pair log ratios, and the wall time per pair; for the interleaved
design also what the waiting process did while the other timed a window (its CPU milliseconds
and context switches, every thread's, from /proc: it should be idle), and how its first steps
after each switch compare with its steady step (the re-warm, measured step by step). The last
line counts the decided comparisons: of n A/A comparisons at a family level of 95 %, any
decided one is a false positive, and a design is trusted only when none is and every ratio is
within 2 % of 1 (docs/statistics.md).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # fwbench from this work tree
sys.path.insert(0, str(ROOT / "benchmarks"))

from interleaved_pairs import DESIGNS, REWARM, per_step, rewarm_profile  # noqa: E402

from fwbench.plan.config import load  # noqa: E402
from fwbench.plan.sweep import Plan  # noqa: E402


def cells(plan: Plan, only: list[str]) -> dict[str, dict]:
    """{cell id: its first trial's settings} of each CPU throughput cell ``only`` selects."""
    chosen = {}
    for trial in plan.trials:
        cell = trial.cell
        if cell.experiment == "throughput" and cell.device == "cpu" and (
                not only or any(part in cell.id for part in only)):
            chosen.setdefault(cell.id, plan.trial_settings(trial).to_dict())
    return chosen


def main(config_path: str, pairs: int, only: list[str], seed: int, rewarm: int) -> int:
    from scipy import stats

    config = load(config_path)
    chosen = cells(Plan.from_config(config), only)
    if not chosen:
        raise SystemExit("no CPU throughput cell matches; see --cells")
    rng = random.Random(seed)
    print(f"seed {seed}: the order of each interleaved round", file=sys.stderr)
    ratios = {(c, d): [] for c in chosen for d in DESIGNS}
    walls = {(c, d): 0.0 for c in chosen for d in DESIGNS}
    waiting = {c: [] for c in chosen}  # (CPU ms, switches) per window waited, interleaved
    rewarm = {c: [] for c in chosen}  # first steps after a switch / steady step, interleaved
    for k in range(pairs):
        for cell_id, settings in chosen.items():
            for design in list(DESIGNS)[:: 1 if k % 2 == 0 else -1]:
                t0 = time.perf_counter()
                first, second = DESIGNS[design](settings, settings, rng, rewarm)
                walls[cell_id, design] += time.perf_counter() - t0
                a, b = (first, second) if k % 2 == 0 else (second, first)
                ratios[cell_id, design].append(per_step(a.windows) / per_step(b.windows))
                if design == "interleaved":
                    waiting[cell_id] += a.waiting + b.waiting
                    rewarm[cell_id] += rewarm_profile([a, b])
            print(f"pair {k + 1}/{pairs} {cell_id}: A/A " + ", ".join(
                f"{d} {ratios[cell_id, d][-1]:.3f}" for d in DESIGNS), file=sys.stderr,
                flush=True)
    family = len(ratios)
    level = 1 - (1 - config["statistics"]["confidence"]) / family
    t = stats.t.ppf(1 - (1 - level) / 2, pairs - 1)
    print(f"A/A ratio (slot A / slot B, the same cell in both), {pairs} pairs per design; "
          f"interval: paired t at {level:.4f} (Bonferroni over {family} A/A comparisons)")
    print(f"{'cell':58s} {'design':12s} {'ratio':>6s} {'interval':>16s} {'decided':>8s} "
          f"{'SD':>6s} {'s/pair':>7s}")
    decided = 0
    for (cell_id, design), values in ratios.items():
        logs = [math.log(r) for r in values]
        mean, sd = statistics.fmean(logs), statistics.stdev(logs)
        half = t * sd / math.sqrt(pairs)
        low, high = math.exp(mean - half), math.exp(mean + half)
        decided += not low <= 1 <= high
        print(f"{cell_id:58s} {design:12s} {math.exp(mean):6.3f} [{low:6.3f}, {high:6.3f}] "
              f"{'yes' if not low <= 1 <= high else 'no':>8s} {sd:6.3f} "
              f"{walls[cell_id, design] / pairs:7.1f}")
    print("interleaved: the waiting process while the other timed a window (median, max), and "
          "its first steps after a switch / its steady step (median per position)")
    for cell_id in chosen:
        cpu = [ms for ms, _ in waiting[cell_id]]
        switches = [n for _, n in waiting[cell_id]]
        positions = [statistics.median(r[i] for r in rewarm[cell_id] if len(r) > i)
                     for i in range(max(map(len, rewarm[cell_id]), default=0))]
        print(f"{cell_id:58s} CPU {statistics.median(cpu):.0f} ms (max {max(cpu):.0f}), "
              f"switches {statistics.median(switches):.0f} (max {max(switches)}); re-warm "
              + " ".join(f"{r:.2f}" for r in positions))
    print(f"decided: {decided} of {family} A/A comparisons (each one decided is a false "
          "positive)")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "config.yaml"))
    parser.add_argument("--pairs", type=int, default=20, help="A/A pairs per design and cell")
    parser.add_argument("--cells", nargs="*", default=[],
                        help="only cells whose id contains one of these (e.g. lenet5/infer)")
    parser.add_argument("--seed", type=int, default=20261128,
                        help="seed of the order of each interleaved round (printed)")
    parser.add_argument("--rewarm", type=int, default=REWARM,
                        help="untimed steps before every window after a process's first")
    args = parser.parse_args()
    if args.pairs < 2:
        parser.error(f"--pairs must be at least 2 for a deviation, got {args.pairs}")
    sys.exit(main(args.config, args.pairs, args.cells, args.seed, args.rewarm))
