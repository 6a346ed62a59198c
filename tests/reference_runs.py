"""Runs made from the shipped reference run's trial files, for the tests of the commands over
several runs (compare, merge, index): copies of all or some of its cells, with one framework's
times scaled or the machine renamed in the copy, measuring nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from tests.conftest import REPO

REFERENCE = REPO / "results" / "reference"
# The reference sweep's cell folders: cells/<experiment>/<device>/<framework>/<model>/<name>.
CELLS = sorted(p.relative_to(REFERENCE) for p in REFERENCE.glob("cells/*/*/*/*/*"))


def copy_run(target: Path, *, keep=lambda cell: True, config: dict | None = None) -> Path:
    """A copy of the reference run at ``target`` holding the cells ``keep`` accepts (a cell as
    its path under the run, e.g. cells/throughput/cpu/pytorch/lenet5/infer-b2-...), with
    ``config`` over its config.yaml and ``run`` set to the folder's name."""
    for cell in CELLS:
        if keep(cell):
            shutil.copytree(REFERENCE / cell, target / cell)
    shutil.copytree(REFERENCE / "environment", target / "environment")
    settings = {**yaml.safe_load((REFERENCE / "config.yaml").read_text()), **(config or {}),
                "run": target.name}
    (target / "config.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    return target


def small_run(target: Path) -> Path:
    """The reference run's lenet5 inference cells at batch 2 (PyTorch's and TensorFlow's, 8
    trials each), with a config that plans exactly these."""
    model = yaml.safe_load((REFERENCE / "config.yaml").read_text())["models"]["lenet5"]
    return copy_run(target, keep=lambda cell: "lenet5/infer-b2-" in cell.as_posix(),
                    config={"models": {"lenet5": model}, "phases": ["infer"],
                            "batch_sizes": [2]})


def _edit(paths, change) -> None:
    for path in paths:
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))


def slow_down(run: Path, framework: str, factor: float) -> None:
    """Every time ``framework``'s trials in ``run`` recorded, multiplied by ``factor``."""
    def scale(result):
        for key in ("iteration_ns", "warmup_ns", "block_ns"):
            result[key] = [round(t * factor) for t in result[key]]
        result["cold_start_ns"] = round(result["cold_start_ns"] * factor)

    _edit(run.glob(f"cells/*/*/{framework}/*/*/trial-[0-9].json"), scale)
    _edit(run.glob(f"cells/*/*/{framework}/*/*/trial-[0-9][0-9].json"), scale)


def move_machine(run: Path, *, hostname: str, cpu_model: str, **packages: str) -> None:
    """The trials of ``run`` as if measured on another host and CPU, with other versions of
    ``packages`` (name -> version) installed."""
    def move(env):
        env.update(hostname=hostname, cpu_model=cpu_model)
        env["cpu"] = {**(env.get("cpu") or {}), "model": cpu_model}
        env["packages"] = {**(env.get("packages") or {}), **packages}

    _edit(run.glob("cells/**/trial-*.env.json"), move)
