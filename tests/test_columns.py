"""The tables' vocabulary (fwbench.analysis.columns): the axis lists follow the cell's fields,
and every shipped run's stats files hold the columns their modules name, in that order
(fwbench.analysis.stats_files)."""

from __future__ import annotations

from dataclasses import fields

import pandas as pd
import pytest

from fwbench.analysis.columns import AXES, CELL_AXES, PAIR_AXES, TRAINING_AXES
from fwbench.analysis.stats_files import STATS_FILES
from fwbench.plan.cells import Cell
from tests.reference_runs import SHIPPED


def test_the_axis_lists_follow_the_cells_fields():
    names = [f.name for f in fields(Cell)]
    assert AXES == [n for n in names if n not in ("num_classes", "control")]
    assert CELL_AXES == AXES[:10] and "framework" in CELL_AXES
    assert "framework" not in PAIR_AXES and set(PAIR_AXES) < set(AXES)
    assert TRAINING_AXES == [a for a in PAIR_AXES if a != "phase"]


@pytest.mark.parametrize("run", SHIPPED, ids=lambda run: run.name)
def test_every_stats_file_holds_the_columns_its_module_names(run):
    registered = STATS_FILES
    written = sorted(p.name for p in (run / "stats").glob("*.csv"))
    assert set(written) <= set(registered), set(written) - set(registered)
    for name in written:
        header = list(pd.read_csv(run / "stats" / name, nrows=0).columns)
        assert header == registered[name], (name, header)
