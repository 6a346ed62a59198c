"""Every shipped run rebuilds byte for byte: `fwbench rebuild results/<run> --check` remakes
its tables, statistics, figures, HTML and PDF from its cell files and compares each with the
checksums recorded beside it (results/<run>/rebuild.sha256). The reference run is checked in
full, under both OpenBLAS kernels; every other shipped run by its tables and statistics, which
hold every number of its report, so that `make test` keeps to its time as runs are added. A
refactoring that moves code must leave every checksum unchanged; a change that means to alter
them records new ones (`--record`) and says why in its commit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from fwbench import SOURCE_DIR, workflow
from fwbench.files import write_csv
from fwbench.report.sections import audit
from tests.conftest import REBUILT_REFERENCE
from tests.reference_runs import REFERENCE, SHIPPED, copy_shipped, rebuild

# What a rebuild writes before the report, and the first rule it can stop before.
STATISTICS = ("tables/*.parquet", "stats/*.csv", "audit/*.csv")
REPORT_RULE = "build_report"


def _byte_identical(done: subprocess.CompletedProcess, kernel: str) -> None:
    assert done.returncode == 0, done.stderr[-4000:]
    assert "byte-identical to" in done.stderr
    assert f"Core: {kernel}" in done.stderr  # OpenBLAS, loaded by the jobs, took the kernel


# OpenBLAS kernels whose last bits differ (Haswell's uses fused multiply-add, Sandybridge's
# does not): the KS p-values of the statistics went through them. Every x86-64 processor since
# 2013 runs both. The Haswell rebuild is the one the other tests of the rebuilt reference read.
@pytest.mark.slow
@pytest.mark.xdist_group(REBUILT_REFERENCE)
def test_the_reference_run_rebuilds_byte_for_byte_measuring_nothing(rebuilt_reference):
    run, done = rebuilt_reference
    _byte_identical(done, "Haswell")
    assert "run_trial" not in done.stderr and "measure_idle" not in done.stderr
    trials = pd.read_parquet(run / "tables" / "trials.parquet")
    assert len(trials) == len(list(run.glob("cells/**/trial-*[0-9].json"))) > 0
    assert _cell_files(run) == _cell_files(REFERENCE)


def _cell_files(run: Path) -> dict[str, bytes]:
    return {p.relative_to(run).as_posix(): p.read_bytes() for p in run.rglob("cells/**/*")
            if p.is_file()}


@pytest.mark.slow
def test_the_reference_run_rebuilds_byte_for_byte_under_the_other_kernel(tmp_path):
    run = copy_shipped(REFERENCE, tmp_path)
    _byte_identical(rebuild(run, "--check", OPENBLAS_CORETYPE="Sandybridge",
                            OPENBLAS_VERBOSE="2"), "Sandybridge")


@pytest.mark.slow
@pytest.mark.parametrize("source", [run for run in SHIPPED if run != REFERENCE],
                         ids=lambda run: run.name)
def test_every_other_shipped_run_rebuilds_its_statistics_byte_for_byte(tmp_path, source):
    run = copy_shipped(source, tmp_path)
    done = subprocess.run([sys.executable, "-m", "snakemake",
                           *workflow.rebuild_arguments(run, SOURCE_DIR / "Snakefile"),
                           "--omit-from", REPORT_RULE], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{os.path.dirname(sys.executable)}"
                                                     f"{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr[-4000:]
    assert not (run / "report").exists()
    assert workflow.check_manifest(run, STATISTICS) == []


def test_the_shipped_runs_are_the_run_folders_with_recorded_checksums():
    assert REFERENCE in SHIPPED
    for run in SHIPPED:
        assert (run / workflow.RUN_CONFIG).is_file() and (run / "cells").is_dir(), run


@pytest.mark.parametrize("release", [(3, 11, 2), (3, 11, 7), (3, 11, 99)])
def test_the_report_names_python_to_the_release_the_lock_can_pin(monkeypatch, release):
    """The report says what built it; the Python patch release is the one version in that
    sentence that requirements.lock cannot pin, so a rebuild in an environment made from
    another (Debian's 3.11.2 beside a 3.11.7) would differ from the recorded bytes."""
    version = ".".join(map(str, release))
    monkeypatch.setattr(audit, "sys", SimpleNamespace(
        version=f"{version} (main) [GCC]", version_info=(*release, "final", 0)))
    assert audit.builder_versions()["Python"] == "3.11"


def test_floats_that_differ_in_their_last_bits_write_the_same_csv(tmp_path):
    # one p-value as OpenBLAS's Haswell and Sandybridge kernels left it, in a float column and
    # among text; 5.0 stays a float
    for name, p in [("haswell.csv", 0.4069914124315368), ("sandybridge.csv", 0.406991412431537)]:
        write_csv(pd.DataFrame({"p": [p, 5.0, None], "note": ["a", p, None]}), tmp_path / name)
    assert ((tmp_path / "haswell.csv").read_text() == (tmp_path / "sandybridge.csv").read_text()
            == "p,note\n0.4069914124,a\n5.0,0.4069914124\n,\n")


def _record(run: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text(text)
    workflow.write_manifest(run)
    assert workflow.check_manifest(run) == []


def test_check_names_every_file_that_differs(tmp_path):
    run = tmp_path / "results" / "run"
    _record(run, {"stats/cells.csv": "cell,median_ns\na,1.5\n", "report/report.html": "b",
                  "report/figures/x.svg": "c"})
    (run / "stats/cells.csv").write_text("cell,median_ns\na,1.25\n")
    (run / "report/report.html").write_text("changed")
    (run / "report/figures/x.svg").unlink()
    (run / "tables/new.parquet").parent.mkdir()
    (run / "tables/new.parquet").write_bytes(b"")
    assert workflow.check_manifest(run) == [
        "report/report.html: differs",
        "stats/cells.csv: differs at row 1, column median_ns: recorded '1.5', rebuilt '1.25'",
        "report/figures/x.svg: not rebuilt",
        "tables/new.parquet: rebuilt but not recorded"]


def test_a_pdf_that_differs_names_a_missing_font_subsetter(tmp_path, monkeypatch):
    # HarfBuzz-Subset is a system library; which one WeasyPrint found is faked here
    run = tmp_path / "results" / "run"
    _record(run, {"report/report.pdf": "a"})
    (run / "report/report.pdf").write_text("b")
    monkeypatch.setattr(workflow, "subsets_fonts_with_harfbuzz", lambda: True)
    assert workflow.check_manifest(run) == ["report/report.pdf: differs"]
    monkeypatch.setattr(workflow, "subsets_fonts_with_harfbuzz", lambda: False)
    [line] = workflow.check_manifest(run)
    assert line.startswith("report/report.pdf: differs (this machine lacks HarfBuzz-Subset")
    assert "libharfbuzz-subset0" in line


def test_a_check_of_the_statistics_alone_leaves_the_report_out(tmp_path):
    run = tmp_path / "results" / "run"
    _record(run, {"stats/cells.csv": "cell,median_ns\na,1.5\n", "report/report.html": "b"})
    shutil.rmtree(run / "report")
    assert workflow.check_manifest(run, STATISTICS) == []
    (run / "stats/cells.csv").write_text("cell,median_ns\na,1.25\n")
    (run / "stats/new.csv").write_text("x\n")
    assert workflow.check_manifest(run, STATISTICS) == [
        "stats/cells.csv: differs at row 1, column median_ns: recorded '1.5', rebuilt '1.25'",
        "stats/new.csv: rebuilt but not recorded"]


def test_a_changed_table_names_its_row_column_and_both_values(tmp_path):
    run = tmp_path / "results" / "run"
    trials = pd.DataFrame({"trial": [0, 1, 2], "median_ns": [1.5, 2.5, 3.5]})
    (run / "tables").mkdir(parents=True)
    trials.to_parquet(run / "tables/trials.parquet", index=False)
    _record(run, {"stats/tests.csv": "id,p,verdict\nks,0.406991412431537,none\n"
                                     "t,0.2,\"a, b\"\n"})
    trials.loc[2, "median_ns"] = 3.25
    trials.to_parquet(run / "tables/trials.parquet", index=False)
    (run / "stats/tests.csv").write_text("id,p,verdict\nks,0.406991412431537,none\n"
                                         "t,0.2,\"a, c\"\n")
    assert workflow.check_manifest(run) == [
        "stats/tests.csv: differs at row 2, column verdict: recorded 'a, b', rebuilt 'a, c'",
        "tables/trials.parquet: differs at row 3, column median_ns: recorded '3.5', "
        "rebuilt '3.25'"]


def test_a_table_that_differs_in_shape_or_bytes_only_says_so(tmp_path):
    run = tmp_path / "results" / "run"
    _record(run, {f"stats/{name}.csv": "x,y\n1,2\n" for name in "abcde"})
    (run / "stats/a.csv").write_text("x,z\n1,2\n")
    (run / "stats/b.csv").write_text("x,y\n1,2\n3,4\n")
    (run / "stats/c.csv").write_text("x,y\r\n1,2\r\n")
    for name in "de":
        (run / f"stats/{name}.csv").write_text("x,y\n1,3\n")
    (run / workflow.RECORDED / "stats/d.csv").unlink()
    (run / workflow.RECORDED / "stats/e.csv").write_text("x,y\n1,3\n")  # not what was recorded
    assert workflow.check_manifest(run) == [
        "stats/a.csv: differs in its columns: recorded ['x', 'y'], rebuilt ['x', 'z']",
        "stats/b.csv: differs in its number of rows: recorded 1, rebuilt 2",
        "stats/c.csv: differs in its bytes only: every value is the same",
        "stats/d.csv: differs (no recorded copy, recorded/stats/d.csv, to show where)",
        "stats/e.csv: differs (recorded/stats/e.csv is not the file recorded: record again to "
        "show where)"]
