"""Settings profiles: what ``matched`` sets in both frameworks, what each ablation step adds,
which image layout each framework runs, and which precisions a device can run."""

from __future__ import annotations

from fwbench.errors import Unsupported

# The settings a profile can set alike in both frameworks; `defaults` sets none of them. A profile
# named "defaults+layout+tf32" matches only those (the ablation's steps).
FACTORS = ("tf32", "cudnn_autotune", "layout", "determinism", "memory_growth")
# What `matched` sets: what changes numerics or resources. Not the layout: forcing one layout on
# both moves a framework off the path its documentation recommends (PyTorch channels_last on a
# CPU made resnet18 inference 1.6x slower); each side runs its recommended layout (layout_for),
# and forcing NHWC on both stays an ablation factor.
MATCHED = ("tf32", "cudnn_autotune", "determinism", "memory_growth")


def matched_factors(profile: str) -> frozenset[str]:
    """The factors a profile name sets to their matched value."""
    if profile == "matched":
        return frozenset(MATCHED)
    base, *extra = profile.split("+")
    unknown = set(extra) - set(FACTORS)
    if base != "defaults" or unknown:
        raise ValueError(f"profile must be 'matched', 'defaults' or 'defaults+<factor>…' with "
                         f"factors from {FACTORS}, got {profile!r}")
    return frozenset(extra)


def check_precision(precision: str, device: str, bf16_supported: bool) -> None:
    """Raise Unsupported when ``precision`` cannot run as mixed precision on ``device``."""
    if precision == "fp16" and device == "cpu":
        raise Unsupported("fp16 mixed precision needs a GPU: neither framework has fast fp16 "
                          "CPU kernels, so a CPU number would measure emulation")
    if precision == "bf16" and not bf16_supported:
        raise Unsupported(f"bf16 is not supported on this {device} device")


def layout_for(framework: str, device: str, precision: str, *, force_nhwc: bool) -> tuple[str, str]:
    """(layout, why): the image layout a framework runs for a device and precision.

    Each framework's documented recommendation, unless the ablation's ``layout`` factor forces
    NHWC on both sides. PyTorch's performance tuning guide recommends channels_last for
    convolutions under mixed precision on Tensor Cores and leaves contiguous NCHW as the default
    elsewhere; Keras builds NHWC everywhere and lets TensorFlow's graph optimizer pick a GPU
    kernel layout.
    """
    if framework == "tensorflow":
        why = "Keras's layout (data_format channels_last)"
        if device == "cuda":
            why += "; TensorFlow's layout optimizer may run GPU convolutions in NCHW"
        return "NHWC (channels_last)", why
    if force_nhwc:
        return "NHWC (channels_last)", "forced by the profile's layout factor (NHWC in both)"
    if device == "cuda" and precision in ("bf16", "fp16"):
        return "NHWC (channels_last)", ("PyTorch's recommendation for convolutions under mixed "
                                        "precision on Tensor Cores")
    return "NCHW", "PyTorch's default (contiguous NCHW), recommended for this device and precision"
