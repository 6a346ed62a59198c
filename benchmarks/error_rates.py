"""Error rates of the verdicts and of the steady-state classes, by simulation.

    python benchmarks/error_rates.py [--families 2000] [--series 1000]

Verdicts: families of six comparisons (one family, as the default run's headline claims), each
with trial k of both frameworks run back to back, passed through
``fwbench.analysis.comparisons.compare_pairs`` as the workflow does. Per scenario it prints the
share of families with a false "faster" (every true ratio 1), with a false "equivalent" (every
true ratio on the margin 1.05, tight noise) and the power (every true ratio 0.8). Scenarios:
the lognormal shift with equal spreads; unequal spreads between trials (1% against 22%, as
lenet5 infer b2 measured); bimodal trials (a third of each framework's trials 25% slower);
drift during the timed steps (a random half of the trials 0-15% slower on average); unequal
trial counts (one pair's TensorFlow trial missing). tests/test_stats_error_control.py checks
the same scenarios with fewer families.

Steady state: the share of simulated series that ``steady_state.classify`` calls flat, with and
without a 15% fall over the timed steps, beside the warm-up detector this replaced (windows of
5 steps, steady when two successive windows' medians differ by less than 2.5%).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # fwbench from this work tree

from fwbench.analysis.comparisons import compare_pairs  # noqa: E402
from fwbench.analysis.steady_state import classify  # noqa: E402
from fwbench.analysis.tables import AXIS_DEFAULTS  # noqa: E402

# name -> (sd of log time per step between trials: PyTorch, TensorFlow; shared pair sd; kind)
SCENARIOS = {
    "lognormal shift, equal spreads": (0.10, 0.10, 0.0, None),
    "unequal spreads (1% vs 22%)": (0.01, 0.22, 0.0, None),
    "bimodal trials": (0.03, 0.03, 0.0, "bimodal"),
    "drift during the timed steps": (0.03, 0.03, 0.0, "drift"),
    "unequal trial counts (a pair missing)": (0.10, 0.10, 0.0, "missing"),
}


def simulated_families(ratios, *, trials: int, scenario: str, families: int, seed: int = 0,
                       scale: float = 1.0) -> pd.DataFrame:
    """Per-trial rows (``trial_statistics``'s columns) of ``families`` families, one comparison
    per true PyTorch/TensorFlow ratio; each family is one experiment. ``scale`` multiplies the
    scenario's spreads (tight noise for the equivalence margin)."""
    sd_pt, sd_tf, sd_pair, kind = SCENARIOS[scenario]
    rng = np.random.default_rng(seed)
    ratios = np.asarray(ratios, dtype=float)
    shape = (families, ratios.size, trials)
    family, pair, trial = (a.ravel() for a in np.indices(shape))
    shared = rng.normal(0.0, sd_pair, size=shape)          # what trial k of both shares
    parts = []
    for framework, centre, sd in (("pytorch", np.log(ratios)[None, :, None], sd_pt),
                                  ("tensorflow", 0.0, sd_tf)):
        log_t = centre + shared + rng.normal(0.0, sd * scale, size=shape)
        if kind == "bimodal":
            log_t += np.log(1.25) * (rng.random(shape) < 1 / 3)
        elif kind == "drift":
            log_t += np.log1p(rng.uniform(0, 0.15, shape) * (rng.random(shape) < 0.5))
        step = 1e6 * np.exp(log_t).ravel()
        parts.append(pd.DataFrame({
            "framework": framework, "experiment": [f"sim{f:05d}" for f in family],
            "batch_size": pair + 1, "trial": trial + 1, "trial_step_ns": step,
            "trial_median_ns": step}))
    frame = pd.concat(parts, ignore_index=True).assign(
        run="sim", device="cpu", model="sim", phase="infer", input_shape="3x32x32",
        precision="fp32", mode="eager", profile="matched", **AXIS_DEFAULTS)
    frame["pair_id"] = frame["experiment"] + "/b" + frame["batch_size"].astype(str)
    if kind == "missing":
        frame = frame[~((frame["framework"] == "tensorflow") & (frame["trial"] == trials))]
    return frame


def family_rate(comparisons: pd.DataFrame, verdicts) -> float:
    """Share of families with at least one comparison whose verdict is in ``verdicts``."""
    hit = comparisons["verdict"].isin(verdicts)
    return float(hit.groupby(comparisons["experiment"]).any().mean())


def verdict_rates(scenario: str, *, families: int, trials: int = 8, seed: int = 0) -> dict:
    """False 'faster', false 'equivalent' (ratio 1.05, noise at a fifth) and power (0.8)."""
    faster = ("pytorch_faster", "tensorflow_faster")
    null = compare_pairs(simulated_families([1.0] * 6, trials=trials, scenario=scenario,
                                            families=families, seed=seed))
    margin = compare_pairs(simulated_families([1.05] * 6, trials=trials, scenario=scenario,
                                              families=families, seed=seed + 1, scale=0.2))
    shifted = compare_pairs(simulated_families([0.8] * 6, trials=trials, scenario=scenario,
                                               families=families, seed=seed + 2))
    return {"false faster": family_rate(null, faster),
            "false equivalent": family_rate(margin, ["equivalent"]),
            "power (0.8, per comparison)": float((shifted["verdict"] == "pytorch_faster").mean())}


def _old_detector_steady_at_end(t, window: int = 5, tolerance: float = 0.025) -> bool:
    """The warm-up rule this replaced: steady once two successive windows' medians agree."""
    medians = [np.median(t[i:i + window]) for i in range(0, len(t) - window + 1, window)]
    return any(abs(b / a - 1) < tolerance for a, b in zip(medians, medians[1:]))


def steady_state_rates(*, series: int, n: int = 30, seed: int = 0) -> dict:
    """Share of series called flat by the changepoints, and steady by the old windows."""
    rng = np.random.default_rng(seed)

    def noise():
        t = np.exp(rng.normal(0.0, 0.03, n))
        t[rng.random(n) < 0.02] *= 1.5
        return t

    trend = np.exp(np.log(0.85) * np.arange(n) / (n - 1))
    flat = [noise() for _ in range(series)]
    falling = [trend * noise() for _ in range(series)]
    return {
        "flat series called flat": np.mean([classify(t) == "flat" for t in flat]),
        "15% fall called flat (missed)": np.mean([classify(t) == "flat" for t in falling]),
        "15% fall called steady by the old windows": np.mean(
            [_old_detector_steady_at_end(t) for t in falling]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", type=int, default=2000)
    parser.add_argument("--series", type=int, default=1000)
    args = parser.parse_args()
    print(f"verdicts: {args.families} families of 6 comparisons, 8 pairs each, alpha 0.05")
    for scenario in SCENARIOS:
        rates = verdict_rates(scenario, families=args.families)
        print(f"  {scenario:40s} " + "  ".join(f"{k} {v:.4f}" for k, v in rates.items()))
    print(f"steady state: {args.series} series of 30 steps, 3% noise, 2% of 1.5x spikes")
    for name, rate in steady_state_rates(series=args.series).items():
        print(f"  {name:45s} {rate:.4f}")


if __name__ == "__main__":
    main()
