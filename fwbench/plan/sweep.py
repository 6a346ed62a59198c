"""The plan: every cell and trial of a validated config, their paths and their run order.

Paths are computed here and nowhere else. Cell groups come in a seeded random order. Trials of
the two frameworks for the same cell are interleaved A B B A A B …, with the first framework
drawn per cell group from the seed, so the order of one group never depends on what else is in
the sweep (adding a cell reruns nothing). Trial k of both frameworks is a pair: its second
member waits for its first and outranks every other job (``priority``), so it runs right after;
on a cluster the two are one job (``pair_group``). An A/A control (config `controls`) is such a
group whose two sides are one cell of one framework, in slots a and b (``Cell.control``); it runs
as many pairs as the plan's sizing rule asks (fwbench.plan.sizing), else the config's `trials`.
Before a group's first trial, each of its cells that warms up runs its calibration trials (config
`warmup.calibrations`, one after the other), whose warm-up record (fwbench.measure.calibration)
every trial of the cell reads; the group's first trial waits for all of them, so none runs
between the members of a pair.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import random
from dataclasses import dataclass, field, replace

from fwbench.plan.analysis_plan import plan_hash
from fwbench.plan.cells import REAL_DATA, Cell, Trial, name_pattern, one_of
from fwbench.plan.contract import Adaptive, Data, Telemetry, TrialSettings
from fwbench.plan.sizing import planned_pairs


@dataclass
class Plan:
    """All trials of a run, in their planned order within each cell group."""

    config: dict
    trials: list[Trial] = field(default_factory=list)
    # Looked up once in from_config, by position (Snakemake asks for each trial's neighbours
    # once per job: a scan of all trials per job made planning quadratic).
    _previous: dict[int, Trial] = field(default_factory=dict, repr=False)
    _group_position: dict[int, int] = field(default_factory=dict, repr=False)
    _last: dict[Cell, Trial] = field(default_factory=dict, repr=False)
    _by_path: dict[str, Trial] = field(default_factory=dict, repr=False)
    # Per cell group: its cells, and the position of its first trial.
    _groups: dict[str, list[Cell]] = field(default_factory=dict, repr=False)
    _group_start: dict[str, int] = field(default_factory=dict, repr=False)
    # Per cell: the settings its trials share, built (and so checked) with the plan.
    _settings: dict[Cell, TrialSettings] = field(default_factory=dict, repr=False)

    @classmethod
    def from_config(cls, config: dict) -> Plan:
        plan = cls(config)
        groups: dict[str, list[Cell]] = {}
        for cell in dict.fromkeys([*sweep_cells(config), *_ablation_cells(config),
                                   *_control_cells(config)]):
            groups.setdefault(cell.pair_id, []).append(cell)
        # Cell groups in a seeded random order, so heat does not build up along an axis (the
        # batch sizes of a power figure); within each group the frameworks alternate.
        order = sorted(groups)
        random.Random(config["seed"]).shuffle(order)
        levels = sizing_levels(config)
        for pair_id in order:
            plan._groups[pair_id] = sorted(groups[pair_id], key=lambda c: c.arm)
            plan._group_start[pair_id] = len(plan.trials)
            trials = group_pairs(config, groups[pair_id][0], levels)
            group = [Trial(cell, index, len(plan.trials) + k) for k, (cell, index)
                     in enumerate(_interleave(groups[pair_id], trials, config["seed"],
                                              pair_id))]
            plan.trials.extend(group)
            for k, trial in enumerate(group):
                plan._group_position[trial.position] = k
                if k:
                    plan._previous[trial.position] = group[k - 1]
                plan._last[trial.cell] = trial
        plan._by_path = {t.path(plan.run): t for t in plan.trials}
        plan._settings = {cell: plan._cell_settings(cell) for cells in plan._groups.values()
                          for cell in cells}
        return plan

    @property
    def run(self) -> str:
        return self.config["run"]

    def results_dir(self) -> str:
        return f"results/{self.run}"

    def idle_path(self) -> str:
        """The idle baseline measured once before the first trial."""
        return f"results/{self.run}/environment/idle.json"

    def cells(self) -> list[Cell]:
        return sorted({t.cell for t in self.trials})

    def trial_paths(self, suffix: str = "json", *, controls: bool | None = None) -> list[str]:
        """Every trial's path; with ``controls``, only the A/A controls' (True) or only the
        others' (False)."""
        return [t.path(self.run, suffix) for t in self.trials
                if controls is None or bool(t.cell.control) == controls]

    def trial(self, path: str) -> Trial:
        try:
            return self._by_path[path]
        except KeyError:
            raise KeyError(f"{path} is not a trial of run {self.run!r}") from None

    def previous(self, trial: Trial) -> Trial | None:
        """The trial planned just before this one in its cell group, if any."""
        return self._previous.get(trial.position)

    def group_position(self, trial: Trial) -> int:
        """0-based place of the trial in its cell group's interleaved order."""
        return self._group_position[trial.position]

    def partner_before(self, trial: Trial) -> Trial | None:
        """The first member of the pair (trial k of the other framework, same cell group) when
        this trial is its second member; None for a first member or a trial without a pair."""
        previous = self.previous(trial)
        return previous if previous and previous.index == trial.index else None

    def pair_group(self, trial: Trial) -> str:
        """The Snakemake job group of the trial's pair, ``<pair_id>/trial-<k>``: on a cluster
        both members run in one job on one node, the second right after the first (its input);
        a local run ignores groups, the priorities order it."""
        return f"{trial.cell.pair_id}/trial-{trial.index}"

    def priority(self, trial: Trial) -> int:
        """The trial job's Snakemake priority; among ready jobs the highest runs first. A second
        member outranks every other job, so it runs right after its partner (trials take the
        one benchmark slot); first members run in planned order, each group's calibrations
        just before its first trial (``calibration_priority``); all outrank a profiled run (0)."""
        n = len(self.trials)
        if self.partner_before(trial):
            return 3 * n + 2 - trial.position
        return 2 * (n - trial.position)

    def calibration_priority(self, cell: Cell) -> int:
        """Of the cell's calibration and of the job fixing its warm-up: above its group's first
        trial, below every trial planned before that, below every second member."""
        return 2 * (len(self.trials) - self._group_start[cell.pair_id]) + 1

    def calibrates(self, cell: Cell) -> bool:
        """Whether the cell's warm-up is fixed by calibration trials of its own: every sweep
        cell whose trials time single steps after a warm-up (the real-data experiments time
        whole runs); an A/A control's slots take their sweep cell's (``warmup_path``)."""
        return cell.experiment not in REAL_DATA and not cell.control

    def calibration_names(self, cell: Cell) -> list[str]:
        """The names of the cell's calibration trials: calibration, calibration-2, ... as many
        as `warmup.calibrations` asks (one where the config does not say, as before there
        were several), none for a cell that does not calibrate."""
        count = self.config["warmup"].get("calibrations") or 1
        names = ["calibration", *(f"calibration-{k}" for k in range(2, count + 1))]
        return names if self.calibrates(cell) else []

    def calibration_path(self, cell: Cell, suffix: str = "json",
                         name: str = "calibration") -> str:
        """A calibration trial's result (and side files) of the cell: beside its trials, never
        read as one (its name is not trial-<k>)."""
        return f"{cell.directory(self.run)}/{name}.{suffix}"

    def warmup_path(self, cell: Cell) -> str | None:
        """The cell's warm-up record, which its trials read; None for a cell without one. An
        A/A control's slots read their sweep cell's: the warm-up is fixed per cell, and a
        control is that cell again (so it costs no calibrations of its own)."""
        if cell.control:
            return self.warmup_path(replace(cell, control=""))
        return f"{cell.directory(self.run)}/warmup.json" if self.calibrates(cell) else None

    def group_warmup_paths(self, trial: Trial) -> list[str]:
        """The warm-up records of every cell of the trial's group, which its first trial waits
        for, so no calibration runs between the members of a pair."""
        paths = [self.warmup_path(cell) for cell in self._groups[trial.cell.pair_id]]
        return [path for path in paths if path]

    def wildcard_constraints(self) -> dict[str, str]:
        """Regexes of the path wildcards, from the planned cells' own values and name parts."""
        cells = self.cells()
        return {
            "experiment": one_of(c.experiment for c in cells),
            "device": one_of(c.device for c in cells),
            "framework": one_of(c.framework for c in cells),
            "model": one_of(c.model for c in cells),
            "cell": name_pattern(cells),
            "trial": r"\d+",
            "calibration": r"calibration(-\d+)?",
        }

    def trial_settings(self, trial: Trial) -> TrialSettings:
        """Everything a worker needs to measure this trial (its JSON is the job's params), built
        and checked with the plan. The warm-up it takes comes from its cell's warm-up record
        when it runs (fwbench.measure.trial.run_trial)."""
        return replace(self._settings[trial.cell], trial=trial.index,
                       group_position=self.group_position(trial))

    def calibration_settings(self, cell: Cell) -> TrialSettings:
        """The settings of the cell's calibration trial (trial 0): a trial's, marked so its
        schedule times single steps only (fwbench.measure.harness.trial_schedule)."""
        return replace(self._settings[cell], calibration=True)

    def _cell_settings(self, cell: Cell) -> TrialSettings:
        """The settings every trial of ``cell`` shares, as trial 0; a bad value is a
        ConfigError naming it."""
        c = self.config
        return TrialSettings(
            run=self.run, cell=cell, cell_id=cell.id, pair_id=cell.pair_id, trial=0,
            group_position=0, iterations=c["iterations"], min_run_time_s=c["min_run_time_s"],
            warmup_min=c["warmup"]["min"], warmup_max=c["warmup"]["max"],
            calibration_s=c["warmup"]["calibration_s"], blocks=c["blocks"]["count"],
            blocks_run_time_s=c["blocks"]["run_time_s"], block_time_s=c["blocks"]["min_time_s"],
            block_min_size=c["blocks"]["size"],
            adaptive=c["adaptive"] and Adaptive.from_dict(c["adaptive"], "config key 'adaptive'"),
            threads=c["threads"], seed=c["seed"], analysis_plan=plan_hash(c["statistics"]),
            timeout_s=c["timeout_s"], memory_limit_mb=c["memory_limit_mb"],
            telemetry=Telemetry.from_dict(c["telemetry"], "config key 'telemetry'"),
            data=None if c["data"] is None else Data.from_dict(c["data"], "config key 'data'"))

    def profile_path(self, cell: Cell) -> str:
        """Where the profiled run of a cell goes: beside its trials, never read as one."""
        return f"{cell.directory(self.run)}/profile.json"

    def last_trial(self, cell: Cell) -> Trial:
        """The cell's last trial in the planned order: its profiled run comes after it."""
        return self._last[cell]

    def data_path(self) -> str | None:
        """The record of the verified data set, for the experiments that read one."""
        if self.config["experiment"] in REAL_DATA:
            return f"results/{self.run}/environment/data.json"
        return None

    def threads(self, trial: Trial) -> int:
        """CPU threads the job takes: per process, times the processes of a distributed cell."""
        return self.config["threads"] * trial.cell.world_size


