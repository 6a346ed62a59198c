"""The networks, framework-neutral: the architecture tables both frameworks build from, and one
sample walked through each network by the same tables.

The Keras builders (frameworks/tensorflow/models.py) read every table; the PyTorch side takes the
few torchvision does not fix (stems, the classifier pool). The walk (``walk``) counts
multiply-adds for FLOPs per sample and finds the smallest feature map, so that the FLOPs and the
input checks of fwbench.plan.models describe the network that is built. Framework-free.
"""

from __future__ import annotations

import math

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


# --- one sample through the network ------------------------------------------------------------

class TooSmall(ValueError):
    """The input is too small for the network: a feature map shrank below a kernel or window,
    or a sequence is longer than the position embeddings."""


class Walk:
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
            raise TooSmall(f"the {self.h}x{self.w} feature map at {where} is smaller than its "
                            f"{kh}x{kw} kernel")
        self.macs += out * (self.c // groups) * kh * kw * h * w
        self.c, self.h, self.w = out, h, w

    def pool(self, kernel, stride, padding=0, where=""):
        h = (self.h + 2 * padding - kernel) // stride + 1
        w = (self.w + 2 * padding - kernel) // stride + 1
        if h < 1 or w < 1:
            raise TooSmall(f"the {self.h}x{self.w} feature map at {where} is smaller than its "
                            f"{kernel}x{kernel} pooling window")
        self.h, self.w = h, w

    def bn(self):
        if self.h * self.w < self.bn_values:
            self.bn_values, self.bn_where = self.h * self.w, f"{self.h}x{self.w}"

    def linear(self, n_in, n_out, rows=1):
        self.macs += rows * n_in * n_out


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def walk(model: str, shape: tuple[int, ...], classes: int, a: dict) -> Walk:
    """One sample of ``shape`` through ``model`` with architecture settings ``a``; raises
    TooSmall where the input is too small for it."""
    return _WALKERS[model](model, shape, classes, a)


def _walk_lenet5(model, shape, classes, a):
    s = Walk(*shape)
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
    s = Walk(*shape)
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
    s = Walk(*shape)
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
    s = Walk(*shape)
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
    s = Walk(*shape)
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
    s = Walk(1, freq, frames)
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
        raise TooSmall(f"its position embeddings cover {a['max_positions']} tokens")
    s = Walk(1, 1, length)
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
    s = Walk(1, 1, length)
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
