"""The model zoo in PyTorch: the same networks, functions in the same order, as
frameworks/tensorflow/models.py.

Vision models are torchvision's (the reference for parameter counts); the speech and language
models are written here. Architecture settings come from fwbench.plan.models and
fwbench.plan.architectures, once for both.

torchvision is imported inside the builders that use it: importing it costs about a second per
process (it imports torch._dynamo), which lenet5 and the speech and language models do not need.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from fwbench.plan import architectures as nets, models as zoo


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int,
                **overrides) -> nn.Module:
    """A freshly initialised ``name`` for inputs of ``input_shape`` (fwbench.plan.models' shapes);
    ``overrides`` change architecture settings (e.g. the reduced test width, dropout 0)."""
    return _BUILDERS[name](tuple(input_shape), num_classes, zoo.arch(name, **overrides))


def _lenet5(shape, classes, a):
    channels, height, width = shape
    flat = 16 * ((height // 2 - 4) // 2) * ((width // 2 - 4) // 2)
    return nn.Sequential(OrderedDict([
        ("conv1", nn.Conv2d(channels, 6, 5, padding=2)), ("relu1", nn.ReLU()),
        ("pool1", nn.MaxPool2d(2)),
        ("conv2", nn.Conv2d(6, 16, 5)), ("relu2", nn.ReLU()), ("pool2", nn.MaxPool2d(2)),
        ("flatten", nn.Flatten()),
        ("fc1", nn.Linear(flat, 120)), ("relu3", nn.ReLU()),
        ("fc2", nn.Linear(120, 84)), ("relu4", nn.ReLU()),
        ("fc3", nn.Linear(84, classes)),
    ]))


def _resnet(name):
    kind, blocks, stem = nets.RESNETS[name]
    stem_kernel, stem_stride, maxpool = nets.RESNET_STEMS[stem]

    def build(shape, classes, a):
        """torchvision's ResNet from the architecture table (tv.resnet18 and tv.resnet152 build the
        same); conv1 is replaced only where it must be, so resnet18 keeps torchvision's draw."""
        from torchvision.models import resnet as tv

        block = tv.BasicBlock if kind == "basic" else tv.Bottleneck
        model = tv.ResNet(block, list(blocks), num_classes=classes)
        if shape[0] != 3 or stem != "imagenet":
            model.conv1 = nn.Conv2d(shape[0], 64, stem_kernel, stem_stride, stem_kernel // 2,
                                    bias=False)
        if not maxpool:
            model.maxpool = nn.Identity()
        return model
    return build


def _vgg16(shape, classes, a):
    from torchvision import models as tv

    model = tv.vgg16(weights=None, num_classes=classes, dropout=a["dropout"])
    if a["classifier"] != 4096:  # a narrower classifier, for tests: the same layers
        width = a["classifier"]
        model.classifier[0] = nn.Linear(512 * nets.VGG_POOL * nets.VGG_POOL, width)
        model.classifier[3] = nn.Linear(width, width)
        model.classifier[6] = nn.Linear(width, classes)
    if shape[0] != 3:
        model.features[0] = nn.Conv2d(shape[0], 64, 3, padding=1)
    return model


def _mobilenet_v2(shape, classes, a):
    from torchvision import models as tv

    model = tv.mobilenet_v2(weights=None, num_classes=classes, dropout=a["dropout"])
    if shape[0] != 3:
        model.features[0][0] = nn.Conv2d(shape[0], nets.MOBILENET_V2_STEM, 3, 2, 1, bias=False)
    return model


def _efficientnet_b4(shape, classes, a):
    from torchvision import models as tv

    if (a["width"], a["depth"]) != (1.4, 1.8):
        raise ValueError("torchvision's efficientnet_b4 is width 1.4, depth 1.8; "
                         f"got width {a['width']}, depth {a['depth']}")
    model = tv.efficientnet_b4(weights=None, num_classes=classes, dropout=a["dropout"],
                               stochastic_depth_prob=a["stochastic_depth"])
    if shape[0] != 3:
        stem = model.features[0][0]
        model.features[0][0] = nn.Conv2d(shape[0], stem.out_channels, 3, 2, 1, bias=False)
    return model


