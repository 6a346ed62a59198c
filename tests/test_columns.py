"""The tables' vocabulary (fwbench.analysis.columns): the axis lists follow the cell's fields,
every shipped run's stats files hold the columns their modules name, in that order
(fwbench.analysis.stats_files), and every column the report reads by name is one of them."""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fwbench import SOURCE_DIR
from fwbench.analysis.columns import AXES, CELL_AXES, PAIR_AXES, TRAINING_AXES
from fwbench.analysis.export import dictionary
from fwbench.analysis.stats_files import STATS_FILES
from fwbench.plan.cells import Cell
from fwbench.report.inputs import Inputs
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


# What the report reads a table's column with: frame["x"], frame[["x", "y"]], frame.get("x"),
# "x" in frame, and the column arguments of the pandas calls it lays tables out with.
COLUMN_ARGUMENTS = {"by", "subset", "columns", "index", "values", "on", "keys"}
COLUMN_METHODS = {"groupby", "sort_values", "drop_duplicates", "pivot_table", "set_index",
                  "dropna", "merge", "drop"}
NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
PACKAGE = SOURCE_DIR / "fwbench"


def _strings(node) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def names_in(tree) -> tuple[set, set]:
    """The names a module reads as keys (a table's columns, or a record's), and those it makes
    itself: a dict literal's keys, dict(...)'s and assign(...)'s keywords, frame["x"] = ...,
    rename's new names, a string given as ``key=`` (a section's, a table's) and a module
    constant's list of names (``STATUSES``, ``DIFF_FIELDS``)."""
    read, made = set(), set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)):
            made.update(_strings(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            (made if isinstance(node.ctx, ast.Store) else read).update(_strings(node.slice))
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            read.update(_strings(node.left))
        elif isinstance(node, ast.Dict):
            made.update(s for k in node.keys if k is not None for s in _strings(k))
        elif isinstance(node, ast.Call):
            method = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if method in ("dict", "assign"):
                made.update(k.arg for k in node.keywords if k.arg)
            made.update(s for k in node.keywords if k.arg == "key" for s in _strings(k.value))
            if method == "get" and node.args:
                read.update(_strings(node.args[0]))
            if method in COLUMN_METHODS:
                read.update(s for a in node.args[:1] for s in _strings(a))
                read.update(s for k in node.keywords if k.arg in COLUMN_ARGUMENTS
                            for s in _strings(k.value))
            if method == "rename":
                for k in node.keywords:
                    if k.arg == "columns" and isinstance(k.value, ast.Dict):
                        made.update(s for v in k.value.values for s in _strings(v))
    return {n for n in read if NAME.match(n)}, {n for n in made if NAME.match(n)}


def _keys(value) -> set:
    """Every mapping key in a loaded YAML document, and every name a list of it holds (a
    schema's choices and defaults: the profile ``defaults``)."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in ({v} if isinstance(v, str) else _keys(v))}
    return set()


# A key of what a library returns: matplotlib's boxplot parts.
LIBRARY_KEYS = {"boxes"}


def registered_names() -> set:
    """The tables' vocabulary: every column of every table and stats file (the data dictionary,
    the stats files' lists) and the tables' names (the report's inputs), with the keys of the
    config's schemas and the report's YAML."""
    columns = {f.name for f in fields(Inputs)} | LIBRARY_KEYS
    columns |= set(dictionary()["columns"])
    columns |= {c for table in dictionary()["overrides"].values() for c in table}
    columns |= {c for names in STATS_FILES.values() for c in names}
    documents = [*SOURCE_DIR.glob("rules/schemas/*.yaml"), *SOURCE_DIR.glob("report/*.yaml")]
    return columns | {k for path in documents for k in _keys(yaml.safe_load(path.read_text()))}


def unknown_names(report: dict[str, str], package: dict[str, str]) -> set:
    """Names the report's modules read that no table registers and no module of the package
    makes."""
    read = set().union(*(names_in(ast.parse(text))[0] for text in report.values()))
    made = set().union(*(names_in(ast.parse(text))[1] for text in package.values()))
    return read - made - registered_names()


def _sources(folder: Path) -> dict[str, str]:
    return {str(p): p.read_text() for p in sorted(folder.rglob("*.py"))}


def test_the_report_reads_only_names_the_tables_or_the_code_hold():
    """A column the report reads by name is one the tables register, or a key some module makes
    (a record's, a figure's): a column renamed in the analysis and not in the report fails
    here, not as a silently empty table."""
    unknown = unknown_names(_sources(PACKAGE / "report"), _sources(PACKAGE))
    assert not unknown, sorted(unknown)


def test_the_check_sees_a_misspelt_column():
    report = {"section.py": 'rows = frame[frame["verdit"] == "x"]\n'
                            'rows.groupby(["modle", "phase"])\nrows.get("ratio")'}
    assert unknown_names(report, report) == {"verdit", "modle"}
