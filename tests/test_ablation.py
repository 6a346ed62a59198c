"""The ablation: its points on each device, the decomposition of the gap (sequential and Shapley),
patel2023's counterfactual modes, the generated "why" paragraph and the report's section.

Framework-free and fast: the trials tables here are built by hand with known effects, so every
contribution has a value to recover. The real CPU run is in tests/test_profiling.py and docs.
"""

import math

import numpy as np
import pandas as pd
import pytest

from fwbench.analysis import ablation as decomposition
from fwbench.errors import ConfigError
from fwbench.plan import ablation as ab
from fwbench.plan.cells import Cell
from fwbench.plan.profiles import FACTORS, matched_factors
from fwbench.report.inputs import normalize_axes
from fwbench.report.sections import why as why_section

CPU_FACTORS = ["threads", "tf32", "cudnn_autotune", "layout", "determinism", "memory_growth",
               "mode=eager"]


def _cell(profile, device="cpu", mode="idiomatic", precision="fp32", framework="pytorch"):
    return Cell("ablation", device, framework, "lenet5", "train", 16, (1, 28, 28), precision,
                mode, profile)


# --- points and profiles ---------------------------------------------------------------------

def test_sequential_profiles_are_cumulative_and_end_at_matched():
    assert ab.ablation_profiles(["layout", "tf32"]) == [
        "defaults", "defaults+layout", "defaults+tf32+layout"]
    assert ab.ablation_profiles([f for f in FACTORS if f != "layout"])[-1] == "matched"
    # Forcing NHWC on both sides is not part of `matched`: a chain with it ends beyond matched.
    assert ab.ablation_profiles(list(FACTORS))[-1] == "defaults+" + "+".join(FACTORS)
    assert ab.ablation_profiles(["layout", "tf32"], "shapley") == [
        "defaults", "defaults+layout", "defaults+tf32", "defaults+tf32+layout"]
    # Every name the ablation produces is a profile the backends understand.
    for name in ab.ablation_profiles(list(FACTORS), "shapley"):
        assert matched_factors(name) <= set(FACTORS)


def test_cpu_points_vary_layout_and_mode_and_say_why_the_rest_cannot():
    points = ab.ablation_points({"factors": CPU_FACTORS}, "cpu")
    assert [p.factor for p in points] == [None, *CPU_FACTORS]
    start, *steps = points
    assert (start.profile, start.mode, start.precision, start.reason) == (
        "defaults", "idiomatic", "fp32", None)
    by_factor = {p.factor: p for p in steps}
    for factor in ("threads", "tf32", "cudnn_autotune", "memory_growth", "determinism"):
        assert by_factor[factor].reason, factor
        # The unsupported cell names the factor, and the trial child refuses it with the reason.
        assert factor in by_factor[factor].profile
        assert ab.unsupported_reason(_cell(by_factor[factor].profile)) .startswith(factor)
    assert "equal in both frameworks" in by_factor["threads"].reason
    assert "GPU" in by_factor["tf32"].reason and "GPU" in by_factor["memory_growth"].reason
    # Layout is the one settings factor the CPU varies; `matched` leaves each framework on its
    # own recommended layout, so forcing NHWC is a step of its own.
    assert (by_factor["layout"].profile, by_factor["layout"].reason) == ("defaults+layout", None)
    assert (by_factor["mode=eager"].profile, by_factor["mode=eager"].mode) == (
        "defaults+layout", "eager")


def test_gpu_points_vary_every_gpu_factor():
    points = ab.ablation_points({"factors": list(FACTORS)}, "cuda")
    assert [p.profile for p in points if not p.reason] == [
        "defaults", "defaults+tf32", "defaults+tf32+cudnn_autotune",
        "defaults+tf32+cudnn_autotune+layout",
        "defaults+tf32+cudnn_autotune+layout+memory_growth"]
    without_layout = ab.ablation_points({"factors": [f for f in FACTORS if f != "layout"]}, "cuda")
    assert without_layout[-1].profile == "matched"
    assert [p.factor for p in points if p.reason] == ["determinism"]
    assert ab.unsupported_reason(_cell("defaults+tf32", device="cuda")) is None
    assert ab.unsupported_reason(_cell("defaults+tf32", device="cpu")).startswith("tf32 on cpu")
    assert ab.unsupported_reason(_cell("matched", device="cpu")) is None


