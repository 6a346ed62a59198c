"""Shared fixtures: the repository, a tiny valid config, a workflow runner, and the shipped
reference run rebuilt once."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.reference_runs import REFERENCE, copy_shipped, rebuild

# Some tests hold both frameworks in one process (trial processes never do). PyTorch's compiler
# stack, which torch.optim imports on first use, segfaults when it is first imported after
# TensorFlow: import it first.
import torch._dynamo  # noqa: E402,F401  isort: skip

from fwbench.measure.data_files import OFFLINE_VARIABLE  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

# Tests never download data: every workflow they run (its subprocesses inherit this) reads the
# files present or the bundled MNIST subset; the tests of downloading serve file:// URLs.
os.environ[OFFLINE_VARIABLE] = "1"

TINY_CONFIG = {
    "run": "tiny",
    "frameworks": ["pytorch", "tensorflow"],
    "models": {"lenet5": {"input_shapes": [[1, 28, 28]]}},
    "phases": ["infer"],
    "devices": ["cpu"],
    "batch_sizes": [2],
    "trials": 1,
    "iterations": 3,
    # No time budgets: a trial times exactly 3 single steps and one block of one step, and a
    # calibration 4 single steps (twice warmup.max).
    "min_run_time_s": 0,
    "blocks": {"count": 1, "size": 1, "min_time_s": 0, "run_time_s": 0},
    "warmup": {"min": 0, "max": 2, "calibration_s": 0},
}


@pytest.fixture
def tiny_config() -> dict:
    return copy.deepcopy(TINY_CONFIG)


def snakemake(workdir: Path, *args: str, timeout: float = 600,
              **kwargs) -> subprocess.CompletedProcess:
    """Run this repository's workflow in ``workdir`` with the test interpreter's environment."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory",
         str(workdir), *args],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout, **kwargs,
    )


# The tests that read the reference run rebuilt share one rebuild (a minute or two on 2 cores):
# they are one xdist group, so `make test` (--dist loadgroup) runs them in one worker process.
REBUILT_REFERENCE = "rebuilt_reference"


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): tests that run in one worker process")


def pytest_collection_modifyitems(config, items):
    """The modules with slow tests first, each module kept in one piece (its module fixtures
    are made once): `make test` hands tests to its workers in this order, so the minute-long
    ones start early instead of leaving one worker running alone at the end."""
    slow_modules = {item.module for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.module not in slow_modules)


class Rebuilt(NamedTuple):
    run: Path                            # results/reference in a folder of its own
    done: subprocess.CompletedProcess    # `fwbench rebuild results/reference --check`


@pytest.fixture(scope="session")
def rebuilt_reference(tmp_path_factory) -> Rebuilt:
    """The shipped reference run rebuilt from its cell files and checked against its recorded
    checksums under OpenBLAS's Haswell kernel (tests/test_rebuild.py the other kernel). Tests
    that use it take the mark ``xdist_group(REBUILT_REFERENCE)`` and write nothing into the run
    beside their own files."""
    run = copy_shipped(REFERENCE, tmp_path_factory.mktemp("rebuilt"))
    return Rebuilt(run, rebuild(run, "--check", OPENBLAS_CORETYPE="Haswell",
                                OPENBLAS_VERBOSE="2"))
