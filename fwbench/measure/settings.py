"""The trial contract: the settings a trial is measured under, and the payload its child returns.

Both cross process boundaries as JSON (the job's params, the child's settings file, the child's
outcome), so both are checked where they are built, as pyperf's ``Run`` and optimum-benchmark's
``BenchmarkReport.from_dict`` are: a bad value fails there, with one error naming the field,
instead of a KeyError deep inside a child process. Framework-free.

Usage::

    settings = TrialSettings.from_dict(plan.trial_settings(trial))   # ConfigError naming a field
    settings.schedule(), settings.cell.framework, settings.to_dict()
    payload = TrialPayload(iteration_ns=[...], details={"steps": 600})   # in the child
    TrialPayload.from_dict(outcome.payload).iteration_ns                 # in the parent
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields

from fwbench.errors import ConfigError, ResultError
from fwbench.measure.harness import Adaptive, Schedule
from fwbench.plan.cells import Cell

# --- checks: each returns what the value should be, or None when it is that ---------------------

Check = Callable[[object], "str | None"]


def _integer(minimum: int) -> Check:
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            return f"an integer of at least {minimum}"
    return check


def _number(minimum: float) -> Check:
    def check(value):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
            return f"a number of at least {minimum:g}"
    return check


def _kind(kind: type, name: str) -> Check:
    def check(value):
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return name
    return check


def _optional(check: Check) -> Check:
    def optional(value):
        want = None if value is None else check(value)
        return want and f"{want} or null"
    return optional


def _integers(value):
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int)
                                          for v in value):
        return "a list of integers"


def _strings(value):
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        return "a list of strings"


_TEXT, _FLAG, _MAPPING = (_kind(str, "a string"), _kind(bool, "true or false"),
                          _kind(dict, "an object"))


def _checked(what: str, error: type[Exception], values: Mapping, checks: Mapping) -> None:
    for name, check in checks.items():
        want = check(values[name])
        if want:
            raise error(f"{what}: {name} must be {want}, got {values[name]!r}")


# --- settings --------------------------------------------------------------------------------

# The cell's axes (fwbench.plan.cells.Cell): the ten a cell always has, then those with defaults.
_CELL_CHECKS = {
    **dict.fromkeys(("experiment", "device", "framework", "model", "phase", "precision", "mode",
                     "profile"), _TEXT),
    "batch_size": _integer(1), "input_shape": _integers, "num_classes": _integer(1),
    "strategy": _optional(_TEXT), "world_size": _integer(1), "optimizer": _optional(_TEXT),
    "control": _TEXT,
}
_CELL_OPTIONAL = ("num_classes", "strategy", "world_size", "optimizer", "control")


@dataclass(frozen=True)
class TrialSettings:
    """Everything a trial is measured under: the plan's settings of one trial
    (fwbench.plan.sweep.Plan.trial_settings), and what is added on its way to the child."""

    run: str
    cell: Cell
    cell_id: str
    pair_id: str
    trial: int
    group_position: int
    iterations: int
    min_run_time_s: float
    warmup_min: int
    warmup_max: int
    calibration_s: float
    blocks: int
    blocks_run_time_s: float
    block_time_s: float
    block_min_size: int
    adaptive: dict | None
    threads: int
    seed: int
    analysis_plan: str
    timeout_s: float
    memory_limit_mb: int | None
    telemetry: dict
    data: dict | None
    # Absent from a plain trial's settings, so absent from its dict (the job's params stay the
    # same, and so does what its result records as requested):
    calibration: bool = False        # a cell's calibration trial (Plan.calibration_settings)
    warmup: dict | None = None       # the cell's warm-up (fwbench.measure.trial.with_warmup)
    images: dict | None = None       # the expected images (fwbench.environment.images)
    gpu_uuids: tuple[str, ...] = ()  # the GPUs the parent's sampler watches
    profile_steps: int | None = None  # a profiled run's steps (fwbench.measure.profiling)

    def __post_init__(self):
        _checked("trial settings", ConfigError, self.__dict__, _SETTINGS_CHECKS)

    @classmethod
    def from_dict(cls, d: Mapping) -> TrialSettings:
        """The settings in ``d`` (JSON), or a ConfigError naming the first field that is
        missing, unknown or of the wrong kind."""
        if not isinstance(d, Mapping):
            raise ConfigError(f"trial settings must be an object, got {d!r}")
        _known_fields("trial settings", d, _NAMES, _REQUIRED)
        cell = d["cell"]
        if not isinstance(cell, Mapping):
            raise ConfigError(f"trial settings: cell must be an object, got {cell!r}")
        _known_fields("trial settings: cell", cell, list(_CELL_CHECKS),
                      [n for n in _CELL_CHECKS if n not in _CELL_OPTIONAL])
        _checked("trial settings: cell", ConfigError, cell,
                 {n: c for n, c in _CELL_CHECKS.items() if n in cell})
        uuids = d.get("gpu_uuids", ())
        if _strings(uuids):
            raise ConfigError(f"trial settings: gpu_uuids must be a list of strings, got "
                              f"{uuids!r}")
        return cls(**{**d, "cell": Cell.from_dict(cell), "gpu_uuids": tuple(uuids)})

    def to_dict(self) -> dict:
        """The settings as JSON: what ``from_dict`` read, the added fields only when set."""
        d = {name: getattr(self, name) for name in _REQUIRED}
        d["cell"] = self.cell.to_dict()
        d.update({name: getattr(self, name) for name in _ADDED if getattr(self, name)})
        if self.gpu_uuids:
            d["gpu_uuids"] = list(self.gpu_uuids)
        return d

    def requested(self) -> dict:
        """What a trial result records as requested (its ``settings.requested``)."""
        d = self.to_dict()
        return {name: d[name] for name in REQUESTED if name in d}

    def schedule(self) -> Schedule:
        """What the trial times after its cold start.

        A calibration trial times single steps only, for ``calibration_s`` and at least twice
        ``warmup_max``, so a warm-up as long as the longest allowed leaves a steady run as long
        to see. Any other trial warms up the steps its cell's calibration fixed (``warmup``)."""
        if self.calibration:
            return Schedule(iterations=max(self.iterations, 2 * self.warmup_max),
                            min_run_time_s=self.calibration_s)
        if self.warmup is None:
            raise ConfigError(f"trial settings of {self.cell_id}: no warm-up; run the trial "
                              "through fwbench.measure.trial.run_trial, which adds its cell's")
        return Schedule(
            warmup=self.warmup["iterations"], iterations=self.iterations,
            min_run_time_s=self.min_run_time_s,
            adaptive=Adaptive(**self.adaptive) if self.adaptive else None,
            blocks=self.blocks, blocks_run_time_s=self.blocks_run_time_s,
            block_time_s=self.block_time_s, block_min_size=self.block_min_size)

    @property
    def warmup_steady(self) -> bool | None:
        """Whether the trial's warm-up reaches the steady state its cell's calibration found
        (None: not known; a calibration trial has no warm-up of its own)."""
        return (self.warmup or {}).get("steady")


