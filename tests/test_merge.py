"""`fwbench merge RUN... --into NEW`: the trials of several runs of one config in one run, each
keeping its origin and its pairs; the analysis per origin and the pooled view only where the
origins agree; the merged run rebuilds with its section per machine. The runs are copies of the
reference run's trial files (lenet5 inference at its smallest batch), one moved to another
machine."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fwbench.analysis.merge import merge_runs
from fwbench.analysis.origins import pooled_comparisons
from fwbench.analysis.run_folder import trial_files
from fwbench.errors import FwbenchError
from tests.reference_runs import move_machine, slow_down, small_run

CELL = "cells/throughput/cpu/{}/lenet5/infer-b4-1x28x28-fp32-idiomatic-matched"


def measured_later(run: Path, days: int = 1) -> None:
    """The trials of ``run`` as if measured ``days`` later: other measurements than the
    reference's, which merge would refuse to count twice."""
    for path in trial_files(run):
        result = json.loads(path.read_text())
        for key in ("started_at", "ended_at"):
            result[key] = (datetime.fromisoformat(result[key]) + timedelta(days=days)).isoformat()
        path.write_text(json.dumps(result))


@pytest.fixture
def sources(tmp_path) -> list[Path]:
    epyc, xeon = (small_run(tmp_path / "results" / n) for n in ("epyc", "xeon"))
    move_machine(xeon, hostname="other", cpu_model="Intel Xeon")
    measured_later(xeon)
    return [epyc, xeon]


def _result(run: Path, framework: str, k: int) -> dict:
    return json.loads((run / CELL.format(framework) / f"trial-{k}.json").read_text())


def test_trials_keep_their_origin_and_their_pairs(sources, tmp_path, capsys):
    from fwbench.cli import main

    merged = tmp_path / "results" / "both"
    assert main(["merge", *map(str, sources), "--into", str(merged)]) == 0
    assert "fwbench rebuild" in capsys.readouterr().err
    n = yaml.safe_load((sources[0] / "config.yaml").read_text())["trials"]  # 7 a source
    for framework in ("pytorch", "tensorflow"):
        folder = merged / CELL.format(framework)
        assert sorted(int(p.name[6:-5]) for p in folder.glob("trial-*[0-9].json")) == \
            list(range(1, 2 * n + 1))
        assert len(list(folder.glob("trial-*.env.json"))) == 2 * n
        for k in (3, n + 3):  # trial 3 of each source
            result = _result(merged, framework, k)
            origin = "epyc" if k <= n else "xeon"
            assert result["run"] == origin and result["trial"] == k
            assert result["origin"]["trial"] == 3 and result["origin"]["run"] == "default"
            assert result["iteration_ns"] == _result(sources[k > n], framework, 3)["iteration_ns"]
    # a pair stays a pair: trial k of both frameworks came from one source's trial pair
    assert _result(merged, "pytorch", n + 3)["origin"] == {
        **_result(merged, "tensorflow", n + 3)["origin"], "hostname": "other"}
    config = yaml.safe_load((merged / "config.yaml").read_text())
    assert config["run"] == "both" and config["trials"] == 2 * n
    # the sources' A/A controls checked their own sittings and stay behind
    assert config["controls"] == [] and not list(merged.glob("cells/**/*-aa-[ab]"))
    with open(merged / "origins.csv", newline="") as f:
        origins = list(csv.DictReader(f))
    assert [(o["origin"], o["trials"], o["hostname"], o["cpu_model"]) for o in origins] == [
        ("epyc", f"1-{n}", "vm", "AMD EPYC"), ("xeon", f"{n + 1}-{2 * n}", "other", "Intel Xeon")]
    assert (merged / "environment" / "idle.json").is_file()
    assert (merged / "origins" / "xeon" / "config.yaml").is_file()


def test_runs_that_cannot_be_merged_are_refused_before_anything_is_written(sources, tmp_path):
    into = tmp_path / "results" / "both"
    other = small_run(tmp_path / "results" / "other")
    config = yaml.safe_load((other / "config.yaml").read_text())
    (other / "config.yaml").write_text(yaml.safe_dump({**config,
                                                       "iterations": config["iterations"] + 20}))
    with pytest.raises(FwbenchError, match="different configs.*iterations"):
        merge_runs([sources[0], other], into)
    (sources[1] / "config.yaml").unlink()
    with pytest.raises(FwbenchError, match="config.yaml is missing"):
        merge_runs(sources, into)
    lenet_only = tmp_path / "results" / "lenet"
    small_run(lenet_only)
    config = yaml.safe_load((lenet_only / "config.yaml").read_text())
    (lenet_only / "config.yaml").write_text(yaml.safe_dump({**config, "batch_sizes": [2, 4]}))
    with pytest.raises(FwbenchError, match="different configs.*batch_sizes"):
        merge_runs([sources[0], lenet_only], into)
    assert not into.exists()


