"""`fwbench index`: results/index.html lists every run with a link to its report, its machine,
date, versions and headline, and every comparison `fwbench compare` wrote beside them."""

from __future__ import annotations

import json
import re

from fwbench.cli import main
from tests.reference_runs import move_machine, small_run


def _row(html: str, name: str) -> str:
    """The table row of the run or comparison ``name``, its tags removed."""
    row = next(r for r in re.findall(r"<tr>(.*?)</tr>", html) if f">{name}<" in r
               or f"<td>{name} " in r)
    return re.sub(r"<[^>]+>", " ", row)


def test_the_index_links_every_run_with_its_machine_date_versions_and_headline(tmp_path):
    results = tmp_path / "results"
    built, fresh = small_run(results / "built"), small_run(results / "fresh")
    move_machine(fresh, hostname="other", cpu_model="Intel Xeon")
    (built / "report").mkdir()
    (built / "report" / "report.html").write_text("<html></html>")
    (built / "stats").mkdir()
    (built / "stats" / "comparisons.csv").write_text(
        "run,pair_id,ratio,ratio_ci_low,ratio_ci_high,verdict,exploratory\n"
        "built,p1,0.7,0.6,0.8,pytorch_faster,False\n"
        "built,p2,1.0,0.97,1.03,equivalent,False\n")
    assert main(["compare", str(built), str(fresh)]) == 0
    assert main(["index", str(results)]) == 0
    html = (results / "index.html").read_text()
    assert '<a href="built/report/report.html">built</a>' in html
    row = _row(html, "built")
    day = json.loads(next(built.glob("cells/**/trial-1.json")).read_text())["started_at"][:10]
    for fact in ("vm: AMD EPYC (2 cores)", day, "PyTorch 2.14.1", "TensorFlow 2.21.0",
                 "16 trials, 16 ok",
                 "PyTorch faster in 1 of 2 comparisons, TensorFlow in 0, equivalent in 1"):
        assert fact in row
    row = _row(html, "fresh")
    assert "no report yet" in row and f"fwbench rebuild {fresh.as_posix()}" in row
    assert "other: Intel Xeon (2 cores)" in row and "no statistics yet" in row
    assert '<a href="compare-built-fresh/compare.html">compare-built-fresh</a>' in html
