"""Weights across frameworks: copy a PyTorch model's parameters and buffers into the Keras model
of the same network, layouts converted, and measure how far two such models have drifted apart.

The Keras models (frameworks/tensorflow/models.py) name every layer with weights like the PyTorch
module it mirrors; the copy is by name, and every weight on both sides must be used exactly once,
so a mismatch in architecture is an error here, not a silent partial copy. torch and keras are
imported inside the functions: importing this module imports neither.

Usage::

    copy_weights(torch_model, keras_model)          # both start from PyTorch's initialisation
    ...train both...
    drift = compare(torch_model, keras_model)       # {"relative_error": ..., "worst": ...}
"""

from __future__ import annotations

import numpy as np

from fwbench.errors import FwbenchError

__all__ = ["TransferError", "keras_values", "copy_weights", "compare", "relative_error"]


class TransferError(FwbenchError):
    """The two models are not the same network: a weight has no counterpart or another shape."""


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    """Norm-wise relative error ||a - b|| / ||b|| (0 when both are zero)."""
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    denominator = np.linalg.norm(b)
    difference = np.linalg.norm(a - b)
    return float(difference / denominator) if denominator else float(difference)


def keras_values(torch_model, keras_model) -> list[tuple[object, np.ndarray]]:
    """(Keras variable, PyTorch's value in Keras's layout) for every weight of ``keras_model``."""
    by_name = {layer.name: layer for layer in keras_model.layers}
    pairs, skip = [], ()
    for name, module in torch_model.named_modules():
        if skip and name.startswith(skip):
            continue
        own = list(module.named_parameters(recurse=False)) + [
            b for b in module.named_buffers(recurse=False) if b[0] != "num_batches_tracked"]
        if not own:
            continue
        convert = _converter(module)
        if convert is None:
            raise TransferError(f"no weight conversion for PyTorch module {name!r} "
                                f"({type(module).__name__})")
        pairs += convert(module, name, by_name, keras_model)
        if type(module).__name__ == "MultiheadAttention":
            skip = (*skip, f"{name}.")  # its out_proj is copied with it
    _check_complete(pairs, keras_model)
    return pairs


def copy_weights(torch_model, keras_model) -> None:
    """Give ``keras_model`` the weights (and BatchNorm statistics) of ``torch_model``."""
    for variable, value in keras_values(torch_model, keras_model):
        variable.assign(value)


def compare(torch_model, keras_model, *, trainable: bool = True, exclude=()) -> dict:
    """How far the Keras model's weights are from the PyTorch model's: the norm-wise relative
    error over all (trainable) weights together, and the worst single weight tensor. Weights
    whose Keras path is in ``exclude`` are left out."""
    pairs = [(v, t) for v, t in keras_values(torch_model, keras_model)
             if (v.trainable or not trainable) and v.path not in exclude]
    ours = np.concatenate([np.asarray(v.numpy(), np.float64).ravel() for v, _ in pairs])
    theirs = np.concatenate([np.asarray(t, np.float64).ravel() for _, t in pairs])
    per_tensor = {v.path: relative_error(v.numpy(), t) for v, t in pairs}
    worst = max(per_tensor, key=per_tensor.get)
    return {"relative_error": relative_error(ours, theirs), "worst": worst,
            "worst_relative_error": per_tensor[worst], "tensors": len(pairs)}


# --- per-module conversions: PyTorch module -> [(Keras variable, array)] --------------------------

def _converter(module):
    return {
        "Conv2d": _conv2d, "Linear": _linear, "NonDynamicallyQuantizableLinear": _linear,
        "BatchNorm2d": _batch_norm, "LayerNorm": _layer_norm, "Embedding": _embedding,
        "GRU": _recurrent, "LSTM": _recurrent, "MultiheadAttention": _attention,
    }.get(type(module).__name__)


