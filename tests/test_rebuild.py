"""The shipped reference run rebuilds byte for byte: `fwbench rebuild results/reference --check`
remakes its tables, statistics, figures, HTML and PDF from its cell files and compares each with
the checksums recorded beside it (results/reference/rebuild.sha256). A refactoring that moves
code must leave every one of them unchanged; a change that means to alter them records new
checksums (`--record`) and says why in its commit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fwbench import SOURCE_DIR, workflow

REFERENCE = SOURCE_DIR / "results" / "reference"
SHIPPED = ("cells", "environment", "config.yaml", "README.md", workflow.MANIFEST)


def _copy_reference(root: Path) -> Path:
    run = root / "results" / "reference"
    run.mkdir(parents=True)
    for name in SHIPPED:
        source = REFERENCE / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, run / name)
    return run


@pytest.mark.slow
def test_the_reference_run_rebuilds_byte_for_byte(tmp_path):
    _copy_reference(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "fwbench", "rebuild", "results/reference",
                           "--check"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "byte-identical to" in done.stderr


def test_check_names_every_file_that_differs(tmp_path):
    run = tmp_path / "results" / "run"
    for name, text in [("stats/cells.csv", "a"), ("report/report.html", "b"),
                       ("report/figures/x.svg", "c")]:
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text(text)
    workflow.write_manifest(run)
    assert workflow.check_manifest(run) == []
    (run / "stats/cells.csv").write_text("changed")
    (run / "report/figures/x.svg").unlink()
    (run / "tables").mkdir()
    (run / "tables/new.parquet").write_bytes(b"")
    assert workflow.check_manifest(run) == ["stats/cells.csv: differs",
                                            "report/figures/x.svg: not rebuilt",
                                            "tables/new.parquet: rebuilt but not recorded"]
