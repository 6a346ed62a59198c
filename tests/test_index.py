"""`fwbench index`: results/index.html lists every run with a link to its report, its machine,
date, versions and headline, and every comparison `fwbench compare` wrote beside them."""

from __future__ import annotations

import json
import re

import pandas as pd

from fwbench.analysis.run_folder import trial_files
from fwbench.cli import main
from tests.reference_runs import REFERENCE, copy_shipped, move_machine, small_run


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
                 "14 trials, 14 ok",
                 "PyTorch faster in 1 of 2 comparisons, TensorFlow in 0, equivalent in 1"):
        assert fact in row
    row = _row(html, "fresh")
    assert "no report yet" in row and f"fwbench rebuild {fresh.as_posix()}" in row
    assert "other: Intel Xeon (2 cores)" in row and "no statistics yet" in row
    assert '<a href="compare-built-fresh/compare.html">compare-built-fresh</a>' in html


def test_shipped_runs_read_their_recorded_tables_and_a_corrupt_run_is_listed_as_unreadable(
        tmp_path, capsys):
    """As in a fresh clone, where git gives a shipped run its recorded/ tables but no tables/
    or stats/; a run whose trial file was cut short is listed with why, the others indexed."""
    results = tmp_path / "results"
    shipped = copy_shipped(REFERENCE, tmp_path)
    assert not (shipped / "stats").exists() and (shipped / "recorded" / "stats").is_dir()
    broken = small_run(results / "broken")
    trial = trial_files(broken)[0]
    trial.write_text(trial.read_text()[:200])
    assert main(["index", str(results)]) == 0
    html = (results / "index.html").read_text()
    compared = len(pd.read_csv(shipped / "recorded" / "stats" / "comparisons.csv"))
    trials = len(pd.read_parquet(shipped / "recorded" / "tables" / "trials.parquet"))
    row = _row(html, "reference")
    assert f"{trials} trials" in row and f"of {compared} comparisons" in row
    assert "no statistics yet" not in row
    row = _row(html, "broken")
    assert f"unreadable: cannot read trial result {trial}: not valid JSON" in row
    err = capsys.readouterr().err
    assert f"fwbench index: broken is listed as unreadable: cannot read trial result {trial}" in err
