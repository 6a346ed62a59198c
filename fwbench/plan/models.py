"""Framework-neutral model zoo: the registry of models with their input specs, the input checks,
FLOPs per sample, the seeded synthetic batch and the training recipe.

No framework is imported here. The architecture tables both frameworks build from, and the walk
of one sample through them that FLOPs and input checks read, are in fwbench.plan.architectures;
the library differences between PyTorch and Keras a model is held to are in
fwbench.plan.differences. The PyTorch side uses torchvision where torchvision has the model.
Loss, optimizers and their hyper-parameters are defined here once, so both frameworks mean the
same.

Input shapes, per kind of input (the cell's ``input_shape``; the batch dimension is not part of it):

    image        (channels, height, width)   float32, standard normal, NCHW in PyTorch, NHWC in TF
    spectrogram  (frequency bins, frames)     float32, standard normal, the same (N, F, T) in both
    tokens       (sequence length,)           int64 token ids, the same (N, T) in both
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

import numpy as np

from fwbench.plan.architectures import TooSmall, walk
from fwbench.plan.differences import LIBRARY_DIFFERENCES, OPTIMIZER_DIFFERENCES
from fwbench.plan.frameworks import FRAMEWORKS

# --- the training recipe: defined once, read by both frameworks --------------------------------

# Losses by name; each model names one. Every loss is a mean, so it does not grow with the batch.
LOSSES = {
    "cross_entropy": "softmax cross-entropy from logits, averaged over the batch",
    "token_cross_entropy": "softmax cross-entropy from logits at every position, averaged over "
                           "batch x sequence positions",
    "ctc": "CTC loss from logits, blank = class 0, targets padded with -1; each utterance's loss "
           "divided by its label length, then averaged over the batch (PyTorch's "
           "reduction='mean')",
}

# Optimizers by name. Adam's epsilon is set explicitly (the defaults differ: PyTorch 1e-8, Keras
# 1e-7); where it is added still differs, see LIBRARY_DIFFERENCES["adam_epsilon"].
OPTIMIZERS = {
    "sgd": {"name": "sgd", "learning_rate": 0.01, "momentum": 0.9},
    "adam": {"name": "adam", "learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999,
             "epsilon": 1e-8},
}

# The optimizer of a throughput training step: SGD with momentum (patel2023, florencio2019's lr).
OPTIMIZER = OPTIMIZERS["sgd"]

# BatchNorm as torchvision builds it: PyTorch's defaults, given to Keras explicitly.
# Keras momentum is the weight of the old running value: 1 - PyTorch momentum.
BATCH_NORM = {"epsilon": 1e-5, "momentum": 0.9}

FLOP_CONVENTION = (
    "FLOPs per sample: a multiply-add counts as 2 FLOPs; counted in convolutions, fully connected "
    "layers, recurrent gate products and attention products (QK^T and attention x V); "
    "normalization, activations, pooling, residual additions, embedding look-ups and the loss "
    "are not counted. A training step counts 3x the forward pass (backward = gradient with "
    "respect to activations + gradient with respect to weights, each about one forward)."
)
TRAIN_FLOPS_FACTOR = 3


# --- the registry --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelSpec:
    """A model the config may name: its task, its input and the facts the tests hold it to.

    ``arch`` holds the architecture hyper-parameters both frameworks build from (the reduced test
    size overrides them with ``test_arch``, see ``reduced_arch``); ``parameters`` is the
    trainable-parameter count at ``canonical_shape`` and ``canonical_classes``, equal in both
    frameworks (tested).
    """

    name: str
    task: str
    inputs: str  # image | spectrogram | tokens
    canonical_shape: tuple[int, ...]
    canonical_classes: int
    parameters: int
    loss: str
    source: str
    test_shape: tuple[int, ...]
    arch: dict = field(default_factory=dict)
    test_arch: dict = field(default_factory=dict)
    differences: tuple[str, ...] = ()

    @property
    def min_size(self) -> int:
        """Smallest height/width (image), frames (spectrogram) or tokens this model accepts."""
        return minimum_shape(self.name)[-1]


_VISION = ("layouts", "softmax_head", "keras_min_input", "weight_init", "dropout_rng")
_BN = ("bn_defaults", "bn_running_variance", "bn_single_value")

MODELS = {
    "lenet5": ModelSpec(
        "lenet5", "image classification", "image", (1, 28, 28), 10, 61_706, "cross_entropy",
        "florencio2019", (1, 28, 28),
        differences=("layouts", "flatten_order", "weight_init")),
    "resnet18": ModelSpec(
        "resnet18", "image classification", "image", (3, 224, 224), 1000, 11_689_512,
        "cross_entropy", "patel2023, tian2020", (3, 32, 32),
        differences=(*_VISION, *_BN, "keras_no_resnet18", "strided_padding", "maxpool_padding")),
    "resnet18_cifar": ModelSpec(
        "resnet18_cifar", "image classification", "image", (3, 32, 32), 10, 11_173_962,
        "cross_entropy",
        "sumanjali2024 (He et al. 2016 CIFAR variant, as in kuangliu/pytorch-cifar)", (3, 32, 32),
        differences=(*_VISION, *_BN, "keras_no_resnet18", "strided_padding")),
    "resnet152": ModelSpec(
        "resnet152", "image classification", "image", (3, 224, 224), 1000, 60_192_808,
        "cross_entropy", "patel2023", (3, 32, 32),
        differences=(*_VISION, *_BN, "keras_resnet_bias", "resnet_v1_5", "strided_padding",
                     "maxpool_padding")),
    "vgg16": ModelSpec(
        "vgg16", "image classification", "image", (3, 224, 224), 1000, 138_357_544,
        "cross_entropy", "patel2023, tian2020", (3, 32, 32),
        arch={"dropout": 0.5, "classifier": 4096}, test_arch={"classifier": 64},
        differences=(*_VISION, "vgg_flatten", "vgg_dropout", "flatten_order")),
    "mobilenet_v2": ModelSpec(
        "mobilenet_v2", "image classification", "image", (3, 224, 224), 1000, 3_504_872,
        "cross_entropy", "patel2023", (3, 32, 32), arch={"dropout": 0.2},
        differences=(*_VISION, *_BN, "strided_padding", "keras_mobilenet_padding")),
    "efficientnet_b4": ModelSpec(
        "efficientnet_b4", "image classification", "image", (3, 380, 380), 1000, 19_341_616,
        "cross_entropy", "patel2023", (3, 32, 32),
        arch={"width": 1.4, "depth": 1.8, "dropout": 0.4, "stochastic_depth": 0.2},
        differences=(*_VISION, *_BN, "strided_padding", "keras_efficientnet_rescaling",
                     "stochastic_depth")),
    "deepspeech2": ModelSpec(
        "deepspeech2", "speech recognition", "spectrogram", (161, 300), 29, 90_221_885, "ctc",
        "dai2022", (32, 24),
        arch={"conv_channels": 32, "hidden": 1024, "layers": 5},
        test_arch={"conv_channels": 4, "hidden": 16, "layers": 2},
        differences=("layouts", "weight_init", "bn_defaults", "bn_running_variance",
                     "gru_gates", "ctc_api", "strided_padding")),
    "bert_base": ModelSpec(
        "bert_base", "text classification", "tokens", (128,), 2, 109_483_778, "cross_entropy",
        "dai2022", (16,),
        arch={"vocab": 30522, "hidden": 768, "layers": 12, "heads": 12, "ffn": 3072,
              "max_positions": 512, "type_vocab": 2, "dropout": 0.1, "layer_norm_eps": 1e-12},
        test_arch={"vocab": 100, "hidden": 32, "layers": 2, "heads": 4, "ffn": 64,
                   "max_positions": 64},
        differences=("layouts", "weight_init", "dropout_rng", "layer_norm_eps",
                     "attention_layout", "transformer_fast_path", "embedding_gradient")),
    "lstm_lm": ModelSpec(
        "lstm_lm", "language modelling", "tokens", (35,), 10_000, 19_775_200,
        "token_cross_entropy", "dai2022", (12,),
        arch={"embedding": 650, "hidden": 650, "layers": 2, "dropout": 0.5},
        test_arch={"embedding": 24, "hidden": 32, "layers": 2},
        differences=("layouts", "weight_init", "dropout_rng", "lstm_bias", "embedding_gradient")),
}

_RANK = {"image": 3, "spectrogram": 2, "tokens": 1}
_SHAPE_NAMES = {"image": "(channels, height, width)", "spectrogram": "(frequency bins, frames)",
                "tokens": "(sequence length,)"}


def arch(model: str, **overrides) -> dict:
    """The architecture hyper-parameters of ``model``, with ``overrides`` applied."""
    unknown = set(overrides) - set(MODELS[model].arch) - set(MODELS[model].test_arch)
    if unknown:
        raise ValueError(f"{model} has no architecture setting {sorted(unknown)}; "
                         f"it has {sorted(MODELS[model].arch)}")
    return {**MODELS[model].arch, **overrides}


def reduced_arch(model: str, *, dropout: bool = False) -> dict:
    """The reduced architecture the equivalence tests build, dropout off unless asked."""
    settings = dict(MODELS[model].test_arch)
    if not dropout:
        rates = ("dropout", "stochastic_depth")
        settings.update({k: 0.0 for k in rates if k in MODELS[model].arch})
    return settings


# --- input checks and the synthetic batch --------------------------------------------------------

def check_input(model: str, input_shape: tuple[int, ...], *, batch_size: int | None = None,
                phase: str | None = None) -> str | None:
    """The reason ``model`` cannot run on ``input_shape`` (and, if given, this training batch
    size), or None. The trial turns a reason into status ``unsupported``."""
    if model not in MODELS:
        return f"unknown model {model!r}; fwbench has {', '.join(MODELS)}"
    spec = MODELS[model]
    shape = tuple(input_shape)
    if len(shape) != _RANK[spec.inputs] or min(shape, default=0) < 1:
        return (f"{model} takes {spec.inputs} inputs shaped {_SHAPE_NAMES[spec.inputs]}, "
                f"e.g. {list(spec.canonical_shape)}; got {list(shape)}")
    try:
        walked = walk(model, shape, spec.canonical_classes, arch(model))
    except TooSmall as exc:
        least = minimum_shape(model)
        return f"{model} {_too_small(spec, least)}, got {'x'.join(map(str, shape))}: {exc}"
    if batch_size is not None and phase == "train" and batch_size * walked.bn_values < 2:
        values = batch_size * walked.bn_values
        return (f"{model} in training needs at least 2 values per BatchNorm channel, but batch "
                f"{batch_size} x a {walked.bn_where} feature map gives {values}: "
                "PyTorch refuses it and the batch statistics are degenerate; use a batch of 2 or "
                "more or a larger input")
    return None


def _too_small(spec: ModelSpec, least: tuple[int, ...]) -> str:
    if spec.inputs == "image":
        return f"needs inputs of at least {least[1]}x{least[2]} pixels"
    if spec.inputs == "spectrogram":
        return f"needs spectrograms of at least {least[0]} frequency bins and {least[1]} frames"
    return f"needs sequences of 1 to {spec.arch['max_positions']} tokens"


@functools.cache
def minimum_shape(model: str) -> tuple[int, ...]:
    """The smallest input (per dimension, others canonical) ``model`` can compute."""
    spec = MODELS[model]
    least = list(spec.canonical_shape)
    for dim in range(1 if spec.inputs == "image" else 0, len(least)):
        for size in range(1, spec.canonical_shape[dim] + 1):
            trial = list(spec.canonical_shape)
            trial[dim] = size
            if spec.inputs == "image":  # height and width shrink together
                trial[1:] = [size, size]
            try:
                walk(model, tuple(trial), spec.canonical_classes, arch(model))
            except TooSmall:
                continue
            least[dim] = size
            break
    return tuple(least)


def synthetic_batch(batch_size: int, input_shape: tuple[int, ...], num_classes: int,
                    seed: int, *, model: str | None = None, arch_overrides: dict | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The seeded synthetic batch, identical in both frameworks: (inputs, targets).

    image: standard-normal float32 (N, C, H, W) and class labels (N,) in [0, num_classes).
    spectrogram: standard-normal float32 (N, F, T) and CTC targets (N, L): labels in
    [1, num_classes) (0 is the blank) padded with -1, one array so that every code path can slice
    it like class labels; label lengths (the non-negative entries) are uniform in [T'//4, T'//2]
    (at least 1), where T' = ceil(T / 2) frames leave the convolutions.
    tokens: ids (N, T) in [0, vocabulary) and class labels (N,) (bert_base) or the next token at
    every position (N, T) (lstm_lm; the vocabulary is num_classes).
    ``model`` None means an image model.
    """
    rng = np.random.default_rng(seed)
    kind = MODELS[model].inputs if model else "image"
    if kind == "image":
        x = rng.standard_normal((batch_size, *input_shape), dtype=np.float32)
        return x, rng.integers(0, num_classes, size=batch_size, dtype=np.int64)
    if kind == "spectrogram":
        x = rng.standard_normal((batch_size, *input_shape), dtype=np.float32)
        frames = speech_output_frames(input_shape[1])
        lengths = rng.integers(max(1, frames // 4), max(1, frames // 2) + 1, size=batch_size,
                               dtype=np.int64)
        labels = rng.integers(1, num_classes, size=(batch_size, int(lengths.max())), dtype=np.int64)
        labels[np.arange(labels.shape[1]) >= lengths[:, None]] = -1
        return x, labels
    (length,) = input_shape
    if model == "lstm_lm":
        stream = rng.integers(0, num_classes, size=(batch_size, length + 1), dtype=np.int64)
        return stream[:, :-1].copy(), stream[:, 1:].copy()
    vocab = arch(model, **(arch_overrides or {}))["vocab"]
    x = rng.integers(0, vocab, size=(batch_size, length), dtype=np.int64)
    return x, rng.integers(0, num_classes, size=batch_size, dtype=np.int64)


def speech_output_frames(frames: int) -> int:
    """Frames leaving deepspeech2's convolutions (time stride 2, then 1): ceil(T / 2)."""
    return (frames + 1) // 2


# --- FLOPs per sample ----------------------------------------------------------------------------

def flops_per_sample(model: str, input_shape: tuple[int, ...], num_classes: int | None = None,
                     phase: str = "infer", **overrides) -> int:
    """FLOPs of one sample through ``model`` (FLOP_CONVENTION): the forward pass for ``infer``,
    3x that for ``train``. The same number serves both frameworks.

    Usage::

        flops_per_sample("resnet18", (3, 224, 224), 1000)           # 3,627,122,688
        flops_per_sample("resnet18", (3, 224, 224), 1000, "train")  # 3x
    """
    classes = MODELS[model].canonical_classes if num_classes is None else num_classes
    macs = walk(model, tuple(input_shape), classes, arch(model, **overrides)).macs
    return 2 * macs * (TRAIN_FLOPS_FACTOR if phase == "train" else 1)


# --- `python -m fwbench models` ------------------------------------------------------------------

def model_table() -> list[dict]:
    """One row per model: what `python -m fwbench models` prints."""
    rows = []
    for spec in MODELS.values():
        rows.append({
            "model": spec.name,
            "task": spec.task,
            "inputs": spec.inputs,
            "input_shape": list(spec.canonical_shape),
            "num_classes": spec.canonical_classes,
            "min_input_shape": list(minimum_shape(spec.name)),
            "trainable_parameters": {f: spec.parameters for f in FRAMEWORKS},
            "gflops_per_sample": {
                "infer": flops_per_sample(spec.name, spec.canonical_shape) / 1e9,
                "train": flops_per_sample(spec.name, spec.canonical_shape, phase="train") / 1e9,
            },
            "loss": spec.loss,
            "source": spec.source,
            "library_differences": list(spec.differences),
        })
    return rows


def print_models(as_json: bool = False) -> None:
    """Print the model zoo as a table, or as JSON (differences and conventions spelled out).

    Parameter counts are the canonical ones, checked for both frameworks by
    tests/frameworks/test_models.py.
    """
    rows = model_table()
    if as_json:
        print(json.dumps({
            "models": rows,
            "library_differences": {k: vars(v) for k, v in LIBRARY_DIFFERENCES.items()},
            "losses": LOSSES,
            "optimizers": OPTIMIZERS,
            "flop_convention": FLOP_CONVENTION,
        }, indent=2))
        return
    header = ("model", "task", "input shape", *(f"params {f}" for f in FRAMEWORKS),
              "GFLOPs infer", "GFLOPs train", "library differences")
    table = [header] + [(
        r["model"], r["task"], "x".join(map(str, r["input_shape"])),
        *(f"{r['trainable_parameters'][f]:,}" for f in FRAMEWORKS),
        f"{r['gflops_per_sample']['infer']:.3f}", f"{r['gflops_per_sample']['train']:.3f}",
        ", ".join(r["library_differences"]),
    ) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])
    print(f"\nEvery model: {', '.join(OPTIMIZER_DIFFERENCES)}.\n{FLOP_CONVENTION}\n"
          "Differences: `python -m fwbench models --json` or docs/models.md.")
