"""fwbench/measure/distributed.py and frameworks/*/distributed.py.

Real runs on the CPU: DistributedDataParallel over gloo and MultiWorkerMirroredStrategy, each with
2 rank processes and LeNet-5 on a tiny batch. After one step the synchronized gradient of every
rank must equal the gradient one process computes over the concatenated global batch. The
single-process strategies (DataParallel, MirroredStrategy) need GPUs and are checked here only
for the reason they give without one.
"""

from __future__ import annotations

import ast
import math
import threading
import time

import numpy as np
import pandas as pd
import pytest

from fwbench.analysis import scaling
from fwbench.errors import BackendError, ConfigError, Unsupported
from fwbench.measure import distributed
from fwbench.measure.frameworks.base import STEP_SCOPES
from fwbench.measure.harness import Schedule
from fwbench.plan import strategies
from fwbench.plan.config import validate
from fwbench.plan.models import synthetic_batch
from fwbench.plan.sweep import Plan
from tests.conftest import REPO, TINY_CONFIG

BATCH = 3  # per rank; odd, so a wrong shard or a wrong average cannot cancel out
WORLD = 2


def settings(framework: str, strategy: str = "multi_process", world_size: int = WORLD, **cell):
    """A distributed trial's settings, as the plan writes them, with the warm-up it takes."""
    config = validate({**TINY_CONFIG, "experiment": "distributed", "frameworks": [framework],
                       "phases": ["train"], "batch_sizes": [BATCH], "iterations": 3,
                       "warmup": {"min": 1, "max": 2, "calibration_s": 0},
                       "blocks": {"count": 1, "size": 2, "min_time_s": 0, "run_time_s": 0},
                       "distributed": {"strategies": [strategy], "world_sizes": [world_size]}})
    plan = Plan.from_config(config)
    params = plan.trial_settings(plan.trials[0]).to_dict()
    return {**params, "cell": {**params["cell"], **cell},
            "warmup": {"iterations": 2, "steady": None}}


# --- framework-free ------------------------------------------------------------------------

def test_strategy_names_resolve_per_framework():
    assert strategies.resolve_strategy("multi_process", "tensorflow") == "multiworker"
    assert strategies.resolve_strategy("single_process", "pytorch") == "dp"
    assert strategies.resolve_strategy("ddp", "pytorch") == "ddp"
    assert strategies.strategy_pair("mirrored") == "single_process"
    with pytest.raises(ConfigError, match="for tensorflow, got 'ddp'"):
        strategies.resolve_strategy("ddp", "tensorflow")


@pytest.mark.parametrize("framework,name", [("pytorch", "DataParallel"),
                                            ("tensorflow", "MirroredStrategy")])
def test_single_process_strategies_are_unsupported_without_cuda(framework, name):
    with pytest.raises(Unsupported, match=f"{name} needs"):
        distributed.run_distributed(settings(framework, "single_process"))


def test_inference_is_unsupported():
    reason = strategies.unsupported_reason(settings("pytorch", phase="infer")["cell"])
    assert "training steps" in reason


def test_shards_are_what_distributed_sampler_gives():
    from torch.utils.data import DistributedSampler

    for rank in range(3):
        sampler = DistributedSampler(range(12), num_replicas=3, rank=rank, shuffle=False)
        assert distributed.shard_indices(12, 3, rank) == list(sampler)


def test_rank_decisions_follow_the_slowest_rank():
    """The time budgets and the block size are decided on the maximum over ranks, so every
    rank steps equally often; each timed region is framed by a barrier."""
    now = [0]
    calls = []

    def step():
        calls.append("step")
        now[0] += 10  # this rank's steps take 10 ns, the other rank's 30

    m = distributed.measure_ranks(
        step, lambda: None, lambda: calls.append("barrier"), lambda t: [t, 3 * t],
        Schedule(warmup=3, iterations=1, min_run_time_s=100e-9, blocks=1, block_time_s=60e-9),
        clock=lambda: now[0])
    # 100 ns of the slowest rank's steps is 4 of them; a 60 ns block of its steps, 20% to
    # spare, is 3 (a pilot of 3 lasts 90 ns there).
    assert len(m.warmup_ns) == 3 and len(m.iteration_ns) == 4 and m.block_size == 3
    assert m.pilot_blocks == [[3, 90]]
    assert all(slow == 3 * own for own, slow in m.iteration_ns + m.block_ns)
    assert calls.count("step") == 1 + 3 + 4 + 3 + 3
    assert calls.count("barrier") == 5 + 1 + 3 + 4 + 1 + 1  # markers, every timed region
    assert list(m.markers_ns) == ["cold_start", "warmup", "measure", "blocks", "end"]


