"""fwbench/plan/config.py: one clear error naming the key and the bad value, before any job
starts."""

import pytest
import yaml

from fwbench.errors import ConfigError, ConfigWarning
from fwbench.plan.config import check_threads, load, validate
from tests.conftest import REPO, snakemake


def test_default_config_is_valid_and_filled():
    config = load(REPO / "config.yaml")
    assert config["precisions"] == ["fp32"] and config["warmup"]["max"] >= config["warmup"]["min"]


def test_defaults_fill_missing_keys(tiny_config):
    config = validate(tiny_config)
    assert config["threads"] == 1 and config["modes"] == ["idiomatic"]
    assert config["models"]["lenet5"]["num_classes"] == 10


BAD = [
    ("unknown top-level key", lambda c: c.update(batchsize=[1]), ["batchsize"]),
    ("wrong type", lambda c: c.update(trials="three"), ["trials", "three"]),
    ("unknown model", lambda c: c["models"].update(alexnet={"input_shapes": [[3, 8, 8]]}),
     ["models", "alexnet"]),
    ("unknown framework", lambda c: c.update(frameworks=["pytorch", "jax"]),
     ["frameworks[1]", "jax"]),
    ("unknown device", lambda c: c.update(devices=["tpu"]), ["devices[0]", "tpu"]),
    ("batch size below 1", lambda c: c.update(batch_sizes=[4, 0]), ["batch_sizes[1]", "0"]),
    ("empty axis", lambda c: c.update(phases=[]), ["phases", "empty"]),
    ("duplicated axis", lambda c: c.update(batch_sizes=[2, 2]), ["batch_sizes", "[2, 2]"]),
    ("unknown nested key", lambda c: c["models"]["lenet5"].update(width=2), ["width"]),
    ("bad input shape", lambda c: c["models"]["lenet5"].update(input_shapes=[[1, 0, 28]]),
     ["input_shapes[0]"]),
    ("missing required key", lambda c: c.pop("trials"), ["trials"]),
    ("warm-up bounds reversed", lambda c: c.update(warmup={"min": 5, "max": 1}), ["warmup", "5"]),
    ("no calibration", lambda c: c.update(warmup={"min": 0, "max": 20, "calibrations": 0}),
     ["calibrations", "0"]),
    ("bad run name", lambda c: c.update(run="../escape"), ["run", "../escape"]),
    ("unknown optimizer", lambda c: c.update(data={"optimizer": "rmsprop"}),
     ["'data.optimizer'", "rmsprop", "sgd"]),
    ("unknown optimizer in a list", lambda c: c.update(data={"optimizer": ["sgd", "lbfgs"]}),
     ["'data.optimizer[1]'", "lbfgs"]),
    ("duplicated optimizer", lambda c: c.update(data={"optimizer": ["adam", "adam"]}),
     ["'data.optimizer'", "must not repeat", "['adam', 'adam']"]),
    ("no optimizer", lambda c: c.update(data={"optimizer": []}), ["'data.optimizer'", "empty"]),
]


@pytest.mark.parametrize("case, mutate, expected", BAD, ids=[b[0] for b in BAD])
def test_invalid_config_names_key_and_value(tiny_config, case, mutate, expected):
    mutate(tiny_config)
    with pytest.raises(ConfigError) as info:
        validate(tiny_config)
    message = str(info.value)
    assert "\n" not in message
    for fragment in expected:
        assert fragment in message, message


def test_a_warmup_too_short_to_be_steady_is_said_not_refused(tiny_config):
    with pytest.warns(ConfigWarning, match="'warmup.max': 8 is below 10.*before their steady"):
        validate({**tiny_config, "warmup": {"min": 2, "max": 8}})


def test_optimizer_is_one_name_or_a_list(tiny_config):
    assert validate(tiny_config)["data"]["optimizer"] == "sgd"
    config = validate({**tiny_config, "data": {"optimizer": ["sgd", "adam"]}})
    assert config["data"]["optimizer"] == ["sgd", "adam"]


def test_threads_above_cores_is_refused(tiny_config):
    config = validate({**tiny_config, "threads": 2})
    with pytest.raises(ConfigError, match="'threads': trials need 2 threads .* grants 1 core"):
        check_threads(config, cores=1)
    check_threads(config, cores=2)


@pytest.mark.parametrize("mutate, expected", [
    (lambda c: c.update(batch_sizes=[0]), "'batch_sizes[0]': 0 is less than the minimum of 1"),
    (lambda c: c.update(unknown=True), "unknown key 'unknown'"),
])
def test_workflow_stops_before_any_job(tmp_path, tiny_config, mutate, expected):
    mutate(tiny_config)
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(tiny_config))
    proc = snakemake(tmp_path, "--configfile", "bad.yaml", "--cores", "1", "--dry-run")
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "ConfigError" in output and expected in output
    assert not (tmp_path / "results").exists()
