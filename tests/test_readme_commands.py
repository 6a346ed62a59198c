"""The README's "Running by hand" table as a new user meets it, on a copy of a shipped run: every
command that measures nothing runs for real, every one that would measure runs as a dry run, and
no committed trial file changes. `fwbench run` of a shipped run's config plans into
results/<run>-2/, never into the shipped folder. And fwbench.plan.runs, the arguments behind
`fwbench run` and `fwbench audit`."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fwbench.errors import FwbenchError
from fwbench.plan import runs
from fwbench.plan.config import load
from fwbench.plan.sweep import Plan
from fwbench.workflow.manifest import MANIFEST
from tests.conftest import BIN, REPO, TINY_CONFIG
from tests.reference_runs import RESULTS, copy_shipped

# A small shipped run (28 trials, rebuilt in about 20 s) that is also a preset's.
RUN = "tian2020-cpu"

# How the slow test runs each command of the table ({run}: the shipped run's copy), in this
# order; those that would measure get --dry-run.
COMMANDS = {
    "fwbench doctor": "fwbench doctor",
    "fwbench unlock-if-idle": "fwbench unlock-if-idle",
    "fwbench restore-times results/<run>": "fwbench restore-times results/{run}",
    "fwbench run": "fwbench run --dry-run",
    "fwbench run --dry-run": "fwbench run --dry-run",
    "fwbench run --preset <paper>": "fwbench run --dry-run --preset {run}",
    "fwbench run --preset <paper> --groups 2": "fwbench run --dry-run --preset {run} --groups 2",
    "fwbench run --configfile results/<run>/config.yaml":
        "fwbench run --dry-run --configfile results/{run}/config.yaml",
    "fwbench run -- --config seed=7": "fwbench run --dry-run -- --config seed=7",
    "fwbench run -- benchmarks_only": "fwbench run --dry-run -- benchmarks_only",
    "snakemake --cores 1 --rerun-incomplete": "snakemake --cores 1 --rerun-incomplete --dry-run",
    "fwbench rebuild results/<run>": "fwbench rebuild results/{run}",
    "fwbench audit results/<run>": "fwbench audit results/{run}",
    "fwbench export results/<run>": "fwbench export results/{run}",
    "fwbench compare results/reference results/default [--fail-on-slowdown PCT]":
        "fwbench compare results/{run} results/{run} --fail-on-slowdown 10",
    "fwbench index": "fwbench index",
    "fwbench --help": "fwbench --help",
    "fwbench <command> --help": "fwbench run --help",
    "fwbench --version": "fwbench --version",
}
SKIPPED = {
    "fwbench run -- --use-singularity": "needs an engine and built images: make test-containers "
                                        "(tests/test_containers.py: through a fake apptainer)",
    "fwbench merge results/<a> results/<b> --into results/<both>":
        "needs runs measured apart (a run merged with itself is refused): tests/test_merge.py",
    "fwbench rebuild results/<both>": "the merged run's rebuild: tests/test_merge.py",
    "python -m fwbench models": "builds every model in both frameworks: tests/test_models.py",
    "python scripts/verify_gpu_harness.py OUT_DIR": "needs a GPU",
    "snakemake --workflow-profile profiles/slurm --configfile presets/<sweep>.yaml "
    "--replace-workflow-config": "needs SLURM: make test-slurm",
}
# A make target works on the repository itself (its results/, its .venv), not on a copy: its
# commands are the ones above (Makefile).
MAKE = "make "
PROGRAMS = ("fwbench", "python", "snakemake", "make")


def readme_commands() -> list[str]:
    """The commands in the last column of the README's "Running by hand" table."""
    text = (REPO / "README.md").read_text()
    section = re.search(r"^## Running by hand\n(.*?)(?=^#)", text, re.M | re.S)
    assert section, "README.md has no '## Running by hand' section"
    cells = [line.rstrip().rstrip("|").rsplit("|", 1)[-1]
             for line in section.group(1).splitlines() if line.startswith("| ")]
    return [code for cell in cells for code in re.findall(r"`([^`]+)`", cell)
            if code.split()[0] in PROGRAMS]


