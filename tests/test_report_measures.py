"""The report's scaling over devices, achieved FLOP/s and one trial's telemetry trace: each
drawn from the tables the workflow writes for it, or left out with the reason without them.

The fixture run is tests/test_report.py's (CPU throughput cells); the tables added here are
made by the library functions the workflow's rules call.
"""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fwbench.analysis.claims import evaluate_claim, load_claims
from fwbench.analysis.flops import achieved_flops
from fwbench.analysis.scaling import summarize_distributed
from fwbench.analysis.telemetry_trace import trace_rows
from fwbench.report import render as report
from fwbench.report.sections import results
from tests.test_report import LEAKS, _need, _pdf_text, html_only, plain, section, visible, write_run

H100 = Path(__file__).parent / "fixtures" / "telemetry" / "h100"
MODELS = {"lenet5": {"num_classes": 10}, "resnet18": {"num_classes": 10}}


def _verdict(page: str, claim_id: str) -> tuple[str, str]:
    """A claim's verdict and what the report says this run measured."""
    table = htmllib.unescape(section(page, "tab-claims"))
    row = re.search(rf'<tr id="claim-{claim_id}">(.*?)</tr>', table, re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    verdict = re.search(r'class="verdict[^"]*">([^<]+)<', row).group(1)
    return verdict, " ".join(re.sub(r"<[^>]+>", "", cells[2]).split())


# --- distributed: two GPUs, both strategies, both frameworks ------------------------------------

def distributed_trials() -> pd.DataFrame:
    """Seven trials per cell: the multi-process strategies scale near-linearly and beat the
    single-process ones at two GPUs."""
    rng = np.random.default_rng(3)
    rows = []
    for framework in ("pytorch", "tensorflow"):
        for strategy, slowdown in (("single_process", 1.6), ("multi_process", 1.03)):
            for world in (1, 2):
                name = f"train-b32-3x32x32-fp32-eager-matched-{strategy}-w{world}"
                step = 1e8 * (slowdown if world == 2 else 1.0)
                for trial in range(1, 8):
                    rows.append({
                        "run": "fixture", "experiment": "distributed", "device": "cuda",
                        "framework": framework, "model": "resnet18", "phase": "train",
                        "batch_size": 32, "input_shape": "3x32x32", "precision": "fp32",
                        "mode": "eager", "profile": "matched", "strategy": strategy,
                        "world_size": world, "trial": trial, "status": "ok", "message": "",
                        "cell_id": f"distributed/cuda/{framework}/resnet18/{name}",
                        "pair_id": f"distributed/cuda/resnet18/{name}",
                        "median_ns": step * (1 + 0.01 * rng.standard_normal())})
    return pd.DataFrame(rows)


def distributed_cell_stats(trials: pd.DataFrame) -> pd.DataFrame:
    """cells.csv rows of the distributed cells: global samples per second, with an interval."""
    rows = []
    for _, group in trials.groupby("cell_id", sort=True):
        first = group.iloc[0]
        global_batch = first["batch_size"] * first["world_size"]
        median = group["median_ns"]
        rows.append({**first.drop(["trial", "status", "message", "median_ns"]).to_dict(),
                     "n_trials": len(group), "n_ok": len(group), "median_ns": median.median(),
                     "ci_low_ns": median.min(), "ci_high_ns": median.max(),
                     "throughput_sps": global_batch / median.median() * 1e9,
                     "throughput_ci_low_sps": global_batch / median.max() * 1e9,
                     "throughput_ci_high_sps": global_batch / median.min() * 1e9})
    return pd.DataFrame(rows)


def with_distributed(folder: Path, trials: pd.DataFrame | None) -> dict:
    """The fixture run's inputs plus stats/scaling.csv and stats/strategies.csv as the rule
    summarise_distributed writes them (and the distributed cells in cells.csv)."""
    inputs = write_run(folder)
    everything = pd.read_parquet(inputs["trials"])
    if trials is not None:
        stats = pd.concat([pd.read_csv(inputs["cell_stats"]), distributed_cell_stats(trials)])
        stats.to_csv(inputs["cell_stats"], index=False)
        everything = pd.concat([everything, trials])
    for name, frame in summarize_distributed(everything).items():
        inputs[name] = str(folder / f"{name}.csv")
        frame.to_csv(inputs[name], index=False)
    return inputs


def test_a_distributed_run_draws_scaling_compares_strategies_and_judges_patel2023(tmp_path):
    # on GPUs, each framework as it comes: patel2023's own setting, so its claims are judged
    paper = distributed_trials().assign(profile="defaults", mode="idiomatic")
    page = html_only(report.load_inputs(with_distributed(tmp_path, paper)), tmp_path)
    assert "figures/scaling.svg" in visible(page).images
    svg = (tmp_path / "figures" / "scaling.svg").read_text()
    assert "scaling efficiency" in svg and "devices or processes" in svg
    strategies = visible(section(page, "tab-strategies")).text
    assert "DistributedDataParallel / DataParallel" in strategies
    assert "MultiWorkerMirroredStrategy / MirroredStrategy" in strategies
    assert "DistributedDataParallel faster" in strategies
    assert "MultiWorkerMirroredStrategy faster" in strategies
    scaling = visible(section(page, "tab-scaling")).text
    # the caption names each verdict once; then the two multi- and single-process rows
    assert scaling.count("near-linear") == 3 and scaling.count("sub-linear") == 3
    verdict, ours = _verdict(page, "patel2023-ddp-faster")
    assert verdict == "confirmed"
    assert re.search(r"resnet18 at 2 devices: DistributedDataParallel / DataParallel throughput "
                     r"1\.5\d \[[\d.]+, [\d.]+\]( at [\d.]+ %)? \(DistributedDataParallel faster\)",
                     ours), ours
    verdict, ours = _verdict(page, "patel2023-ddp-linear")
    assert verdict == "confirmed"
    assert re.search(r"scaling efficiency 0\.9\d+ \[[\d.]+, [\d.]+\]( at [\d.]+ %)? "
                     r"\(near-linear\)", ours), ours
    assert "whole interval at or above 0.9" in ours
    # the cells of a model and phase at 1 and 2 devices are told apart wherever a figure lists them
    labels = "".join(p.read_text() for p in (tmp_path / "figures").glob("*.svg"))
    assert re.search(r"resnet18 train [^<]*\b1 process\b", labels)
    assert re.search(r"resnet18 train [^<]*\b2 processes\b", labels)
    text = visible(page).text
    assert re.search(r"3\.\d+ Beyond one device: scaling and strategies", text)
    assert not LEAKS.findall(text), LEAKS.findall(text)[:5]


def test_slower_ddp_contradicts_the_claims():
    trials = distributed_trials().assign(profile="defaults", mode="idiomatic")  # the paper's
    ddp = (trials["framework"] == "pytorch") & (trials["strategy"] == "multi_process") \
        & (trials["world_size"] == 2)
    trials.loc[ddp, "median_ns"] *= 2.5
    frames = summarize_distributed(trials)
    claims = {c["id"]: c for c in load_claims()["claims"]}
    faster = evaluate_claim(claims["patel2023-ddp-faster"], pd.DataFrame(),
                                   pd.DataFrame(), trials=trials, **frames)
    linear = evaluate_claim(claims["patel2023-ddp-linear"], pd.DataFrame(),
                                   pd.DataFrame(), trials=trials, **frames)
    assert faster["verdict"] == "contradicted" and "(DataParallel faster)" in faster["ours"]
    assert linear["verdict"] == "contradicted" and "(sub-linear)" in linear["ours"]


def test_a_run_without_distributed_cells_leaves_scaling_out_and_the_claims_not_measured(tmp_path):
    page = html_only(report.load_inputs(with_distributed(tmp_path, None)), tmp_path)
    absent = "this run has no distributed cell"
    left_out = plain(section(page, "unmeasured-list"))
    assert "Scaling over devices" in left_out and absent in left_out
    assert "config experiment" not in left_out      # a reader's words, not the config's keys
    assert "the scaling-efficiency table" in left_out and "the strategy comparison" in left_out
    assert 'id="fig-scaling"' not in page and 'id="tab-scaling"' not in page
    unjudged = htmllib.unescape(section(page, "tab-claims-unjudged"))
    row = re.search(r"<tr>((?:(?!</tr>).)*patel2023-ddp-faster.*?)</tr>", unjudged, re.S)[1]
    assert "not measured" in row and "patel2023-ddp-linear" in row
    assert "this run has no distributed cell" in plain(row)
    assert not LEAKS.findall(visible(page).text)


def test_distributed_cells_on_the_cpu_are_another_setting_and_only_failed_ones_not_measured():
    trials = distributed_trials().assign(device="cpu", profile="defaults", mode="idiomatic")
    cpu = summarize_distributed(trials)
    claims = {c["id"]: c for c in load_claims()["claims"]}
    result = evaluate_claim(claims["patel2023-ddp-linear"], pd.DataFrame(),
                                   pd.DataFrame(), trials=trials, **cpu)
    assert result["verdict"] == "measured in another setting"
    assert result["differs"] == ["device CPU (paper: GPU)"]
    failed = trials.assign(status="oom", message="CUDA out of memory", median_ns=None)
    frames = summarize_distributed(failed)
    result = evaluate_claim(claims["patel2023-ddp-faster"], pd.DataFrame(),
                                   pd.DataFrame(), trials=failed, **frames)
    assert result["verdict"] == "not measured" and "CUDA out of memory" in result["ours"]


# --- achieved FLOP/s ----------------------------------------------------------------------------

def with_flops(folder: Path, peak_flops: dict) -> dict:
    """The fixture run's inputs plus stats/flops.csv as the rule summarise_flops writes it."""
    inputs = write_run(folder)
    frame = achieved_flops(pd.read_csv(inputs["cell_stats"]), pd.read_parquet(inputs["trials"]),
                           MODELS, peak_flops)
    inputs["flops"] = str(folder / "flops.csv")
    frame.to_csv(inputs["flops"], index=False)
    return inputs


def _figures(inputs: dict, folder: Path) -> dict:
    data = report.load_inputs(inputs)
    folder.mkdir(exist_ok=True)
    return report.make_figures(data, folder, report.failure_reasons(data.trials))


def test_achieved_flops_without_a_cpu_peak_draws_the_rate_and_says_why_no_fraction(tmp_path):
    figure = _figures(with_flops(tmp_path, {"cpu": None, "cuda": None}), tmp_path / "f")["flops"]
    assert figure.file == "achieved_flops.svg"
    svg = (tmp_path / "f" / figure.file).read_text()
    assert "achieved GFLOP/s (log scale)" in svg and "of the device's peak" not in svg
    assert "training 3 × forward" in figure.caption
    assert ("No fraction of peak for 15 of 15 cells: no peak rate for the CPU is "
            "known.") in figure.caption                       # stats/flops.csv says how to set it


def test_achieved_flops_with_a_configured_peak_draws_the_fraction(tmp_path):
    figure = _figures(with_flops(tmp_path, {"cpu": 2e10, "cuda": None}), tmp_path / "f")["flops"]
    svg = (tmp_path / "f" / figure.file).read_text()
    assert "% of the device's peak" in svg
    assert "as a share of the peak (config `peak_flops.cpu`)" in figure.caption
    assert "No fraction of peak" not in figure.caption


def test_achieved_flops_without_its_table_is_left_out_with_the_reason(tmp_path):
    figure = _figures(write_run(tmp_path), tmp_path / "f")["flops"]
    assert figure.file is None
    assert figure.reason == ("Not drawn: the statistics computed no achieved FLOP/s "
                             "(stats/flops.csv, rule summarise_flops).")


# --- one trial's telemetry trace ---------------------------------------------------------------

CELL = "throughput/cuda/pytorch/resnet18/train-b8-3x32x32-fp32-idiomatic-matched"


def with_trace(folder: Path) -> dict:
    """The fixture run's inputs plus tables/telemetry_trace.parquet of a real H100 trial."""
    inputs = write_run(folder)
    markers = json.loads((H100 / "markers.json").read_text())["markers_ns"]
    trace = trace_rows(H100 / "trial-0.telemetry.csv", markers, {"cell_id": CELL, "trial": 3})
    inputs["telemetry_trace"] = str(folder / "telemetry_trace.parquet")
    trace.to_parquet(inputs["telemetry_trace"])
    return inputs


def test_telemetry_trace_of_a_real_gpu_trial_is_drawn_with_its_phases(tmp_path):
    figure = _figures(with_trace(tmp_path), tmp_path / "f")["telemetry"]
    assert figure.file == "telemetry_trace.svg"
    svg = (tmp_path / "f" / figure.file).read_text()
    for text in ("GPU power (W)", "temperature (°C)", "utilization (%)",
                 "seconds from the cold-start iteration", "warm-up", "measure"):
        assert text in svg, text
    assert f"trial 3 of {CELL}, the longest ok trial of the run" in figure.caption
    assert figure.caption.endswith("No reading of: CPU temperature.")


def test_telemetry_trace_without_its_table_is_left_out_with_the_reason(tmp_path):
    figure = _figures(write_run(tmp_path), tmp_path / "f")["telemetry"]
    assert figure.file is None and figure.reason == f"Not drawn: {results.TRACE_ABSENT}."


# --- all three in the PDF -----------------------------------------------------------------------

def test_the_pdf_carries_scaling_flops_and_the_trace(tmp_path):
    _need("pdftotext", "poppler-utils")
    inputs = with_distributed(tmp_path / "tables", distributed_trials())
    inputs["flops"] = with_flops(tmp_path / "flops", {"cpu": 2e10, "cuda": None})["flops"]
    inputs["telemetry_trace"] = with_trace(tmp_path / "trace")["telemetry_trace"]
    out = tmp_path / "report"
    report.build_report(inputs, run="fixture", html=str(out / "report.html"),
                        pdf=str(out / "report.pdf"), figures=str(out / "figures"))
    text = _pdf_text(out / "report.pdf")
    assert not LEAKS.findall(text), LEAKS.findall(text)[:5]
    for caption in ("Scaling over devices: left, throughput", "Achieved FLOP/s and fraction of "
                    "peak: FLOPs per sample", "Telemetry trace of one trial: trial 3",
                    "Beyond one device"):
        assert caption in text, caption
    page = (out / "report.html").read_text()
    numbers = [int(n) for n in re.findall(r'<span class="label">Figure (\d+)\.</span>', page)]
    assert numbers == list(range(1, len(numbers) + 1))
    for name in ("scaling.svg", "achieved_flops.svg", "telemetry_trace.svg"):
        assert (out / "figures" / name).stat().st_size > 0


@pytest.mark.parametrize("rules, name", [("statistics", "summarise_distributed"),
                                         ("statistics", "summarise_flops"),
                                         ("tables", "collect_telemetry_trace")])
def test_the_report_rule_reads_what_each_rule_writes(rules, name):
    folder = Path(__file__).parent.parent / "rules"
    assert f"rule {name}:" in (folder / f"{rules}.smk").read_text()
    assert f"rules.{name}.output." in (folder / "report.smk").read_text()


def test_the_distributed_claims_name_a_known_strategy():
    from fwbench.plan.strategies import STRATEGIES
    field = {"strategy_comparison": "expect", "scaling": "strategy"}
    claims = [c for c in load_claims()["claims"] if c["test"]["kind"] in field]
    assert {c["id"] for c in claims} == {"patel2023-ddp-faster", "patel2023-ddp-linear"}
    for claim in claims:
        assert claim["test"][field[claim["test"]["kind"]]] in STRATEGIES, claim["id"]
