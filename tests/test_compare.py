"""`fwbench compare RUN_A RUN_B`: each shared cell's ratio B/A with its interval, detectable
slowdown and verdict under one error control, what differs between the environments, the CSV
and HTML it writes, and the exit status and last line --fail-on-slowdown gives, through the real
command. The runs are copies of the reference run's trial files, one framework's times scaled in
a copy. docs/compare.md's transcript is this file's output (FWBENCH_UPDATE_DOCS=1 rewrites it)."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from fwbench import SOURCE_DIR
from fwbench.analysis.compare import POWER, compare_runs, compare_unpaired, slowdowns
from fwbench.analysis.run_folder import load_run, trial_files
from fwbench.analysis.tables import collect_tables, write_tables
from fwbench.cli import main
from fwbench.files import CSV_DIGITS
from tests.reference_runs import SWEEP_CELLS as CELLS, copy_run, move_machine, slow_down, small_run

PYTORCH, TENSORFLOW = "/pytorch/", "/tensorflow/"
# PyTorch's times in the slowed copies, multiplied: the case docs/compare.md shows.
SLOWER = 1.3
GATE = ["--fail-on-slowdown", "10"]
DOCS = SOURCE_DIR / "docs" / "compare.md"
TRANSCRIPT = re.compile(r"(<!-- transcript: tests/test_compare\.py[^\n]*-->\n```console\n)"
                        r"(.*?)(```\n)", re.DOTALL)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """results/reference (a copy of the reference run), results/slow (a copy whose PyTorch
    trials are 30 % slower) and results/moved (the same, as if measured on another host and CPU
    with another numpy)."""
    results = tmp_path_factory.mktemp("compare") / "results"
    reference, slow, moved = (copy_run(results / name) for name in ("reference", "slow", "moved"))
    for run in (slow, moved):
        slow_down(run, "pytorch", SLOWER)
    move_machine(moved, hostname="other", cpu_model="Intel Xeon", numpy="9.9.9")
    return reference, slow, moved


def fwbench_compare(results, *args: str) -> subprocess.CompletedProcess:
    """`python -m fwbench compare ARGS` from the folder holding ``results``, its stderr merged
    into its stdout in the order written, as a terminal or a CI log shows them."""
    return subprocess.run([sys.executable, "-m", "fwbench", "compare", *args],
                          cwd=results.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def slowed(runs):
    """The compare of the reference with its slowed copy at a 10 % gate."""
    return fwbench_compare(runs[0].parent, "results/reference", "results/slow", *GATE)


def _cells(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _last_line(done: subprocess.CompletedProcess) -> str:
    return done.stdout.rstrip("\n").splitlines()[-1]


def test_a_copy_with_pytorch_30_percent_slower_fails_the_gate(runs, slowed):
    assert slowed.returncode == 1, slowed.stdout
    assert _last_line(slowed).startswith("FAIL: 4 of 8 cells are slower by more than 10 % "
                                         "(interval above 1, B/A above 1.1): ")
    cells = _cells(runs[0].parent / "compare-reference-slow" / "compare.csv")
    pytorch = [c for c in cells if PYTORCH in c["cell_id"]]
    assert len(pytorch) == len(CELLS) // 2 and {c["verdict"] for c in pytorch} == {"slower"}
    assert all(math.isclose(float(c["ratio"]), SLOWER, rel_tol=1e-3) for c in pytorch)
    tensorflow = [c for c in cells if TENSORFLOW in c["cell_id"]]
    # unchanged: "same" where its spread lets the interval lie within the margin
    assert all(float(c["ratio"]) == 1.0 and c["verdict"] in ("inconclusive", "same")
               for c in tensorflow)
    assert all(1 < float(c["detectable_slowdown"]) < 2 for c in cells)


def test_the_reference_against_itself_passes(runs):
    reference = runs[0]
    done = fwbench_compare(reference.parent, "results/reference", "results/reference", *GATE,
                           "--out", "results/self")
    assert done.returncode == 0, done.stdout
    assert _last_line(done).startswith("PASS: none of 8 cells is slower by more than 10 %")
    # what the gate could not see is said: the cells of 7 trials a side that cannot detect 10 %
    blind = [c for c in _cells(reference.parent / "self" / "compare.csv")
             if float(c["detectable_slowdown"]) > 1.1]
    assert blind and (f"{len(blind)} of them could not detect a 10 % slowdown with 80 % power"
                      in _last_line(done))
    assert "machine: the same (host vm; CPU model AMD EPYC" in done.stdout
    assert "versions: no item of the version audit differs" in done.stdout
    cells = _cells(reference.parent / "self" / "compare.csv")
    assert len(cells) == len(CELLS) and {c["verdict"] for c in cells} <= {"same", "inconclusive"}
    assert all(float(c["ratio"]) == 1.0 and c["family_size"] == str(len(CELLS)) for c in cells)
    # "same" exactly where the equivalence interval lies within the margin (how many do depends
    # on the run's spread: the reference's 8 trials a side leave some too wide)
    for c in cells:
        inside = (float(c["rope_low"]) <= float(c["equivalence_ci_low"])
                  and float(c["equivalence_ci_high"]) <= float(c["rope_high"]))
        assert (c["verdict"] == "same") == inside, c["cell_id"]
    html = (reference.parent / "self" / "compare.html").read_text()
    assert "Every cell, B against A" in html and "<th>Detectable slowdown</th>" in html


def test_the_docs_transcript_is_this_compare(slowed):
    """docs/compare.md shows exactly what the command printed; FWBENCH_UPDATE_DOCS=1 rewrites
    its block from this run."""
    transcript = (f"$ fwbench compare results/reference results/slow {' '.join(GATE)}\n"
                  f"{slowed.stdout}$ echo $?\n{slowed.returncode}\n")
    docs = DOCS.read_text()
    found = TRANSCRIPT.search(docs)
    assert found, "docs/compare.md has no transcript block"
    if os.environ.get("FWBENCH_UPDATE_DOCS") == "1":
        docs = docs[:found.start(2)] + transcript + docs[found.end(2):]
        DOCS.write_text(docs)
        found = TRANSCRIPT.search(docs)
    assert found.group(2) == transcript, ("docs/compare.md's transcript is stale: "
                                          "FWBENCH_UPDATE_DOCS=1 pytest tests/test_compare.py")


def test_the_environment_first_then_each_slowdown(runs, capsys):
    reference, _, moved = runs
    out = reference.parent / "moved-out"
    assert main(["compare", str(reference), str(moved), *GATE, "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert text.index("CPU model: AMD EPYC -> Intel Xeon") < text.index("B/A")
    assert "host: vm -> other" in text and "package numpy" in text
    assert "machine: the same" not in text and "machine: alike only in (CPU cores" in text
    assert text.rstrip().splitlines()[-1].startswith("FAIL: 4 of 8 cells")
    # the one CSV writer: every float at the stated precision, whatever the BLAS kernel gave
    cells = _cells(out / "compare.csv")
    floats = [v for c in cells for v in c.values() if _is_float(v)]
    assert floats and all(v == repr(float(f"{float(v):.{CSV_DIGITS}g}")) for v in floats)
    assert any(len(v.lstrip("-0.").replace(".", "")) > 6 for v in floats)  # not rounded coarser


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return "." in text or "e" in text.lower()


@pytest.mark.parametrize("percent", ["-10", "0", "nan", "inf"])
def test_a_threshold_that_is_not_a_positive_number_is_refused(runs, percent):
    done = fwbench_compare(runs[0].parent, "results/reference", "results/slow",
                           "--fail-on-slowdown", percent, "--out", "results/refused")
    assert done.returncode == 2
    assert (f"argument --fail-on-slowdown: PCT must be a finite number of percent above 0, "
            f"e.g. 10, not '{percent}'") in _last_line(done)
    assert not (runs[0].parent / "refused").exists()


def test_runs_sharing_no_cell_decide_nothing(tmp_path):
    """Exit 3, one line, nothing written: a gate that saw nothing must not pass."""
    results = tmp_path / "results"
    copy_run(results / "lenet", keep=lambda cell: "lenet5" in str(cell))
    copy_run(results / "resnet", keep=lambda cell: "resnet18" in str(cell))
    done = fwbench_compare(results, "results/lenet", "results/resnet", *GATE)
    assert done.returncode == 3
    assert done.stdout == ("fwbench compare: nothing could be decided: the two runs share no "
                           "cell with ok trials; nothing written\n")
    assert sorted(p.name for p in results.iterdir()) == ["lenet", "resnet"]


def test_one_trial_a_side_decides_nothing(tmp_path):
    a = small_run(tmp_path / "results" / "a")
    b = small_run(tmp_path / "results" / "b")
    for path in trial_files(b):
        if path.name != "trial-1.json":
            path.unlink()
    comparison = compare_runs(load_run(a), load_run(b))
    assert comparison.undecided() == ("none of the 2 shared cells has an interval (fewer than "
                                      "two ok trials on a side, or no spread)")


def test_the_gate_fails_a_confident_slowdown_above_the_threshold():
    """Confidently slower (interval above 1) and B/A above 1 + PCT/100, as asv continuous."""
    cells = pd.DataFrame({"cell_id": ["sure", "unsure", "small", "no interval"],
                          "ratio": [1.30, 1.30, 1.08, 1.50],
                          "ratio_ci_low": [1.02, 0.98, 1.03, math.nan]})
    assert list(slowdowns(cells, 10)["cell_id"]) == ["sure"]
    assert list(slowdowns(cells, 5)["cell_id"]) == ["sure", "small"]
    assert slowdowns(cells, 31).empty


def test_the_detectable_slowdown_is_called_slower_with_its_power():
    """Where the spread is what a cell observed, cells at the true ratio its
    detectable_slowdown states are called slower about 80 % of the time (benchmarks/
    compare_gate.py does this at scale)."""
    rng = np.random.default_rng(1)
    trials, m = 8, 8
    observed = np.exp(rng.normal(0, 0.1, trials))
    stated = compare_unpaired(observed, observed, family_size=m)["detectable_slowdown"]
    assert 1.05 < stated < 1.5
    a, b = np.exp(rng.normal(0, np.log(observed).std(ddof=1), (2, 400, trials)))
    verdicts = [compare_unpaired(x, y * stated, family_size=m)["verdict"] for x, y in zip(a, b)]
    assert abs(verdicts.count("slower") / 400 - POWER) < 0.08


def test_stale_tables_give_way_to_the_trial_files(tmp_path, capsys):
    """Tables older than a trial file, or listing other trials, are not read; one line says so."""
    results = tmp_path / "results"
    reference, changed = copy_run(results / "reference"), copy_run(results / "changed")
    _write_tables(changed)
    assert load_run(changed).stale == ""
    hour_ago = time.time() - 3600
    for table in (changed / "tables").iterdir():
        os.utime(table, (hour_ago, hour_ago))     # rebuilt an hour ago; then the trials changed
    slow_down(changed, "pytorch", SLOWER)
    run = load_run(changed)
    assert run.stale.startswith(f"{changed}/tables is older than the trial file {changed}/cells/")
    n = len(list(trial_files(reference)))   # the sweep cells' trials (5-12 each)
    assert run.stale.endswith(f"; reading the run's {n} trial files instead (`fwbench rebuild "
                              f"{changed}` updates the tables)")
    assert main(["compare", str(reference), str(changed)]) == 0
    out, errors = capsys.readouterr()
    assert errors.splitlines()[0] == f"fwbench compare: {run.stale}"
    assert "1.30  [" in out           # the trial files' times, not the tables' 1.00

    _write_tables(reference)
    next(p for p in trial_files(reference) if p.name == "trial-7.json").unlink()
    assert load_run(reference).stale == (
        f"{reference}/tables lists {n} trials, {n - 1} of them among the {n - 1} trial files; "
        f"reading the run's {n - 1} trial files instead (`fwbench rebuild {reference}` updates "
        "the tables)")


def _write_tables(run) -> None:
    """The run's tables as a rebuild writes them, now."""
    tables = collect_tables(trial_files(run))
    shutil.rmtree(run / "tables", ignore_errors=True)
    write_tables(tables, {name: run / "tables" / f"{name}.parquet" for name in tables})