def _trials(times_by_world: dict[int, list[float]], strategy="multi_process", framework="pytorch"):
    rows = []
    for world, medians in times_by_world.items():
        for k, median in enumerate(medians, 1):
            rows.append({"run": "t", "experiment": "distributed", "device": "cuda",
                         "framework": framework, "model": "resnet18", "phase": "train",
                         "batch_size": 32, "input_shape": "3x32x32", "precision": "fp32",
                         "mode": "eager", "profile": "matched", "strategy": strategy,
                         "world_size": world, "trial": k, "status": "ok", "message": "",
                         "median_ns": median})
    return rows


def test_scaling_efficiency_and_the_near_linear_verdict():
    rng = np.random.default_rng(0)
    base = list(1e8 * (1 + 0.01 * rng.standard_normal(8)))
    linear = [t * (1 + 0.01 * rng.standard_normal()) for t in base]   # same step time: linear
    halved = [2 * t for t in base]                                      # twice as slow: 0.5
    rows = scaling_efficiency_rows({1: base, 2: linear, 4: halved})
    two, four = rows.iloc[0], rows.iloc[1]
    assert (two.world_size, four.world_size) == (2, 4)
    assert two.efficiency == pytest.approx(1.0, abs=0.02) and two.verdict == "near-linear"
    assert two.efficiency_ci_low <= two.efficiency_hl <= two.efficiency_ci_high
    assert two.speedup == pytest.approx(2.0, abs=0.05)
    assert four.efficiency == pytest.approx(0.5, abs=0.02) and four.verdict == "sub-linear"
    assert four.ci_attained and four.ci_level >= 0.95


def scaling_efficiency_rows(times):
    return scaling.scaling_efficiency(pd.DataFrame(_trials(times)))


def test_scaling_efficiency_without_a_baseline_is_not_measured():
    rows = _trials({2: [1e8, 1e8]}) + [{**_trials({1: [1e8]})[0], "status": "oom",
                                        "message": "CUDA out of memory", "median_ns": None}]
    row = scaling.scaling_efficiency(rows).iloc[0]
    assert row.verdict == "not measured"
    assert "no ok trial at world size 1" in row.note and "oom" in row.note
    few = scaling.scaling_efficiency(_trials({1: [1e8, 1e8], 2: [1e8, 1e8]})).iloc[0]
    assert few.verdict == "inconclusive" and not few.ci_attained


def test_strategy_comparison_names_the_faster_strategy():
    dp = _trials({2: [2e8] * 6}, "single_process")
    ddp = _trials({2: [1e8 * (1 + 0.01 * k) for k in range(6)]}, "multi_process")
    row = scaling.strategy_comparisons(dp + ddp).iloc[0]
    assert (row.single_process, row.multi_process) == ("dp", "ddp")
    assert row.ratio == pytest.approx(2 / 1.025, rel=0.01)
    assert row.faster == "ddp" and row.ratio_ci_low > 1


