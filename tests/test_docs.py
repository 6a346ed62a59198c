"""The README and docs/*.md name only what exists: every repository path they give (a file, a
folder, a glob or a pattern with <placeholders>) and every `fwbench.` module or name in one.
Paths the workflow or a build writes (results/<run>/…, logs/, containers/build/, .venv/) are
not in the repository and are not checked; results/reference/, which ships, is."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fwbench import SOURCE_DIR

DOCS = [SOURCE_DIR / "README.md", *sorted((SOURCE_DIR / "docs").glob("*.md"))]
# The repository's top-level folders a path starts with.
FOLDERS = ("fwbench", "rules", "scripts", "containers", "docs", "report", "tests", "presets",
           "profiles", "benchmarks", "results", ".ci")
# Written by running or building, never committed (.gitignore).
GENERATED = ("results/", "logs/", ".venv/", ".snakemake/", "containers/build/",
             "containers/wheelhouse/", "build/")
SEGMENT = r"(?:[\w.*-]|<[^<>\n]*>|\{[^{}\s]*\})+"
PATH = re.compile(rf"(?<![\w./<>{{}}$-])((?:{'|'.join(map(re.escape, FOLDERS))})/(?:{SEGMENT}/?)*"
                  rf"|[\w-]+\.md\b)")
MODULE = re.compile(r"(?<![\w./-])fwbench(?:\.[A-Za-z_]\w*)+")
NOT_MODULES = {"fwbench.source"}                # the MLflow tag docs/export.md names


def _exists(path: str, root: Path) -> bool:
    if "/" not in path:                          # a bare `NAME.md`: at the top or in docs/
        return (root / path).is_file() or (root / "docs" / path).is_file()
    if path.startswith(GENERATED) and not path.startswith("results/reference/"):
        return True
    pattern = re.sub(r"<[^<>]*>|\{[^{}]*\}", "*", path).rstrip("/")
    return any(root.glob(pattern)) if "*" in pattern else (root / pattern).exists()


def _defines(module: Path, name: str) -> bool:
    """Whether a module binds ``name`` at its top level (def, class, assignment or import)."""
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found = {node.name}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found = {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found = {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            continue
        if name in found:
            return True
    return False


def _module_exists(dotted: str, root: Path) -> bool:
    """``fwbench.a.b``: a package or module, or a name the deepest module among them binds."""
    parts = dotted.split(".")
    folder = root
    for i, part in enumerate(parts):
        if (folder / part / "__init__.py").is_file():
            folder = folder / part
        elif (folder / f"{part}.py").is_file():
            rest = parts[i + 1:]
            return not rest or _defines(folder / f"{part}.py", rest[0])
        else:
            return _defines(folder / "__init__.py", part)
    return True


def missing_names(text: str, root: Path = SOURCE_DIR) -> list[str]:
    """The repository paths and fwbench modules ``text`` names that ``root`` does not hold."""
    paths = {m.group(1).rstrip(".,:;") for m in PATH.finditer(text)}
    modules = {m.group(0).rstrip(".") for m in MODULE.finditer(text)} - NOT_MODULES
    return sorted({p for p in paths if not _exists(p, root)}
                  | {m for m in modules if not _module_exists(m, root)})


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(SOURCE_DIR).as_posix())
def test_every_path_and_module_a_document_names_exists(doc):
    assert missing_names(doc.read_text()) == []


def test_the_check_finds_planted_names_that_do_not_exist():
    text = ("The dictionary is `fwbench/data_dictionary.yaml`, the design `DESIGN.md`; atomic "
            "writes live in `fwbench.report.output`, and rules/nope.smk, "
            "`fwbench.environment.images.no_such_function` and `presets/<x>.toml` run it. "
            "Real: `fwbench/analysis/data_dictionary.yaml`, `fwbench.environment.images`, "
            "fwbench.environment.images.check_runtime, `fwbench.errors.ConfigWarning`, "
            "`presets/<paper>.yaml`, `containers/<framework>/requirements-<variant>.lock`, "
            "`results/<run>/tables/{iterations,trials}.parquet`, results/reference/cells/, "
            "`rules/*.smk`, `docs/containers.md`, README.md.")
    assert missing_names(text) == ["DESIGN.md", "fwbench.environment.images.no_such_function",
                                   "fwbench.report.output", "fwbench/data_dictionary.yaml",
                                   "presets/<x>.toml", "rules/nope.smk"]
