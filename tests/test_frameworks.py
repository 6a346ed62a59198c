"""The framework registry (fwbench.plan.frameworks) is the one list of frameworks: a toy third
framework registered there is accepted by the config schema, the plan, the image lock and the
report's style with no other edit, and the places that cannot import the registry agree with it."""

from __future__ import annotations

import importlib.util
import tomllib

import pytest
import yaml

from fwbench import SOURCE_DIR
from fwbench.analysis.claims import wording
from fwbench.environment import images
from fwbench.errors import ConfigError
from fwbench.measure.child import thread_environment
from fwbench.plan import frameworks
from fwbench.plan.config import load_schema, validate
from fwbench.plan.frameworks import FRAMEWORKS, PYTORCH, Framework
from fwbench.plan.sweep import Plan
from fwbench.report.figures import style

TOY = Framework(
    name="toyflow", label="ToyFlow", colour="#cc79a7", imports=("toyflow",),
    packages=("toyflow",), backend="toyflow.fwbench:ToyBackend",
    modes={mode: "eager" for mode in PYTORCH.modes},
    strategies={pair: "ddp" for pair in PYTORCH.strategies},
    intra_op_variables=("TOYFLOW_THREADS",), image_packages=("toyflow",),
)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(FRAMEWORKS, TOY.name, TOY)
    return TOY


def _config(names) -> dict:
    config = yaml.safe_load((SOURCE_DIR / "config.yaml").read_text())
    return {**config, "frameworks": list(names)}


def test_the_schema_and_the_plan_take_a_registered_framework(toy):
    plan = Plan.from_config(validate(_config(FRAMEWORKS)))
    planned = {t.cell.framework: t.cell for t in plan.trials}
    assert set(planned) == {"pytorch", "tensorflow", "toyflow"}
    assert planned["toyflow"].framework_mode == "eager"
    assert "toyflow" in load_schema()["properties"]["controls"]["items"]["properties"][
        "framework"]["enum"]


def test_the_schema_refuses_a_framework_not_registered():
    with pytest.raises(ConfigError, match="toyflow"):
        validate(_config(["pytorch", "toyflow"]))


def test_the_image_lock_takes_a_registered_framework(toy, tmp_path):
    lock = yaml.safe_load(images.LOCK_PATH.read_text())
    lock["images"]["toyflow"] = {"repository": "ghcr.io/fwbench/fwbench-toyflow",
                                 "tag": "toyflow1.0-py3.11", "digest": None,
                                 "package": "toyflow", "version": "1.0"}
    path = tmp_path / "images.lock"
    path.write_text(yaml.safe_dump(lock))
    assert set(images.load_lock(path)["images"]) == {"pytorch", "tensorflow", "toyflow"}
    assert images.MODULES["toyflow"] == "toyflow"


def test_the_image_lock_refuses_a_framework_not_registered(tmp_path):
    lock = yaml.safe_load(images.LOCK_PATH.read_text())
    lock["images"]["toyflow"] = dict(lock["images"]["pytorch"])
    path = tmp_path / "images.lock"
    path.write_text(yaml.safe_dump(lock))
    with pytest.raises(images.ImageError, match="images must be among"):
        images.load_lock(path)


def test_the_report_style_and_the_child_take_a_registered_framework(toy):
    assert style.FRAMEWORK_COLOURS["toyflow"] == "#cc79a7"
    assert style.FRAMEWORK_LABELS["toyflow"] == wording.label("toyflow") == "ToyFlow"
    assert thread_environment(3)["TOYFLOW_THREADS"] == "3"


def test_the_names_spelled_for_each_side_follow_the_registry():
    assert frameworks.FASTER == ("pytorch_faster", "tensorflow_faster")
    assert frameworks.sides("n_{}", 7, 8) == {"n_pytorch": 7, "n_tensorflow": 8}
    assert frameworks.opposite("tensorflow_less") == "pytorch_less"
    assert list(wording.OUTCOME_LABELS) == [*frameworks.FASTER, "equivalent", "inconclusive"]
    assert thread_environment(2) == {
        "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2",
        "TF_NUM_INTRAOP_THREADS": "2", "TF_NUM_INTEROP_THREADS": "1"}


def test_every_framework_has_its_backend_image_and_extra():
    """What a new framework adds beside its record: its backend package, its image folder, its
    pyproject extra; and the mode and strategy pairs every framework names."""
    extras = tomllib.loads((SOURCE_DIR / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    schema_modes = load_schema()["properties"]["modes"]["items"]["enum"]
    for name, framework in FRAMEWORKS.items():
        module, _ = framework.backend.split(":")
        assert (SOURCE_DIR / module.replace(".", "/")).is_dir(), name
        assert (SOURCE_DIR / "containers" / name / "Dockerfile").is_file(), name
        assert extras[name] == list(framework.packages), name
        assert list(framework.modes) == schema_modes, name
        assert list(framework.strategies) == list(PYTORCH.strategies), name


def test_the_image_label_writer_names_the_registrys_modules():
    """containers/write_label.py runs in the image before fwbench is there, so it keeps its own
    copy of the modules: the same as the registry's."""
    path = SOURCE_DIR / "containers" / "write_label.py"
    spec = importlib.util.spec_from_file_location("write_label", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.MODULES == dict(frameworks.each("module"))
