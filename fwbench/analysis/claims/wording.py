"""How a verdict reads the statistics' tables and writes its numbers: a value that was not
measured, a boolean cell, the direction a comparison supports, numbers, intervals and lists as
text. The report writes its tables in the same words, so it imports them from here; every
number goes through ``numbers.fmt``, of which ``sig``, ``ratio``, ``fmt_duration``, ``fmt_p`` and
``percent`` are short names.
"""

from __future__ import annotations

import pandas as pd

from fwbench.analysis import columns
from fwbench.analysis.claims.numbers import fmt
from fwbench.plan import frameworks

FRAMEWORK_LABELS = frameworks.each("label")
OUTCOME_LABELS = {**{verdict: f"{FRAMEWORK_LABELS[side]} faster"
                     for verdict, side in zip(frameworks.FASTER, frameworks.COMPARED)},
                  "equivalent": "equivalent", "inconclusive": "inconclusive"}

DEVICE_NAMES = {"cuda": "GPU", "cpu": "CPU"}
PHASE_WORDS = {"train": "training", "infer": "inference"}

# Axis columns that name a pair, in the order a label lists them, and those that tell training
# results apart (fwbench.analysis.columns).
PAIR_AXES, TRAINING_AXES = columns.PAIR_AXES, columns.TRAINING_AXES


def missing(value) -> bool:
    """True for None, NaN, NaT and pandas' NA: a value that was not measured."""
    if value is None or value is pd.NA:  # NA's truth is itself NA
        return True
    try:
        return bool(value != value)  # NaN and NaT are not equal to themselves
    except (TypeError, ValueError):
        return False


def flag(value) -> bool:
    """A boolean cell of a table: True, "True" or 1; anything missing is False."""
    if missing(value):
        return False
    return value.strip().lower() == "true" if isinstance(value, str) else bool(value)


def is_exploratory(row) -> bool:
    """The comparison's verdict is only a hint (too few trials, unsteady or drifting ones):
    fwbench.analysis.stats marks it, and every figure and table says so beside the verdict."""
    return flag(row.get("exploratory"))


def outcome(row) -> str:
    """The direction a comparison row supports (ratio > 1: the first side, PyTorch, slower).

    The statistics' verdict decides when it is one of ``OUTCOME_LABELS``; for tables without
    one, an interval that excludes 1 decides, else ``inconclusive``.
    """
    verdict = "" if missing(row.get("verdict")) else str(row.get("verdict")).lower()
    # the statistics' own verdict (fwbench.analysis.estimators.verdict)
    if verdict in OUTCOME_LABELS:
        return verdict
    if "equiv" in verdict:
        return "equivalent"
    low, high = row.get("ratio_ci_low"), row.get("ratio_ci_high")
    if not missing(high) and float(high) < 1:
        return frameworks.FASTER[0]
    if not missing(low) and float(low) > 1:
        return frameworks.FASTER[1]
    for key, faster in zip(frameworks.COMPARED, frameworks.FASTER):
        if f"{key} faster" in verdict or faster in verdict:
            return faster
    return "inconclusive"


def select_rows(frame, select: dict):
    """The rows of ``frame`` whose axis values match ``select`` (a list means any of them)."""
    keep = frame.index == frame.index
    for axis, wanted in select.items():
        if axis not in frame.columns:
            return frame.iloc[0:0]
        values = wanted if isinstance(wanted, list) else [wanted]
        keep &= frame[axis].astype(str).isin([str(v) for v in values])
    return frame[keep]


def sig(value) -> str:
    """A number with no quantity of its own, as ``numbers.fmt`` writes it (0.820, 1.40, 1234)."""
    return fmt(value, "value")


def ratio(value) -> str:
    """A time ratio, speed-up or efficiency (``numbers.fmt``)."""
    return fmt(value, "ratio")


def fmt_duration(ns) -> str:
    """Nanoseconds as a readable duration (``numbers.fmt``): 812 µs, 2.44 ms, 1.20 s."""
    return fmt(ns, "duration")


