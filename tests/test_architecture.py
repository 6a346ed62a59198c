"""The map in docs/architecture.md stays true: every module it names exists, and every rule
reaches the function that does its work in two steps (its script imports it by name, or a
comment above a shell rule names it)."""

from __future__ import annotations

import ast
import importlib
import re

import pytest

from fwbench import SOURCE_DIR

MAP = (SOURCE_DIR / "docs" / "architecture.md").read_text()
STAGES = ("plan", "environment", "measure", "analysis", "report")


def mapped_modules() -> list[str]:
    """Paths under fwbench/ the diagram names: `<stage>/` opens a stage; then each line's first
    column (before its description) lists modules `x.py` and packages `x/`."""
    diagram = MAP.split("```")[1]
    named, stage = [], None
    for line in diagram.splitlines():
        rest = line.lstrip(" │▼")
        opened = re.match(rf"({'|'.join(STAGES)})/\s+", rest)
        if opened:
            stage, rest = opened.group(1), rest[opened.end():]
        column = re.split(r"\s{2,}", rest.strip())[0]
        names = [t.strip() for t in column.split(",")]
        if stage and all(re.fullmatch(r"[a-z_]+(\.py|/)", n) for n in names):
            named += [f"{stage}/{n}" for n in names]
    return named


def rule_table() -> dict[str, tuple[str, list[str]]]:
    """rule -> (step 1, the functions of step 2), from the map's table."""
    rows = {}
    for line in MAP.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        functions = re.findall(r"`([\w.]+)`", cells[2])
        full = [functions[0]] + [f if "." in f else functions[0].rsplit(".", 1)[0] + "." + f
                                 for f in functions[1:]]
        for rule in re.findall(r"`(\w+)`", cells[0]):
            rows[rule] = (cells[1], full)
    return rows


def workflow_rules() -> dict[str, str]:
    """rule name -> its text (with the comment lines right above it), from rules/*.smk."""
    out = {}
    for path in sorted((SOURCE_DIR / "rules").glob("*.smk")):
        text = path.read_text()
        for match in re.finditer(r"((?:^#.*\n)*)^rule (\w+):\n((?:^(?:    .*|)\n)*)", text, re.M):
            out[match.group(2)] = match.group(1) + match.group(3)
    return out


def test_every_module_the_map_names_exists():
    named = mapped_modules()
    assert len(named) > 30
    missing = [m for m in named if not (SOURCE_DIR / "fwbench" / m).exists()]
    assert missing == []


@pytest.mark.parametrize("rule", sorted(r for r, text in workflow_rules().items()
                                        if "script:" in text or "shell:" in text))
def test_every_rule_reaches_its_function_in_two_steps(rule):
    table = rule_table()
    assert rule in table, f"docs/architecture.md has no row for rule {rule}"
    step, functions = table[rule]
    for dotted in functions:
        module, name = dotted.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), name, None)), dotted
    text = workflow_rules()[rule]
    script = re.search(r'script:\s*\n\s*"\.\./(scripts/\w+\.py)"', text)
    if script:
        assert script.group(1) in step
        imported = {(node.module, a.name) for node in
                    ast.walk(ast.parse((SOURCE_DIR / script.group(1)).read_text()))
                    if isinstance(node, ast.ImportFrom) for a in node.names}
        for dotted in functions:
            assert tuple(dotted.rsplit(".", 1)) in imported, f"{script.group(1)}: {dotted}"
    else:
        comment = re.findall(r"^# Calls ([\w.]+)", text, re.M)
        assert comment and comment[0] in functions, f"rule {rule}: no '# Calls <function>'"


def test_the_rule_table_names_every_rule():
    runs = {r for r, text in workflow_rules().items() if "script:" in text or "shell:" in text}
    assert runs and runs <= set(rule_table())
