"""Cells and trials: one point of the sweep, its stable readable id, and its paths.

Framework-free. A cell's path is
results/<run>/cells/<experiment>/<device>/<framework>/<model>/<cell>/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from functools import cached_property

from fwbench.plan.frameworks import FRAMEWORKS, PYTORCH

STATUSES = ("ok", "oom", "timeout", "unsupported", "error", "crashed")
# The experiments that train on a real data set (fwbench.measure.experiments); their cells name an
# optimizer.
REAL_DATA = ("epoch", "convergence")

# Each named mode is a matched pair: what each framework runs under that name.
MODES = {mode: {f.name: f.modes[mode] for f in FRAMEWORKS.values()} for mode in PYTORCH.modes}

@dataclass(frozen=True, order=True)
class Cell:
    """One point of the sweep: every axis value, nothing else."""

    experiment: str
    device: str
    framework: str
    model: str
    phase: str
    batch_size: int = field(metadata={"minimum": 1})
    input_shape: tuple[int, ...]
    precision: str
    mode: str
    profile: str
    num_classes: int = field(default=10, metadata={"minimum": 1})
    # Distributed cells only: the strategy pair (fwbench.measure.distributed) and the device count.
    strategy: str | None = None
    world_size: int = field(default=1, metadata={"minimum": 1})
    # Real-data cells only (REAL_DATA): the optimizer trained with (fwbench.plan.models.OPTIMIZERS).
    optimizer: str | None = None
    # A/A control cells only: the slot, "a" or "b", of a pair whose two sides are this same cell
    # of one framework (config `controls`); the design's own check of false positives. "" for
    # every other cell (not None: cells sort, and None does not compare with "a").
    control: str = ""

    @property
    def shape_name(self) -> str:
        return "x".join(map(str, self.input_shape))

    def name_parts(self) -> tuple[str, ...]:
        """The parts of the folder name in order, "" where this cell has no such part. The name
        and the workflow's wildcard constraint (``name_pattern``) are both built from these."""
        return (self.phase, f"b{self.batch_size}", self.shape_name, self.precision, self.mode,
                self.profile, f"{self.strategy}-w{self.world_size}" if self.strategy else "",
                self.optimizer or "", f"aa-{self.control}" if self.control else "")

    @cached_property  # Snakemake asks for every trial's paths several times while planning
    def name(self) -> str:
        """The cell's folder name, e.g. ``train-b32-3x32x32-fp32-idiomatic-matched``, then
        ``-multi_process-w2`` for a distributed cell, ``-adam`` for a real-data cell or
        ``-aa-a`` for slot a of an A/A control."""
        return "-".join(part for part in self.name_parts() if part)

    @cached_property
    def id(self) -> str:
        """Stable, readable id: experiment/device/framework/model/name."""
        return f"{self.experiment}/{self.device}/{self.framework}/{self.model}/{self.name}"

    @property
    def pair_id(self) -> str:
        """The id without the framework: the two cells that share it are compared. An A/A
        control's two slots share the id without the slot, which keeps its framework."""
        if self.control:
            base = self.name.removesuffix(f"-aa-{self.control}")
            return f"{self.experiment}/{self.device}/{self.model}/{base}-aa-{self.framework}"
        return f"{self.experiment}/{self.device}/{self.model}/{self.name}"

    @property
    def arm(self) -> str:
        """The side of its pair the cell is on: the framework, or an A/A control's slot."""
        return self.control or self.framework

    @property
    def framework_mode(self) -> str:
        """What this framework actually runs under the named mode pair."""
        return FRAMEWORKS[self.framework].modes[self.mode]

    def directory(self, run: str) -> str:
        return f"results/{run}/cells/{self.id}"

    def to_dict(self) -> dict:
        """The cell as JSON; without ``optimizer`` or ``control`` when it has none, so that the
        settings of a cell planned before those fields existed (a trial job's params) stay the
        same and Snakemake reruns none of its trials."""
        d = {name: getattr(self, name) for name in _CELL_FIELDS}  # asdict: 11x slower
        d["input_shape"] = list(self.input_shape)
        for optional in ("optimizer", "control"):
            if not d[optional]:
                del d[optional]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Cell:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in names}
        values["input_shape"] = tuple(values["input_shape"])
        return cls(**values)


_CELL_FIELDS = [f.name for f in fields(Cell)]


@dataclass(frozen=True)
class Trial:
    """One fresh process measuring one cell; ``position`` is its place in the planned run order."""

    cell: Cell
    index: int
    position: int

    def path(self, run: str, suffix: str = "json") -> str:
        return f"{self.cell.directory(run)}/trial-{self.index}.{suffix}"



def one_of(values) -> str:
    """A regex matching exactly one of ``values``."""
    return "|".join(map(re.escape, sorted(set(values))))


def name_pattern(cells) -> str:
    """A regex of the folder names these cells take: per part of ``Cell.name_parts``, one of
    the values the cells use there (optional where some cell has no such part)."""
    pattern = []
    for position, values in enumerate(zip(*(cell.name_parts() for cell in cells))):
        used = [v for v in values if v]
        if not used:
            continue
        part = f"(?:{one_of(used)})" if position == 0 else f"-(?:{one_of(used)})"
        pattern.append(f"(?:{part})?" if "" in values else part)
    return "".join(pattern)