def fmt_p(p) -> str:
    """A p-value (``numbers.fmt``): 0.485, 3.9 × 10⁻¹⁸."""
    return fmt(p, "p")


def fmt_interval(low, high, write=sig) -> str:
    """[low, high], each bound as ``write`` writes it."""
    return f"[{write(low)}, {write(high)}]"


def percent(level) -> str:
    """An interval's coverage (``numbers.fmt``): "95 %", "87.5 %"."""
    return fmt(level, "level")


def with_level(interval: str, level, uniform=None, nominal: float = 0.95) -> str:
    """An interval, with its coverage when that is not the ``nominal`` level (the analysis
    plan's) nor ``uniform`` (the level a table's caption states for every row)."""
    if missing(level) or abs(float(level) - nominal) < 1e-9:
        return interval
    if uniform is not None and abs(float(level) - uniform) < 1e-6:
        return interval
    return f"{interval} at {percent(level)}"


def count(n, noun: str, plural: str | None = None) -> str:
    """"1 trial", "8 trials", "2–3 trials": a count with its noun in the right number (never
    "trial(s)"); ``n`` may be a number or a span's text."""
    n = n if isinstance(n, str) else fmt(n, "count")
    return f"{n} {noun if n == '1' else plural or noun + 's'}"


def label(framework) -> str:
    return FRAMEWORK_LABELS.get(str(framework), str(framework))


def join(items) -> str:
    items = [str(i) for i in items]
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def text(value) -> str:
    """A table value as text; whole floats (a nullable integer read back) without ".0"."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def unique(frame, column: str) -> list[str]:
    """The distinct values of ``frame[column]`` as sorted text (none when there is no column)."""
    if column not in frame:
        return []
    return sorted({text(v) for v in frame[column] if not missing(v)})


def pair_name(row, also=()) -> str:
    """A comparison or cell in words, as prose names it: "resnet18 training at batch 4 on the
    CPU" (its columns model, phase, batch_size and device, those it has), then the ``also``
    axes that tell it from the others ("with adam", "over 2 processes")."""
    return " ".join(_axis_words(axis, row.get(axis))
                    for axis in ("model", "phase", "batch_size", "device", *also)
                    if not missing(row.get(axis)))


def _axis_words(axis: str, value) -> str:
    if axis == "phase":
        return PHASE_WORDS.get(str(value), str(value))
    if axis == "batch_size":
        return f"at batch {text(value)}"
    if axis == "device":
        return f"on the {DEVICE_NAMES.get(str(value), str(value))}"
    if axis == "optimizer":
        return f"with {text(value)}"
    if axis == "world_size":
        return f"over {count(int(value), 'process', 'processes')}"
    return text(value) if axis == "model" else f"{axis.replace('_', ' ')} {text(value)}"


def setting(values: dict) -> str:
    """Axis values that hold for a whole table or figure, in words, as a caption states them:
    "throughput experiment, on the CPU, batch size 4, fp32, idiomatic mode, matched profile"."""
    words = {"experiment": "{} experiment", "batch_size": "batch size {}",
             "input_shape": "input {}", "mode": "{} mode", "profile": "{} profile",
             "optimizer": "optimizer {}", "model": "model {}", "precision": "{}"}
    return ", ".join(
        _axis_words(axis, value) if axis in ("phase", "device", "world_size")
        else words.get(axis, axis.replace("_", " ") + " {}").format(text(value))
        for axis, value in values.items())


def telling_apart(frame) -> list[str]:
    """The pair axes a name needs beyond those ``pair_name`` always writes: those that still
    vary between rows of ``frame`` alike in model, phase, batch size and device."""
    named = [a for a in ("model", "phase", "batch_size", "device") if a in frame]
    alike = frame.astype(str).groupby(named) if named else None
    return [a for a in PAIR_AXES if a in frame and a not in named and a != "experiment"
            and alike is not None and alike[a].nunique().max() > 1]
