"""scripts/lint_workflow.py: `snakemake --lint` on tiny workflows, with and without `lint-ok`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

RULE = '''rule {name}:
    output:
        "{name}.txt",
    log:
        "logs/{name}.log",
    shell:
        "touch {{output}} > {{log}} 2>&1"
'''
WHY = "# lint-ok software: runs natively, as the test says\n"


def lint(folder: Path, snakefile: str) -> subprocess.CompletedProcess:
    (folder / "Snakefile").write_text(snakefile)
    return subprocess.run([sys.executable, str(REPO / "scripts" / "lint_workflow.py")],
                          cwd=folder, capture_output=True, text=True, timeout=120)


def test_a_lint_passes_only_where_a_comment_says_why(tmp_path):
    proc = lint(tmp_path, WHY + RULE.format(name="native") + "\n\n" + RULE.format(name="bare"))
    assert proc.returncode == 1, proc.stderr
    assert "Snakefile:11 rule bare: Specify a conda environment or container" in proc.stderr
    assert "rule native" not in proc.stderr
    assert "1 to fix, 1 allowed" in proc.stderr

    proc = lint(tmp_path, WHY + RULE.format(name="native"))
    assert proc.returncode == 0, proc.stderr
    assert "0 to fix, 1 allowed" in proc.stderr


def test_a_comment_that_silences_nothing_fails(tmp_path):
    stale = WHY + 'rule aggregate:\n    input:\n        "a.txt",\n'  # runs nothing: no lint
    proc = lint(tmp_path, WHY + RULE.format(name="a") + "\n\n" + stale)
    assert proc.returncode == 1
    assert "`lint-ok software` silences no lint" in proc.stderr

    proc = lint(tmp_path, WHY.replace("software", "sofware") + RULE.format(name="a"))
    assert proc.returncode == 1
    assert "`lint-ok sofware` silences no lint" in proc.stderr and "kinds: software" in proc.stderr


def test_a_workflow_that_does_not_parse_is_an_error_not_a_pass(tmp_path):
    proc = lint(tmp_path, "rule broken:\n    shell: undefined_name\n")
    assert proc.returncode == 2
    assert "failed before linting" in proc.stderr
