"""Every stats file a run writes (results/<run>/stats/) and the columns it holds, in order: the
lists of the modules that write them, in one place. Nothing in fwbench imports this module (it
imports them all); tests/test_columns.py holds every shipped run's files to it."""

from __future__ import annotations

from fwbench.analysis import (
    ablation,
    comparisons,
    controls,
    flops,
    gate,
    latency,
    memory,
    scaling,
    stats,
    tests_table,
    trial_quality,
    trial_stats,
)

# Every stats file a run writes (results/<run>/stats/), and its columns in order.
STATS_FILES = {
    "cells.csv": trial_stats.CELL_COLUMNS,
    "comparisons.csv": comparisons.COMPARISON_COLUMNS,
    "sensitivity.csv": comparisons.SENSITIVITY_COLUMNS,
    "quality.csv": trial_quality.QUALITY_COLUMNS,
    "tests.csv": tests_table.TEST_COLUMNS,
    "plan.csv": stats.PLAN_COLUMNS,
    "controls.csv": controls.CONTROL_COLUMNS,
    "gate.csv": gate.GATE_COLUMNS,
    "memory.csv": memory.MEMORY_COLUMNS,
    "memory_comparisons.csv": memory.MEMORY_COMPARISON_COLUMNS,
    "latency.csv": latency.LATENCY_COLUMNS,
    "flops.csv": flops.FLOPS_COLUMNS,
    "ablation.csv": ablation.DECOMPOSITION_COLUMNS,
    "gaps.csv": ablation.GAP_COLUMNS,
    "scaling.csv": scaling.EFFICIENCY_COLUMNS,
    "strategies.csv": scaling.COMPARISON_COLUMNS,
}