def test_summarize_distributed_gives_both_tables_and_empty_ones_without_a_distributed_trial():
    steps = [1e8 * (1 + 0.01 * k) for k in range(6)]
    rows = (_trials({1: steps, 2: steps}) + _trials({1: steps, 2: [2 * t for t in steps]},
                                                    "single_process"))
    other = {**rows[0], "experiment": "throughput", "strategy": "none", "world_size": 1}
    frames = scaling.summarize_distributed(pd.DataFrame(rows + [other]))
    table, strategies = frames["scaling"], frames["strategies"]
    assert list(table.columns) == scaling.EFFICIENCY_COLUMNS
    assert dict(zip(table["strategy"], table["verdict"])) == {
        "multi_process": "near-linear", "single_process": "sub-linear"}
    assert list(strategies["world_size"]) == [1, 2]
    assert list(strategies["faster"]) == ["neither", "ddp"]
    empty = scaling.summarize_distributed(pd.DataFrame([other]))
    assert empty["scaling"].empty and list(empty["scaling"].columns) == \
        scaling.EFFICIENCY_COLUMNS
    assert empty["strategies"].empty and list(empty["strategies"].columns) == \
        scaling.COMPARISON_COLUMNS


def test_framework_modules_are_mirror_images():
    def names(framework):
        path = REPO / f"fwbench/measure/frameworks/{framework}/distributed.py"
        tree = ast.parse(path.read_text())
        top = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        return top, [n.name for n in cls.body if isinstance(n, ast.FunctionDef)]

    torch_top, torch_methods = names("pytorch")
    tf_top, tf_methods = names("tensorflow")
    assert torch_methods == tf_methods
    assert [n for n in torch_top if not n.startswith("_")] == \
        [n for n in tf_top if not n.startswith("_")]


def diverges_or_waits(job):
    """A rank entry: rank 1 fails, rank 0 waits for it, as in a collective, until killed."""
    if job["rank"] == 1:
        raise ValueError("the loss diverged")
    time.sleep(120)


def test_a_failing_rank_fails_the_trial_with_its_message_and_the_others_are_killed(monkeypatch):
    # The ranks run through the trial's own launcher: rank 1's error is the trial's; rank 0,
    # waiting for it, is killed after the grace and named last.
    monkeypatch.setattr(distributed, "RANK_ENTRY", "tests.test_distributed:diverges_or_waits")
    monkeypatch.setattr(distributed, "RANK_GRACE_S", 0.5)
    start = time.monotonic()
    with pytest.raises(BackendError, match=r"^rank 1 of 2: ValueError: the loss diverged$"):
        distributed.run_distributed(settings("pytorch"))
    assert time.monotonic() - start < 60


def test_ranks_leave_together_after_the_last_barrier(tmp_path, monkeypatch):
    """No rank returns (and so exits) before every rank is past the last barrier, whose last
    exchange may still be reading from it; a rank that never comes is an error in time."""
    left = []

    def leave(rank):
        distributed._leave_together(str(tmp_path), rank, 2)
        left.append(rank)

    first = threading.Thread(target=leave, args=(0,))
    first.start()
    time.sleep(0.2)
    assert left == []           # rank 0 waits for rank 1
    leave(1)
    first.join(timeout=5)
    assert sorted(left) == [0, 1]
    monkeypatch.setattr(distributed, "RANK_GRACE_S", 0.1)
    with pytest.raises(BackendError, match="not every rank of 3 got past the last barrier"):
        distributed._leave_together(str(tmp_path), 0, 3)


def test_a_rank_that_cannot_run_makes_the_trial_unsupported_with_its_reason():
    with pytest.raises(Unsupported, match="fp16 mixed precision needs a GPU"):
        distributed.run_distributed(settings("pytorch", precision="fp16"))


# --- real distributed runs on the CPU --------------------------------------------------------

def _global_batch():
    return synthetic_batch(BATCH * WORLD, (1, 28, 28), 10, 0, model="lenet5")


def _torch_reference(initial):
    import torch

    from fwbench.measure.frameworks.pytorch import models

    model = models.build_model("lenet5", (1, 28, 28), 10)
    with torch.no_grad():
        for p, value in zip(model.parameters(), initial, strict=True):
            p.copy_(torch.tensor(value))
    x, y = models.batch_tensors("lenet5", *_global_batch(), torch.device("cpu"))
    models.loss_fn("lenet5")(model(x), y).backward()
    return [p.grad.numpy() for p in model.parameters()]


