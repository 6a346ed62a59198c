"""Whether a run measured a claim in the paper's own setting: its device, models, settings
profile and execution mode. A claim is confirmed or contradicted only there; judged anywhere
else it was "measured in another setting", and the verdict says what differs.

The setting is a claim's ``setting`` in report/claims.yaml, over its paper's ``setting_axes``
(``load_claims`` merges them). An axis the claim's ``select`` also names keeps only the values
the claim selects: a ResNet18 claim of a five-model paper needs ResNet18, not the five.
"""

from __future__ import annotations

import pandas as pd

from fwbench.analysis.claims.wording import join, select_rows, unique

ANOTHER_SETTING = "measured in another setting"
JUDGED = ("confirmed", "contradicted", "equivalent", "inconclusive")

AXIS_NAMES = {"device": "device", "model": "models", "profile": "settings profile",
              "mode": "execution mode"}
VALUE_NAMES = {"cuda": "GPU", "cpu": "CPU"}


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
    rows = select_rows(rows, select)
    if rows.empty:
        return []
    out = []
    for axis, wanted in setting.items():
        wanted = [str(v) for v in (wanted if isinstance(wanted, list) else [wanted])]
        if axis in select:
            chosen = {str(v) for v in (select[axis] if isinstance(select[axis], list)
                                       else [select[axis]])}
            wanted = [w for w in wanted if w in chosen] or wanted
        have = unique(rows, axis)
        if not set(wanted) <= set(have):
            out.append(f"{AXIS_NAMES.get(axis, axis)} {_values(have) or 'not recorded'} "
                       f"(paper: {_values(wanted)})")
    return out


def _values(values: list[str]) -> str:
    return join(VALUE_NAMES.get(v, v) for v in values)
