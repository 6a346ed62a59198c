"""The data-parallel strategies a distributed cell names: a pair per framework, as a cell names a
mode pair, and the cells no machine can run (docs/distributed.md)."""

from __future__ import annotations

from fwbench.errors import ConfigError
from fwbench.plan.frameworks import FRAMEWORKS, PYTORCH

# What each framework runs under a strategy pair's name.
STRATEGY_PAIRS = {pair: {f.name: f.strategies[pair] for f in FRAMEWORKS.values()}
                  for pair in PYTORCH.strategies}
STRATEGIES = {name: (framework, pair) for pair, names in STRATEGY_PAIRS.items()
              for framework, name in names.items()}
# How the report names each framework's strategy.
STRATEGY_LABELS = {"dp": "DataParallel", "ddp": "DistributedDataParallel",
                   "mirrored": "MirroredStrategy", "multiworker": "MultiWorkerMirroredStrategy"}
MULTI_PROCESS = frozenset(STRATEGY_PAIRS["multi_process"].values())


def resolve_strategy(name: str, framework: str) -> str:
    """The strategy ``framework`` runs for ``name``: a pair name or the framework's own name.

    Usage::

        resolve_strategy("multi_process", "tensorflow")   # "multiworker"
        resolve_strategy("ddp", "pytorch")                # "ddp"
    """
    if name in STRATEGY_PAIRS:
        return STRATEGY_PAIRS[name][framework]
    if name in STRATEGIES and STRATEGIES[name][0] == framework:
        return name
    known = sorted({*STRATEGY_PAIRS, *(s for s, (f, _) in STRATEGIES.items() if f == framework)})
    raise ConfigError(f"strategy must be one of {', '.join(known)} for {framework}, got {name!r}")


def strategy_pair(name: str) -> str:
    """The pair name of a strategy given by pair name or by framework name."""
    return name if name in STRATEGY_PAIRS else STRATEGIES[name][1]


def unsupported_reason(cell: dict) -> str | None:
    """Why the distributed ``cell`` (a Cell dict with strategy and world_size) cannot run
    anywhere, decided without a framework; None when only the device set can tell."""
    strategy = resolve_strategy(cell["strategy"], cell["framework"])
    if cell["phase"] != "train":
        return ("the distributed experiment times training steps; data-parallel inference needs "
                "no gradient synchronization")
    if strategy == "dp" and cell["device"] != "cuda":
        return ("DataParallel needs CUDA devices: on the CPU it calls the module unchanged, so "
                "it would measure one device under another name")
    if strategy == "mirrored" and cell["device"] != "cuda":
        return ("MirroredStrategy needs GPUs: on the CPU its replicas would be logical devices "
                "sharing one thread pool, so it would measure one device under another name")
    if int(cell["world_size"]) < 1:
        return f"world_size must be at least 1, got {cell['world_size']}"
    return None
