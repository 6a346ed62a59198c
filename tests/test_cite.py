"""Licence, citation and version: one source each, and the README agrees with them."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

import fwbench

REPO = Path(__file__).resolve().parent.parent
CITE = [sys.executable, str(REPO / "scripts" / "cite.py")]


def test_readme_how_to_cite_is_what_the_script_generates_from_citation_cff():
    proc = subprocess.run([*CITE, "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    printed = subprocess.run(CITE, capture_output=True, text=True, check=True).stdout
    readme = (REPO / "README.md").read_text()
    assert printed.strip() in readme
    assert readme.index("## How to cite") < readme.index(printed.strip())


def test_check_fails_naming_the_fix_when_the_readme_drifts(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text((REPO / "README.md").read_text().replace("@software{", "@misc{"))
    proc = subprocess.run([*CITE, "--check", "--readme", str(readme)], capture_output=True,
                          text=True)
    assert proc.returncode == 1 and "python scripts/cite.py --write" in proc.stderr
    subprocess.run([*CITE, "--write", "--readme", str(readme)], check=True, capture_output=True)
    assert readme.read_text() == (REPO / "README.md").read_text()


def test_citation_names_the_version_and_licence_of_the_package():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert cff["version"] == fwbench.__version__
    assert "version" in project["dynamic"] and "version" not in project  # one source
    assert cff["license"] == project["license"] == "Apache-2.0"
    assert "Apache License" in (REPO / "LICENSE").read_text()[:200]
    assert "## Licence" in (REPO / "README.md").read_text()


def test_every_trial_records_the_fwbench_version(tiny_config):
    from fwbench.analysis.tables import trial_row
    from fwbench.measure.results import make_result, validate_trial
    from fwbench.measure.supervisor import Outcome
    from fwbench.plan.config import validate
    from fwbench.plan.sweep import Plan

    plan = Plan.from_config(validate(tiny_config))
    settings = plan.trial_settings(plan.trials[0])
    result = make_result(settings, Outcome("ok", "", {"iteration_ns": [1, 2, 3]}, 0),
                         started_at="2026-01-01T00:00:00+00:00",
                         ended_at="2026-01-01T00:00:01+00:00",
                         workflow={"git_commit": None, "git_dirty": None, "session": None})
    validate_trial(result)
    assert result["fwbench_version"] == fwbench.__version__
    assert trial_row(result)["fwbench_version"] == fwbench.__version__
