"""TensorFlow's one training step and one inference batch, written once for every experiment.

The throughput backend, the real-data trainer and the distributed replica all build their step
here, and ``compiled`` compiles what they built, whole, and says so: the compile scope a trial
records is the one that ran. Mirror image of frameworks/pytorch/steps.py.

Usage::

    train = train_step(model, loss_fn, optimizer)
    train, record = compiled(train, "xla", "train")   # tf.function(jit_compile=True), whole
    loss = train(x, y)
"""

from __future__ import annotations

import tensorflow as tf

from fwbench.measure.frameworks.base import compiled_record

# The framework modes that compile the step, and with what (Keras mode compiles its own loop).
COMPILERS = {"function": "tf.function", "xla": "tf.function(jit_compile=True), XLA"}


def train_step(model, loss_fn, optimizer, *, weight_decay: float = 0.0):
    """``step(x, y) -> loss``: forward and loss (in float32 under mixed precision, as PyTorch's
    autocast computes it) on a gradient tape, the loss scaled by the optimizer (fp16's
    LossScaleOptimizer; any other returns it as is), gradients, the optimizer's update.
    ``weight_decay`` adds (wd / 2)·Σ w² over the trainable weights to the loss that is
    differentiated, as on the PyTorch side; the loss returned is the data loss."""
    # Read once, as PyTorch's optimizer holds its parameters: Keras walks every layer to collect
    # trainable_variables on each read.
    variables = model.trainable_variables

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, _float32(model(x, training=True)))
            total = loss
            if weight_decay:
                total = loss + weight_decay / 2 * tf.add_n(
                    [tf.reduce_sum(tf.square(tf.cast(v, tf.float32))) for v in variables])
            scaled = optimizer.scale_loss(total)
        grads = tape.gradient(scaled, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    return step


def infer_step(model):
    """``step(x) -> outputs``: the forward pass in inference mode (training=False)."""

    def step(x):
        return model(x, training=False)

    return step


def compiled(step, mode: str, phase: str, input_signature=None):
    """``step`` as the framework mode runs it, and the record of what is compiled (None: eager).

    tf.function traces the whole step, optimizer included, into one graph; with XLA
    (jit_compile) the graph is compiled. ``input_signature`` lets batches of another size (the
    last of an epoch) reuse the trace."""
    if mode not in COMPILERS:
        return step, None
    step = tf.function(step, jit_compile=mode == "xla", input_signature=input_signature)
    return step, compiled_record(phase, COMPILERS[mode])


def _float32(outputs):
    """Losses are computed in float32 under mixed precision, as PyTorch's autocast does."""
    return tf.cast(outputs, tf.float32) if outputs.dtype != tf.float32 else outputs
