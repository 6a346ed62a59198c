"""Every preset and the default config validate, plan, and dry-run through Snakemake, so
`snakemake --configfile presets/<x>.yaml` starts."""

import re
from pathlib import Path

import pytest

from fwbench.plan.config import load
from fwbench.plan.sweep import Plan
from tests.conftest import REPO, snakemake

CONFIGS = [REPO / "config.yaml", *sorted((REPO / "presets").glob("*.yaml"))]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_config_validates_and_plans(path: Path):
    config = load(path)
    plan = Plan.from_config(config)
    assert plan.trials and len({t.path(plan.run) for t in plan.trials}) == len(plan.trials)
    if path.parent.name == "presets":
        assert config["run"] == path.stem, "a preset writes to results/<its name>/"


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_planned_path_matches_the_workflow_wildcards(path: Path):
    plan = Plan.from_config(load(path))
    constraints = {k: re.compile(v) for k, v in plan.wildcard_constraints().items()}
    for cell in plan.cells():
        parts = dict(zip(["experiment", "device", "framework", "model", "cell"],
                         cell.id.split("/")))
        for wildcard, value in parts.items():
            assert constraints[wildcard].fullmatch(value), (wildcard, value)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_config_dry_runs_through_snakemake(tmp_path, path: Path):
    done = snakemake(tmp_path, "--configfile", str(path), "--cores", "1", "--dry-run")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    trials = re.search(r"^run_trial\s+(\d+)$", done.stdout, re.MULTILINE)
    assert trials and int(trials.group(1)) == len(Plan.from_config(load(path)).trials)
    assert re.search(r"^build_report\s+1$", done.stdout, re.MULTILINE)