def test_shapley_points_are_every_subset_of_what_the_device_varies():
    points = ab.ablation_points({"factors": ["tf32", "layout", "mode=eager"],
                                 "order": "shapley"}, "cpu")
    measured = {(p.profile, p.mode) for p in points if not p.reason}
    assert measured == {("defaults", "idiomatic"), ("defaults+layout", "idiomatic"),
                        ("defaults", "eager"), ("defaults+layout", "eager")}
    assert [p.factor for p in points if p.reason] == ["tf32"]


def test_fp16_on_the_cpu_is_an_unsupported_step_and_the_chain_goes_on():
    points = ab.ablation_points({"factors": ["precision=fp16", "layout"]}, "cpu")
    assert points[1].precision == "fp16" and "GPU" in points[1].reason
    assert (points[2].profile, points[2].precision, points[2].reason) == (
        "defaults+layout", "fp32", None)


@pytest.mark.parametrize("ablation, words", [
    ({"factors": []}, "at least one"),
    ({"factors": ["speed"]}, "'speed' is not a factor"),
    ({"factors": ["mode=eager", "mode=compiled"]}, "at most one mode="),
    ({"factors": ["mode=idiomatic"]}, "is the base mode"),
    ({"factors": ["layout"], "order": "random"}, "ablation.order"),
    ({"factors": ["layout", "layout"]}, "twice"),
])
def test_bad_ablation_configs_name_the_key(ablation, words):
    with pytest.raises(ConfigError, match=words):
        ab.validate_ablation(ablation)


# --- decomposition ---------------------------------------------------------------------------

