"""The package follows the data flow: no import cycle among fwbench's modules, and no import
against the flow (a stage imports only itself, earlier stages and the shared modules)."""

from __future__ import annotations

import ast
from pathlib import Path

import fwbench

PACKAGE = Path(fwbench.__file__).parent
# The stages in the order data flows through them (docs/architecture.md).
STAGES = ("plan", "environment", "measure", "analysis", "report")
# Importable from every stage; they import no stage.
SHARED = {"fwbench", "fwbench.errors", "fwbench.files", "fwbench.workflow",
          *(f"fwbench.workflow.{m}" for m in ("locks", "host", "rebuild", "manifest", "failures",
                                              "progress"))}
# The command line (cli, and jobs for the workflow's own commands): imports every stage,
# imported by nothing else.
ENTRY = {"fwbench.cli", "fwbench.jobs", "fwbench.__main__"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The fwbench module an imported name lives in (a package's __init__ for a package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str, text: str | None = None) -> set[str]:
    """Every fwbench module ``module`` imports (its file, or ``text``), at its top or inside a
    function."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text() if text is None else text)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {m for n in names if n.startswith("fwbench") and (m := _resolve(n))}
    return found - {module}


GRAPH = {m: imports(m) for m in MODULES}


def stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def against_the_flow(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in graph.items():
        for target in sorted(targets):
            if target in ENTRY and module not in ENTRY:
                bad.append(f"{module} imports the command line {target}")
            elif module in SHARED and target not in SHARED:
                bad.append(f"shared module {module} imports {target}")
            elif module in ENTRY or target in SHARED:
                continue
            elif STAGES.index(stage(target)) > STAGES.index(stage(module)):
                bad.append(f"{module} ({stage(module)}) imports {target} ({stage(target)})")
    return bad


def test_every_module_is_in_a_stage_or_named_shared():
    assert [m for m in MODULES if stage(m) is None and m not in SHARED | ENTRY] == []


def test_no_import_cycle():
    assert _cycles(GRAPH) == []


def test_no_import_against_the_flow():
    assert against_the_flow(GRAPH) == []


def test_the_checks_catch_a_cycle_and_an_import_against_the_flow():
    graph = {"fwbench.plan.a": {"fwbench.measure.b"}, "fwbench.measure.b": {"fwbench.plan.a"},
             "fwbench.analysis.c": {"fwbench.report.d"}, "fwbench.report.d": set()}
    assert _cycles(graph) == [["fwbench.measure.b", "fwbench.plan.a"]]
    assert against_the_flow(graph) == [
        "fwbench.plan.a (plan) imports fwbench.measure.b (measure)",
        "fwbench.analysis.c (analysis) imports fwbench.report.d (report)"]


# A trial's parent side: the command line's `fwbench trial` (fwbench.jobs) starts it; every
# experiment imports what it shares with the others from below it (fwbench.measure.child),
# never from the parent, lazily or not.
TRIAL = "fwbench.measure.trial"


def importers(graph: dict[str, set[str]], target: str) -> list[str]:
    return sorted(m for m, targets in graph.items() if target in targets)


def test_only_the_trial_command_imports_the_trials_parent():
    assert importers(GRAPH, TRIAL) == ["fwbench.jobs"]


def test_the_check_sees_a_lazy_import_back_into_the_trials_parent():
    experiments = "fwbench.measure.experiments"
    planted = MODULES[experiments].read_text() + (
        "\n\ndef _planted():\n    from fwbench.measure.trial import run_trial\n")
    graph = {**GRAPH, experiments: imports(experiments, planted)}
    assert importers(graph, TRIAL) == ["fwbench.jobs", experiments]


FRAMEWORKS = {"torch", "torchvision", "tensorflow", "keras", "tf_keras"}
FRAMEWORK_PACKAGE = "fwbench.measure.frameworks."


def framework_imports(module: str) -> set[str]:
    """The frameworks ``module`` imports anywhere in its text (top level or in a function)."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & FRAMEWORKS


def test_only_the_framework_packages_import_a_framework():
    outside = {m: sorted(framework_imports(m)) for m in MODULES
               if not m.startswith(FRAMEWORK_PACKAGE) and framework_imports(m)}
    assert outside == {}
    inside = [m for m in MODULES if m.startswith(FRAMEWORK_PACKAGE) and framework_imports(m)]
    assert len(inside) >= 8   # the check sees the imports it forbids elsewhere
