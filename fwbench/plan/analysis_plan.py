"""The analysis plan's fingerprint: a hash of the config's resolved `statistics` block.

Every trial records it in its settings (``Plan.trial_settings``), so the statistics can tell a
plan fixed before measuring from one changed after the data were seen
(fwbench.analysis.stats writes stats/plan.csv, the report says it on its first page).
"""

from __future__ import annotations

import hashlib
import json

__all__ = ["plan_hash"]


def plan_hash(statistics: dict) -> str:
    """sha256 (first 16 hex digits) of the canonical JSON of a resolved `statistics` block
    (keys sorted, no spaces): the same plan gives the same hash on every machine. Usage::

        plan_hash(config["statistics"])   # e.g. "3f5c0a9e12b4d7c8"
    """
    text = json.dumps(statistics, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