def test_every_command_of_the_table_is_run_here_or_skipped_with_a_reason():
    commands = readme_commands()
    assert "fwbench run" in commands and "fwbench audit results/<run>" in commands
    assert not [c for c in commands if c.startswith("snakemake --cores 1 audit")]
    unknown = [c for c in commands if c not in COMMANDS and c not in SKIPPED
               and not c.startswith(MAKE)]
    assert unknown == [], "add each to COMMANDS (how to run it here) or SKIPPED (why not)"
    assert set(COMMANDS) | set(SKIPPED) <= set(commands), "no longer in the README"


def _argv(command: str) -> list[str]:
    program, *args = shlex.split(command)
    if program == "snakemake":
        return [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), *args]
    return [sys.executable, "-m", "fwbench", *args]


def _digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A folder as a new user's checkout holds it: config.yaml, presets/ and a shipped run."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copy(REPO / "config.yaml", root / "config.yaml")
    shutil.copytree(REPO / "presets", root / "presets")
    copy_shipped(RESULTS / RUN, root)
    return root


@pytest.mark.slow
def test_the_tables_commands_run_on_a_shipped_run_and_change_no_trial_file(checkout):
    cells = checkout / "results" / RUN / "cells"
    before = _digests(cells)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    done = {}
    for readme, command in COMMANDS.items():
        proc = subprocess.run(_argv(command.format(run=RUN)), cwd=checkout, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (readme, proc.stdout[-2000:] + proc.stderr[-3000:])
        done[readme] = proc

    assert _digests(cells) == before
    assert not (checkout / "results" / f"{RUN}-2").exists()    # dry runs write nothing
    # the preset's 72 trials and the 88 of its A/A controls, as the shipped run measured them
    for readme, trials in (("fwbench run --preset <paper>", 160),
                           ("fwbench run --configfile results/<run>/config.yaml", 160)):
        proc = done[readme]
        first, last = proc.stderr.splitlines()[0], proc.stderr.splitlines()[-1]
        assert first.startswith(f"fwbench run: would write results/{RUN}-2/ (results/{RUN}/ "
                                "holds a shipped run"), first
        assert last == f"fwbench run: dry run, nothing written; a run would write results/{RUN}-2/"
        outputs = re.findall(r"^\s+output: (.*)$", proc.stdout, re.M)
        assert outputs and not [o for o in outputs if f"results/{RUN}/" in o]   # none into it
        assert re.search(rf"^run_trial\s+{trials}$", proc.stdout, re.M), proc.stdout[-2000:]
    # Of the preset's four cell groups (two A/A controls of 44 trials, two comparisons of 36),
    # the first two in the planned order: TensorFlow's control and the inference comparison.
    sitting = done["fwbench run --preset <paper> --groups 2"]
    assert ("fwbench run: measures the next 2 cell groups not yet measured and stops, 2 left "
            "after them") in sitting.stderr
    assert re.search(r"^run_trial\s+80$", sitting.stdout, re.M), sitting.stdout[-2000:]
    assert not re.search(r"^build_report", sitting.stdout, re.M)
    default = done["fwbench run"].stderr.splitlines()
    assert default[0] == "fwbench run: would write results/default/"
    assert "fwbench doctor: " in done["fwbench run"].stderr
    audit = checkout / "results" / RUN / "audit" / "versions.csv"   # as the rebuild made it
    recorded = dict(reversed(line.split("  ", 1)) for line in
                    (checkout / "results" / RUN / MANIFEST).read_text().splitlines())
    assert hashlib.sha256(audit.read_bytes()).hexdigest() == recorded["audit/versions.csv"]
    assert "run_trial" not in done["fwbench audit results/<run>"].stderr
    assert (checkout / "results" / RUN / "export" / "data_dictionary.json").is_file()
    assert (checkout / "results" / "index.html").is_file()


# --- fwbench.plan.runs --------------------------------------------------------------------------

def _ship(results: Path, name: str) -> None:
    (results / name).mkdir(parents=True)
    (results / name / MANIFEST).write_text("")


def test_a_shipped_run_is_never_the_run_written(tmp_path):
    results = tmp_path / "results"
    assert runs.free_run("default", results) == "default"
    _ship(results, "reference")
    assert runs.free_run("reference", results) == "reference-2"
    (results / "reference-2").mkdir()               # a run of ours: the same command resumes it
    assert runs.free_run("reference", results) == "reference-2"
    (results / "reference-2" / MANIFEST).write_text("")
    _ship(results, "reference-3")
    assert runs.free_run("reference", results) == "reference-4"


def test_the_run_name_stays_among_the_users_config_items():
    args = ["--config", "seed=3", "run=mine", "--keep-going"]
    assert runs.asked_run({"run": "default"}, args) == "mine"
    assert runs.asked_run({"run": "default"}, ["--cores", "2"]) == "default"
    assert runs.with_run(args, "mine-2") == ["--config", "seed=3", "run=mine-2", "--keep-going"]
    assert runs.with_run(["-n"], "x") == ["-n", "--config", "run=x"]
    assert runs.uses_containers(["--use-singularity"])
    assert runs.uses_containers(["--sdm", "apptainer"]) and not runs.uses_containers(["-n"])


def test_fwbench_run_plans_a_preset_alone_on_its_cores_and_away_from_its_shipped_run(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(REPO / "presets", tmp_path / "presets")
    distributed = runs.new_run(preset="patel2023-distributed-cpu")
    args = distributed.arguments
    assert args[args.index("--cores") + 1] == "2" and "--replace-workflow-config" in args
    assert distributed.run == distributed.asked == "patel2023-distributed-cpu"
    _ship(tmp_path / "results", RUN)
    moved = runs.new_run(preset=RUN, snakemake_args=["--config", "seed=1", "--cores", "2"],
                         dry_run=True)
    assert (moved.asked, moved.run, moved.folder) == (RUN, f"{RUN}-2", f"results/{RUN}-2/")
    assert moved.arguments[-5:] == ["--config", "seed=1", f"run={RUN}-2", "--cores", "2"]
    assert "--dry-run" in moved.arguments and "--rerun-incomplete" in moved.arguments
    with pytest.raises(FwbenchError, match="no preset 'nope'"):
        runs.new_run(preset="nope")


def test_a_run_over_several_sittings_measures_whole_cell_groups_in_the_planned_order(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(
        {**TINY_CONFIG, "trials": 2, "batch_sizes": [2, 4, 8]}))
    plan = Plan.from_config(load(tmp_path / "config.yaml"))
    groups = runs.unmeasured_groups(plan, "tiny")
    assert [len(g) for g in groups] == [4, 4, 4]
    assert [t.path("tiny") for t in sorted(plan.trials, key=lambda t: t.position)] == [
        p for g in groups for p in g]
    first = runs.new_run(groups=2, snakemake_args=["--config", "seed=0"])
    assert (first.groups, first.groups_left) == (2, 1)
    # The targets stand before the user's arguments, which may end in --config items.
    assert first.arguments[-10:] == [*groups[0], *groups[1], "--config", "seed=0"]
    for path in groups[0]:                     # the first sitting measured its groups
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("{}")
    second = runs.new_run(groups=2)
    assert (second.groups, second.groups_left) == (2, 0)
    assert second.arguments[-8:] == [*groups[1], *groups[2]]
    for path in groups[1] + groups[2]:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("{}")
    last = runs.new_run(groups=2)                # nothing left: the whole run, its report
    assert (last.groups, last.groups_left) == (0, 0)
    assert last.arguments == runs.new_run().arguments


def test_the_audit_runs_only_the_audit_rules_on_the_runs_own_config(tmp_path):
    run_dir = copy_shipped(RESULTS / RUN, tmp_path)
    args = runs.audit_arguments(run_dir, REPO / "Snakefile")
    assert args[0] == "audit"
    assert args[args.index("--allowed-rules") + 1:] == list(runs.AUDIT_RULES)
    assert args[args.index("--configfile") + 1] == str(run_dir.resolve() / "config.yaml")
    with pytest.raises(FwbenchError, match="under a results/ folder"):
        runs.audit_arguments(tmp_path, REPO / "Snakefile")
