"""fwbench/plan/models.py (with plan/architectures.py and plan/differences.py) without any
framework: the registry, input checks, synthetic batches, FLOPs and `python -m fwbench models`.
The framework side is tests/frameworks/test_models.py."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from fwbench.plan import architectures, differences, models as zoo

# torchvision's documented multiply-adds (its "GFLOPS" column) at the canonical input size.
TORCHVISION_GMACS = {"resnet18": 1.81, "resnet152": 11.51, "vgg16": 15.47, "mobilenet_v2": 0.30,
                     "efficientnet_b4": 4.39}


def test_importing_the_zoo_and_the_weight_transfer_imports_no_framework():
    code = ("import sys, fwbench.plan.models, fwbench.measure.frameworks.transfer; "
            "print([m for m in ('torch', 'tensorflow', 'keras') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", list(zoo.MODELS))
def test_every_model_accepts_its_canonical_and_test_inputs(name):
    spec = zoo.MODELS[name]
    assert zoo.check_input(name, spec.canonical_shape) is None
    assert zoo.check_input(name, spec.test_shape, batch_size=4, phase="train") is None
    assert set(spec.differences) <= set(differences.LIBRARY_DIFFERENCES)
    assert spec.loss in zoo.LOSSES


@pytest.mark.parametrize(("name", "shape", "words"), [
    ("lenet5", (1, 8, 8), ["lenet5", "at least 12x12", "1x8x8", "conv2"]),
    ("vgg16", (3, 16, 16), ["at least 32x32", "features.30"]),
    ("lenet5", (28, 28), ["image inputs", "(channels, height, width)"]),
    ("bert_base", (3, 128), ["tokens inputs", "(sequence length,)"]),
    ("bert_base", (600,), ["1 to 512 tokens", "position embeddings"]),
    ("deepspeech2", (161, 0), ["spectrogram"]),
    ("alexnet", (3, 224, 224), ["unknown model 'alexnet'", "resnet18"]),
])
def test_an_input_the_model_cannot_take_gets_a_reason(name, shape, words):
    reason = zoo.check_input(name, shape)
    assert reason is not None
    for word in words:
        assert word in reason


def test_training_batchnorm_on_one_value_per_channel_is_unsupported():
    reason = zoo.check_input("resnet18", (3, 32, 32), batch_size=1, phase="train")
    assert "BatchNorm" in reason and "1x1" in reason and "batch of 2" in reason
    assert zoo.check_input("resnet18", (3, 32, 32), batch_size=2, phase="train") is None
    assert zoo.check_input("resnet18", (3, 32, 32), batch_size=1, phase="infer") is None
    assert zoo.check_input("resnet18", (3, 64, 64), batch_size=1, phase="train") is None


def test_minimum_shapes_follow_the_architecture():
    assert zoo.minimum_shape("lenet5") == (1, 12, 12)
    assert zoo.minimum_shape("vgg16") == (3, 32, 32)
    assert zoo.minimum_shape("resnet18") == (3, 1, 1)
    assert zoo.MODELS["lenet5"].min_size == 12


@pytest.mark.parametrize("name", list(TORCHVISION_GMACS))
def test_flops_match_torchvisions_documented_multiply_adds(name):
    spec = zoo.MODELS[name]
    macs = zoo.flops_per_sample(name, spec.canonical_shape) / 2 / 1e9
    assert macs == pytest.approx(TORCHVISION_GMACS[name], rel=0.01)


def test_flops_follow_the_convention():
    assert zoo.flops_per_sample("lenet5", (1, 28, 28), 10) == 2 * (
        6 * 25 * 28 * 28 + 16 * 6 * 25 * 10 * 10 + 400 * 120 + 120 * 84 + 84 * 10)
    infer = zoo.flops_per_sample("bert_base", (128,))
    assert zoo.flops_per_sample("bert_base", (128,), phase="train") == 3 * infer
    # attention grows with the square of the sequence: doubling it more than doubles the FLOPs
    assert zoo.flops_per_sample("bert_base", (256,)) > 2 * infer
    assert zoo.flops_per_sample("lstm_lm", (35,), 10_000) == 2 * 35 * (
        4 * 650 * 1300 * 2 + 650 * 10_000)
    # the classifier head follows num_classes
    assert zoo.flops_per_sample("resnet18", (3, 224, 224), 10) < zoo.flops_per_sample(
        "resnet18", (3, 224, 224), 1000)


def test_synthetic_images_are_seeded_nchw_with_class_labels():
    x, y = zoo.synthetic_batch(4, (3, 8, 8), 10, seed=1)
    assert x.shape == (4, 3, 8, 8) and x.dtype == np.float32
    assert y.shape == (4,) and y.dtype == np.int64 and y.max() < 10
    again, _ = zoo.synthetic_batch(4, (3, 8, 8), 10, seed=1, model="resnet18")
    assert np.array_equal(x, again)


def test_synthetic_speech_has_padded_ctc_labels_that_fit_the_frames():
    x, labels = zoo.synthetic_batch(8, (161, 100), 29, seed=0, model="deepspeech2")
    lengths = (labels >= 0).sum(axis=1)
    frames = zoo.speech_output_frames(100)
    assert x.shape == (8, 161, 100) and frames == 50
    assert lengths.min() >= frames // 4 and lengths.max() <= frames // 2
    assert labels.shape == (8, lengths.max())
    for row, n in zip(labels, lengths):
        assert row[:n].min() >= 1 and row[:n].max() < 29 and (row[n:] == -1).all()


def test_synthetic_tokens_for_a_language_model_predict_the_next_token():
    x, y = zoo.synthetic_batch(2, (12,), 50, seed=0, model="lstm_lm")
    assert x.shape == y.shape == (2, 12) and np.array_equal(x[:, 1:], y[:, :-1])
    tokens, labels = zoo.synthetic_batch(2, (16,), 2, seed=0, model="bert_base",
                                         arch_overrides={"vocab": 100})
    assert tokens.max() < 100 and labels.shape == (2,)


def test_architecture_overrides_are_checked():
    assert zoo.arch("bert_base", layers=2)["layers"] == 2
    with pytest.raises(ValueError, match="no architecture setting"):
        zoo.arch("resnet18", width=2)
    assert zoo.reduced_arch("efficientnet_b4") == {"dropout": 0.0, "stochastic_depth": 0.0}


def test_efficientnet_b4_blocks_are_torchvisions():
    blocks = architectures.efficientnet_blocks(1.4, 1.8)
    assert len(blocks) == 32 and blocks[0]["in"] == 48 and blocks[-1]["out"] == 448
    assert blocks[0]["drop_fraction"] == 0 and blocks[-1]["drop_fraction"] == 31 / 32


def test_print_models_table_and_json(capsys):
    zoo.print_models(as_json=False)
    table = capsys.readouterr().out
    for name in zoo.MODELS:
        assert name in table
    assert "11,689,512" in table and "multiply-add counts as 2 FLOPs" in table
    zoo.print_models(as_json=True)
    data = json.loads(capsys.readouterr().out)
    rows = {row["model"]: row for row in data["models"]}
    assert rows["resnet18"]["trainable_parameters"] == {"pytorch": 11_689_512,
                                                        "tensorflow": 11_689_512}
    assert rows["lenet5"]["gflops_per_sample"]["train"] == pytest.approx(
        3 * rows["lenet5"]["gflops_per_sample"]["infer"])
    assert "adam_epsilon" in data["library_differences"]
    assert data["optimizers"]["adam"]["epsilon"] == 1e-8
