"""Every preset and the default config validate, plan, and dry-run through Snakemake with the
command README.md gives, so `snakemake ... --configfile presets/<x>.yaml` starts and plans what
the README's table of presets says; every paper has its preset, every CPU preset fits a 2-core
machine."""

import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from fwbench.plan.config import load
from fwbench.plan.sizing import names
from fwbench.plan.sweep import Plan, group_pairs, sizing_axes, sizing_levels
from tests.conftest import REPO, snakemake

PRESETS = sorted((REPO / "presets").glob("*.yaml"))
CONFIGS = [REPO / "config.yaml", *PRESETS]
# Papers whose experiments cannot run on a CPU in a working day, and why (README, "Presets").
NO_CPU_VARIANT = {"sumanjali2024": "200 epochs of CIFAR-10, which cannot be downloaded here"}
CPU_CORES = 2  # the development machine the CPU presets are sized for


def readme_presets() -> dict[str, dict]:
    """README.md's table of presets, by config path: its trials, its A/A controls' trials, the
    calibration trials it counts beside them ("72 + 32 A/A (and 12 calibrations)"; None when
    it names none) and its command."""
    text = (REPO / "README.md").read_text()
    section = re.search(r"^## Presets[^\n]*\n(.*?)(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert section, "README.md has no '## Presets' section"
    rows = [line for line in section.group(1).splitlines() if line.startswith("| `")]
    table = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        path, trials, command = cells[0].strip("`"), cells[4], cells[-1].strip("`")
        counts = re.fullmatch(r"([\d,]+) \+ ([\d,]+) A/A(?: \(and ([\d,]+) calibrations\))?",
                              trials)
        assert counts, f"README.md's trials for {path} read {trials!r}"
        number = [int(g.replace(",", "")) if g else None for g in counts.groups()]
        table[path] = {"trials": number[0], "controls": number[1], "calibrations": number[2],
                       "command": command}
    return table


def _plan(path: Path) -> Plan:
    return Plan.from_config(load(path))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_config_validates_and_plans(path: Path):
    config = load(path)
    plan = Plan.from_config(config)
    assert plan.trials and len({t.path(plan.run) for t in plan.trials}) == len(plan.trials)
    if path.parent.name == "presets":
        assert config["run"] == path.stem, "a preset writes to results/<its name>/"


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_planned_path_matches_the_workflow_wildcards(path: Path):
    plan = _plan(path)
    constraints = {k: re.compile(v) for k, v in plan.wildcard_constraints().items()}
    for cell in plan.cells():
        parts = dict(zip(["experiment", "device", "framework", "model", "cell"],
                         cell.id.split("/")))
        for wildcard, value in parts.items():
            assert constraints[wildcard].fullmatch(value), (wildcard, value)


def test_the_readme_table_names_every_preset_and_the_default():
    named = set(readme_presets())
    present = {str(p.relative_to(REPO)) for p in CONFIGS}
    assert named == present, (f"in README.md's table but not in the repository: {named - present}; "
                              f"in the repository but not in the table: {present - named}")


def test_the_readme_table_gives_each_plans_trials():
    for path, row in readme_presets().items():
        plan = _plan(REPO / path)
        assert row["trials"] == len(plan.trial_paths(controls=False)), path
        assert row["controls"] == len(plan.trial_paths(controls=True)), path
        if row["calibrations"] is not None:
            assert row["calibrations"] == sum(len(plan.calibration_names(cell))
                                              for cell in plan.cells()), path


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_the_readme_command_dry_runs_the_plan(tmp_path, path: Path):
    """The table's command, run where config.yaml sits (as in a checkout), plans the preset's
    trials and no other: a preset merged into config.yaml would gain its models."""
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    (tmp_path / "presets").mkdir()
    for preset in PRESETS:
        shutil.copy(preset, tmp_path / "presets" / preset.name)
    command = shlex.split(readme_presets()[str(path.relative_to(REPO))]["command"])
    assert command[0] == "snakemake"
    done = snakemake(tmp_path, *command[1:], "--dry-run")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    trials = re.search(r"^run_trial\s+(\d+)$", done.stdout, re.MULTILINE)
    assert trials and int(trials.group(1)) == len(_plan(path).trials)
    assert re.search(r"^build_report\s+1$", done.stdout, re.MULTILINE)


@pytest.mark.parametrize("path", PRESETS, ids=[p.name for p in PRESETS])
def test_each_preset_header_gives_the_readme_command(path: Path):
    command = readme_presets()[str(path.relative_to(REPO))]["command"]
    header = " ".join(line.lstrip("# ").strip() for line in path.read_text().splitlines()
                      if line.startswith("#"))
    assert command in header, f"{path.name}'s comments should give {command!r}"
    assert "Expected run time" in header


def test_each_paper_has_a_preset_and_a_cpu_variant_where_one_can_run():
    papers = yaml.safe_load((REPO / "report" / "claims.yaml").read_text())["papers"]
    names = {p.stem for p in PRESETS}
    for paper in papers:
        assert paper in names, f"no presets/{paper}.yaml"
        assert f"{paper}-cpu" in names or paper in NO_CPU_VARIANT, f"no presets/{paper}-cpu.yaml"


@pytest.mark.parametrize("path", [p for p in PRESETS if p.stem.endswith("-cpu")],
                         ids=lambda p: p.name)
def test_a_cpu_preset_runs_on_the_cpu_of_a_2_core_machine(path: Path):
    config, plan = load(path), _plan(path)
    assert config["devices"] == ["cpu"] and {c.device for c in plan.cells()} == {"cpu"}
    needed = max(plan.threads(t) for t in plan.trials)
    assert needed <= CPU_CORES
    command = shlex.split(readme_presets()[str(path.relative_to(REPO))]["command"])
    assert int(command[command.index("--cores") + 1]) >= needed


def test_the_default_sweep_is_sized_by_its_plan_in_every_family():
    """Every family (the plan's ``statistics.family`` axes) holds more than one comparison;
    each comparison and A/A control runs the pairs the plan's sizing rule asks at the SD a
    pilot measured of it (fwbench.plan.sizing), and none fewer than a verdict needs; both
    models and both phases are measured. No pair is to spare (the run's 10 minutes)."""
    config = load(REPO / "config.yaml")
    statistics, plan = config["statistics"], Plan.from_config(config)
    families: dict[tuple, set] = {}
    for cell in plan.cells():
        if not cell.control:
            key = tuple(getattr(cell, axis) for axis in statistics["family"])
            families.setdefault(key, set()).add(cell.pair_id)
    assert families and all(len(pairs) >= 2 for pairs in families.values())
    pairs: dict = {}
    levels = sizing_levels(config)
    for trial in plan.trials:
        pairs[trial.cell] = max(pairs.get(trial.cell, 0), trial.index)
    for cell, n in pairs.items():
        assert n == group_pairs(config, cell, levels) >= statistics["min_trials_for_verdict"]
        assert any(names(entry, sizing_axes(cell)) for entry in statistics["sizing"]["pilot"])
    assert config["trials"] == statistics["min_trials_for_verdict"]
    assert {cell.framework for cell in pairs if cell.control} == set(config["frameworks"])
    assert len({c.model for c in plan.cells()}) >= 2
    assert set(config["phases"]) == {"train", "infer"}
