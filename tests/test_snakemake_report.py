"""`snakemake --report` on a finished run: the outputs marked report() in rules/*.smk, captioned."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests.conftest import REBUILT_REFERENCE, snakemake


@pytest.mark.slow
@pytest.mark.xdist_group(REBUILT_REFERENCE)
def test_report_holds_the_figures_tables_and_paper_with_captions(rebuilt_reference):
    run_dir = rebuilt_reference.run
    reference_root = run_dir.parent.parent
    proc = snakemake(reference_root, "--cores", "1", "--configfile", str(run_dir / "config.yaml"),
                     "--report", "report.zip")
    assert proc.returncode == 0, proc.stderr[-3000:]

    with zipfile.ZipFile(reference_root / "report.zip") as archive:
        members = {Path(name).name: name for name in archive.namelist()
                   if "/data/raw/" in name}
        expected = [run_dir / "report" / "report.pdf",
                    *sorted((run_dir / "report" / "figures").glob("*.svg")),
                    *sorted((run_dir / "stats").glob("*.csv")),
                    run_dir / "audit" / "versions.csv"]
        assert len(expected) > 12  # the PDF, several figures, every statistics table
        assert sorted(members) == sorted(p.name for p in expected)
        for path in expected:  # the run's own files, unchanged
            assert archive.read(members[path.name]) == path.read_bytes(), path.name
        page = archive.read("report/report.html").decode()

    # report/workflow.rst, rendered for this run, and one caption of each kind.
    assert 'fwbench run <tt class=\\"docutils literal\\">reference</tt>' in page
    for caption in ("docs/statistics.md", "docs/ablation.md", "docs/distributed.md",
                    "the fraction of the device", "The paper as PDF", "The paper's figures",
                    "The software behind every number"):
        assert caption in page, caption