def sweep_cells(config: dict):
    """The sweep's cells: every combination of the config's axes."""
    distributed = [(None, 1)]
    if config["experiment"] == "distributed":
        d = config["distributed"]
        distributed = list(itertools.product(d["strategies"], d["world_sizes"]))
    optimizers = [None]
    if config["experiment"] in REAL_DATA:
        optimizer = config["data"]["optimizer"]  # one name or a list of them
        optimizers = [optimizer] if isinstance(optimizer, str) else optimizer
    for model, spec in config["models"].items():
        axes = itertools.product(
            config["devices"], config["frameworks"], config["phases"], config["batch_sizes"],
            spec["input_shapes"], config["precisions"], config["modes"], config["profiles"],
            distributed, optimizers,
        )
        for device, framework, phase, batch, shape, precision, mode, profile, (strategy, world), \
                optimizer in axes:
            yield Cell(
                experiment=config["experiment"], device=device, framework=framework,
                model=model, phase=phase, batch_size=batch, input_shape=tuple(shape),
                precision=precision, mode=mode, profile=profile,
                num_classes=spec["num_classes"], strategy=strategy, world_size=world,
                optimizer=optimizer,
            )


def _ablation_cells(config: dict):
    """The ablation's cells: one per framework for each point, on every device and shape."""
    if not config["ablation"]:
        return
    from fwbench.plan.ablation import EXPERIMENT, ablation_points
    for device in config["devices"]:
        for point in ablation_points(config["ablation"], device):
            yield from sweep_cells({**config, "experiment": EXPERIMENT, "devices": [device],
                                    "profiles": [point.profile], "modes": [point.mode],
                                    "precisions": [point.precision]})