def test_runs_that_share_only_some_cells(tmp_path):
    """A holds lenet5 only; B holds lenet5's inference cells and resnet18: only lenet5's
    inference cells are compared, and the error control counts only them."""
    a = copy_run(tmp_path / "results" / "a", keep=lambda cell: "lenet5" in str(cell))
    b = copy_run(tmp_path / "results" / "b", keep=lambda cell: "lenet5/train" not in str(cell))
    comparison = compare_runs(load_run(a), load_run(b))
    cells = comparison.cells
    compared = comparison.compared
    assert sorted(compared["cell_id"]) == sorted(c for c in cells["cell_id"]
                                                 if "lenet5/infer" in c)
    shared = sum("lenet5/infer" in cell.as_posix() for cell in CELLS)
    assert len(compared) == shared and set(compared["family_size"]) == {shared}
    notes = cells.set_index("cell_id")["note"]
    assert {notes[c] for c in cells["cell_id"] if "lenet5/train" in c} == {"only in run A"}
    assert {notes[c] for c in cells["cell_id"] if "resnet18" in c} == {"only in run B"}
    assert len(cells) == len(CELLS)


def test_a_merged_run_is_refused(tmp_path):
    """Its cells pool machines: compare the runs it came from."""
    from fwbench.analysis.merge import merge_runs
    from fwbench.errors import FwbenchError

    sources = [small_run(tmp_path / "results" / n) for n in ("x", "y")]
    for path in trial_files(sources[1]):  # measured a day later: trials merge would not refuse
        result = json.loads(path.read_text())
        for key in ("started_at", "ended_at"):
            result[key] = (datetime.fromisoformat(result[key]) + timedelta(days=1)).isoformat()
        path.write_text(json.dumps(result))
    merged = tmp_path / "results" / "xy"
    merge_runs(sources, merged)
    with pytest.raises(FwbenchError, match="merged from 2 runs"):
        compare_runs(load_run(sources[0]), load_run(merged))


def test_equal_runs_with_little_spread_are_the_same():
    steps = [1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.00, 1.01]
    assert compare_unpaired(steps, steps[::-1], family_size=4)["verdict"] == "same"
    assert compare_unpaired(steps, [2 * s for s in steps], family_size=4)["verdict"] == "slower"
