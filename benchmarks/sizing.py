"""The plan's sizing rule on realistic noise: false "faster" rates and power, by simulation.

    python benchmarks/sizing.py [--families 200] [--seed 0]

Each simulated comparison is n per-pair log ratios of time per step, analysed by the primary
analysis the runs use (``fwbench.analysis.comparisons.compare_paired``, at the family's level).
Its noise is not drawn from a normal: residuals are resampled from the shipped runs' own pairs
(every run's recorded trials table, each comparison's log ratios less their mean, pooled and
scaled to unit SD), then scaled to the noise level. With the slow mode, one or two trials of
one side of every comparison are also 1.3-1.5x slower, the pattern the shipped data show.

For each family size the presets use (3, 4, 15) and noise (0.05, 0.10, 0.17) it prints:
- the pairs the rule asks (fwbench.plan.sizing, power 0.8 to decide a ratio of 0.9) when the
  plan's SD is the true noise, and when the plan says 0.06 (the default's);
- with every true ratio 1: the share of comparisons, and of families, with a false "faster"
  (nominal at most alpha/m and alpha);
- with every true ratio 0.9: the share decided "faster" (the power; the rule promised 0.8).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # fwbench from this work tree

from fwbench.analysis.comparisons import compare_paired  # noqa: E402
from fwbench.plan.sizing import pairs_to_decide  # noqa: E402

FAMILIES, NOISE, RATIO, POWER, PLANNED_SD = (3, 4, 15), (0.05, 0.10, 0.17), 0.9, 0.8, 0.06


def shipped_residuals() -> np.ndarray:
    """Every shipped comparison's per-pair log ratios (PyTorch over TensorFlow time per step,
    the trials' mean per block), less their mean, pooled and scaled to unit SD."""
    pools = []
    for path in sorted(ROOT.glob("results/*/recorded/tables/trials.parquet")):
        trials = pd.read_parquet(path)
        trials = trials[trials["status"] == "ok"]
        steps = trials.pivot_table(index=["pair_id", "trial"], columns="framework",
                                   values="block_mean_ns_per_iteration")
        if {"pytorch", "tensorflow"} - set(steps.columns):
            continue
        d = np.log(steps["pytorch"] / steps["tensorflow"]).dropna()
        d = d.groupby(level="pair_id").transform(lambda x: x - x.mean())
        pools.append(d[d.groupby(level="pair_id").transform("size") >= 3].to_numpy())
    pool = np.concatenate(pools)
    return pool / pool.std(ddof=1)


def simulate(residuals, *, n: int, family: int, families: int, noise: float, ratio: float,
             slow: bool, rng) -> pd.DataFrame:
    """One row per simulated comparison: its family and its verdict."""
    rows = []
    for f in range(families):
        for _ in range(family):
            d = np.log(ratio) + noise * rng.choice(residuals, n)
            if slow:  # one side's 1-2 trials 1.3-1.5x slower; which side, drawn
                hit = rng.choice(n, rng.integers(1, 3), replace=False)
                d[hit] += rng.choice([-1, 1]) * np.log(rng.uniform(1.3, 1.5, hit.size))
            rows.append({"family": f, "verdict": compare_paired(d, family_size=family)["verdict"]})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    residuals = shipped_residuals()
    print(f"{residuals.size} residuals from the shipped runs; {args.families} families per row; "
          f"rule: power {POWER} to decide {RATIO}, alpha 0.05 over the family")
    print("family  noise  slow   n(sd=noise)  n(sd=0.06)  false-faster/comparison  "
          "false-faster/family  power(0.9)")
    faster = ["pytorch_faster", "tensorflow_faster"]
    for family in FAMILIES:
        for noise in NOISE:
            n = pairs_to_decide(sd=noise, ratio=RATIO, alpha=0.05 / family, power=POWER)
            planned = pairs_to_decide(sd=PLANNED_SD, ratio=RATIO, alpha=0.05 / family,
                                      power=POWER)
            for slow in (False, True):
                common = dict(n=n, family=family, families=args.families, noise=noise,
                              slow=slow, rng=rng)
                null = simulate(residuals, ratio=1.0, **common)
                shifted = simulate(residuals, ratio=RATIO, **common)
                false = null["verdict"].isin(faster)
                print(f"{family:6d}  {noise:5.2f}  {'yes' if slow else 'no':4s}  {n:11d}  "
                      f"{planned:10d}  {false.mean():23.4f}  "
                      f"{false.groupby(null['family']).any().mean():19.4f}  "
                      f"{(shifted['verdict'] == 'pytorch_faster').mean():10.3f}")


if __name__ == "__main__":
    main()