def _trials(times: dict, *, device="cpu", n=7, noise=0.01, seed=1, failed=()):
    """A trials table: ``times`` maps (profile, mode, precision) to (PyTorch ns, TensorFlow ns);
    each arm gets ``n`` trial medians with a little multiplicative noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for (profile, mode, precision), pair in times.items():
        for framework, t in zip(("pytorch", "tensorflow"), pair):
            cell = Cell("ablation", device, framework, "lenet5", "train", 16, (1, 28, 28),
                        precision, mode, profile)
            for k in range(1, n + 1):
                bad = (profile, mode, framework) in failed
                rows.append({
                    "run": "r", "cell_id": cell.id, "pair_id": cell.pair_id, **cell.to_dict(),
                    "input_shape": cell.shape_name, "trial": k,
                    "status": "error" if bad else "ok",
                    "message": "RuntimeError: boom" if bad else "",
                    "median_ns": None if bad else t * math.exp(rng.normal(0, noise)),
                })
    return pd.DataFrame(rows)


def _rows(table, kind):
    return table[table["row"] == kind].set_index("factor") if kind == "factor" else \
        table[table["row"] == kind].iloc[0]


def test_sequential_decomposition_recovers_known_effects_and_adds_up():
    # Defaults: PyTorch 2.0 ms against TensorFlow 1.0 ms. Matching the layout makes PyTorch
    # 1.25x faster; switching both to eager makes TensorFlow 1.5x slower. Residual: 1.6/1.5.
    times = {("defaults", "idiomatic", "fp32"): (2.0e6, 1.0e6),
             ("defaults+layout", "idiomatic", "fp32"): (1.6e6, 1.0e6),
             ("defaults+layout", "eager", "fp32"): (1.6e6, 1.5e6)}
    table = decomposition.decompose(_trials(times), {"factors": CPU_FACTORS})
    total, residual = _rows(table, "total"), _rows(table, "residual")
    factors = _rows(table, "factor")
    assert total["ratio"] == pytest.approx(2.0, rel=0.03)
    assert factors.loc["layout", "contribution"] == pytest.approx(math.log(1.25), abs=0.02)
    assert factors.loc["mode=eager", "contribution"] == pytest.approx(math.log(1.5), abs=0.02)
    assert residual["ratio"] == pytest.approx(1.6 / 1.5, rel=0.03)
    measured = factors[factors["status"] == "measured"]
    assert measured["contribution"].sum() + residual["contribution"] == pytest.approx(
        total["contribution"])
    for _, r in measured.iterrows():
        assert r["contribution_ci_low"] <= r["contribution"] <= r["contribution_ci_high"]
    assert factors.loc["layout", "share"] == pytest.approx(math.log(1.25) / math.log(2), abs=0.03)
    # The factors the CPU cannot vary are rows with their reason, not silent zeros.
    for factor in ("threads", "tf32", "cudnn_autotune", "determinism", "memory_growth"):
        assert factors.loc[factor, "status"] == "unsupported"
        assert factors.loc[factor, "reason"]
        assert pd.isna(factors.loc[factor, "contribution"])
    assert "sequential" in total["method"] and "bootstrap" in total["method"]


def test_a_failed_step_is_not_measured_with_its_message_and_the_next_step_says_so():
    times = {("defaults", "idiomatic", "fp32"): (2.0e6, 1.0e6),
             ("defaults+layout", "idiomatic", "fp32"): (1.6e6, 1.0e6),
             ("defaults+layout", "eager", "fp32"): (1.6e6, 1.5e6)}
    trials = _trials(times, device="cuda", failed=[("defaults+layout", "idiomatic", "pytorch")])
    table = decomposition.decompose(trials, {"factors": ["layout", "mode=eager"]})
    factors = _rows(table, "factor")
    assert factors.loc["layout", "status"] == "not measured"
    assert "boom" in factors.loc["layout", "reason"]
    assert "includes layout" in factors.loc["mode=eager", "note"]
    # The eager step is then compared with the start: both changes together.
    assert factors.loc["mode=eager", "contribution"] == pytest.approx(
        math.log(2.0) - math.log(1.6 / 1.5), abs=0.03)


def test_shapley_splits_an_interaction_evenly_where_sequential_gives_it_to_the_first():
    # Layout alone and eager alone change nothing; together they halve PyTorch's time.
    times = {("defaults", "idiomatic", "fp32"): (2.0e6, 1.0e6),
             ("defaults+layout", "idiomatic", "fp32"): (2.0e6, 1.0e6),
             ("defaults", "eager", "fp32"): (2.0e6, 1.0e6),
             ("defaults+layout", "eager", "fp32"): (1.0e6, 1.0e6)}
    trials = _trials(times, noise=0.001)
    shapley = _rows(decomposition.decompose(trials, {"factors": ["layout", "mode=eager"],
                                          "order": "shapley"}), "factor")
    assert shapley.loc["layout", "contribution"] == pytest.approx(math.log(2) / 2, abs=0.01)
    assert shapley.loc["mode=eager", "contribution"] == pytest.approx(math.log(2) / 2, abs=0.01)
    sequential = _rows(decomposition.decompose(trials, {"factors": ["layout", "mode=eager"]}),
                       "factor")
    assert sequential.loc["layout", "contribution"] == pytest.approx(0, abs=0.01)
    assert sequential.loc["mode=eager", "contribution"] == pytest.approx(math.log(2), abs=0.01)


def test_no_gap_means_no_shares():
    times = {("defaults", "idiomatic", "fp32"): (1.0e6, 1.0e6),
             ("defaults+layout", "idiomatic", "fp32"): (0.9e6, 1.0e6)}
    table = decomposition.decompose(_trials(times, noise=0.05, n=3), {"factors": ["layout"]})
    assert "contains 0" in _rows(table, "total")["note"]
    assert pd.isna(_rows(table, "factor").loc["layout", "share"])


def test_decomposition_ignores_groups_that_are_not_an_ablation():
    times = {("matched", "eager", "fp32"): (1.0e6, 1.0e6)}
    assert decomposition.decompose(_trials(times), {"factors": ["layout"]}).empty


# --- patel2023's counterfactuals -------------------------------------------------------------

def test_switching_tensorflow_to_eager_closes_a_graph_advantage():
    # TensorFlow's tf.function is 2x faster than PyTorch eager; TensorFlow eager is as fast as
    # PyTorch eager; torch.compile makes PyTorch 2x faster; XLA changes nothing.
    times = {("defaults", "idiomatic", "fp32"): (2.0e6, 1.0e6),
             ("defaults", "eager", "fp32"): (2.0e6, 2.0e6),
             ("defaults", "compiled", "fp32"): (1.0e6, 1.0e6)}
    gaps = decomposition.gap_tests(_trials(times)).set_index("counterfactual")
    assert gaps.loc["TensorFlow eager", "verdict"] == "closes the gap"
    assert gaps.loc["TensorFlow eager", "gap_closed"] == pytest.approx(1.0, abs=0.05)
    assert bool(gaps.loc["TensorFlow eager", "interleaved"])
    assert gaps.loc["PyTorch torch.compile", "verdict"] == "closes the gap"
    assert not bool(gaps.loc["PyTorch torch.compile", "interleaved"])  # two cell pairs
    assert gaps.loc["TensorFlow XLA", "verdict"] == "does not close the gap"
    assert gaps.loc["both compiled", "ratio"] == pytest.approx(1.0, rel=0.03)


def test_without_a_tensorflow_advantage_there_is_nothing_to_explain():
    times = {("defaults", "idiomatic", "fp32"): (1.0e6, 1.2e6),
             ("defaults", "eager", "fp32"): (1.0e6, 3.0e6)}
    gaps = decomposition.gap_tests(_trials(times))
    assert list(gaps["verdict"]) == ["no TensorFlow advantage to explain"]


# --- the paragraph, the figure, the report ---------------------------------------------------

ABLATION_TIMES = {("defaults", "idiomatic", "fp32"): (2.0e6, 1.0e6),
                  ("matched", "idiomatic", "fp32"): (1.6e6, 1.0e6),
                  ("matched", "eager", "fp32"): (1.6e6, 1.5e6),
                  ("matched", "compiled", "fp32"): (1.2e6, 1.0e6)}


def _profiles(table):
    """A profiles table (fwbench.analysis.profiles.collect_profiles' columns) for the ablation's
    cells."""
    from fwbench.analysis.profiles import PROFILE_COLUMNS
    from fwbench.measure.trace import CATEGORIES

    rows = []
    for (cell_id, pair_id, framework, profile, mode), _ in table.groupby(
            ["cell_id", "pair_id", "framework", "profile", "mode"]):
        host = 0.4 if framework == "pytorch" else 0.2
        for category in CATEGORIES:
            share = host if category == "host_overhead" else (1 - host) / (len(CATEGORIES) - 1)
            rows.append({"run": "r", "cell_id": cell_id, "pair_id": pair_id,
                         "experiment": "ablation", "device": "cpu", "framework": framework,
                         "model": "lenet5", "phase": "train", "batch_size": 16,
                         "input_shape": "1x28x28", "precision": "fp32", "mode": mode,
                         "profile": profile, "status": "ok", "message": "",
                         "category": category, "share": share, "ns_per_step": share * 2e6,
                         "wall_ns_per_step": 2e6})
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)


def test_the_why_paragraph_names_the_gap_the_factors_the_residual_and_the_profile():
    trials = _trials(ABLATION_TIMES)
    frames = decomposition.summarize_ablation(trials, {"factors": CPU_FACTORS}, n_boot=500)
    [paragraph] = why_section.explain(frames["ablation"], frames["gaps"], _profiles(trials))
    text = paragraph["text"]
    assert "PyTorch took 2.0" in text
    assert "layout" in text and "eager in both" in text
    assert "residual" in text and "threads are equal in every profile" in text
    assert "outside operators" in text and "40 %" in text
    assert "patel2023" in text and "TensorFlow eager" in text


def test_report_section_draws_the_waterfall_and_the_breakdown(tmp_path):
    from fwbench.report import render as report
    from fwbench.report.figures import why as why_figures

    trials = _trials(ABLATION_TIMES)
    frames = decomposition.summarize_ablation(trials, {"factors": CPU_FACTORS}, n_boot=300)
    profiles = _profiles(trials)
    water = why_figures.waterfall(frames["ablation"], tmp_path)
    breakdown = why_figures.time_breakdown(profiles, tmp_path)
    assert water.file and (tmp_path / water.file).stat().st_size > 1000
    assert breakdown.file and (tmp_path / breakdown.file).stat().st_size > 1000
    data = report.Inputs(trials=trials, cells=pd.DataFrame(), cell_stats=pd.DataFrame(),
                         comparisons=pd.DataFrame(), tests=pd.DataFrame(),
                         ablation=normalize_axes(frames["ablation"]),
                         gaps=normalize_axes(frames["gaps"]), profiles=profiles)
    why = why_section.context(report.Numbering(), data)
    assert why["decomposition"]["rows"] and why["gaps"]["rows"]
    assert any("TensorFlow eager" in s for s in why["patel"])
    [experiment] = why["experiments"]
    assert experiment["experiment"] == "ablation" and experiment["paragraphs"]


def test_report_without_an_ablation_says_so(tmp_path):
    from fwbench.report import render as report
    from fwbench.report.figures import why as why_figures

    empty = pd.DataFrame()
    assert "no ablation" in why_figures.waterfall(empty, tmp_path).reason
    assert "profiled no cell" in why_figures.time_breakdown(empty, tmp_path).reason
    data = report.Inputs(trials=empty, cells=empty, cell_stats=empty, comparisons=empty,
                         tests=empty)
    why = why_section.context(report.Numbering(), data)
    assert "no ablation" in why["absent"] and why["decomposition"]["number"] is None