def _control_cells(config: dict):
    """The A/A controls' cells: each sweep cell a `controls` entry selects, in slots a and b
    of one pair."""
    for cell in sweep_cells(config):
        if any(selects(selector, cell) for selector in config["controls"]):
            yield from (replace(cell, control=slot) for slot in ("a", "b"))


def sizing_levels(config: dict) -> dict:
    """What the sizing rule's levels count: the sweep's largest family, the run's controls."""
    return {"family_size": max(family_sizes(config), default=1),
            "controls": control_groups(config)}


def group_pairs(config: dict, cell: Cell, levels: dict) -> int:
    """The pairs the cell group of ``cell`` runs (fwbench.plan.sizing.planned_pairs) at the
    ``levels`` of ``sizing_levels``."""
    return planned_pairs(config["statistics"], sizing_axes(cell), trials=config["trials"],
                         **levels)


def sizing_problems(config: dict):
    """Why the plan's sizing rule cannot size this sweep, in words: a cell group no count of
    pairs up to N_MAX sizes. (A `pilot` entry that names none of its groups sizes nothing: a
    sweep narrowed from the one it was measured for keeps it.)"""
    groups = {cell.pair_id: cell for cell in [*sweep_cells(config), *_control_cells(config)]}
    levels = sizing_levels(config)
    for cell in groups.values():
        try:
            group_pairs(config, cell, levels)
        except ValueError as error:
            yield (f"config key 'statistics.sizing': the cell group {cell.pair_id} cannot be "
                   f"sized ({error}): lower `power`, or size a larger difference (`ratio`).")


