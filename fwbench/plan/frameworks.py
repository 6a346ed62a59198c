"""The frameworks fwbench measures: one record each, and the one place that lists them.

The config schema, the plan's mode and strategy pairs, the measuring child's thread variables,
the backends, the image lock and the image scripts, the doctor, the analysis's column and
verdict names and the report's labels and colours all read it. A new framework is a record
here, its backend package (fwbench/measure/frameworks/<name>/), its image folder
(containers/<name>/) and its extra in pyproject.toml (tests/test_frameworks.py checks them).

Framework-free: nothing here imports a framework.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from fwbench.errors import FwbenchError


@dataclass(frozen=True)
class Framework:
    """What the rest of fwbench needs to know of one framework, by its config name."""

    name: str
    label: str                       # how the report names it
    colour: str                      # its colour in every figure (Okabe-Ito: colour-blind safe)
    # The top-level modules its backend imports, the framework's own first (an image must
    # provide it), and what `pip install` needs for them: pyproject's extra of this name.
    imports: tuple[str, ...]
    packages: tuple[str, ...]
    backend: str                     # "module:class" of its backend (fwbench.measure.frameworks)
    # What it runs under each named mode pair and each strategy pair (fwbench.plan.cells and
    # fwbench.plan.strategies).
    modes: Mapping[str, str]
    strategies: Mapping[str, str]
    # Its own variables that size its thread pools at import, beside the BLAS ones every child
    # sets (fwbench.measure.child): intra-op set to the trial's threads, inter-op to 1.
    intra_op_variables: tuple[str, ...] = ()
    inter_op_variables: tuple[str, ...] = ()
    # Its image's distributions (containers/freeze.py), the CPU variant's; the CUDA variant
    # installs ``cuda_variant``'s (distribution, extra) in place of the one it names.
    image_packages: tuple[str, ...] = ()
    cuda_variant: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # How its ranks of a multi-process trial find each other (fwbench.measure.distributed):
    # "torchrun" (one rendezvous port; RANK, WORLD_SIZE, ...) or "tf_config" (a port per worker).
    rank_launch: str = ""
    # Python that prints how many GPUs it sees here and their names, tab-separated, and the
    # call that says it sees none (fwbench.environment.cuda_stack.gpu_report).
    gpu_probe: str = ""
    gpu_absent: str = ""

    @property
    def module(self) -> str:
        return self.imports[0]

    @property
    def distributions(self) -> tuple[str, ...]:
        """The distributions that may install its module in an image, the CUDA variant's first
        (its name is the image tag's): tensorflow or tensorflow-cpu."""
        cpu = self.image_packages[0]
        return tuple(dict.fromkeys((self.cuda_variant.get(cpu, (cpu,))[0], cpu)))


PYTORCH = Framework(
    name="pytorch", label="PyTorch", colour="#d55e00",
    imports=("torch", "torchvision"), packages=("torch", "torchvision"),
    backend="fwbench.measure.frameworks.pytorch:PyTorchBackend",
    modes={"eager": "eager", "idiomatic": "eager", "compiled": "compile", "keras": "eager"},
    strategies={"single_process": "dp", "multi_process": "ddp"},
    image_packages=("torch", "torchvision"),
    rank_launch="torchrun",
    gpu_probe=("import torch; n = torch.cuda.device_count() if torch.cuda.is_available() else 0;"
               " print(n, *(torch.cuda.get_device_name(i) for i in range(n)), sep='\\t')"),
    gpu_absent="torch.cuda.is_available() is False",
)
TENSORFLOW = Framework(
    name="tensorflow", label="TensorFlow", colour="#0072b2",
    imports=("tensorflow", "keras"), packages=("tensorflow",),
    backend="fwbench.measure.frameworks.tensorflow:TensorFlowBackend",
    modes={"eager": "eager", "idiomatic": "function", "compiled": "xla", "keras": "keras"},
    strategies={"single_process": "mirrored", "multi_process": "multiworker"},
    intra_op_variables=("TF_NUM_INTRAOP_THREADS",),
    inter_op_variables=("TF_NUM_INTEROP_THREADS",),
    # The GPU image installs `tensorflow[and-cuda]`; the CPU image and this machine tensorflow-cpu.
    image_packages=("tensorflow-cpu",),
    cuda_variant={"tensorflow-cpu": ("tensorflow", "and-cuda")},
    rank_launch="tf_config",
    gpu_probe=("import tensorflow as tf; g = tf.config.list_physical_devices('GPU');"
               " print(len(g), *(d.name for d in g), sep='\\t')"),
    gpu_absent="tf.config.list_physical_devices('GPU') is empty",
)

FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (PYTORCH, TENSORFLOW)}

# The two sides of every comparison, in the order of its ratio: the first's time over the
# second's. Columns and verdicts that name a side are spelled from these (``per_side``).
COMPARED = (PYTORCH.name, TENSORFLOW.name)


def per_side(template: str) -> tuple[str, str]:
    """``template`` spelled for each side of a comparison, e.g. ``per_side("n_{}")`` is
    ("n_pytorch", "n_tensorflow") and ``per_side("{}_faster")`` the two "faster" verdicts."""
    first, second = COMPARED
    return template.format(first), template.format(second)


# A comparison's two "faster" verdicts (fwbench.analysis.estimators.verdict), the first's first.
FASTER = per_side("{}_faster")


def sides(template: str, first, second) -> dict:
    """The two sides' values under their names, e.g. ``sides("n_{}", 7, 8)`` is
    {"n_pytorch": 7, "n_tensorflow": 8}."""
    return dict(zip(per_side(template), (first, second)))


def opposite(verdict: str) -> str:
    """The other side's verdict of the same kind: "tensorflow_faster" for "pytorch_faster"."""
    first, second = COMPARED
    side, _, kind = verdict.partition("_")
    return f"{second if side == first else first}_{kind}"


def get(name: str) -> Framework:
    """The record of ``name``; an unknown name says which are known."""
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise FwbenchError(f"unknown framework {name!r}; known: {', '.join(FRAMEWORKS)}") from None


class _Field(Mapping):
    """One field of every registered framework by name, read when asked, so that a framework
    registered later is in it."""

    def __init__(self, attribute: str):
        self._attribute = attribute

    def __getitem__(self, name: str):
        return getattr(FRAMEWORKS[name], self._attribute)

    def __iter__(self) -> Iterator[str]:
        return iter(FRAMEWORKS)

    def __len__(self) -> int:
        return len(FRAMEWORKS)


def each(attribute: str) -> Mapping[str, object]:
    """``attribute`` of every framework by name, e.g. ``each("colour")["pytorch"]``."""
    return _Field(attribute)
