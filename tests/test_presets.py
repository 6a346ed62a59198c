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


def test_the_default_sweep_can_reach_a_verdict_in_every_family():
    """The smallest exact p that min_trials_for_verdict against itself can reach is below each
    family's Bonferroni level, and the sweep runs more trials than that, so a trial that drifts
    or never settles can be left out and the verdict still stand (docs/statistics.md)."""
    from math import comb

    config = load(REPO / "config.yaml")
    statistics = config["statistics"]
    least, alpha = statistics["min_trials_for_verdict"], 1 - statistics["confidence"]
    families: dict[tuple, set] = {}
    for cell in Plan.from_config(config).cells():
        families.setdefault((cell.experiment, cell.device, cell.phase), set()).add(cell.pair_id)
    assert families and all(len(pairs) >= 2 for pairs in families.values())
    for pairs in families.values():
        assert 2 / comb(2 * least, least) < alpha / len(pairs)
    assert config["trials"] >= least + 3
    assert len({c.model for c in Plan.from_config(config).cells()}) >= 2
    assert len(config["batch_sizes"]) >= 2 and set(config["phases"]) == {"train", "infer"}