_SETTINGS_CHECKS = {
    "run": _TEXT, "cell": _kind(Cell, "a cell"), "cell_id": _TEXT, "pair_id": _TEXT,
    "trial": _integer(0), "group_position": _integer(0), "iterations": _integer(1),
    "min_run_time_s": _number(0), "warmup_min": _integer(0), "warmup_max": _integer(0),
    "calibration_s": _number(0), "blocks": _integer(0), "blocks_run_time_s": _number(0),
    "block_time_s": _number(0), "block_min_size": _integer(1), "adaptive": _optional(_MAPPING),
    "threads": _integer(1), "seed": _integer(0), "analysis_plan": _TEXT,
    "timeout_s": _number(0), "memory_limit_mb": _optional(_integer(1)), "telemetry": _MAPPING,
    "data": _optional(_MAPPING), "calibration": _FLAG, "warmup": _optional(_MAPPING),
    "images": _optional(_MAPPING), "gpu_uuids": _kind(tuple, "a list of strings"),
    "profile_steps": _optional(_integer(1)),
}
_NAMES = [f.name for f in fields(TrialSettings)]
_ADDED = ("calibration", "warmup", "images", "profile_steps")
_REQUIRED = [f.name for f in fields(TrialSettings) if f.name not in (*_ADDED, "gpu_uuids")]
# What a trial result records as requested, as far as the settings hold it: ``warmup`` is the
# cell's fixed warm-up, ``calibration`` marks a calibration trial, ``analysis_plan`` is the hash
# of the analysis plan the trial was measured under (fwbench.plan.analysis_plan).
REQUESTED = ("calibration", "iterations", "min_run_time_s", "warmup_min", "warmup_max",
             "calibration_s", "warmup", "blocks", "blocks_run_time_s", "block_time_s",
             "block_min_size", "adaptive", "threads", "seed", "timeout_s", "memory_limit_mb",
             "analysis_plan")


