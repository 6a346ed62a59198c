"""Bad input to every command that reads a path: exit status 2, one line on stderr that names
what is wrong, no traceback, and nothing written. Each case sets up copies of the reference
run's lenet5 inference cells (tests/reference_runs.small_run) under tmp/results, spoils what it
names, and runs the command from tmp."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fwbench.cli import main
from tests.reference_runs import copy_run, small_run
from tests.test_merge import measured_later

TRIAL = "cells/throughput/cpu/pytorch/lenet5/infer-b4-1x28x28-fp32-idiomatic-matched/trial-1.json"


def run(tmp: Path, name: str = "a") -> Path:
    return small_run(tmp / "results" / name)


def truncated(tmp: Path) -> Path:
    path = run(tmp) / TRIAL
    path.write_text(path.read_text()[:300])
    return path


def empty(tmp: Path) -> Path:
    path = run(tmp) / TRIAL
    path.write_text("")
    return path


def malformed_config(tmp: Path) -> Path:
    path = run(tmp) / "config.yaml"
    path.write_text(path.read_text().replace("\n", "\n  ", 3))  # an indented key: not YAML
    return path


def missing_config(tmp: Path) -> Path:
    path = run(tmp) / "config.yaml"
    path.unlink()
    return path


def a_file(tmp: Path) -> Path:
    path = tmp / "README.md"
    path.write_text("not a run\n")
    return path


def run_and_a_file(tmp: Path) -> Path:
    run(tmp)
    return a_file(tmp)


def two_runs_and_a_file(tmp: Path) -> Path:
    two_runs(tmp)
    return a_file(tmp)


def other_plan(tmp: Path) -> None:
    """results/a and results/b: one config, but b measured another batch size."""
    run(tmp)
    b = run(tmp, "b")
    config = yaml.safe_load((b / "config.yaml").read_text())
    (b / "config.yaml").write_text(yaml.safe_dump({**config, "batch_sizes": [8]}))


def a_copy(tmp: Path) -> None:
    """results/b: a copy of results/a, the same trials."""
    shutil.copytree(run(tmp), tmp / "results" / "b")


def two_runs(tmp: Path) -> None:
    """results/a and results/b, which merge would accept."""
    run(tmp)
    measured_later(run(tmp, "b"))


def other_cells(tmp: Path) -> None:
    """results/a: lenet5's cells; results/b: resnet18's, none of them shared."""
    run(tmp)
    copy_run(tmp / "results" / "b", keep=lambda cell: "resnet18/infer" in cell.as_posix())


def damaged_table(tmp: Path) -> Path:
    path = run(tmp) / "tables" / "trials.parquet"
    path.parent.mkdir()
    path.write_bytes(b"PAR1\0\0")
    return path


# (command line, what spoils it, text the one line must hold); "{path}": what the setup returned
CASES = [
    (["rebuild", "results/nope"], None, "results/nope is not a run folder (it does not exist)"),
    (["rebuild", "README.md"], a_file, "README.md is not a run folder (it is a file)"),
    (["rebuild", "results/a"], truncated, "cannot read trial result {path}: not valid JSON"),
    (["rebuild", "results/a"], empty, "cannot read trial result {path}: the file is empty"),
    (["rebuild", "results/a"], malformed_config, "{path} is not valid YAML"),
    (["rebuild", "results/a"], missing_config, "{path} is missing"),
    (["export", "results/nope"], None, "results/nope is not a run folder (it does not exist)"),
    (["export", "README.md"], a_file, "README.md is not a run folder (it is a file)"),
    (["export", "results/a"], run, "has no tables/*.parquet or stats/*.csv yet"),
    (["export", "results/a"], damaged_table, "cannot read table {path}"),
    (["export", "results/a", "--out", "README.md"], run_and_a_file, "README.md is a file"),
    (["compare", "results/nope", "results/a"], run, "results/nope is not a run folder"),
    (["compare", "results/a", "README.md"], run_and_a_file, "README.md is not a run folder"),
    (["compare", "results/a", "results/a"], truncated, "cannot read trial result {path}"),
    (["compare", "results/a", "results/a"], empty, "cannot read trial result {path}"),
    (["compare", "results/a", "results/a"], malformed_config, "{path} is not valid YAML"),
    (["compare", "results/a", "results/a"], missing_config, "{path} is missing"),
    (["merge", "results/nope", "results/a", "--into", "results/m"], run,
     "results/nope is not a run folder (it does not exist)"),
    (["merge", "README.md", "results/a", "--into", "results/m"], run_and_a_file,
     "README.md is not a run folder (it is a file)"),
    (["merge", "results/a", "results/a", "--into", "results/m"], truncated,
     "cannot read trial result {path}: not valid JSON"),
    (["merge", "results/a", "results/a", "--into", "results/m"], empty,
     "cannot read trial result {path}: the file is empty"),
    (["merge", "results/a", "results/a", "--into", "results/m"], malformed_config,
     "{path} is not valid YAML"),
    (["merge", "results/a", "results/a", "--into", "results/m"], missing_config,
     "{path} is missing"),
    (["merge", "results/a", "results/b", "--into", "results/m"], other_plan,
     "different configs (batch_sizes"),
    (["merge", "results/a", "results/b", "--into", "results/m"], a_copy,
     "hold the same trials"),
    (["merge", "results/a", "results/a", "--into", "results/m"], run, "hold the same trials"),
    (["merge", "results/a", "--into", "results/m"], run, "needs two runs or more"),
    (["merge", "results/a", "results/b", "--into", "results/a"], two_runs, "exists already"),
    (["merge", "results/a", "results/b", "--into", "README.md/m"], two_runs_and_a_file,
     "cannot write README.md/m"),
    (["index", "results/nope"], None, "results/nope is not a folder of runs (it does not exist)"),
    (["index", "README.md"], a_file, "README.md is not a folder of runs (it is a file)"),
    (["index", "results", "--out", "results/a"], run, "results/a is a folder"),
    (["index", "results", "--out", "README.md/index.html"], run_and_a_file,
     "cannot write README.md/index.html"),
    (["restore-times", "results/nope"], None, "results/nope is not a run folder"),
    (["restore-times", "README.md"], a_file, "README.md is not a run folder (it is a file)"),
    (["restore-times", "results/a"], truncated, "cannot read {path}: not valid JSON"),
    (["restore-times", "results/a"], empty, "cannot read {path}: the file is empty"),
]
# Not bad input, but nothing to do: compare exits 3 when no cell could be decided.
UNDECIDED = [
    (["compare", "results/a", "results/b"], other_cells, "nothing could be decided"),
]


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``folder`` with its size and modification time."""
    return {p.relative_to(folder).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*")}


def _id(case) -> str:
    args, spoil, _, status = case
    return f"{' '.join(args)} ({getattr(spoil, '__name__', 'as it is')}) -> {status}"


TABLE = [(*case, 2) for case in CASES] + [(*case, 3) for case in UNDECIDED]


@pytest.mark.parametrize("args, spoil, expected, status", TABLE, ids=map(_id, TABLE))
def test_bad_input_is_one_line_an_exit_status_and_nothing_written(
        args, spoil, expected, status, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spoiled = spoil(Path()) if spoil else None
    before = listing(tmp_path)
    capsys.readouterr()
    assert main(args) == status
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fwbench {args[0]}: "), err
    assert "Traceback" not in err and not out
    assert expected.format(path=spoiled) in lines[0], lines[0]
    assert listing(tmp_path) == before


def test_the_installed_command_exits_2_with_one_line(tmp_path):
    """The same through `python -m fwbench`, as a shell or CI sees it."""
    run(tmp_path)
    for args in (["index", "results/nope"], ["merge", "results/a", "results/a", "--into",
                                              "results/m"]):
        proc = subprocess.run([sys.executable, "-m", "fwbench", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert "Traceback" not in proc.stderr

