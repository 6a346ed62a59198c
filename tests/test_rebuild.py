"""Every shipped run rebuilds byte for byte: `fwbench rebuild results/<run> --check` remakes
its tables, statistics, figures, HTML and PDF from its cell files and compares each with the
checksums recorded beside it (results/<run>/rebuild.sha256). Every shipped run is checked in
full, figures and PDF included; the reference run under both OpenBLAS kernels, and a run with a
log axis with numpy's AVX-512 kernels and without them. A refactoring that moves code must
leave every checksum unchanged; a change that means to alter them records new ones
(`--record`) and says why in its commit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from numpy._core import _multiarray_umath

from fwbench.analysis.run_folder import trial_files
from fwbench.files import write_csv
from fwbench.report.sections import audit
from fwbench.workflow import manifest
from fwbench.workflow.host import NUMPY_DISPATCH
from fwbench.workflow.rebuild import RUN_CONFIG
from tests.conftest import REBUILT_REFERENCE
from tests.reference_runs import REFERENCE, RESULTS, SHIPPED, copy_shipped, rebuild

# What a rebuild writes before the report.
STATISTICS = ("tables/*.parquet", "stats/*.csv", "audit/*.csv")


def _byte_identical(done: subprocess.CompletedProcess, kernel: str | None = None) -> None:
    assert done.returncode == 0, done.stderr[-4000:]
    assert "byte-identical to" in done.stderr
    if kernel:
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
    controls = pd.read_parquet(run / "tables" / "controls.parquet")
    assert len(trials) == len(trial_files(run)) > 0
    assert len(controls) == len(trial_files(run, controls=True)) > 0
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
def test_every_other_shipped_run_rebuilds_byte_for_byte(tmp_path, source):
    _byte_identical(rebuild(copy_shipped(source, tmp_path), "--check"))


# numpy's SIMD targets on this processor, and those of them that use AVX-512.
NUMPY_FEATURES = _multiarray_umath.__cpu_features__
AVX512 = [t for t in _multiarray_umath.__cpu_dispatch__ if t.startswith(("AVX512", "X86_V4"))]
# A shipped run whose latency figure has a log axis (patel2023-cpu's), and the tables of one
# pair whose log-axis coordinates numpy's AVX-512 logarithm moves in their last digit: VGG16
# inference at batch 1 of the patel2023-cpu run measured on 2026-11-26, on a Zen 4 host (the run
# measured again on 2026-11-29 has no pair that shows it on this host).
LOG_AXIS_RUN = RESULTS / "patel2023-cpu"
AVX512_PAIR = Path(__file__).parent / "fixtures" / "avx512_ecdf"
DRAW_ECDF = """\
import sys
from pathlib import Path
import pandas as pd
from fwbench.report.figures.usage import latency_ecdf
run, out = Path(sys.argv[1]), Path(sys.argv[2])
tables = run / "recorded" / "tables"
latency_ecdf(pd.read_parquet(tables / "iterations.parquet"),
             pd.read_parquet(tables / "trials.parquet"), out)
