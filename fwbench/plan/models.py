"""Framework-neutral model zoo: specs, input specs, architecture tables, FLOPs, the training recipe
and the library differences found between PyTorch and Keras.

No framework is imported here: the architecture tables below are read by the Keras builders
(frameworks/tensorflow/models.py), by the FLOP counter and by ``check_input``; the PyTorch side
uses torchvision where torchvision has the model. Loss, optimizers and their hyper-parameters are
defined here once, so both frameworks mean the same.

Input shapes, per kind of input (the cell's ``input_shape``; the batch dimension is not part of it):

    image        (channels, height, width)   float32, standard normal, NCHW in PyTorch, NHWC in TF
    spectrogram  (frequency bins, frames)     float32, standard normal, the same (N, F, T) in both
    tokens       (sequence length,)           int64 token ids, the same (N, T) in both
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field

import numpy as np

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


# --- architecture tables -------------------------------------------------------------------------

# block kind, blocks per stage, stem (RESNET_STEMS); torchvision's ResNet v1.5 (stride on the 3x3
# convolution)
RESNETS = {
    "resnet18": ("basic", (2, 2, 2, 2), "imagenet"),
    "resnet18_cifar": ("basic", (2, 2, 2, 2), "cifar"),
    "resnet152": ("bottleneck", (3, 8, 36, 3), "imagenet"),
}
# The layers before the four stages: conv1's kernel and stride, and whether a 3x3 stride-2
# max-pool follows. The ImageNet stem shrinks 32x32 to 8x8, which costs accuracy on CIFAR-10; the
# CIFAR stem (He et al. 2016, Sec. 4.2; kuangliu/pytorch-cifar) keeps 32x32 into the first stage.
RESNET_STEMS = {"imagenet": (7, 2, True), "cifar": (3, 1, False)}
RESNET_WIDTHS = (64, 128, 256, 512)
RESNET_EXPANSION = {"basic": 1, "bottleneck": 4}

VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
VGG_POOL = 7  # torchvision's AdaptiveAvgPool2d((7, 7)) before the classifier

# expansion t, output channels c, blocks n, first stride s (torchvision, width 1.0)
MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))
MOBILENET_V2_STEM, MOBILENET_V2_LAST = 32, 1280

# EfficientNet-B0 stages: expansion, kernel, stride, input channels, output channels, blocks
EFFICIENTNET_B0 = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2),
                   (6, 3, 2, 40, 80, 3), (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4),
                   (6, 3, 1, 192, 320, 1))


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round channels to a multiple of ``divisor`` as torchvision and Keras both do."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def efficientnet_blocks(width: float, depth: float) -> list[dict]:
    """Every MBConv block of a scaled EfficientNet, in order, with its stochastic-depth rate
    as a fraction of the model's (torchvision: linear in the block index)."""
    stages = [(e, k, s, make_divisible(i * width), make_divisible(o * width), math.ceil(n * depth))
              for e, k, s, i, o, n in EFFICIENTNET_B0]
    total = sum(stage[-1] for stage in stages)
    blocks = []
    for stage, (expand, kernel, stride, c_in, c_out, n) in enumerate(stages, start=1):
        for index in range(n):
            blocks.append({
                "stage": stage, "index": index, "expand": expand, "kernel": kernel,
                "stride": stride if index == 0 else 1, "in": c_in if index == 0 else c_out,
                "out": c_out, "expanded": make_divisible((c_in if index == 0 else c_out) * expand),
                "squeeze": max(1, (c_in if index == 0 else c_out) // 4),
                "drop_fraction": len(blocks) / total,
            })
    return blocks


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


# --- the library differences ---------------------------------------------------------------------

@dataclass(frozen=True)
class Difference:
    """One way PyTorch (or torchvision) and Keras (or keras.applications) differ, and what fwbench
    does about it."""

    topic: str
    pytorch: str
    keras: str
    resolution: str


LIBRARY_DIFFERENCES = {
    "layouts": Difference(
        "tensor layouts",
        "NCHW activations; Conv2d weight (out, in/groups, kh, kw); depthwise (C, 1, kh, kw); "
        "Linear weight (out, in)",
        "NHWC activations; Conv2D kernel (kh, kw, in, out); DepthwiseConv2D (kh, kw, C, 1); "
        "Dense kernel (in, out)",
        "each framework runs its own default layout; weight copies transpose "
        "(fwbench/measure/frameworks/transfer.py)"),
    "flatten_order": Difference(
        "flattening a feature map",
        "flattens (C, H, W)", "flattens (H, W, C)",
        "the first Dense after a Flatten gets its input rows permuted when weights are copied"),
    "softmax_head": Difference(
        "classifier output",
        "torchvision models return logits",
        "keras.applications models end in softmax unless classifier_activation=None",
        "both return logits; losses take logits (from_logits=True)"),
    "keras_min_input": Difference(
        "smallest input",
        "torchvision models accept any input the layers can compute",
        "keras.applications refuse inputs under 32x32 ('Input size must be at least 32x32')",
        "our Keras models accept what the architecture can compute; check_input names the "
        "architectural minimum and the trial records status `unsupported`"),
    "weight_init": Difference(
        "weight initialization",
        "kaiming / uniform(+-1/sqrt(fan_in)) per torchvision and torch.nn",
        "glorot_uniform kernels, zero biases (Keras defaults)",
        "irrelevant to step time; equivalence tests and convergence runs copy PyTorch's weights"),
    "dropout_rng": Difference(
        "dropout masks",
        "torch random generator", "TF random generator",
        "the two cannot draw the same masks: benchmark runs keep dropout, equivalence checks build "
        "both with dropout rates 0"),
    "bn_defaults": Difference(
        "BatchNorm defaults",
        "eps 1e-5, momentum 0.1 (new value's weight); torchvision efficientnet_b4 keeps these",
        "eps 1e-3, momentum 0.99 (old value's weight); keras.applications ResNet 1.001e-5, "
        "MobileNetV2 1e-3 / 0.999, EfficientNet 1e-3 / 0.99",
        "Keras BatchNormalization gets eps 1e-5, momentum 0.9 explicitly"),
    "bn_running_variance": Difference(
        "BatchNorm running variance",
        "updated with the unbiased batch variance (n / (n - 1))",
        "updated with the biased batch variance",
        "cannot be matched with stock layers; only the running statistics differ (training-mode "
        "outputs and parameters agree); recorded"),
    "bn_single_value": Difference(
        "BatchNorm over one value",
        "refuses to train BatchNorm on one value per channel (batch 1 and a 1x1 feature map)",
        "computes a zero variance and goes on",
        "check_input marks such training cells `unsupported` in both frameworks"),
    "keras_no_resnet18": Difference(
        "ResNet-18", "torchvision.models.resnet18", "keras.applications has no ResNet18",
        "built from Keras layers, mirroring torchvision"),
    "keras_resnet_bias": Difference(
        "ResNet convolution biases",
        "no biases before BatchNorm: resnet152 has 60,192,808 trainable parameters",
        "keras.applications.ResNet152's convolutions carry biases: 60,268,520",
        "built from Keras layers with use_bias=False"),
    "resnet_v1_5": Difference(
        "ResNet bottleneck stride",
        "torchvision is ResNet v1.5: stride 2 on the 3x3 convolution",
        "keras.applications ResNet is v1: stride 2 on the first 1x1 convolution",
        "built as v1.5 in Keras (same parameters, different FLOPs and outputs otherwise)"),
    "strided_padding": Difference(
        "padding of strided convolutions",
        "pads symmetrically ((k - 1) / 2 on every side)",
        "padding='same' pads (k - 2) / 2 before and k / 2 after for stride 2 on even sizes",
        "strided layers pad explicitly with ZeroPadding2D; stride-1 layers use 'same', which is "
        "symmetric there"),
    "keras_mobilenet_padding": Difference(
        "MobileNetV2 and EfficientNet padding in keras.applications",
        "symmetric",
        "keras.applications pads stride-2 layers asymmetrically (correct_pad: 0 before, 1 after "
        "on even sizes)",
        "same trainable parameters (3,504,872 and 19,341,616) but different outputs: built from "
        "Keras layers instead"),
    "maxpool_padding": Difference(
        "max-pool padding", "pads with -inf", "ZeroPadding2D pads with 0",
        "equal here: the stem's max pool follows a ReLU, so its inputs are >= 0"),
    "vgg_flatten": Difference(
        "VGG classifier input",
        "AdaptiveAvgPool2d((7, 7)), so the classifier has 25088 inputs at any input size",
        "keras.applications.VGG16 flattens the last feature map: its parameter count depends on "
        "the input size and equals torchvision's (138,357,544) only at 224x224",
        "Keras gets an adaptive average pool with PyTorch's bin edges (identity at 224x224)"),
    "vgg_dropout": Difference(
        "VGG classifier dropout", "Dropout(0.5) after each hidden classifier layer",
        "keras.applications.VGG16 has no dropout", "Keras gets the same Dropout layers"),
    "keras_efficientnet_rescaling": Difference(
        "EfficientNet input normalization",
        "the caller normalizes the input",
        "keras.applications.EfficientNet rescales and normalizes inside the model "
        "(Rescaling + Normalization layers, 7 non-trainable values)",
        "no normalization layers: the synthetic input is already standard-normal"),
    "stochastic_depth": Difference(
        "stochastic depth",
        "torchvision StochasticDepth(p, 'row'), p rising linearly to 0.2 over the blocks",
        "keras.applications uses Dropout(p, noise_shape=(None, 1, 1, 1)) with the same schedule",
        "Keras gets the Dropout form; same distribution, different random draws"),
    "lstm_bias": Difference(
        "LSTM biases",
        "two bias vectors per gate (b_ih and b_hh)", "one bias vector per gate",
        "PyTorch's b_hh is fixed at zero and frozen (requires_grad=False): trainable counts and "
        "training dynamics match; copying adds b_ih + b_hh"),
    "embedding_gradient": Difference(
        "embedding gradients",
        "nn.Embedding's weight gradient is dense (sparse=False by default)",
        "Embedding's gradient is sparse (IndexedSlices); Keras's Adam then squares each "
        "occurrence's gradient before repeated tokens are summed, so a token seen k times in a "
        "batch gets another second moment (and step) than in PyTorch",
        "our Keras Embedding passes a dense gradient, as PyTorch does (tested with Adam)"),
    "gru_gates": Difference(
        "GRU gate order and reset placement",
        "gates ordered (r, z, n); reset applied after the recurrent product, two bias vectors",
        "gates ordered (z, r, h); reset_after=True (Keras 3 default) is PyTorch's formulation with "
        "the same two bias vectors",
        "reset_after=True; copying reorders the gates"),
    "ctc_api": Difference(
        "CTC loss",
        "F.ctc_loss takes log-probabilities, time-major (T, N, C); reduction='mean' divides by "
        "label lengths",
        "keras.ops.ctc_loss (tf.nn.ctc_loss) takes logits, batch-major, and returns one loss per "
        "utterance",
        "both compute LOSSES['ctc']: log-softmax (PyTorch) or logits (Keras), per-utterance loss "
        "divided by label length, averaged"),
    "layer_norm_eps": Difference(
        "LayerNorm epsilon", "1e-5 by default", "1e-3 by default",
        "BERT's 1e-12 set in both"),
    "attention_layout": Difference(
        "attention weights",
        "nn.MultiheadAttention packs Q, K, V into one in_proj (3d x d) and runs "
        "scaled_dot_product_attention",
        "layers.MultiHeadAttention keeps separate query/key/value EinsumDense kernels "
        "(d, heads, head_dim) and computes attention with einsum",
        "same parameter count; copying splits and reshapes"),
    "transformer_fast_path": Difference(
        "Transformer inference path",
        "nn.TransformerEncoderLayer runs a fused native kernel in inference (eval, no grad)",
        "Keras composes the layer from einsum, softmax and dense ops",
        "kept: it is how each framework runs this model; the equivalence test covers both paths"),
    "adam_epsilon": Difference(
        "Adam epsilon",
        "eps 1e-8 by default, added to sqrt of the bias-corrected second moment",
        "epsilon 1e-7 by default, added to sqrt of the uncorrected second moment (the effective "
        "epsilon is larger by 1 / sqrt(1 - beta_2^t))",
        "epsilon 1e-8 set in both (OPTIMIZERS['adam']); the placement difference stays and is "
        "measured by the training-equivalence test"),
    "sgd_momentum_form": Difference(
        "SGD momentum form",
        "v = mu v + g; p -= lr v", "v = mu v - lr g; p += v",
        "identical for a constant learning rate; nothing to do"),
}


# Differences of the optimizers: they concern every model.
OPTIMIZER_DIFFERENCES = ("adam_epsilon", "sgd_momentum_form")


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
        walk = _walk(model, shape, spec.canonical_classes, arch(model))
    except _TooSmall as exc:
        least = minimum_shape(model)
        return f"{model} {_too_small(spec, least)}, got {'x'.join(map(str, shape))}: {exc}"
    if batch_size is not None and phase == "train" and batch_size * walk.bn_values < 2:
        values = batch_size * walk.bn_values
        return (f"{model} in training needs at least 2 values per BatchNorm channel, but batch "
                f"{batch_size} x a {walk.bn_where} feature map gives {values}: "
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
                _walk(model, tuple(trial), spec.canonical_classes, arch(model))
            except _TooSmall:
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
    macs = _walk(model, tuple(input_shape), classes, arch(model, **overrides)).macs
    return 2 * macs * (TRAIN_FLOPS_FACTOR if phase == "train" else 1)


class _TooSmall(ValueError):
    pass


class _Walk:
    """One sample walked through a network: feature-map shape, multiply-adds and the fewest
    values any BatchNorm channel sees."""

    def __init__(self, channels: int, height: int, width: int):
        self.c, self.h, self.w = channels, height, width
        self.macs = 0
        self.bn_values, self.bn_where = math.inf, ""

    def conv(self, out, kernel, stride=1, padding=None, groups=1, where=""):
        kh, kw = _pair(kernel)
        sh, sw = _pair(stride)
        ph, pw = _pair(padding) if padding is not None else ((kh - 1) // 2, (kw - 1) // 2)
        h, w = (self.h + 2 * ph - kh) // sh + 1, (self.w + 2 * pw - kw) // sw + 1
        if h < 1 or w < 1:
            raise _TooSmall(f"the {self.h}x{self.w} feature map at {where} is smaller than its "
                            f"{kh}x{kw} kernel")
        self.macs += out * (self.c // groups) * kh * kw * h * w
        self.c, self.h, self.w = out, h, w

    def pool(self, kernel, stride, padding=0, where=""):
        h = (self.h + 2 * padding - kernel) // stride + 1
        w = (self.w + 2 * padding - kernel) // stride + 1
        if h < 1 or w < 1:
            raise _TooSmall(f"the {self.h}x{self.w} feature map at {where} is smaller than its "
                            f"{kernel}x{kernel} pooling window")
        self.h, self.w = h, w

    def bn(self):
        if self.h * self.w < self.bn_values:
            self.bn_values, self.bn_where = self.h * self.w, f"{self.h}x{self.w}"

    def linear(self, n_in, n_out, rows=1):
        self.macs += rows * n_in * n_out


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _walk(model: str, shape: tuple[int, ...], classes: int, a: dict) -> _Walk:
    return _WALKERS[model](model, shape, classes, a)


def _walk_lenet5(model, shape, classes, a):
    s = _Walk(*shape)
    s.conv(6, 5, padding=2, where="conv1")
    s.pool(2, 2, where="pool1")
    s.conv(16, 5, padding=0, where="conv2")
    s.pool(2, 2, where="pool2")
    s.linear(s.c * s.h * s.w, 120)
    s.linear(120, 84)
    s.linear(84, classes)
    return s


def _walk_resnet(model, shape, classes, a):
    kind, blocks, stem = RESNETS[model]
    stem_kernel, stem_stride, maxpool = RESNET_STEMS[stem]
    expansion = RESNET_EXPANSION[kind]
    s = _Walk(*shape)
    s.conv(64, stem_kernel, stem_stride, where="conv1")
    s.bn()
    if maxpool:
        s.pool(3, 2, 1, where="maxpool")
    for stage, (width, n) in enumerate(zip(RESNET_WIDTHS, blocks), start=1):
        for index in range(n):
            stride = 2 if stage > 1 and index == 0 else 1
            c_in, where = s.c, f"layer{stage}.{index}"
            if kind == "basic":
                s.conv(width, 3, stride, where=f"{where}.conv1")
                s.bn()
                s.conv(width, 3, where=f"{where}.conv2")
            else:
                s.conv(width, 1, where=f"{where}.conv1")
                s.bn()
                s.conv(width, 3, stride, where=f"{where}.conv2")
                s.bn()
                s.conv(width * expansion, 1, where=f"{where}.conv3")
            s.bn()
            if stride != 1 or c_in != width * expansion:
                s.macs += c_in * width * expansion * s.h * s.w  # downsample 1x1 conv
    s.linear(512 * expansion, classes)
    return s


def _walk_vgg16(model, shape, classes, a):
    s = _Walk(*shape)
    index = 0
    for v in VGG16:
        if v == "M":
            s.pool(2, 2, where=f"features.{index}")
            index += 1
        else:
            s.conv(v, 3, where=f"features.{index}")
            index += 2
    s.linear(512 * VGG_POOL * VGG_POOL, a["classifier"])
    s.linear(a["classifier"], a["classifier"])
    s.linear(a["classifier"], classes)
    return s


def _walk_mobilenet_v2(model, shape, classes, a):
    s = _Walk(*shape)
    s.conv(MOBILENET_V2_STEM, 3, 2, where="features.0")
    s.bn()
    index = 1
    for t, c, n, first_stride in MOBILENET_V2:
        for i in range(n):
            hidden = int(round(s.c * t))
            if t != 1:
                s.conv(hidden, 1)
                s.bn()
            s.conv(hidden, 3, first_stride if i == 0 else 1, groups=hidden,
                   where=f"features.{index}")
            s.bn()
            s.conv(c, 1)
            s.bn()
            index += 1
    s.conv(MOBILENET_V2_LAST, 1)
    s.bn()
    s.linear(MOBILENET_V2_LAST, classes)
    return s


def _walk_efficientnet_b4(model, shape, classes, a):
    blocks = efficientnet_blocks(a["width"], a["depth"])
    s = _Walk(*shape)
    s.conv(blocks[0]["in"], 3, 2, where="features.0")
    s.bn()
    for b in blocks:
        if b["expanded"] != b["in"]:
            s.conv(b["expanded"], 1)
            s.bn()
        s.conv(b["expanded"], b["kernel"], b["stride"], groups=b["expanded"],
               where=f"features.{b['stage']}.{b['index']}")
        s.bn()
        s.linear(b["expanded"], b["squeeze"])  # squeeze-and-excitation 1x1 convs
        s.linear(b["squeeze"], b["expanded"])
        s.conv(b["out"], 1)
        s.bn()
    last = 4 * blocks[-1]["out"]
    s.conv(last, 1)
    s.bn()
    s.linear(last, classes)
    return s


def _walk_deepspeech2(model, shape, classes, a):
    freq, frames = shape
    s = _Walk(1, freq, frames)
    s.conv(a["conv_channels"], (41, 11), (2, 2), (20, 5), where="conv.0")
    s.bn()
    s.conv(a["conv_channels"], (21, 11), (2, 1), (10, 5), where="conv.3")
    s.bn()
    n_in, hidden = s.c * s.h, a["hidden"]
    for _ in range(a["layers"]):
        s.linear(n_in + hidden, 3 * hidden, rows=2 * s.w)  # 3 gates, two directions
        n_in = 2 * hidden
    s.linear(2 * hidden, classes, rows=s.w)
    return s


def _walk_bert_base(model, shape, classes, a):
    (length,) = shape
    if length > a["max_positions"]:
        raise _TooSmall(f"its position embeddings cover {a['max_positions']} tokens")
    s = _Walk(1, 1, length)
    d = a["hidden"]
    for _ in range(a["layers"]):
        s.linear(d, 4 * d, rows=length)  # Q, K, V and output projections
        s.macs += 2 * length * length * d  # QK^T and attention x V
        s.linear(d, a["ffn"], rows=length)
        s.linear(a["ffn"], d, rows=length)
    s.linear(d, d)  # pooler on the first token
    s.linear(d, classes)
    return s


def _walk_lstm_lm(model, shape, classes, a):
    (length,) = shape
    s = _Walk(1, 1, length)
    n_in = a["embedding"]
    for _ in range(a["layers"]):
        s.linear(n_in + a["hidden"], 4 * a["hidden"], rows=length)
        n_in = a["hidden"]
    s.linear(a["hidden"], classes, rows=length)
    return s


_WALKERS = {
    "lenet5": _walk_lenet5, "resnet18": _walk_resnet, "resnet18_cifar": _walk_resnet,
    "resnet152": _walk_resnet, "vgg16": _walk_vgg16,
    "mobilenet_v2": _walk_mobilenet_v2, "efficientnet_b4": _walk_efficientnet_b4,
    "deepspeech2": _walk_deepspeech2, "bert_base": _walk_bert_base, "lstm_lm": _walk_lstm_lm,
}


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
            "trainable_parameters": {"pytorch": spec.parameters, "tensorflow": spec.parameters},
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
    header = ("model", "task", "input shape", "params pytorch", "params tensorflow",
              "GFLOPs infer", "GFLOPs train", "library differences")
    table = [header] + [(
        r["model"], r["task"], "x".join(map(str, r["input_shape"])),
        f"{r['trainable_parameters']['pytorch']:,}", f"{r['trainable_parameters']['tensorflow']:,}",
        f"{r['gflops_per_sample']['infer']:.3f}", f"{r['gflops_per_sample']['train']:.3f}",
        ", ".join(r["library_differences"]),
    ) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])
    print(f"\nEvery model: {', '.join(OPTIMIZER_DIFFERENCES)}.\n{FLOP_CONVENTION}\n"
          "Differences: `python -m fwbench models --json` or docs/models.md.")