class DeepSpeech2(nn.Module):
    """DeepSpeech2-shaped: two 2-D convolutions over the spectrogram (BatchNorm, hardtanh 0..20),
    bidirectional GRUs, a linear layer to characters; returns logits (N, T', classes)."""

    def __init__(self, shape, classes, conv_channels, hidden, layers):
        super().__init__()
        freq, _ = shape
        c = conv_channels
        self.conv = nn.Sequential(
            nn.Conv2d(1, c, (41, 11), (2, 2), (20, 5)), nn.BatchNorm2d(c), nn.Hardtanh(0, 20),
            nn.Conv2d(c, c, (21, 11), (2, 1), (10, 5)), nn.BatchNorm2d(c), nn.Hardtanh(0, 20),
        )
        freq_out = ((freq + 1) // 2 + 1) // 2
        self.rnn = nn.GRU(c * freq_out, hidden, layers, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        x = self.conv(x.unsqueeze(1))          # (N, C, F', T')
        x = x.flatten(1, 2).transpose(1, 2)    # (N, T', C * F'), channel-major features
        x, _ = self.rnn(x)
        return self.fc(x)


def _deepspeech2(shape, classes, a):
    return DeepSpeech2(shape, classes, a["conv_channels"], a["hidden"], a["layers"])


class BertEmbeddings(nn.Module):
    def __init__(self, vocab, hidden, max_positions, type_vocab, dropout, eps):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_positions, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device).expand_as(tokens)
        x = (self.word_embeddings(tokens) + self.position_embeddings(positions)
             + self.token_type_embeddings(torch.zeros_like(tokens)))
        return self.dropout(self.norm(x))


class BertClassifier(nn.Module):
    """BERT-base-shaped: post-LayerNorm Transformer encoder (GELU), tanh pooler on the first
    token, linear classifier; returns logits (N, classes). No padding mask: every token is real."""

    def __init__(self, classes, vocab, hidden, layers, heads, ffn, max_positions, type_vocab,
                 dropout, layer_norm_eps):
        super().__init__()
        self.embeddings = BertEmbeddings(vocab, hidden, max_positions, type_vocab, dropout,
                                         layer_norm_eps)
        layer = nn.TransformerEncoderLayer(hidden, heads, ffn, dropout, activation="gelu",
                                           layer_norm_eps=layer_norm_eps, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        for copy in self.encoder.layers:  # TransformerEncoder deep-copies one initialisation
            copy.self_attn._reset_parameters()
            copy.linear1.reset_parameters()
            copy.linear2.reset_parameters()
        self.pooler = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, tokens):
        x = self.encoder(self.embeddings(tokens))
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return self.classifier(self.dropout(pooled))


def _bert_base(shape, classes, a):
    return BertClassifier(classes, **a)


class LSTMLanguageModel(nn.Module):
    """Zaremba-style LSTM language model: embedding, stacked LSTM, linear decoder over the
    vocabulary (= num_classes), dropout between; returns logits (N, T, vocabulary).

    PyTorch's second bias vector (b_hh) is fixed at zero and frozen: Keras's LSTM has one bias
    per gate, and this keeps trainable parameters and training dynamics the same.
    """

    def __init__(self, vocab, embedding, hidden, layers, dropout):
        super().__init__()
        self.encoder = nn.Embedding(vocab, embedding)
        self.drop = nn.Dropout(dropout)
        self.rnn = nn.LSTM(embedding, hidden, layers, batch_first=True,
                           dropout=dropout if layers > 1 else 0.0)
        self.decoder = nn.Linear(hidden, vocab)
        for name, p in self.rnn.named_parameters():
            if name.startswith("bias_hh"):
                nn.init.zeros_(p)
                p.requires_grad_(False)

    def forward(self, tokens):
        x, _ = self.rnn(self.drop(self.encoder(tokens)))
        return self.decoder(self.drop(x))


def _lstm_lm(shape, classes, a):
    return LSTMLanguageModel(classes, a["embedding"], a["hidden"], a["layers"], a["dropout"])


_BUILDERS = {"lenet5": _lenet5, **{name: _resnet(name) for name in nets.RESNETS},
             "vgg16": _vgg16, "mobilenet_v2": _mobilenet_v2, "efficientnet_b4": _efficientnet_b4,
             "deepspeech2": _deepspeech2, "bert_base": _bert_base, "lstm_lm": _lstm_lm}


def loss_fn(name: str):
    """The model's loss (fwbench.plan.models.LOSSES), called as ``loss_fn(outputs, targets)``."""
    return {"cross_entropy": nn.CrossEntropyLoss(), "token_cross_entropy": _token_cross_entropy,
            "ctc": _ctc}[zoo.MODELS[name].loss]


def _token_cross_entropy(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def _ctc(logits, targets):
    lengths = (targets >= 0).sum(-1)
    labels = targets.clamp(min=0)  # the padding (-1) lies beyond each length
    log_probs = logits.log_softmax(-1).transpose(0, 1)  # (T', N, C), as ctc_loss wants
    frames = torch.full((logits.shape[0],), logits.shape[1], dtype=torch.long,
                        device=logits.device)
    return F.ctc_loss(log_probs, labels, frames, lengths, blank=0, reduction="mean")


def optimizer(model: nn.Module, recipe: dict) -> torch.optim.Optimizer:
    """The optimizer of ``recipe`` (fwbench.plan.models.OPTIMIZERS) over the trainable
    parameters."""
    params = [p for p in model.parameters() if p.requires_grad]
    if recipe["name"] == "sgd":
        return torch.optim.SGD(params, lr=recipe["learning_rate"], momentum=recipe["momentum"])
    if recipe["name"] == "adam":
        return torch.optim.Adam(params, lr=recipe["learning_rate"],
                                betas=(recipe["beta_1"], recipe["beta_2"]), eps=recipe["epsilon"])
    raise ValueError(f"optimizer must be one of {sorted(zoo.OPTIMIZERS)}, got {recipe['name']!r}")


def batch_tensors(name: str, x: np.ndarray, y, device) -> tuple:
    """The synthetic batch on ``device``, in this framework's layout (images stay NCHW)."""
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)


def trainable_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