def _tensorflow_reference(initial):
    import tensorflow as tf

    from fwbench.measure.frameworks.tensorflow import models

    model = models.build_model("lenet5", (1, 28, 28), 10)
    for v, value in zip(model.trainable_variables, initial, strict=True):
        v.assign(np.asarray(value, dtype=np.float32))
    x, y = models.batch_tensors("lenet5", *_global_batch(), "/CPU:0")
    with tf.GradientTape() as tape:
        loss = models.loss_fn("lenet5")(y, model(x, training=True))
    return [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]


REFERENCES = {"pytorch": _torch_reference, "tensorflow": _tensorflow_reference}


@pytest.fixture(scope="module", params=["pytorch", "tensorflow"])
def real_run(request):
    """One real 2-process trial per framework (DDP over gloo, MultiWorkerMirroredStrategy over
    the gRPC ring): the probed first step, then the timed steps."""
    s = settings(request.param)
    return request.param, s, distributed.run_distributed(s, probe=True)


def test_synchronized_gradient_equals_the_single_process_gradient(real_run):
    framework, _, out = real_run
    ranks = out["probe"]
    assert [r["indices"] for r in ranks] == [[0, 2, 4], [1, 3, 5]]  # disjoint shards
    expected = REFERENCES[framework](ranks[0]["initial"])
    for rank in ranks:
        for got, want in zip(rank["gradients"], expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        # The real training step applied that gradient: SGD's first momentum step is -lr * g.
        for before, after, g in zip(rank["initial"], rank["after_step"], expected, strict=True):
            np.testing.assert_allclose(np.asarray(before) - np.asarray(after),
                                       rank["learning_rate"] * g, rtol=1e-3, atol=1e-7)
    np.testing.assert_array_equal(np.concatenate([np.ravel(a) for a in ranks[0]["after_step"]]),
                                  np.concatenate([np.ravel(a) for a in ranks[1]["after_step"]]))


def test_a_distributed_trial_reports_every_rank(real_run):
    framework, s, payload = real_run
    assert payload["world_size"] == WORLD
    assert payload["strategy"] == {"pytorch": "ddp", "tensorflow": "multiworker"}[framework]
    assert payload["global_batch_size"] == BATCH * WORLD
    per_rank = payload["per_rank_ns"]
    assert len(per_rank) == WORLD and all(len(t) == s["iterations"] for t in per_rank)
    assert payload["iteration_ns"] == [max(t) for t in zip(*per_rank)]
    assert payload["cold_start_ns"] == max(payload["per_rank_cold_start_ns"]) > 0
    assert len(payload["warmup_ns"]) == 2 and len(payload["block_ns"]) == 1
    assert payload["block_size"] == 2
    markers = payload["markers_ns"]
    assert sorted(markers, key=markers.get) == ["cold_start", "warmup", "measure", "blocks", "end"]
    assert len(set(markers.values())) == 5
    in_force = payload["settings_in_force"]
    assert in_force["threads_intra"] == 1 and in_force["world_size"] == WORLD
    assert in_force["communication"] in ("gloo", "collective ring all-reduce")
    # Idiomatic mode: PyTorch eager; TensorFlow's tf.function traces the whole step, as in the
    # throughput backend (the same frameworks/<fw>/steps.py).
    compiled = in_force["compiled"]["train"]
    assert (compiled and compiled["scope"]) == {
        "pytorch": None, "tensorflow": STEP_SCOPES["train"]}[framework]
    assert payload["versions"]["framework_version"]
    assert math.isfinite(payload["peak_rss_bytes"])


@pytest.mark.slow  # torch.compile's inductor and XLA, in rank processes
def test_compiled_mode_compiles_the_whole_step_in_both_frameworks():
    """Compiled mode compiles the same scope on both sides: the whole training step, as the
    throughput backend and the trainer do (PyTorch's replica once compiled the model only)."""
    scopes = {}
    for framework in ("pytorch", "tensorflow"):
        s = settings(framework, world_size=1, mode="compiled")
        payload = distributed.run_distributed(s)
        assert len(payload["iteration_ns"]) == s["iterations"]
        scopes[framework] = payload["settings_in_force"]["compiled"]["train"]["scope"]
    assert scopes == {"pytorch": STEP_SCOPES["train"], "tensorflow": STEP_SCOPES["train"]}