def _np(tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy()


def _layer(by_name, name, module):
    if name not in by_name:
        raise TransferError(f"the Keras model has no layer named {name!r} for PyTorch's "
                            f"{type(module).__name__}")
    return by_name[name]


def _conv2d(module, name, by_name, model):
    layer = _layer(by_name, name, module)
    weight = _np(module.weight)
    if type(layer).__name__ == "DepthwiseConv2D":
        kernel = weight.transpose(2, 3, 0, 1)  # (C, 1, kh, kw) -> (kh, kw, C, 1)
    else:
        kernel = weight.transpose(2, 3, 1, 0)  # (out, in, kh, kw) -> (kh, kw, in, out)
    pairs = [(layer.kernel, kernel)]
    if module.bias is not None:
        pairs.append((layer.bias, _np(module.bias)))
    return pairs


def _linear(module, name, by_name, model):
    layer = _layer(by_name, name, module)
    weight = _np(module.weight)
    flatten = next((f for f in model.layers
                    if type(f).__name__ == "Flatten" and f.output is layer.input), None)
    if flatten is not None and len(flatten.input.shape) == 4:
        # PyTorch flattened (C, H, W), Keras flattens (H, W, C): permute the input columns.
        _, h, w, c = flatten.input.shape
        weight = weight.reshape(-1, c, h, w).transpose(0, 2, 3, 1).reshape(weight.shape[0], -1)
    pairs = [(layer.kernel, weight.T)]
    if module.bias is not None:
        pairs.append((layer.bias, _np(module.bias)))
    return pairs


def _batch_norm(module, name, by_name, model):
    layer = _layer(by_name, name, module)
    return [(layer.gamma, _np(module.weight)), (layer.beta, _np(module.bias)),
            (layer.moving_mean, _np(module.running_mean)),
            (layer.moving_variance, _np(module.running_var))]


def _layer_norm(module, name, by_name, model):
    layer = _layer(by_name, name, module)
    return [(layer.gamma, _np(module.weight)), (layer.beta, _np(module.bias))]


def _embedding(module, name, by_name, model):
    return [(_layer(by_name, name, module).embeddings, _np(module.weight))]


def _recurrent(module, name, by_name, model):
    """nn.GRU / nn.LSTM (all layers, both directions) -> Keras layers ``{name}.{k}``."""
    gru = type(module).__name__ == "GRU"
    h = module.hidden_size
    pairs = []
    for k in range(module.num_layers):
        layer = _layer(by_name, f"{name}.{k}", module)
        cells = ([layer.forward_layer.cell, layer.backward_layer.cell] if module.bidirectional
                 else [layer.cell])
        for cell, suffix in zip(cells, ("", "_reverse")):
            w_ih, w_hh = (_np(getattr(module, f"weight_{x}_l{k}{suffix}")) for x in ("ih", "hh"))
            b_ih, b_hh = (_np(getattr(module, f"bias_{x}_l{k}{suffix}")) for x in ("ih", "hh"))
            if gru:  # PyTorch gates (r, z, n) -> Keras (z, r, h); two bias rows (reset_after)
                order = np.r_[h:2 * h, 0:h, 2 * h:3 * h]
                w_ih, w_hh, b_ih, b_hh = w_ih[order], w_hh[order], b_ih[order], b_hh[order]
                bias = np.stack([b_ih, b_hh])
            else:  # gates (i, f, g, o) in both; Keras has one bias vector
                bias = b_ih + b_hh
            pairs += [(cell.kernel, w_ih.T), (cell.recurrent_kernel, w_hh.T), (cell.bias, bias)]
    return pairs


def _attention(module, name, by_name, model):
    """nn.MultiheadAttention's packed in_proj -> Keras query/key/value (d, heads, head_dim)."""
    layer = _layer(by_name, name, module)
    d, heads = module.embed_dim, module.num_heads
    w, b = _np(module.in_proj_weight), _np(module.in_proj_bias)
    pairs = []
    for i, dense in enumerate((layer.query_dense, layer.key_dense, layer.value_dense)):
        rows = slice(i * d, (i + 1) * d)
        pairs += [(dense.kernel, w[rows].T.reshape(d, heads, d // heads)),
                  (dense.bias, b[rows].reshape(heads, d // heads))]
    out = module.out_proj
    pairs += [(layer.output_dense.kernel, _np(out.weight).T.reshape(heads, d // heads, d)),
              (layer.output_dense.bias, _np(out.bias))]
    return pairs


def _check_complete(pairs, keras_model) -> None:
    seen = {}
    for variable, value in pairs:
        if id(variable) in seen:
            raise TransferError(f"Keras weight {variable.path} would be copied twice")
        seen[id(variable)] = variable
        if tuple(variable.shape) != value.shape:
            raise TransferError(f"Keras weight {variable.path} has shape {tuple(variable.shape)}, "
                                f"PyTorch's value has {value.shape}")
    missing = [v.path for v in keras_model.weights if id(v) not in seen]
    if missing:
        raise TransferError(f"no PyTorch counterpart for Keras weights {missing[:5]}"
                            f"{' ...' if len(missing) > 5 else ''}")
