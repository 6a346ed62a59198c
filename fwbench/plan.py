"""The plan: every cell and trial of a validated config, their paths and their run order.

Paths are computed here and nowhere else. Cell groups come in a seeded random order. Trials of
the two frameworks for the same cell are interleaved A B B A A B …, with the first framework drawn per cell group from the seed, so the order
of one group never depends on what else is in the sweep (adding a cell reruns nothing).
"""

from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import dataclass, field

from fwbench.cells import REAL_DATA, Cell, Trial


@dataclass
class Plan:
    """All trials of a run, in their planned order within each cell group."""

    config: dict
    trials: list[Trial] = field(default_factory=list)

    @classmethod
    def from_config(cls, config: dict) -> Plan:
        plan = cls(config)
        groups: dict[str, list[Cell]] = {}
        for cell in dict.fromkeys([*_cells(config), *_ablation_cells(config)]):
            groups.setdefault(cell.pair_id, []).append(cell)
        # Cell groups in a seeded random order, so heat does not build up along an axis (the
        # batch sizes of a power figure); within each group the frameworks alternate.
        order = sorted(groups)
        random.Random(config["seed"]).shuffle(order)
        position = 0
        for pair_id in order:
            cells = groups[pair_id]
            for cell, index in _interleave(cells, config["trials"], config["seed"], pair_id):
                plan.trials.append(Trial(cell, index, position))
                position += 1
        plan._by_path = {t.path(plan.run): t for t in plan.trials}
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

    def trial_paths(self, suffix: str = "json") -> list[str]:
        return [t.path(self.run, suffix) for t in self.trials]

    def trial(self, path: str) -> Trial:
        try:
            return self._by_path[path]
        except KeyError:
            raise KeyError(f"{path} is not a trial of run {self.run!r}") from None

    def previous(self, trial: Trial) -> Trial | None:
        """The trial planned just before this one in its cell group, if any."""
        before = [t for t in self.trials if t.cell.pair_id == trial.cell.pair_id
                  and t.position < trial.position]
        return before[-1] if before else None

    def group_position(self, trial: Trial) -> int:
        """0-based place of the trial in its cell group's interleaved order."""
        return sum(1 for t in self.trials if t.cell.pair_id == trial.cell.pair_id
                   and t.position < trial.position)

    def trial_settings(self, trial: Trial) -> dict:
        """Everything a worker needs to measure this trial; these are the job's params."""
        c = self.config
        return {
            "run": self.run,
            "cell": trial.cell.to_dict(),
            "cell_id": trial.cell.id,
            "pair_id": trial.cell.pair_id,
            "trial": trial.index,
            "group_position": self.group_position(trial),
            "iterations": c["iterations"],
            "warmup_min": c["warmup"]["min"],
            "warmup_max": c["warmup"]["max"],
            "blocks": c["blocks"]["count"],
            "block_size": c["blocks"]["size"],
            "adaptive": c["adaptive"],
            "threads": c["threads"],
            "seed": c["seed"],
            "timeout_s": c["timeout_s"],
            "memory_limit_mb": c["memory_limit_mb"],
            "telemetry": c["telemetry"],
            "data": c["data"],
        }

    def profile_path(self, cell: Cell) -> str:
        """Where the profiled run of a cell goes: beside its trials, never read as one."""
        return f"{cell.directory(self.run)}/profile.json"

    def last_trial(self, cell: Cell) -> Trial:
        """The cell's last trial in the planned order: its profiled run comes after it."""
        return max((t for t in self.trials if t.cell == cell), key=lambda t: t.position)

    def data_path(self) -> str | None:
        """The record of the verified data set, for the experiments that read one."""
        if self.config["experiment"] in REAL_DATA:
            return f"results/{self.run}/environment/data.json"
        return None

    def threads(self, trial: Trial) -> int:
        """CPU threads the job takes: per process, times the processes of a distributed cell."""
        return self.config["threads"] * trial.cell.world_size


def _cells(config: dict):
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
    from fwbench.ablation import EXPERIMENT, ablation_points

    for device in config["devices"]:
        for point in ablation_points(config["ablation"], device):
            yield from _cells({**config, "experiment": EXPERIMENT, "devices": [device],
                               "profiles": [point.profile], "modes": [point.mode],
                               "precisions": [point.precision]})


def _interleave(cells: list[Cell], trials: int, seed: int, group: str):
    """Yield (cell, trial index) as A B B A A B …; never more than two of one side in a row."""
    cells = sorted(cells, key=lambda c: c.framework)
    digest = hashlib.sha256(f"{seed}/{group}".encode()).digest()
    if digest[0] % 2:
        cells.reverse()
    for k in range(1, trials + 1):
        for cell in (cells if k % 2 else cells[::-1]):
            yield cell, k
