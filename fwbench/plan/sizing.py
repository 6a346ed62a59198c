"""How many pairs a run needs, stated before measuring: the plan's sizing rule.

A comparison is a paired analysis of n per-pair log ratios (fwbench.analysis.estimators): its
interval at 1 - alpha/m decides it when it excludes 1, and its equivalence (TOST, each side at
alpha/m) when it lies within the margin. Given the per-pair standard deviation the plan expects
(``statistics.sizing.sd``, from earlier runs on such a host), the power of both follows from the
noncentral t distribution, and the rule is the smallest n that reaches ``sizing.power``:

- a headline comparison: to decide a true ratio of ``sizing.ratio`` (or its inverse) at its
  family's level;
- an A/A control: to show a true ratio of 1 equivalent within the controls' margin
  (``statistics.control_margin``, else ``rope``) at the controls' level, since a control fails
  the shipping gate when it cannot.

The power of TOST at a true difference of 0 is read as ``2 P(T > t) - 1`` with T noncentral
(delta sqrt(n) / sd): the usual approximation, a little low for small n. `make bench-sizing`
checks both against simulated runs with a one-sided slow mode.

Usage::

    pairs_to_decide(sd=0.06, ratio=0.9, alpha=0.05 / 4, power=0.8)          # 7
    pairs_for_equivalence(sd=0.05, rope=0.05, alpha=0.05 / 2, power=0.8)    # 13
"""

from __future__ import annotations

import math

# The largest count the rule may ask for: beyond it a comparison is too noisy to size.
N_MAX = 200


def decision_power(n: int, *, sd: float, ratio: float, alpha: float) -> float:
    """Power of the two-sided paired t interval at level 1 - alpha to exclude 1 when the true
    ratio is ``ratio``."""
    from scipy import stats  # only where a rule is stated: every trial process reads the plan

    if n < 2:
        return 0.0
    t = stats.t.ppf(1 - alpha / 2, n - 1)
    shift = abs(math.log(ratio)) * math.sqrt(n) / sd
    return float(stats.nct.sf(t, n - 1, shift) + stats.nct.cdf(-t, n - 1, shift))


def equivalence_power(n: int, *, sd: float, rope: float, alpha: float) -> float:
    """Power of TOST (each one-sided test at ``alpha``) to show a true ratio of 1 within
    1/(1 + rope) .. 1 + rope."""
    from scipy import stats

    if n < 2:
        return 0.0
    t = stats.t.ppf(1 - alpha, n - 1)
    shift = math.log(1 + rope) * math.sqrt(n) / sd
    return max(0.0, float(2 * stats.nct.sf(t, n - 1, shift) - 1))


def pairs_to_decide(*, sd: float, ratio: float, alpha: float, power: float) -> int:
    """The fewest pairs that decide a true ``ratio`` with ``power`` at level 1 - alpha."""
    return _fewest(lambda n: decision_power(n, sd=sd, ratio=ratio, alpha=alpha), power)


def pairs_for_equivalence(*, sd: float, rope: float, alpha: float, power: float) -> int:
    """The fewest pairs that show a true ratio of 1 equivalent with ``power``."""
    return _fewest(lambda n: equivalence_power(n, sd=sd, rope=rope, alpha=alpha), power)


def _fewest(power_at, power: float) -> int:
    for n in range(2, N_MAX + 1):
        if power_at(n) >= power:
            return n
    raise ValueError(f"no count of pairs up to {N_MAX} reaches a power of {power}")


def rule_counts(statistics: dict, *, family_size: int, controls: int) -> dict | None:
    """What the plan's rule asks of a run, or None where `statistics.sizing` states none:
    ``pairs`` each headline comparison needs at the level of a family of ``family_size``, and
    ``control_pairs`` each of the run's ``controls`` A/A controls runs."""
    rule = statistics.get("sizing")
    if not rule:
        return None
    alpha = 1 - statistics["confidence"]
    return {"family_size": family_size, "controls": controls,
            "pairs": pairs_to_decide(sd=rule["sd"], ratio=rule["ratio"],
                                     alpha=alpha / family_size, power=rule["power"]),
            "control_pairs": pairs_for_equivalence(
                sd=rule["sd"], rope=control_margin(statistics),
                alpha=alpha / max(controls, 1),
                power=rule["power"]) if controls else 0}


def control_margin(statistics: dict) -> float:
    """The A/A controls' equivalence margin: the plan's ``control_margin``, else its ``rope``
    (a plan written before the controls had a margin of their own)."""
    return statistics.get("control_margin") or statistics["rope"]
