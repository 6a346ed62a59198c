"""A real trial of each framework on the CPU: result file, thread settings, unsupported inputs."""

import pytest

from fwbench.cli import run_trial
from fwbench.config import validate
from fwbench.plan import Plan
from fwbench.results import load_trial

FRAMEWORKS = ["pytorch", "tensorflow"]


def _settings(tiny_config, framework, **changes):
    plan = Plan.from_config(validate({**tiny_config, "frameworks": [framework], **changes}))
    return plan.trial_settings(plan.trials[0])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_threads_are_set_in_both_frameworks_whatever_the_environment(
        tmp_path, monkeypatch, tiny_config, framework):
    # Snakemake exports OMP_NUM_THREADS=1 under --cores 1; the configured count must still win.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    settings = _settings(tiny_config, framework, threads=2)
    run_trial(settings, tmp_path / "trial-1.json", tmp_path / "trial-1.env.json")
    result = load_trial(tmp_path / "trial-1.json")
    assert result["status"] == "ok", result["message"]
    in_force = result["settings"]["in_force"]
    assert (in_force["threads_intra"], in_force["threads_inter"]) == (2, 1)
    assert len(result["iteration_ns"]) == 3 and result["cold_start_ns"] > 0
    assert result["versions"]["framework_version"]
    assert (tmp_path / "trial-1.env.json").exists()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_input_too_small_is_unsupported_with_a_reason(tmp_path, tiny_config, framework):
    tiny_config["models"]["lenet5"]["input_shapes"] = [[1, 8, 8]]
    run_trial(_settings(tiny_config, framework), tmp_path / "r.json", tmp_path / "e.json")
    result = load_trial(tmp_path / "r.json")
    assert result["status"] == "unsupported"
    assert "lenet5" in result["message"] and "8x8" in result["message"]
    assert result["iteration_ns"] == []
