"""Every trial records the processor it ran on, and a run never pools two kinds of processor:
a verdict holds for the processor that produced it (CPU verdicts moved from 1.58 to 0.79
between an AMD and an Intel host)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fwbench.errors import FwbenchError
from fwbench.measure import provenance, trial

# /proc/cpuinfo of one processor of each kind the project's hosts have had, cut to its fields
GENOA = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
microcode\t: 0x1000065
flags\t\t: fpu sse4_2 avx fma avx2 avx512f avx512bw avx512vl avx512_vnni avx512_bf16
core id\t\t: 0

"""
SAPPHIRE_RAPIDS = GENOA.replace("AuthenticAMD", "GenuineIntel").replace(
    "cpu family\t: 25", "cpu family\t: 6").replace("model\t\t: 17", "model\t\t: 143").replace(
    "avx512_bf16", "avx512_bf16 avx512_fp16 amx_tile amx_bf16 amx_int8")


def test_the_processor_is_named_by_its_family_model_and_widest_extensions(tmp_path):
    (tmp_path / "cpuinfo").write_text(GENOA)
    cache = tmp_path / "devices/system/cpu/cpu0/cache/index0"
    cache.mkdir(parents=True)
    for name, value in {"level": "1", "type": "Data", "size": "32K"}.items():
        (cache / name).write_text(value + "\n")
    cpu = provenance.cpu_info(tmp_path / "cpuinfo", tmp_path)
    assert (cpu["vendor"], cpu["family"], cpu["model_number"], cpu["stepping"],
            cpu["microcode"]) == ("AuthenticAMD", 25, 17, 1, "0x1000065")
    assert cpu["caches"] == {"L1d": "32K"}
    assert cpu["isa"] == ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl",
                          "avx512_vnni", "avx512_bf16"]
    assert cpu["kind"] == "AuthenticAMD family 25 model 17, AVX-512"
    (tmp_path / "cpuinfo").write_text(SAPPHIRE_RAPIDS)
    assert provenance.cpu_info(tmp_path / "cpuinfo", tmp_path)["kind"] == \
        "GenuineIntel family 6 model 143, AVX-512 and AMX"


def test_this_machine_has_a_kind():
    cpu = provenance.cpu_info()
    assert cpu["kind"] and cpu["vendor"] and cpu["family"] is not None, cpu


def test_a_trial_of_a_run_started_on_another_kind_is_refused(tmp_path):
    here = provenance.cpu_info()
    trial.check_processor({"processor": here}, "idle.json")  # the same kind: measured
    trial.check_processor({}, "idle.json")  # a run from before the record: not checked
    other = {**here, "kind": "GenuineIntel family 6 model 143, AVX-512 and AMX"}
    with pytest.raises(FwbenchError, match="another kind of processor .GenuineIntel family 6 "
                                           "model 143, AVX-512 and AMX, idle.json.; this "
                                           "machine is"):
        trial.check_processor({"processor": other}, "idle.json")


def test_the_trial_command_refuses_it_in_one_line_and_writes_nothing(tmp_path, tiny_config):
    from fwbench.plan.config import validate
    from fwbench.plan.sweep import Plan

    plan = Plan.from_config(validate(tiny_config))
    idle = tmp_path / "idle.json"
    idle.write_text(json.dumps({"processor": {"kind": "GenuineIntel family 6 model 143, "
                                                      "AVX-512 and AMX"}}))
    params = json.dumps(plan.trial_settings(plan.trials[0]).to_dict())
    done = subprocess.run(
        [sys.executable, "-m", "fwbench", "trial", "--settings", params,
         "--result", str(tmp_path / "r.json"),
         "--env", str(tmp_path / "e.json"), "--telemetry", str(tmp_path / "t.csv"),
         "--idle", str(idle)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "never pools two kinds" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idle.json"]
