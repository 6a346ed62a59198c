"""Error rates of ``fwbench compare --fail-on-slowdown PCT``, by simulation.

    python benchmarks/compare_gate.py [--families 2000] [--trials 8] [--cells 8] [--percent 10]

A family is one compare: two runs sharing ``--cells`` cells, ``--trials`` trials a side, each
trial's log time per step normal with the same SD in both runs: 0.05, 0.10 or 0.15 (the shipped
reference run's cells measured 0.08-0.17). Each cell is decided by
``fwbench.analysis.compare.compare_unpaired`` at the family's level under the default analysis
plan (confidence 0.95, margin 5 %), and the gate by ``compare.slowdowns``, as the command does.
Per SD it prints:

- false FAIL: the share of families, every true ratio 1.0, that the gate fails;
- FAIL at 1.1, 1.2, 1.3: the share of families with one cell at that true ratio B/A (the others
  at 1.0) that the gate fails, its power (the cells at 1.0 are those of the null families, which
  do not depend on the slowed cell);
- detectable: ``compare.detectable_slowdown`` at this SD and n (the column every cell shows, here
  from the true spread), then the share of cells at that true ratio called "slower": the 80 % it
  promises.

Each share's Monte Carlo standard error is at most 0.5/sqrt(families), 1.1 % at 2000.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # fwbench from this work tree

from fwbench.analysis.claims.numbers import fmt  # noqa: E402
from fwbench.analysis.claims.wording import percent, sig  # noqa: E402
from fwbench.analysis.compare import (  # noqa: E402
    compare_unpaired,
    detectable_slowdown,
    slowdowns,
)

SDS = (0.05, 0.10, 0.15)
RATIOS = (1.1, 1.2, 1.3)
CONFIDENCE, ROPE = 0.95, 0.05  # the default analysis plan's statistics.confidence and .rope


def decided(rng, ratio: float, sd: float, *, trials: int, cells: int, families: int):
    """``families`` cells at the true ratio B/A ``ratio``, each decided as one of ``cells``."""
    rows = []
    for _ in range(families):
        a = np.exp(rng.normal(0.0, sd, trials))
        b = np.exp(rng.normal(math.log(ratio), sd, trials))
        rows.append(compare_unpaired(a, b, family_size=cells, confidence=CONFIDENCE, rope=ROPE))
    return pd.DataFrame(rows)


def failed(cells: pd.DataFrame, threshold: float, families: int) -> float:
    """Share of families (``cells``' column ``family``) that fail the gate."""
    return slowdowns(cells, threshold)["family"].nunique() / families


def rates(sd: float, *, trials: int, cells: int, families: int, threshold: float,
          seed: int) -> list[str]:
    """One row of the table: false FAIL, FAIL at each of ``RATIOS``, detectable and its power."""
    rng = np.random.default_rng(seed)
    null = decided(rng, 1.0, sd, trials=trials, cells=cells, families=families * cells)
    null["family"] = np.repeat(np.arange(families), cells)
    others = null[null.index % cells != 0]  # cells - 1 null cells beside each slowed one
    row = [fmt(sd, "setting"), percent(failed(null, threshold, families))]
    for ratio in RATIOS:
        slowed = decided(rng, ratio, sd, trials=trials, cells=cells, families=families)
        slowed["family"] = np.arange(families)
        row.append(percent(failed(pd.concat([slowed, others]), threshold, families)))
    level = 1 - (1 - CONFIDENCE) / cells
    detectable = detectable_slowdown(sd * math.sqrt(2 / trials), 2 * trials - 2, level)
    at = decided(rng, detectable, sd, trials=trials, cells=cells, families=families)
    return [*row, sig(detectable), percent((at["verdict"] == "slower").mean())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=8, help="trials a side")
    parser.add_argument("--cells", type=int, default=8, help="cells compared: the family")
    parser.add_argument("--percent", type=float, default=10, help="the gate's PCT")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    level = 1 - (1 - CONFIDENCE) / args.cells
    print(f"--fail-on-slowdown {fmt(args.percent, 'setting')}: {args.cells} cells, "
          f"{args.trials} trials a side, intervals at {percent(level)}, {args.families} families "
          "per share")
    header = ["log-SD", "false FAIL", *(f"FAIL at {r}" for r in RATIOS), "detectable",
              "slower at it"]
    print("  ".join(f"{h:>12}" for h in header))
    for i, sd in enumerate(SDS):
        row = rates(sd, trials=args.trials, cells=args.cells, families=args.families,
                    threshold=args.percent, seed=args.seed + i)
        print("  ".join(f"{v:>12}" for v in row))


if __name__ == "__main__":
    main()
