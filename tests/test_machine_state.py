"""The machine's state in every trial (fwbench.measure.telemetry.machine): CPU governor, turbo and
SMT from a FAKE sysfs tree in a tmp folder (this VM exposes almost none of it), GPU settings from
the FAKE NVML (tests/fakes/nvml.py)."""

from __future__ import annotations

from pathlib import Path

from fwbench.measure import provenance
from fwbench.measure.telemetry.machine import cpu_state, machine_columns, machine_state

try:
    from tests.fakes import nvml as fake_nvml
except ImportError:
    from fakes import nvml as fake_nvml


def write(root: Path, relative: str, value: str) -> None:
    path = root / "devices" / "system" / "cpu" / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")


def intel_machine(root: Path, governors=("performance", "performance"), no_turbo="0") -> Path:
    for i, governor in enumerate(governors):
        write(root, f"cpufreq/policy{i}/scaling_governor", governor)
        write(root, f"cpufreq/policy{i}/scaling_driver", "intel_pstate")
        write(root, f"cpufreq/policy{i}/energy_performance_preference", "performance")
    write(root, "intel_pstate/no_turbo", no_turbo)
    write(root, "smt/control", "on")
    write(root, "smt/active", "1")
    return root


def test_intel_pstate_machine(tmp_path):
    cpu = cpu_state(intel_machine(tmp_path))
    assert cpu["scaling_governor"] == "performance" and cpu["scaling_driver"] == "intel_pstate"
    assert cpu["energy_performance_preference"] == "performance"
    assert cpu["turbo"] is True and cpu["turbo_source"] == "intel_pstate/no_turbo"
    assert cpu["smt_control"] == "on" and cpu["smt_active"] is True
    assert cpu["unavailable"] == {}
    assert cpu_state(intel_machine(tmp_path / "b", no_turbo="1"))["turbo"] is False


def test_acpi_cpufreq_boost_and_amd_pstate_per_policy_boost(tmp_path):
    acpi = tmp_path / "acpi"
    write(acpi, "cpufreq/policy0/scaling_governor", "schedutil")
    write(acpi, "cpufreq/boost", "0")
    write(acpi, "smt/control", "off")
    write(acpi, "smt/active", "0")
    cpu = cpu_state(acpi)
    assert cpu["turbo"] is False and cpu["turbo_source"] == "cpufreq/boost"
    assert cpu["smt_control"] == "off" and cpu["smt_active"] is False
    amd = tmp_path / "amd"
    for i in range(2):
        write(amd, f"cpufreq/policy{i}/scaling_governor", "performance")
        write(amd, f"cpufreq/policy{i}/boost", "1")
    cpu = cpu_state(amd)
    assert cpu["turbo"] is True and cpu["turbo_source"] == "cpufreq/policy*/boost"
    assert "smt_control" in cpu["unavailable"]


def test_governors_that_differ_are_shown_per_policy(tmp_path):
    cpu = cpu_state(intel_machine(tmp_path, governors=("performance", "powersave", "powersave")))
    assert cpu["scaling_governor"] == "mixed"
    assert cpu["scaling_governor_per_policy"] == {"policy0": "performance",
                                                  "policy1": "powersave",
                                                  "policy2": "powersave"}
    columns = machine_columns({"cpu": cpu, "gpus": []})
    assert columns["cpu_governor"] is None
    assert columns["machine_note"] == "scaling_governor differs between cpufreq policies"


def test_older_kernels_per_cpu_cpufreq(tmp_path):
    write(tmp_path, "cpu0/cpufreq/scaling_governor", "ondemand")
    write(tmp_path, "cpu1/cpufreq/scaling_governor", "ondemand")
    assert cpu_state(tmp_path)["scaling_governor"] == "ondemand"


def test_a_machine_that_exposes_nothing_says_why(tmp_path):
    cpu = cpu_state(tmp_path)
    assert cpu["scaling_governor"] is None and cpu["turbo"] is None and cpu["smt_control"] is None
    assert set(cpu["unavailable"]) == {"scaling_governor", "scaling_driver",
                                       "energy_performance_preference", "turbo", "smt_control"}
    assert "virtual machines" in cpu["unavailable"]["scaling_governor"]