def _known_fields(what: str, d: Mapping, names, required) -> None:
    missing = [n for n in required if n not in d]
    if missing:
        raise ConfigError(f"{what}: {missing[0]} is missing")
    unknown = sorted(set(d) - set(names))
    if unknown:
        raise ConfigError(f"{what}: unknown field {unknown[0]!r}; known: {', '.join(names)}")


# --- payload ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrialPayload:
    """What a trial's child returns: the fields every experiment reports, and its own beside them
    (``details``). A field it did not get to is its default: nothing measured."""

    cold_start_ns: int | None = None
    warmup_ns: list[int] = field(default_factory=list)
    warmup_steady: bool | None = None
    iteration_ns: list[int] = field(default_factory=list)
    stop_reason: str | None = None
    block_size: int = 0
    block_ns: list[int] = field(default_factory=list)
    markers_ns: dict[str, int] = field(default_factory=dict)
    energy_mj: dict | None = None
    settings_in_force: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    peak_rss_bytes: int | None = None
    peak_memory: dict | None = None
    # What the experiment adds (epochs, ranks, pilot blocks, …): the result's ``details``.
    details: dict = field(default_factory=dict)
    # The child's part of the trial's timeline (wall clock, ns); the supervisor takes it out.
    timeline_ns: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        _checked("trial payload", ResultError, self.__dict__, _PAYLOAD_CHECKS)

    @classmethod
    def from_dict(cls, d: Mapping) -> TrialPayload:
        """A payload from its JSON; every key that is not a field is a detail."""
        known = {k: v for k, v in d.items() if k in _PAYLOAD_FIELDS}
        return cls(**known, details={k: v for k, v in d.items() if k not in _PAYLOAD_FIELDS})

    def to_dict(self) -> dict:
        """The payload as JSON, its details beside the fields (what ``from_dict`` reads)."""
        d = {name: getattr(self, name) for name in _PAYLOAD_FIELDS}
        return {**d, **self.details}


_PAYLOAD_CHECKS = {
    "cold_start_ns": _optional(_integer(0)), "warmup_ns": _integers,
    "warmup_steady": _optional(_FLAG), "iteration_ns": _integers,
    "stop_reason": _optional(_TEXT), "block_size": _integer(0), "block_ns": _integers,
    "markers_ns": _MAPPING, "energy_mj": _optional(_MAPPING), "settings_in_force": _MAPPING,
    "versions": _MAPPING, "peak_rss_bytes": _optional(_integer(0)),
    "peak_memory": _optional(_MAPPING), "details": _MAPPING, "timeline_ns": _MAPPING,
}
_PAYLOAD_FIELDS = [f.name for f in fields(TrialPayload) if f.name != "details"]
