"""Both backends: mirror images, and every mode, precision and profile runs or says why not.

Each case is a real trial of the real framework on the CPU, in a fresh process, as the
workflow runs it.
"""

import inspect

import pytest

from fwbench.measure.frameworks.base import STEP_SCOPES, Backend
from fwbench.measure.results import load_trial
from fwbench.measure.trial import run_trial
from fwbench.plan.config import validate
from fwbench.plan.sweep import Plan

FRAMEWORKS = ["pytorch", "tensorflow"]


def test_backends_are_mirror_images():
    from fwbench.measure.frameworks import get_backend

    pytorch, tensorflow = (get_backend(name) for name in FRAMEWORKS)
    interface = [n for n, _ in inspect.getmembers(Backend, inspect.isfunction)
                 if not n.startswith("_")]
    for cls in (pytorch, tensorflow):
        public = [n for n in vars(cls) if not n.startswith("_") and callable(getattr(cls, n))]
        assert sorted(public) == sorted(set(interface) - {"__init__"}), cls.NAME
    assert [n for n in vars(pytorch) if not n.startswith("_")] == \
        [n for n in vars(tensorflow) if not n.startswith("_") and n != "_keras_step"]


def _trial(tmp_path, tiny_config, framework, **changes):
    config = {**tiny_config, "frameworks": [framework], "phases": ["train"], "iterations": 2,
              "blocks": {"count": 1, "size": 2, "min_time_s": 0, "run_time_s": 0},
              **changes}
    plan = Plan.from_config(validate(config))
    run_trial(plan.trial_settings(plan.trials[0]), tmp_path / "r.json", tmp_path / "e.json",
              tmp_path / "t.csv")
    return load_trial(tmp_path / "r.json")


CASES = [
    ("pytorch", "eager", "eager"), ("tensorflow", "eager", "eager"),
    ("pytorch", "idiomatic", "eager"), ("tensorflow", "idiomatic", "function"),
    ("pytorch", "keras", "eager"), ("tensorflow", "keras", "keras"),
    ("tensorflow", "compiled", "xla"),
    pytest.param("pytorch", "compiled", "compile", marks=pytest.mark.slow),  # ~20 s of inductor
]
# What each framework mode compiles of the training step: the whole of it (STEP_SCOPES) or
# nothing. Compiled mode compiles the same scope on both sides (tests/test_experiments.py and
# tests/test_distributed.py check the other experiments).
COMPILERS = {"eager": None, "function": "tf.function", "xla": "tf.function(jit_compile=True), XLA",
             "compile": "torch.compile",
             "keras": "Keras (train_on_batch, predict_on_batch: tf.function, no XLA)"}


@pytest.mark.parametrize("framework, mode, runs", CASES)
def test_every_mode_runs_and_is_recorded(tmp_path, tiny_config, framework, mode, runs):
    result = _trial(tmp_path, tiny_config, framework, modes=[mode])
    assert result["status"] == "ok", result["message"]
    in_force = result["settings"]["in_force"]
    assert in_force["mode"] == runs
    compiler = COMPILERS[runs]
    assert in_force["compiled"] == {
        "train": compiler and {"scope": STEP_SCOPES["train"], "compiler": compiler}}
    assert len(result["iteration_ns"]) == 2 and len(result["block_ns"]) == 1
    assert result["block_size"] == 2 and len(result["warmup_ns"]) == 2  # no calibration: max
    # Compilation and tracing land in the cold start, never in the timed iterations.
    if runs in ("function", "xla", "compile"):
        assert result["cold_start_ns"] > max(result["iteration_ns"])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_bf16_runs_and_fp16_is_unsupported_on_the_cpu(tmp_path, tiny_config, framework):
    result = _trial(tmp_path, tiny_config, framework, precisions=["bf16"])
    assert result["status"] == "ok", result["message"]
    assert result["settings"]["in_force"]["precision"] == "bf16"
    result = _trial(tmp_path, tiny_config, framework, precisions=["fp16"])
    assert result["status"] == "unsupported" and "fp16" in result["message"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_profiles_record_what_is_in_force(tmp_path, tiny_config, framework):
    matched = _trial(tmp_path, tiny_config, framework, profiles=["matched"])
    in_force = matched["settings"]["in_force"]
    # `matched` leaves each framework on the layout its documentation recommends for the CPU
    # at fp32, and says why; only the layout factor forces NHWC on PyTorch.
    native = {"pytorch": "NCHW", "tensorflow": "NHWC (channels_last)"}[framework]
    assert in_force["layout"] == native and in_force["layout_reason"]
    assert (in_force["tf32_matmul"], in_force["deterministic"]) == (False, False)
    if framework == "tensorflow":
        assert in_force["synchronous_execution"] is True
    defaults = _trial(tmp_path, tiny_config, framework, profiles=["defaults"])
    assert defaults["settings"]["in_force"]["layout"] == native
    forced = _trial(tmp_path, tiny_config, framework, profiles=["defaults+layout"])
    assert forced["settings"]["in_force"]["layout"] == "NHWC (channels_last)"
    cpu_math = defaults["versions"]["cpu_math"]
    assert set(cpu_math) == {"blas", "onednn", "instruction_set", "onednn_isa"}
    if framework == "pytorch":  # oneDNN's own name for what it dispatches to here
        assert cpu_math["onednn_isa"].startswith("Intel ")
    assert defaults["peak_memory"]["device_peak_bytes"] is None and defaults["peak_rss_bytes"] > 0


def test_tensorflow_syncs_only_a_device_that_runs_ahead(monkeypatch):
    """A CPU runs TensorFlow synchronously unless told otherwise; syncing it would only add the
    call's own time to every step (PyTorch's CPU synchronize is free), so it is skipped there."""
    import tensorflow as tf

    from fwbench.measure.frameworks import get_backend
    from fwbench.plan.cells import Cell

    calls = []
    monkeypatch.setattr(tf.test.experimental, "sync_devices", lambda: calls.append(1))
    cell = Cell("throughput", "cpu", "tensorflow", "lenet5", "infer", 2, (1, 28, 28), "fp32",
                "idiomatic", "matched")
    backends = []
    for synchronous in (True, False):
        tf.config.experimental.set_synchronous_execution(synchronous)
        try:
            # No configure(): it would pin this test process's TensorFlow threads for the tests
            # after it (the model-equivalence tests run TensorFlow in this process too).
            backend = get_backend("tensorflow")(cell, threads=1, seed=0)
            backend.load()
        finally:
            tf.config.experimental.set_synchronous_execution(True)
        backends.append(backend)
    backends[0].synchronize()
    assert calls == []
    backends[1].synchronize()
    assert calls == [1]


def test_tensorflow_enters_its_device_once_outside_the_timed_calls(monkeypatch):
    """The placement is entered around the timing loop, not in each step: at LeNet's 0.15 ms
    steps a context switch per call is part of what would be timed."""
    import tensorflow as tf

    from fwbench.measure.frameworks import get_backend
    from fwbench.plan.cells import Cell

    cell = Cell("throughput", "cpu", "tensorflow", "lenet5", "train", 2, (1, 28, 28), "fp32",
                "idiomatic", "matched")
    backend = get_backend("tensorflow")(cell, threads=1, seed=0)  # no configure(): see above
    backend.load()
    step = backend.step()
    entered = []
    device = tf.device
    monkeypatch.setattr(tf, "device", lambda name: entered.append(name) or device(name))
    with backend.device_scope():
        for _ in range(3):
            step()
    assert entered == ["/CPU:0"]
