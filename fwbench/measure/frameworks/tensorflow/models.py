"""The model zoo in TensorFlow (Keras 3): the same networks, functions in the same order, as
frameworks/pytorch/models.py.

Every layer with weights is named like the PyTorch module it mirrors (``layer1.0.conv1``), which
is how fwbench/measure/frameworks/transfer.py copies weights across. keras.applications is not used:
its ResNet, VGG16, MobileNetV2 and EfficientNet differ from torchvision's
(fwbench.plan.differences). Padding follows PyTorch: 'same' where that is symmetric (stride 1, odd
kernel), explicit ZeroPadding2D before strided layers. BatchNorm takes PyTorch's epsilon and
momentum (fwbench.plan.models.BATCH_NORM).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import layers, ops

from fwbench.plan import architectures as nets, models as zoo

BN = zoo.BATCH_NORM


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int,
                **overrides) -> keras.Model:
    """A freshly initialised ``name`` for inputs of ``input_shape`` (fwbench.plan.models' shapes;
    images arrive NHWC); ``overrides`` change architecture settings as in PyTorch."""
    spec = zoo.MODELS[name]
    shape = tuple(input_shape)
    if spec.inputs == "image":
        inputs = keras.Input((*shape[1:], shape[0]))
    else:
        inputs = keras.Input(shape, dtype="float32" if spec.inputs == "spectrogram" else "int64")
    outputs = _BUILDERS[name](inputs, shape, num_classes, zoo.arch(name, **overrides))
    return keras.Model(inputs, outputs, name=name)


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _conv(x, filters, kernel, stride=1, padding=None, *, name, bias=True, depthwise=False):
    """Conv2D (or DepthwiseConv2D) padded the way PyTorch pads: ``padding`` per side, by
    default (k - 1) // 2."""
    (kh, kw), (sh, sw) = _pair(kernel), _pair(stride)
    ph, pw = _pair(padding) if padding is not None else ((kh - 1) // 2, (kw - 1) // 2)
    same = (sh, sw) == (1, 1) and (ph, pw) == ((kh - 1) // 2, (kw - 1) // 2) and kh % 2 and kw % 2
    if not same and (ph or pw):
        x = layers.ZeroPadding2D((ph, pw))(x)
    mode = "same" if same else "valid"
    if depthwise:
        return layers.DepthwiseConv2D((kh, kw), (sh, sw), mode, use_bias=bias, name=name)(x)
    return layers.Conv2D(filters, (kh, kw), (sh, sw), mode, use_bias=bias, name=name)(x)


def _bn(x, name):
    return layers.BatchNormalization(epsilon=BN["epsilon"], momentum=BN["momentum"], name=name)(x)


def _lenet5(x, shape, classes, a):
    x = _conv(x, 6, 5, padding=2, name="conv1")
    x = layers.MaxPooling2D(2)(layers.ReLU()(x))
    x = _conv(x, 16, 5, padding=0, name="conv2")
    x = layers.MaxPooling2D(2)(layers.ReLU()(x))
    x = layers.Flatten()(x)
    x = layers.Dense(120, activation="relu", name="fc1")(x)
    x = layers.Dense(84, activation="relu", name="fc2")(x)
    return layers.Dense(classes, name="fc3")(x)


def _resnet(name):
    kind, blocks, stem = nets.RESNETS[name]
    stem_kernel, stem_stride, maxpool = nets.RESNET_STEMS[stem]
    expansion = nets.RESNET_EXPANSION[kind]

    def build(x, shape, classes, a):
        x = _conv(x, 64, stem_kernel, stem_stride, name="conv1", bias=False)
        x = layers.ReLU()(_bn(x, "bn1"))
        if maxpool:
            # Zero padding equals PyTorch's -inf padding: the pool's inputs are >= 0 after ReLU.
            x = layers.MaxPooling2D(3, 2)(layers.ZeroPadding2D(1)(x))
        for stage, (width, n) in enumerate(zip(nets.RESNET_WIDTHS, blocks), start=1):
            for index in range(n):
                stride = 2 if stage > 1 and index == 0 else 1
                x = _resnet_block(x, kind, width, expansion, stride, f"layer{stage}.{index}")
        x = layers.GlobalAveragePooling2D()(x)
        return layers.Dense(classes, name="fc")(x)
    return build


def _resnet_block(x, kind, width, expansion, stride, p):
    shortcut = x
    if stride != 1 or x.shape[-1] != width * expansion:
        shortcut = _conv(x, width * expansion, 1, stride, 0, name=f"{p}.downsample.0", bias=False)
        shortcut = _bn(shortcut, f"{p}.downsample.1")
    if kind == "basic":
        y = _bn(_conv(x, width, 3, stride, name=f"{p}.conv1", bias=False), f"{p}.bn1")
        y = layers.ReLU()(y)
        y = _bn(_conv(y, width, 3, name=f"{p}.conv2", bias=False), f"{p}.bn2")
    else:  # torchvision's v1.5 bottleneck: the stride sits on the 3x3 convolution
        y = layers.ReLU()(_bn(_conv(x, width, 1, name=f"{p}.conv1", bias=False), f"{p}.bn1"))
        y = _bn(_conv(y, width, 3, stride, name=f"{p}.conv2", bias=False), f"{p}.bn2")
        y = layers.ReLU()(y)
        y = _bn(_conv(y, width * expansion, 1, name=f"{p}.conv3", bias=False), f"{p}.bn3")
    return layers.ReLU()(layers.Add()([y, shortcut]))


class AdaptiveAveragePooling2D(layers.Layer):
    """PyTorch's AdaptiveAvgPool2d for NHWC: output bin i averages input rows
    floor(i * H / n) .. ceil((i + 1) * H / n) - 1 (and likewise columns)."""

    def __init__(self, size: int, **kwargs):
        super().__init__(**kwargs)
        self.size = size

    def call(self, x):
        height, width = x.shape[1], x.shape[2]
        if (height, width) == (self.size, self.size):
            return x
        rows, cols = self._bins(height), self._bins(width)
        return ops.einsum("ih,nhwc,jw->nijc", ops.cast(rows, x.dtype), x, ops.cast(cols, x.dtype))

    def _bins(self, n_in: int) -> np.ndarray:
        matrix = np.zeros((self.size, n_in), dtype=np.float32)
        for i in range(self.size):
            start, end = (i * n_in) // self.size, -(-((i + 1) * n_in) // self.size)
            matrix[i, start:end] = 1.0 / (end - start)
        return matrix

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.size, self.size, input_shape[3])

    def get_config(self):
        return {**super().get_config(), "size": self.size}


def _vgg16(x, shape, classes, a):
    index = 0
    for v in nets.VGG16:
        if v == "M":
            x = layers.MaxPooling2D(2)(x)
            index += 1
        else:
            x = layers.ReLU()(_conv(x, v, 3, name=f"features.{index}"))
            index += 2
    x = layers.Flatten()(AdaptiveAveragePooling2D(nets.VGG_POOL)(x))
    x = layers.Dense(a["classifier"], activation="relu", name="classifier.0")(x)
    x = layers.Dense(a["classifier"], activation="relu", name="classifier.3")(
        layers.Dropout(a["dropout"])(x))
    return layers.Dense(classes, name="classifier.6")(layers.Dropout(a["dropout"])(x))


def _mobilenet_v2(x, shape, classes, a):
    relu6 = layers.ReLU(6.0)
    x = relu6(_bn(_conv(x, nets.MOBILENET_V2_STEM, 3, 2, name="features.0.0", bias=False),
                  "features.0.1"))
    index = 1
    for t, c, n, first_stride in nets.MOBILENET_V2:
        for i in range(n):
            stride, c_in, p = first_stride if i == 0 else 1, x.shape[-1], f"features.{index}.conv"
            hidden, j, y = int(round(c_in * t)), 0, x
            if t != 1:
                y = relu6(_bn(_conv(y, hidden, 1, name=f"{p}.0.0", bias=False), f"{p}.0.1"))
                j = 1
            y = _conv(y, hidden, 3, stride, name=f"{p}.{j}.0", bias=False, depthwise=True)
            y = relu6(_bn(y, f"{p}.{j}.1"))
            y = _bn(_conv(y, c, 1, name=f"{p}.{j + 1}", bias=False), f"{p}.{j + 2}")
            x = layers.Add()([x, y]) if stride == 1 and c_in == c else y
            index += 1
    x = relu6(_bn(_conv(x, nets.MOBILENET_V2_LAST, 1, name=f"features.{index}.0", bias=False),
                  f"features.{index}.1"))
    x = layers.Dropout(a["dropout"])(layers.GlobalAveragePooling2D()(x))
    return layers.Dense(classes, name="classifier.1")(x)


def _efficientnet_b4(x, shape, classes, a):
    silu = layers.Activation("silu")
    blocks = nets.efficientnet_blocks(a["width"], a["depth"])
    x = silu(_bn(_conv(x, blocks[0]["in"], 3, 2, name="features.0.0", bias=False), "features.0.1"))
    for b in blocks:
        p, j, y = f"features.{b['stage']}.{b['index']}.block", 0, x
        if b["expanded"] != b["in"]:
            y = silu(_bn(_conv(y, b["expanded"], 1, name=f"{p}.0.0", bias=False), f"{p}.0.1"))
            j = 1
        y = _conv(y, b["expanded"], b["kernel"], b["stride"], name=f"{p}.{j}.0", bias=False,
                  depthwise=True)
        y = silu(_bn(y, f"{p}.{j}.1"))
        scale = layers.GlobalAveragePooling2D(keepdims=True)(y)
        scale = silu(layers.Conv2D(b["squeeze"], 1, name=f"{p}.{j + 1}.fc1")(scale))
        scale = layers.Conv2D(b["expanded"], 1, activation="sigmoid",
                              name=f"{p}.{j + 1}.fc2")(scale)
        y = layers.Multiply()([scale, y])
        y = _bn(_conv(y, b["out"], 1, name=f"{p}.{j + 2}.0", bias=False), f"{p}.{j + 2}.1")
        if b["stride"] == 1 and b["in"] == b["out"]:
            rate = a["stochastic_depth"] * b["drop_fraction"]
            if rate > 0:  # torchvision's StochasticDepth(rate, "row"): one draw per sample
                y = layers.Dropout(rate, noise_shape=(None, 1, 1, 1))(y)
            y = layers.Add()([y, x])
        x = y
    last, stage = 4 * blocks[-1]["out"], blocks[-1]["stage"] + 1
    x = silu(_bn(_conv(x, last, 1, name=f"features.{stage}.0", bias=False), f"features.{stage}.1"))
    x = layers.Dropout(a["dropout"])(layers.GlobalAveragePooling2D()(x))
    return layers.Dense(classes, name="classifier.1")(x)


def _deepspeech2(x, shape, classes, a):
    freq, frames = shape
    c = a["conv_channels"]
    hardtanh = layers.ReLU(max_value=20.0)  # PyTorch's Hardtanh(0, 20)
    x = layers.Reshape((freq, frames, 1))(x)
    x = hardtanh(_bn(_conv(x, c, (41, 11), (2, 2), (20, 5), name="conv.0"), "conv.1"))
    x = hardtanh(_bn(_conv(x, c, (21, 11), (2, 1), (10, 5), name="conv.3"), "conv.4"))
    freq_out = x.shape[1]
    x = layers.Permute((2, 3, 1))(x)  # (N, T', C, F'): channel-major features, as in PyTorch
    x = layers.Reshape((-1, c * freq_out))(x)
    for k in range(a["layers"]):
        x = layers.Bidirectional(layers.GRU(a["hidden"], return_sequences=True), name=f"rnn.{k}")(x)
    return layers.Dense(classes, name="fc")(x)


@tf.custom_gradient
def _dense_gradient(table):
    return tf.identity(table), tf.convert_to_tensor


class Embedding(layers.Embedding):
    """layers.Embedding with a dense weight gradient, as PyTorch's nn.Embedding has.

    Keras's gradient is sparse (IndexedSlices), and Keras's Adam then squares each occurrence's
    gradient before repeated tokens are summed: a different second moment from PyTorch's.
    """

    def call(self, inputs):
        table = _dense_gradient(tf.convert_to_tensor(self.embeddings))
        return ops.cast(ops.take(table, ops.cast(inputs, "int32"), axis=0), self.compute_dtype)


def _bert_base(tokens, shape, classes, a):
    (length,) = shape
    d, eps, drop = a["hidden"], a["layer_norm_eps"], a["dropout"]
    positions = ops.zeros_like(tokens) + ops.arange(length, dtype="int64")
    x = layers.Add()([
        Embedding(a["vocab"], d, name="embeddings.word_embeddings")(tokens),
        Embedding(a["max_positions"], d, name="embeddings.position_embeddings")(positions),
        Embedding(a["type_vocab"], d, name="embeddings.token_type_embeddings")(
            ops.zeros_like(tokens)),
    ])
    x = layers.Dropout(drop)(layers.LayerNormalization(epsilon=eps, name="embeddings.norm")(x))
    for i in range(a["layers"]):
        p = f"encoder.layers.{i}"
        attention = layers.MultiHeadAttention(a["heads"], d // a["heads"], dropout=drop,
                                              name=f"{p}.self_attn")(x, x)
        x = layers.Add()([x, layers.Dropout(drop)(attention)])
        x = layers.LayerNormalization(epsilon=eps, name=f"{p}.norm1")(x)
        h = layers.Dense(a["ffn"], activation="gelu", name=f"{p}.linear1")(x)
        h = layers.Dense(d, name=f"{p}.linear2")(layers.Dropout(drop)(h))
        x = layers.Add()([x, layers.Dropout(drop)(h)])
        x = layers.LayerNormalization(epsilon=eps, name=f"{p}.norm2")(x)
    pooled = layers.Dense(d, activation="tanh", name="pooler")(x[:, 0])
    return layers.Dense(classes, name="classifier")(layers.Dropout(drop)(pooled))


def _lstm_lm(tokens, shape, classes, a):
    x = layers.Dropout(a["dropout"])(Embedding(classes, a["embedding"], name="encoder")(tokens))
    for k in range(a["layers"]):
        x = layers.LSTM(a["hidden"], return_sequences=True, name=f"rnn.{k}")(x)
        x = layers.Dropout(a["dropout"])(x)
    return layers.Dense(classes, name="decoder")(x)


_BUILDERS = {"lenet5": _lenet5, **{name: _resnet(name) for name in nets.RESNETS},
             "vgg16": _vgg16, "mobilenet_v2": _mobilenet_v2, "efficientnet_b4": _efficientnet_b4,
             "deepspeech2": _deepspeech2, "bert_base": _bert_base, "lstm_lm": _lstm_lm}


def loss_fn(name: str):
    """The model's loss (fwbench.plan.models.LOSSES), called as ``loss_fn(targets, outputs)``."""
    if zoo.MODELS[name].loss == "ctc":
        return _ctc
    # Averages over every position for (N, T, V) logits too: token cross-entropy.
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _ctc(targets, logits):
    labels = ops.cast(targets, "int32")  # Keras's compile() may hand them over as floats
    lengths = ops.sum(ops.cast(labels >= 0, "int32"), axis=-1)
    labels = ops.maximum(labels, 0)  # the padding (-1) lies beyond each length
    frames = ops.full((ops.shape(logits)[0],), ops.shape(logits)[1], dtype="int32")
    per_utterance = ops.ctc_loss(labels, logits, lengths, frames, mask_index=0)
    return ops.mean(per_utterance / ops.cast(lengths, per_utterance.dtype))


def optimizer(recipe: dict) -> keras.optimizers.Optimizer:
    """The optimizer of ``recipe`` (fwbench.plan.models.OPTIMIZERS)."""
    if recipe["name"] == "sgd":
        return keras.optimizers.SGD(learning_rate=recipe["learning_rate"],
                                    momentum=recipe["momentum"])
    if recipe["name"] == "adam":
        return keras.optimizers.Adam(learning_rate=recipe["learning_rate"], beta_1=recipe["beta_1"],
                                     beta_2=recipe["beta_2"], epsilon=recipe["epsilon"])
    raise ValueError(f"optimizer must be one of {sorted(zoo.OPTIMIZERS)}, got {recipe['name']!r}")


def batch_tensors(name: str, x: np.ndarray, y, device) -> tuple:
    """The synthetic batch on ``device``, in this framework's layout (images NCHW -> NHWC)."""
    if zoo.MODELS[name].inputs == "image":
        x = np.ascontiguousarray(np.transpose(x, (0, 2, 3, 1)))
    with tf.device(device):
        return tf.constant(x), tf.constant(y)


def trainable_parameters(model: keras.Model) -> int:
    return sum(int(np.prod(v.shape)) for v in model.trainable_weights)
