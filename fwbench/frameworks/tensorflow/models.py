"""The model zoo in TensorFlow (Keras 3): the same networks as frameworks/pytorch/models.py.

Padding is explicit where PyTorch pads symmetrically and Keras's 'same' would not; BatchNorm
takes PyTorch's epsilon (1e-5) and momentum (Keras momentum = 1 - PyTorch momentum).
"""

from __future__ import annotations

import keras
from keras import layers

BN = {"epsilon": 1e-5, "momentum": 0.9}


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int) -> keras.Model:
    """A freshly initialised ``name`` for NHWC inputs; ``input_shape`` is (C, H, W) as everywhere."""
    channels, height, width = input_shape
    inputs = keras.Input((height, width, channels))
    return keras.Model(inputs, _BUILDERS[name](inputs, num_classes), name=name)


def _lenet5(x, num_classes):
    x = layers.ZeroPadding2D(2)(x)
    x = layers.Conv2D(6, 5, activation="relu")(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Conv2D(16, 5, activation="relu")(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Flatten()(x)
    x = layers.Dense(120, activation="relu")(x)
    x = layers.Dense(84, activation="relu")(x)
    return layers.Dense(num_classes)(x)


def _conv_bn(x, filters, kernel, stride, relu=True):
    if kernel > 1:
        x = layers.ZeroPadding2D(kernel // 2)(x)
    x = layers.Conv2D(filters, kernel, stride, use_bias=False)(x)
    x = layers.BatchNormalization(**BN)(x)
    return layers.ReLU()(x) if relu else x


def _basic_block(x, filters, stride):
    shortcut = x
    if stride != 1 or x.shape[-1] != filters:
        shortcut = _conv_bn(x, filters, 1, stride, relu=False)
    y = _conv_bn(x, filters, 3, stride)
    y = _conv_bn(y, filters, 3, 1, relu=False)
    return layers.ReLU()(layers.Add()([y, shortcut]))


def _resnet18(x, num_classes):
    x = _conv_bn(x, 64, 7, 2)
    # Zero padding equals PyTorch's -inf padding here: inputs to the pool are >= 0 after ReLU.
    x = layers.ZeroPadding2D(1)(x)
    x = layers.MaxPooling2D(3, 2)(x)
    for filters, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        x = _basic_block(x, filters, stride)
        x = _basic_block(x, filters, 1)
    x = layers.GlobalAveragePooling2D()(x)
    return layers.Dense(num_classes)(x)


_BUILDERS = {"lenet5": _lenet5, "resnet18": _resnet18}


def loss_fn() -> keras.losses.Loss:
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def optimizer(spec: dict) -> keras.optimizers.Optimizer:
    return keras.optimizers.SGD(learning_rate=spec["learning_rate"], momentum=spec["momentum"])
