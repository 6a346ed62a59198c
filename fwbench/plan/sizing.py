"""How many pairs a run needs, stated before measuring: the plan's sizing rule.

A comparison is a paired analysis of n per-pair log ratios (fwbench.analysis.estimators): its
interval at 1 - alpha/m decides it when it excludes 1, and its equivalence (TOST, each side at
alpha/m) when it lies within the margin. Given the per-pair standard deviation the plan expects
(``statistics.sizing.sd``, from earlier runs on such a host, or a ``sizing.pilot`` entry's: the
SD earlier runs measured of that very comparison or control), the power of both follows from
the noncentral t distribution, and the rule is the smallest n that reaches ``sizing.power``:

- a headline comparison: to decide a true ratio of ``sizing.ratio`` (or its inverse) at its
  family's level, and never fewer than the config's ``trials``;
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

import functools
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


@functools.cache  # the plan asks it of every cell group
def pairs_to_decide(*, sd: float, ratio: float, alpha: float, power: float) -> int:
    """The fewest pairs that decide a true ``ratio`` with ``power`` at level 1 - alpha."""
    return _fewest(lambda n: decision_power(n, sd=sd, ratio=ratio, alpha=alpha), power)


@functools.cache
def pairs_for_equivalence(*, sd: float, rope: float, alpha: float, power: float) -> int:
    """The fewest pairs that show a true ratio of 1 equivalent with ``power``."""
    return _fewest(lambda n: equivalence_power(n, sd=sd, rope=rope, alpha=alpha), power)


def _fewest(power_at, power: float) -> int:
    for n in range(2, N_MAX + 1):
        if power_at(n) >= power:
            return n
    raise ValueError(f"no count of pairs up to {N_MAX} reaches a power of {power}")


def planned_pairs(statistics: dict, axes: dict, *, trials: int, family_size: int,
                  controls: int) -> int:
    """The pairs one cell group runs. Without a sizing rule, ``trials``. With one, a headline
    comparison runs ``trials`` or, where its expected SD asks more, the pairs that decide the
    rule's ratio at the level of a family of ``family_size``; an A/A control (``axes`` naming
    its framework) runs the pairs that show a true 1 equivalent within the controls' margin at
    the level of the run's ``controls``."""
    rule = statistics.get("sizing")
    if not rule:
        return trials
    alpha = 1 - statistics["confidence"]
    sd = expected_sd(rule, axes)
    if "framework" in axes:
        return pairs_for_equivalence(sd=sd, rope=control_margin(statistics),
                                     alpha=alpha / max(controls, 1), power=rule["power"])
    return max(trials, pairs_to_decide(sd=sd, ratio=rule["ratio"], alpha=alpha / family_size,
                                       power=rule["power"]))


def expected_sd(rule: dict, axes: dict) -> float:
    """The per-pair SD the rule expects of one comparison or A/A control: that of the first
    ``pilot`` entry whose every value ``axes`` has, else ``sd``. ``axes``: a comparison's axis
    values, or an A/A control's with its framework; an entry that names a framework sizes that
    framework's controls, one that names none the comparisons."""
    return next((entry["sd"] for entry in rule.get("pilot", ()) if names(entry, axes)),
                rule["sd"])


def names(entry: dict, axes: dict) -> bool:
    """Whether a ``pilot`` entry names the comparison or control of these axis values: it has
    every value the entry names, and names a framework only if the entry does."""
    named = {key: value for key, value in entry.items() if key != "sd"}
    return ("framework" in named) == ("framework" in axes) and all(
        key in axes and axis_text(axes[key]) == axis_text(value) for key, value in named.items())


def axis_text(value) -> str:
    """An axis value as the config and the tables may each write it: a shape as 3x32x32, a
    count a table read as a float (4.0) as 4."""
    if isinstance(value, (list, tuple)):
        return "x".join(map(str, value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def control_margin(statistics: dict) -> float:
    """The A/A controls' equivalence margin: the plan's ``control_margin``, else its ``rope``
    (a plan written before the controls had a margin of their own)."""
    return statistics.get("control_margin") or statistics["rope"]
