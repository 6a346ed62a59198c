"""Every number the report and the verdicts write goes through ``fmt(value, quantity)``: it
rounds to the significant digits (or decimals) of its quantity and adds the quantity's unit.
One table, ``QUANTITIES``, says how each quantity reads; nothing else rounds.

    fmt(0.8213, "ratio")        -> "0.821"
    fmt(2.44e6, "duration")     -> "2.44 ms"      (nanoseconds in, the unit that reads best)
    fmt(3.9e-18, "p")           -> "3.9 × 10⁻¹⁸"
    fmt(0.875, "level")         -> "87.5 %"       (an interval's coverage)
    fmt(0.8307, "accuracy")     -> "83.1 %"
    fmt(12000, "tick")          -> "12k"          (a log axis' tick label)
    fmt(0.8307, "accuracy", unit=False) -> "83.1" (a table whose header carries the unit)
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Quantity:
    """How one quantity is written: ``digits`` significant digits, or at most ``decimals``
    decimals when set (trailing zeros dropped when ``trim``), of ``value × scale``, then
    ``unit`` (with its own leading space, if any)."""

    digits: int = 3
    unit: str = ""
    scale: float = 1.0
    decimals: int | None = None
    trim: bool = False
    signed: bool = False  # "+0.120": a change, whose sign is the news


QUANTITIES = {
    "value": Quantity(3),                                   # a number with no unit of its own
    "ratio": Quantity(3),                                   # a time ratio, speed-up, efficiency
    "ratio_cell": Quantity(2),                              # a ratio in a heatmap's cell
    "ratio_tick": Quantity(2, "×", trim=True),              # 0.67×, 1×, 1.5×
    "setting": Quantity(4, trim=True),                      # a configured value: 0.9, 0.05, 10
    "data": Quantity(4),                                    # a value of a data appendix
    "level": Quantity(decimals=1, unit=" %", scale=100, trim=True),      # coverage: 95 %, 87.5 %
    "share": Quantity(decimals=0, unit=" %", scale=100),    # a fraction: 46 %
    "accuracy": Quantity(decimals=1, unit=" %", scale=100),  # a fraction correct: 83.1 %
    "utilization": Quantity(3, " %"),                       # already in percent: 85.0 %
    "temperature": Quantity(3, " °C"),
    "power": Quantity(3, " W"),
    "energy": Quantity(3, " J"),
    "memory": Quantity(3, " MiB", 1 / 2**20),               # bytes in
    "throughput": Quantity(3, " samples/s"),
    "epochs": Quantity(3, trim=True),
    "log_ratio": Quantity(decimals=3, signed=True),         # a contribution on log time: +0.223
    "count": Quantity(decimals=0),
    "duration": Quantity(3),                                # nanoseconds in; unit chosen below
    "p": Quantity(2),                                       # a p-value; scientific below 0.001
    "tick": Quantity(3, trim=True),                         # 100, 1k, 10k, 0.01, 2.25
}

# A duration's unit: the largest that keeps the value at or above 1.
_DURATION_UNITS = (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1.0))
# Tick labels past a thousand: 1k, 10k, 1M, 1G, 1T.
_SI_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def fmt(value, quantity: str = "value", unit: bool = True, like=None) -> str:
    """``value`` written as its ``quantity`` reads (a key of ``QUANTITIES``), with its unit
    unless ``unit`` is False (a table whose header carries it); a duration in the unit that
    suits ``like`` when given (an interval's bounds in their estimate's unit)."""
    spec = QUANTITIES[quantity]
    value = float(value)
    if not math.isfinite(value):
        return "not measured" if math.isnan(value) else ("∞" if value > 0 else "−∞")
    if quantity == "duration":
        size = abs(float(like if like is not None else value))
        name, scale = next(((n, s) for n, s in _DURATION_UNITS if size >= s),
                           _DURATION_UNITS[-1])
        return _number(value / scale, spec) + (f" {name}" if unit else "")
    if quantity == "p":
        return _scientific(value, spec.digits) if value < 1e-3 else f"{value:.3f}"
    if quantity == "tick":
        return _tick(value, spec)
    return _number(value * spec.scale, spec) + (spec.unit if unit else "")


def _number(value: float, spec: Quantity) -> str:
    if spec.decimals is not None:
        text = f"{value:{'+' if spec.signed else ''}.{spec.decimals}f}"
    else:
        text = _significant(value, spec.digits)
    if spec.trim and "." in text and "e" not in text and "×" not in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _significant(value: float, digits: int) -> str:
    """``value`` rounded to ``digits`` significant digits, in plain notation down to 10⁻⁴."""
    if value == 0:
        return "0"
    rounded = float(f"{value:.{digits - 1}e}")
    exponent = math.floor(math.log10(abs(rounded)))
    if exponent < -4:
        return _scientific(value, digits)
    if exponent >= digits - 1:  # whole digits are never rounded away: 1234, not 1230
        return f"{value:.0f}"
    return f"{rounded:.{digits - 1 - exponent}f}"


def _scientific(value: float, digits: int) -> str:
    """3.9 × 10⁻¹⁸: a mantissa of ``digits`` significant digits and a power of ten."""
    if value == 0:
        return "0"
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"


def _tick(value: float, spec: Quantity) -> str:
    """A log axis' tick: 0.01, 0.5, 100, 1k, 20k, 1M."""
    for size, prefix in _SI_PREFIXES:
        if abs(value) >= size:
            return _number(value / size, spec) + prefix
    return _number(value, spec)
