"""The vocabulary of the tables: their axis columns, derived from the cell, read by analysis/
where it writes them and by report/ where it reads them.

A stats file's columns are its module's list (``comparisons.COMPARISON_COLUMNS``, ...), all of
them named in fwbench.analysis.stats_files; the columns naming a framework's side are the
framework registry's (fwbench.plan.frameworks.per_side), never written by hand.

Usage::

    from fwbench.analysis.columns import AXES, CELL_AXES, PAIR_AXES, without
    without(CELL_AXES, "framework")    # a pair's ten axes
"""

from __future__ import annotations

from dataclasses import MISSING, fields

from fwbench.plan.cells import Cell


def without(axes, *names: str) -> list[str]:
    """``axes`` in order, less ``names``."""
    return [a for a in axes if a not in names]


# Every axis of a cell as a column: its fields but the class count (a property of the model's
# head) and an A/A control's slot (a control's tables say it apart: ``control``).
AXES = without((f.name for f in fields(Cell)), "num_classes", "control")
# The ten axes every cell has; a distributed cell's strategy and world size and a real-data
# cell's optimizer come after them (AXES).
CELL_AXES = [f.name for f in fields(Cell) if f.default is MISSING]
# What names a matched pair, in the order a label lists them: a cell's ten axes but its
# framework, then the optimizer and the world size that tell real-data and distributed pairs
# apart.
PAIR_AXES = [*without(CELL_AXES, "framework"), "optimizer", "world_size"]
# What tells training results apart: a pair's axes but the phase (always train).
TRAINING_AXES = without(PAIR_AXES, "phase")
