"""Every preset and the default config validate and plan, so `--configfile presets/<x>.yaml` starts."""

from pathlib import Path

import pytest

from fwbench.config import load
from fwbench.plan import Plan
from tests.conftest import REPO

CONFIGS = [REPO / "config.yaml", *sorted((REPO / "presets").glob("*.yaml"))]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_config_validates_and_plans(path: Path):
    config = load(path)
    plan = Plan.from_config(config)
    assert plan.trials and len({t.path(plan.run) for t in plan.trials}) == len(plan.trials)
    if path.parent.name == "presets":
        assert config["run"] == path.stem, "a preset writes to results/<its name>/"