"""


@pytest.mark.slow
def test_a_rebuild_gives_the_same_bytes_with_numpys_avx512_kernels_and_without(tmp_path):
    if not NUMPY_FEATURES.get("AVX512F"):
        pytest.skip("this processor lacks AVX-512, so numpy's AVX-512 kernels cannot run here: "
                    "the rebuild was compared with and without them only on AVX-512 hosts")
    # The difference is real here: drawn outside the workflow, the figure's bytes depend on them
    drawn = []
    for name, disabled in (("drawn-with", ""), ("drawn-without", " ".join(AVX512))):
        (tmp_path / name).mkdir()
        subprocess.run([sys.executable, "-c", DRAW_ECDF, AVX512_PAIR, tmp_path / name],
                       env={**os.environ, NUMPY_DISPATCH: disabled}, check=True)
        drawn.append(tmp_path / name / "latency_ecdf.svg")
    assert drawn[0].read_bytes() != drawn[1].read_bytes()
    assert ", attribute " in manifest.svg_difference(*drawn)
    # and the workflow's rebuild, made both ways, gives the recorded bytes
    _byte_identical(rebuild(copy_shipped(LOG_AXIS_RUN, tmp_path / "with"), "--check"))
    _byte_identical(rebuild(copy_shipped(LOG_AXIS_RUN, tmp_path / "without"), "--check",
                            **{NUMPY_DISPATCH: " ".join(AVX512)}))


def test_the_shipped_runs_are_the_run_folders_with_recorded_checksums():
    assert REFERENCE in SHIPPED
    for run in SHIPPED:
        assert (run / RUN_CONFIG).is_file() and (run / "cells").is_dir(), run


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
    manifest.write_manifest(run)
    assert manifest.check_manifest(run) == []


def test_check_names_every_file_that_differs(tmp_path):
    run = tmp_path / "results" / "run"
    _record(run, {"stats/cells.csv": "cell,median_ns\na,1.5\n", "report/report.html": "b",
                  "report/figures/x.svg": "c"})
    (run / "stats/cells.csv").write_text("cell,median_ns\na,1.25\n")
    (run / "report/report.html").write_text("changed")
    (run / "report/figures/x.svg").unlink()
    (run / "tables/new.parquet").parent.mkdir()
    (run / "tables/new.parquet").write_bytes(b"")
    assert manifest.check_manifest(run) == [
        "report/report.html: differs",
        "stats/cells.csv: differs at row 1, column median_ns: recorded '1.5', rebuilt '1.25'",
        "report/figures/x.svg: not rebuilt",
        "tables/new.parquet: rebuilt but not recorded"]


def test_a_pdf_that_differs_names_a_missing_font_subsetter(tmp_path, monkeypatch):
    # HarfBuzz-Subset is a system library; which one WeasyPrint found is faked here
    run = tmp_path / "results" / "run"
    _record(run, {"report/report.pdf": "a"})
    (run / "report/report.pdf").write_text("b")
    monkeypatch.setattr(manifest, "subsets_fonts_with_harfbuzz", lambda: True)
    assert manifest.check_manifest(run) == ["report/report.pdf: differs"]
    monkeypatch.setattr(manifest, "subsets_fonts_with_harfbuzz", lambda: False)
    [line] = manifest.check_manifest(run)
    assert line.startswith("report/report.pdf: differs (this machine lacks HarfBuzz-Subset")
    assert "libharfbuzz-subset0" in line


def test_a_check_of_the_statistics_alone_leaves_the_report_out(tmp_path):
    run = tmp_path / "results" / "run"
    _record(run, {"stats/cells.csv": "cell,median_ns\na,1.5\n", "report/report.html": "b"})
    shutil.rmtree(run / "report")
    assert manifest.check_manifest(run, STATISTICS) == []
    (run / "stats/cells.csv").write_text("cell,median_ns\na,1.25\n")
    (run / "stats/new.csv").write_text("x\n")
    assert manifest.check_manifest(run, STATISTICS) == [
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
    assert manifest.check_manifest(run) == [
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
    (run / manifest.RECORDED / "stats/d.csv").unlink()
    (run / manifest.RECORDED / "stats/e.csv").write_text("x,y\n1,3\n")  # not what was recorded
    assert manifest.check_manifest(run) == [
        "stats/a.csv: differs in its columns: rebuilt adds 'z', rebuilt lacks 'y'",
        "stats/b.csv: differs in its number of rows: recorded 1, rebuilt 2",
        "stats/c.csv: differs in its bytes only: every value is the same",
        "stats/d.csv: differs (no recorded copy, recorded/stats/d.csv, to show where)",
        "stats/e.csv: differs (recorded/stats/e.csv is not the file recorded: record again to "
        "show where)"]


SVG = """<svg xmlns="http://www.w3.org/2000/svg"><defs><clipPath id="p{clip}"><rect x="1"/>
</clipPath></defs><g id="patch_4"><path d="M 25.33218{last} L 40 2" clip-path="url(#p{clip})"/>
</g><g id="text_1"><text>{label}</text></g></svg>"""


def test_a_figure_that_differs_is_shown_at_its_first_differing_element(tmp_path):
    run = tmp_path / "results" / "run"
    _record(run, {"report/figures/a.svg": SVG.format(clip="1a", last=8, label="ms"),
                  "report/figures/b.svg": SVG.format(clip="1a", last=8, label="ms")})
    # the clip-path's id follows the coordinates: the coordinates are the difference shown
    (run / "report/figures/a.svg").write_text(SVG.format(clip="2b", last=7, label="ms"))
    (run / "report/figures/b.svg").write_text(SVG.format(clip="1a", last=8, label="s"))
    assert manifest.check_manifest(run) == [
        "report/figures/a.svg: differs at element 6, a <path> in <g id=\"patch_4\">, "
        "attribute d: recorded 'M 25.332188', rebuilt 'M 25.332187'",
        "report/figures/b.svg: differs at element 8, a <text> in <g id=\"text_1\">, text: "
        "recorded 'ms', rebuilt 's'"]
