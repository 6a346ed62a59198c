"""The shipped runs, and runs made from the reference run's trial files for the tests of the
commands over several runs (compare, merge, index): copies of all or some of its cells, with
one framework's times scaled or the machine renamed in the copy, measuring nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import yaml

from fwbench import SOURCE_DIR
from fwbench.analysis.run_folder import CONTROL_CELL
from fwbench.workflow.manifest import MANIFEST, REBUILT

RESULTS = SOURCE_DIR / "results"
REFERENCE = RESULTS / "reference"
# Every shipped run: a results/<run>/ folder that records the checksums of its rebuild. A run
# added there is checked by tests/test_rebuild.py as it is, with no change to the tests.
SHIPPED = sorted(p.parent for p in RESULTS.glob(f"*/{MANIFEST}"))
# The folders a rebuild writes; everything else in a run folder ships with it.
WRITTEN = {PurePosixPath(pattern).parts[0] for pattern in REBUILT}


def copy_shipped(source: Path, root: Path) -> Path:
    """The shipped run ``source`` copied to root/results/<its name>/ without what its rebuild
    writes, so that a file the rebuild fails to write is missing rather than the shipped one."""
    return Path(shutil.copytree(source, root / "results" / source.name, ignore=lambda folder,
                                names: WRITTEN & set(names) if Path(folder) == source else ()))


def rebuild(run: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`fwbench rebuild` of ``run`` from its results/ folder, with ``env`` over this
    environment and its interpreter's folder first on PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           **env}
    return subprocess.run([sys.executable, "-m", "fwbench", "rebuild", f"results/{run.name}",
                           *args], cwd=run.parent.parent, env=env, capture_output=True, text=True,
                          timeout=900)

# The reference sweep's cell folders: cells/<experiment>/<device>/<framework>/<model>/<name>,
# its A/A controls' among them (CELLS); the sweep's alone, which commands over runs compare.
CELLS = sorted(p.relative_to(REFERENCE) for p in REFERENCE.glob("cells/*/*/*/*/*"))
SWEEP_CELLS = [cell for cell in CELLS if not CONTROL_CELL.search(cell.name)]


def copy_run(target: Path, *, keep=lambda cell: True, config: dict | None = None) -> Path:
    """A copy of the reference run at ``target`` holding the cells ``keep`` accepts (a cell as
    its path under the run, e.g. cells/throughput/cpu/pytorch/lenet5/infer-b4-...), with
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
    """The reference run's lenet5 inference cells at its smallest batch (PyTorch's and
    TensorFlow's, and their A/A controls), with a config that plans exactly these: its
    ``trials`` are the pairs the reference measured of them, since the sizing rule would size
    a comparison alone (a family of 1) to fewer."""
    config = yaml.safe_load((REFERENCE / "config.yaml").read_text())
    batch = min(config["batch_sizes"])
    cell = f"lenet5/infer-b{batch}-"
    pairs = len(list(REFERENCE.glob(f"cells/*/*/pytorch/{cell}*-matched/trial-*[0-9].json")))
    return copy_run(target, keep=lambda path: cell in path.as_posix(),
                    config={"models": {"lenet5": config["models"]["lenet5"]},
                            "phases": ["infer"], "batch_sizes": [batch], "trials": pairs})


def _edit(paths, change) -> None:
    for path in paths:
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))


def slow_down(run: Path, framework: str, factor: float, cells: str = "*") -> None:
    """Every time ``framework``'s trials in ``run`` recorded, multiplied by ``factor``; only
    in the cell folders ``cells`` matches (``"*-aa-b"``: slot b of its A/A control)."""
    def scale(result):
        for key in ("iteration_ns", "warmup_ns", "block_ns"):
            result[key] = [round(t * factor) for t in result[key]]
        result["cold_start_ns"] = round(result["cold_start_ns"] * factor)

    _edit(run.glob(f"cells/*/*/{framework}/*/{cells}/trial-[0-9].json"), scale)
    _edit(run.glob(f"cells/*/*/{framework}/*/{cells}/trial-[0-9][0-9].json"), scale)


def move_machine(run: Path, *, hostname: str, cpu_model: str, **packages: str) -> None:
    """The trials of ``run`` as if measured on another host and CPU, with other versions of
    ``packages`` (name -> version) installed."""
    def move(env):
        env.update(hostname=hostname, cpu_model=cpu_model)
        env["cpu"] = {**(env.get("cpu") or {}), "model": cpu_model}
        env["packages"] = {**(env.get("packages") or {}), **packages}

    _edit(run.glob("cells/**/trial-*.env.json"), move)