def test_gpu_settings_from_nvml():
    state = machine_state(sysfs_root="/nonexistent", nvml=fake_nvml.one_gpu)
    gpu = state["gpus"][0]
    assert state["gpu_unavailable"] is None
    assert gpu["uuid"] == fake_nvml.UUID_A and gpu["index"] == 0
    assert gpu["power_limit_w"] == gpu["power_limit_default_w"] == gpu["power_limit_enforced_w"] \
        == 700.0
    assert gpu["persistence_mode"] is True
    assert (gpu["applications_clock_sm_mhz"], gpu["applications_clock_mem_mhz"]) == (1980, 2619)
    assert gpu["default_applications_clock_sm_mhz"] == 1755
    assert (gpu["ecc_current"], gpu["ecc_pending"]) == (True, True)
    assert (gpu["mig_current"], gpu["mig_pending"]) == (False, False)
    assert gpu["compute_mode"] == "default" and gpu["unavailable"] == {}


def test_what_a_gpu_lacks_is_a_reason():
    gpu = machine_state(nvml=fake_nvml.older_gpu)["gpus"][0]
    assert gpu["mig_current"] is None and "Not Supported" in gpu["unavailable"]["mig_current"]
    state = machine_state(nvml=fake_nvml.no_library)
    assert state["gpus"] == [] and "libnvidia-ml.so.1" in state["gpu_unavailable"]


def test_columns_for_the_trials_table_are_typed_and_note_what_differs():
    state = machine_state(nvml=fake_nvml.two_gpus_differing)
    both = machine_columns(state)
    assert both["gpu_power_limit_w"] is None and both["gpu_ecc"] is None
    assert "power_limit_w differs between the GPUs: 700.0 / 500.0" in both["machine_note"]
    assert both["gpu_applications_clock_sm_mhz"] == 1980  # the same on both
    mine = machine_columns(state, [fake_nvml.UUID_B])
    assert mine["gpu_power_limit_w"] == 500.0 and mine["gpu_persistence_mode"] is False
    assert mine["gpu_mig"] is True and mine["machine_note"] is None
    assert set(machine_columns(state, [])) == set(both)
    assert machine_columns(state, [])["gpu_power_limit_w"] is None


def test_every_trial_records_it_through_provenance_and_the_trials_table(tmp_path, tiny_config):
    from fwbench.analysis.tables import collect_tables
    from fwbench.measure.results import make_result, write_json
    from fwbench.measure.supervisor import Outcome
    from fwbench.plan.config import validate
    from fwbench.plan.sweep import Plan

    env = provenance.environment(nvml_spec=fake_nvml.two_gpus_differing)
    assert [g["uuid"] for g in env["machine_state"]["gpus"]] == [fake_nvml.UUID_A,
                                                                 fake_nvml.UUID_B]
    assert set(env["machine_state"]["cpu"]) >= {"scaling_governor", "turbo", "smt_control"}
    paths = []
    for device in ("cuda", "cpu"):
        plan = Plan.from_config(validate({**tiny_config, "devices": [device]}))
        settings = {**plan.trial_settings(plan.trials[0]).to_dict(), "cell_id": f"c-{device}"}
        result = make_result(settings, Outcome("ok", "", {"iteration_ns": [1, 2, 3]}, 0),
                             started_at="2026-01-01T00:00:00+00:00",
                             ended_at="2026-01-01T00:00:01+00:00",
                             workflow={"git_commit": None, "git_dirty": None, "session": None})
        result["telemetry"] = {"gpus": [fake_nvml.UUID_B] if device == "cuda" else [],
                               "phases": {}}
        path = tmp_path / f"trial-{device}.json"
        write_json(result, path)
        write_json(env, path.with_suffix(".env.json"))
        paths.append(path)
    trials = collect_tables(paths)["trials"].set_index("device")
    assert trials.loc["cuda", "gpu_power_limit_w"] == 500.0   # the trial's own GPU, B
    assert not trials.loc["cuda", "gpu_persistence_mode"]
    assert trials.loc["cuda", "gpu_mig"] and trials.loc["cuda", "gpu_compute_mode"] == "default"
    assert trials.loc["cpu", "gpu_power_limit_w"] != trials.loc["cpu", "gpu_power_limit_w"]  # NaN
    assert trials.loc["cpu", "cpu_smt"] == env["machine_state"]["cpu"]["smt_control"]