def sizing_axes(cell: Cell) -> dict:
    """A cell group's axis values as the sizing rule's pilot names them: a comparison's
    without a framework, an A/A control's with its own."""
    axes = cell.to_dict()
    axes.pop("control", None)
    if not cell.control:
        del axes["framework"]
    return axes


def control_groups(config: dict) -> int:
    """How many A/A controls the run has: one per sweep cell a `controls` entry selects."""
    return sum(1 for cell in _control_cells(config) if cell.control == "a")


def family_sizes(config: dict) -> list[int]:
    """The sizes of the sweep's families of comparisons: its cell groups by the values of the
    plan's ``family`` axes, as the analysis forms them."""
    axes = config["statistics"]["family"]
    groups = {cell.pair_id: tuple(getattr(cell, axis) for axis in axes)
              for cell in sweep_cells(config)}
    return list(collections.Counter(groups.values()).values())


def selects(selector: dict, cell: Cell) -> bool:
    """Whether the cell has every value a `controls` entry names."""
    return all((list(cell.input_shape) if key == "input_shape" else getattr(cell, key)) == value
               for key, value in selector.items())


def _interleave(cells: list[Cell], trials: int, seed: int, group: str):
    """Yield (cell, trial index) as A B B A A B …; never more than two of one side in a row."""
    cells = sorted(cells, key=lambda c: c.arm)
    digest = hashlib.sha256(f"{seed}/{group}".encode()).digest()
    if digest[0] % 2:
        cells.reverse()
    for k in range(1, trials + 1):
        for cell in (cells if k % 2 else cells[::-1]):
            yield cell, k
