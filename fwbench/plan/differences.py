"""The library differences found between PyTorch (torchvision) and Keras (keras.applications), each
with what fwbench does about it.

A model's ``ModelSpec.differences`` names the ones that concern it (OPTIMIZER_DIFFERENCES concern
every model); `python -m fwbench models` prints them and docs/models.md explains them. Kept as
data, beside the model zoo, so that the builders, the tests and the documentation cite one list.
"""

from __future__ import annotations

from dataclasses import dataclass


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
