"""The profiles table (tables/profiles.parquet): every profiled cell's ``profile.json``
(fwbench.measure.profiling) as one row per category of the breakdown (fwbench.measure.trace)."""

from __future__ import annotations

import json

from fwbench.analysis.columns import CELL_AXES
from fwbench.measure.profiling import validate_profile
from fwbench.measure.trace import CATEGORIES

PROFILE_COLUMNS = ["run", "cell_id", "pair_id", *CELL_AXES, "status", "message", "category",
                   "ns_per_step", "share", "wall_ns_per_step", "unprofiled_ns_per_step",
                   "profiler_overhead", "overlap", "steps", "profiler", "basis", "top_ops",
                   "notes"]


def collect_profiles(paths):
    """The profiles table (pandas): one row per profiled cell and category (``CATEGORIES``); a
    failed profile is one row with its status and message and no category."""
    import pandas as pd

    from fwbench.errors import ResultError

    rows = []
    for path in paths:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            raise ResultError(f"cannot read profile result {path}: {exc}") from exc
        validate_profile(data, str(path))
        cell = data["cell"]
        base = {"run": data["run"], "cell_id": data["cell_id"], "pair_id": data["pair_id"],
                **{k: cell[k] for k in ("experiment", "device", "framework", "model", "phase",
                                        "batch_size", "precision", "mode", "profile")},
                "input_shape": "x".join(map(str, cell["input_shape"])),
                "status": data["status"], "message": data["message"]}
        p = data.get("profile")
        if data["status"] != "ok" or not p:
            rows.append(base)
            continue
        extra = {"wall_ns_per_step": p["wall_ns_per_step"],
                 "unprofiled_ns_per_step": p.get("unprofiled_ns_per_step"),
                 "profiler_overhead": p.get("profiler_overhead"), "overlap": p["overlap"],
                 "steps": p["steps"], "profiler": p["profiler"], "basis": p["basis"],
                 "top_ops": json.dumps(p["top_ops"]), "notes": "; ".join(p["notes"])}
        for category in CATEGORIES:
            rows.append({**base, "category": category, "ns_per_step": p["per_step_ns"][category],
                         "share": p["share"][category], **extra})
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)
