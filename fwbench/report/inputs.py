"""The report's inputs: the tidy tables and statistics the workflow names, read into one
``Inputs``; a table that is missing or empty becomes an empty frame with the reason in
``problems``, so every section can say why it has nothing to show."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from fwbench.analysis.claims.wording import PAIR_AXES


@dataclass
class Inputs:
    """The report's tables; ``problems`` says why a table is empty when it is."""

    trials: pd.DataFrame
    cells: pd.DataFrame
    cell_stats: pd.DataFrame
    comparisons: pd.DataFrame
    tests: pd.DataFrame
    problems: dict = field(default_factory=dict)
    # The "why" section's inputs (fwbench.plan.ablation, fwbench.measure.profiling); empty when
    # not run.
    ablation: pd.DataFrame = field(default_factory=pd.DataFrame)
    gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    profiles: pd.DataFrame = field(default_factory=pd.DataFrame)
    # Beyond one device (fwbench.measure.distributed), achieved FLOP/s (fwbench.analysis.flops)
    # and one trial's telemetry over time (fwbench.analysis.telemetry_trace); empty when not
    # passed.
    scaling: pd.DataFrame = field(default_factory=pd.DataFrame)
    strategies: pd.DataFrame = field(default_factory=pd.DataFrame)
    flops: pd.DataFrame = field(default_factory=pd.DataFrame)
    telemetry_trace: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The real-data experiments' records (fwbench.measure.results): per epoch, and confusion
    # matrices.
    epochs: pd.DataFrame = field(default_factory=pd.DataFrame)
    confusion: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The version audit (rules/audit.smk): versions.csv, and each diff-<other>.csv beside it.
    versions: pd.DataFrame = field(default_factory=pd.DataFrame)
    diffs: dict = field(default_factory=dict)
    versions_path: str | None = None
    # What a framework costs its user (fwbench.analysis.memory, fwbench.analysis.latency), and
    # the iterations the latency distribution is drawn from; empty when not passed.
    memory: pd.DataFrame = field(default_factory=pd.DataFrame)
    memory_comparisons: pd.DataFrame = field(default_factory=pd.DataFrame)
    latency: pd.DataFrame = field(default_factory=pd.DataFrame)
    iterations: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The analysis plan (the config's `statistics` block) and, when the statistics wrote one,
    # the analysis without the trials of a quality class beside the primary one.
    statistics: dict = field(default_factory=dict)
    sensitivity: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The trials' quality classes per framework, and whether the trials recorded this plan.
    quality: pd.DataFrame = field(default_factory=pd.DataFrame)
    plan: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The shipping gate's verdict (fwbench.analysis.gate, stats/gate.csv): a run that failed it
    # is preliminary; empty when not passed.
    gate: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The A/A controls (fwbench.analysis.controls, stats/controls.csv) and their trials
    # (tables/controls.parquet); empty without any.
    controls: pd.DataFrame = field(default_factory=pd.DataFrame)
    control_trials: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def every_trial(self) -> pd.DataFrame:
        """The trials and the A/A controls' trials: when the run measured, and its date."""
        frames = [f for f in (self.trials, self.control_trials) if not f.empty]
        return pd.concat(frames, ignore_index=True) if len(frames) > 1 else self.trials


def load_inputs(inputs: dict, statistics: dict | None = None) -> Inputs:
    """Read the tables named by the workflow; a missing or empty one becomes an empty frame.

    Of the iterations table only what the latency distribution draws is read. ``statistics``
    is the analysis plan in force (the config's block; the schema's defaults when not given).
    """
    frames, problems = {}, {}
    for name in ("trials", "cells", "cell_stats", "comparisons", "tests"):
        frames[name], problem = _read_table(inputs.get(name), name)
        if problem:
            problems[name] = problem
    for name in ("cell_stats", "comparisons"):
        frames[name] = normalize_axes(frames[name])
    pairs = frames["cells"] if not frames["cells"].empty else frames["trials"]
    frames["comparisons"] = _with_unmeasured_pairs(frames["comparisons"], pairs)
    for name in ("ablation", "gaps", "profiles", "scaling", "strategies", "flops",
                 "telemetry_trace", "epochs", "confusion", "memory", "memory_comparisons",
                 "latency", "sensitivity", "quality", "plan", "gate",
                 "controls", "control_trials"):  # optional, e.g. no ablation
        if inputs.get(name) is not None:
            frames[name], problem = _read_table(inputs[name], name)
            if problem:
                problems[name] = problem
            frames[name] = normalize_axes(frames[name])
    for name in ("memory", "memory_comparisons", "latency"):
        if inputs.get(name) is None:
            problems[name] = (f"the workflow passed no {name} table (stats/{name}.csv, rule "
                              "summarise_results)")
    frames["iterations"] = _read_iterations(inputs.get("iterations"))
    frames["versions"], frames["diffs"], problem = _read_audit(inputs.get("versions"))
    if problem:
        problems["versions"] = problem
    if inputs.get("versions") is not None:
        frames["versions_path"] = str(inputs["versions"])
    plan = statistics if statistics is not None else default_statistics()
    return Inputs(**frames, problems=problems, statistics=dict(plan))


def default_statistics() -> dict:
    """The analysis plan of a config that sets none: the schema's defaults."""
    from fwbench.plan.config import load_schema

    spec = load_schema()["properties"]["statistics"]["properties"]
    return {key: value["default"] for key, value in spec.items() if "default" in value}


ITERATION_COLUMNS = ["run", "cell_id", "pair_id", "framework", "trial", "iteration", "time_ns"]


def _read_iterations(path) -> pd.DataFrame:
    """The iteration times, with the cell's axes from the trials table when drawn."""
    if path is None or not Path(path).exists():
        return pd.DataFrame()
    import pyarrow.parquet as pq

    have = set(pq.read_schema(path).names)
    columns = [c for c in ITERATION_COLUMNS + PAIR_AXES if c in have]
    return normalize_axes(pd.read_parquet(path, columns=columns))


def _read_audit(path) -> tuple[pd.DataFrame, dict, str | None]:
    """The version audit's versions.csv and every diff-<other>.csv beside it, all as text.

    Optional: the report says how to produce the audit when it is absent.
    """
    if path is None:
        return pd.DataFrame(), {}, "the workflow passed no versions table"
    path = Path(path)
    diffs = {}
    for diff in sorted(path.parent.glob("diff-*.csv")) if path.parent.is_dir() else []:
        diffs[diff.stem.removeprefix("diff-")] = _read_text_csv(diff)
    if not path.exists():
        return pd.DataFrame(), diffs, f"{path.name} does not exist"
    frame = _read_text_csv(path)
    return frame, diffs, None if len(frame) else f"{path.name} has no rows"


def _read_text_csv(path: Path) -> pd.DataFrame:
    """A CSV with every value kept as written ("" where nothing was recorded)."""
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def _with_unmeasured_pairs(comparisons: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Comparisons plus a row without a ratio for every pair the statistics could not compare.

    The statistics compare a pair only when both frameworks have ok trials; a pair that failed
    stays in the report (patel2023 dropped its out-of-memory points; we show each one).
    """
    if cells.empty or "pair_id" not in cells:
        return comparisons
    known = set(comparisons["pair_id"]) if "pair_id" in comparisons else set()
    axes = [a for a in PAIR_AXES if a in cells]
    extra = (cells[~cells["pair_id"].astype(str).isin(known)]
             .drop_duplicates("pair_id")[["pair_id", *axes]])
    if extra.empty:
        return comparisons
    return normalize_axes(pd.concat([comparisons, extra], ignore_index=True))


def _read_table(path, name: str) -> tuple[pd.DataFrame, str | None]:
    if path is None:
        return pd.DataFrame(), f"the workflow passed no {name} table"
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(), f"{path.name} does not exist"
    try:
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame(), f"{path.name} is empty"
    if frame.empty:
        return frame, f"{path.name} has no rows"
    return frame, None


def normalize_axes(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    counts = ("batch_size", "world_size")
    for axis in PAIR_AXES + ["framework", "pair_id", "cell_id"]:
        if axis in frame:
            frame[axis] = pd.to_numeric(frame[axis], errors="coerce").astype("Int64") \
                if axis in counts else frame[axis].astype(str)
    return frame


def source_date_epoch(trials: pd.DataFrame) -> int:
    """The report's date: when the last trial ended (0 when no trial ran); never the clock."""
    if trials.empty or "ended_at" not in trials:
        return 0
    ended = pd.to_datetime(trials["ended_at"], utc=True, errors="coerce").dropna()
    return int(ended.max().timestamp()) if len(ended) else 0