def test_the_same_trials_passed_twice_are_refused(sources, tmp_path):
    """A copy of a run is not a second machine: its trials would count twice."""
    copy = Path(shutil.copytree(sources[0], tmp_path / "results" / "copy"))
    move_machine(copy, hostname="other", cpu_model="Intel Xeon")  # even under another host
    into = tmp_path / "results" / "both"
    for runs in ([sources[0], copy], [sources[0], sources[0]], [*sources, copy]):
        with pytest.raises(FwbenchError, match="hold the same trials .* merge each run once"):
            merge_runs(runs, into)
    assert not into.exists()


def test_the_pooled_ratio_only_where_the_origins_agree():
    def origin(run, ratio, low, high, verdict):
        return {"run": run, "pair_id": "p", "ratio": ratio, "ratio_ci_low": low,
                "ratio_ci_high": high, "ratio_ci_level": 0.99, "n_pairs_used": 8,
                "rope_high": 1.05, "verdict": verdict, "exploratory": False}

    agree = pd.DataFrame([origin("a", 0.70, 0.60, 0.80, "pytorch_faster"),
                          origin("b", 0.72, 0.62, 0.84, "pytorch_faster")])
    row = pooled_comparisons(agree).iloc[0]
    assert row["pooled"] and row["verdict"] == "pytorch_faster"
    assert 0.70 < row["ratio"] < 0.72 and row["ratio_ci_high"] - row["ratio_ci_low"] < 0.2
    disagree = pd.DataFrame([origin("a", 0.70, 0.60, 0.80, "pytorch_faster"),
                             origin("b", 1.40, 1.25, 1.55, "tensorflow_faster")])
    row = pooled_comparisons(disagree).iloc[0]
    assert not row["pooled"] and row["verdict"] == "not pooled"
    assert row["heterogeneity_p"] < 0.05 and "the origins disagree" in row["note"]
    assert pooled_comparisons(agree.iloc[:1]).empty  # one origin: nothing to pool


def test_the_spread_between_origins_is_set_beside_the_spread_within_one():
    def origin(run, ratio, low, high, verdict):
        return {"run": run, "pair_id": "p", "ratio": ratio, "ratio_ci_low": low,
                "ratio_ci_high": high, "ratio_ci_level": 0.99, "n_pairs_used": 8,
                "rope_high": 1.05, "verdict": verdict, "exploratory": False}

    # Within: an interval of 8 pairs at 99 % spans 2 t(0.995, 7) SD/sqrt(8) in log.
    within = math.log(0.80 / 0.60) / (2 * 3.4995) * math.sqrt(8)
    agree = pooled_comparisons(pd.DataFrame([origin("a", 0.70, 0.60, 0.80, "pytorch_faster"),
                                             origin("b", 0.70, 0.60, 0.80, "pytorch_faster")]))
    assert agree.iloc[0]["within_sd"] == pytest.approx(within, rel=1e-3)
    assert agree.iloc[0]["between_sd"] == 0.0 and agree.iloc[0]["holds_on"] == "every origin"
    apart = pooled_comparisons(pd.DataFrame([
        origin("amd", 0.70, 0.60, 0.80, "pytorch_faster"),
        origin("intel", 1.40, 1.20, 1.60, "tensorflow_faster"),
        origin("amd-2", 0.72, 0.62, 0.82, "pytorch_faster")])).iloc[0]
    # DerSimonian-Laird: the origins' log ratios spread far beyond their own intervals.
    assert apart["between_sd"] > 3 * apart["within_sd"] / math.sqrt(8)
    assert apart["holds_on"] == "pytorch_faster: amd, amd-2; tensorflow_faster: intel"


@pytest.mark.slow
def test_the_merged_run_rebuilds_with_a_section_per_machine(sources, tmp_path):
    slow_down(sources[1], "pytorch", 2.0)  # the second machine runs PyTorch twice as slowly
    merged = tmp_path / "results" / "both"
    merge_runs(sources, merged)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "fwbench", "rebuild", "results/both"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    trials = pd.read_parquet(merged / "tables" / "trials.parquet")
    assert trials.groupby("run")["hostname"].unique().map(list).to_dict() == {
        "epyc": ["vm"], "xeon": ["other"]}
    comparisons = pd.read_csv(merged / "stats" / "comparisons.csv")
    ratios = comparisons.set_index("run")["ratio"]
    assert ratios["xeon"] == pytest.approx(2 * ratios["epyc"], rel=1e-3)  # each origin alone
    html = (merged / "report" / "report.html").read_text()
    assert "Per machine" in html and "Origin epyc" in html and "Origin xeon" in html
    assert "the origins disagree" in html  # 0.72 against 1.44: no pooled ratio
    assert "SD between" in html and "SD within" in html
    assert "The origins reach different verdicts on" in html or \
        "The same decided verdict on every origin" in html
