"""Provenance behind every number: env.json contents, loaded libraries, and the version audit."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

from fwbench.analysis import versions
from fwbench.environment import source
from fwbench.measure import provenance
from tests.conftest import REPO


def test_environment_records_software_machine_and_workflow():
    env = provenance.environment()
    json.dumps(env)                                   # env.json is plain JSON
    assert env["container"] == "none"                 # natively
    assert env["python"] == sys.version.split()[0]
    assert env["packages"]["pyyaml"] and env["packages"]["torch"] == "2.14.1"
    assert env["os"]["kernel"] and env["os"]["name"]
    assert env["cpu"]["model"] == env["cpu_model"] and env["cpu"]["logical_cores"] >= 1
    assert env["memory_bytes"] > 0
    assert env["workflow"]["git_commit"] and isinstance(env["workflow"]["git_dirty"], bool)
    assert env["workflow"]["measuring_code"] == source.measuring_code()
    assert env["gpus"]["available"] is False and "NVML" in env["gpus"]["reason"]


def test_gpus_through_nvml_driver_names_uuids_count():
    gpus = provenance.gpu_info("tests.fakes.nvml:two_gpus")
    assert gpus["available"] and gpus["count"] == 2 and gpus["driver"]
    assert len({d["uuid"] for d in gpus["devices"]}) == 2
    assert all(d["name"] and d["memory_total_bytes"] > 0 for d in gpus["devices"])
    assert provenance.gpu_info("tests.fakes.nvml:no_library")["reason"].startswith("NVML library")


def test_behaviour_variables_are_recorded_and_secrets_are_not():
    environ = {"CUDA_VISIBLE_DEVICES": "0", "TF_ENABLE_ONEDNN_OPTS": "0", "OMP_NUM_THREADS": "2",
               "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "XLA_FLAGS": "--x",
               "LD_LIBRARY_PATH": "/usr/lib", "HOME": "/root", "PATH": "/bin",
               "TF_TOKEN_app_terraform_io": "secret", "TF_VAR_password": "secret",
               "NCCL_AUTH_TOKEN": "secret", "FWBENCH_IMAGE_LABEL": "/opt/fwbench/image.json"}
    recorded = provenance.behaviour_variables(environ)
    assert set(recorded) == {"CUDA_VISIBLE_DEVICES", "TF_ENABLE_ONEDNN_OPTS", "OMP_NUM_THREADS",
                             "PYTORCH_CUDA_ALLOC_CONF", "XLA_FLAGS", "LD_LIBRARY_PATH",
                             "FWBENCH_IMAGE_LABEL"}


def test_git_state_falls_back_to_what_the_workflow_exported(tmp_path, monkeypatch):
    monkeypatch.delenv(source.GIT_STATE_VARIABLE, raising=False)
    assert source.git_state(tmp_path) == {"git_commit": None, "git_dirty": None}
    monkeypatch.setenv(source.GIT_STATE_VARIABLE, json.dumps({"git_commit": "abc",
                                                                  "git_dirty": False}))
    assert source.git_state(tmp_path) == {"git_commit": "abc", "git_dirty": False}


def test_the_hash_of_what_measures_follows_the_measuring_code_and_the_software(tmp_path):
    for folder in source.MEASURING_CODE:
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "a.py").write_text("x = 1\n")
    (tmp_path / source.NATIVE_LOCK).write_text("torch==2.14.1\n")
    (tmp_path / "fwbench" / "report.py").write_text("report = 1\n")
    native = source.measuring_code(source=tmp_path)
    assert native == source.measuring_code(source=tmp_path)         # the same tree, the same hash
    (tmp_path / "fwbench" / "report.py").write_text("report = 2\n")  # measures nothing
    (tmp_path / "fwbench" / "measure" / "__pycache__").mkdir()
    (tmp_path / "fwbench" / "measure" / "__pycache__" / "a.pyc").write_bytes(b"compiled")
    assert source.measuring_code(source=tmp_path) == native
    (tmp_path / source.NATIVE_LOCK).write_text("torch==2.15.0\n")    # other software
    assert source.measuring_code(source=tmp_path) != native
    in_image = source.measuring_code("sha256:" + "a" * 64, source=tmp_path)
    (tmp_path / source.NATIVE_LOCK).write_text("torch==2.14.1\n")    # an image ignores the lock
    assert source.measuring_code("sha256:" + "a" * 64, source=tmp_path) == in_image
    assert source.measuring_code("sha256:" + "b" * 64, source=tmp_path) != in_image
    (tmp_path / "fwbench" / "plan" / "a.py").write_text("x = 2\n")     # the plan's code measures
    assert source.measuring_code("sha256:" + "a" * 64, source=tmp_path) != in_image


def test_loaded_libraries_read_from_the_process_maps(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f0-7f1 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06\n"
        "7f1-7f2 r-xp 00000000 08:01 2 /opt/venv/lib/python3.11/site-packages/nvidia/cudnn/"
        "lib/libcudnn.so.9\n"
        "7f2-7f3 r--p 00001000 08:01 2 /opt/venv/lib/python3.11/site-packages/nvidia/cudnn/"
        "lib/libcudnn.so.9\n"
        "7f3-7f4 r-xp 00000000 08:01 3 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f4-7f5 rw-p 00000000 00:00 0 [heap]\n")
    libs = {lib["name"]: lib for lib in provenance.loaded_libraries(maps)}
    assert set(libs) == {"libcuda.so.580.65.06", "libcudnn.so.9"}     # once each, no libc
    assert libs["libcuda.so.580.65.06"]["version"] == "580.65.06"      # the driver's own
    assert libs["libcudnn.so.9"]["version"] == "9"


def test_loaded_libraries_name_the_package_that_ships_them(tmp_path, monkeypatch):
    # A wheel's own library and one it vendors in <name>.libs, both owned through its RECORD.
    site = tmp_path / "site-packages"
    files = ["fake_fw/lib/libtorch_fake.so", "fake_fw.libs/libgomp-0a1b2c3d.so.1.0.0"]
    for file in files:
        (site / file).parent.mkdir(parents=True, exist_ok=True)
        (site / file).write_bytes(b"")
    info = site / "fake_fw-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: Fake_FW\nVersion: 1.2.3\n")
    (info / "RECORD").write_text("fake_fw/__init__.py,sha256=a,0\n"
                                 + "".join(f"{file},sha256=b,0\n" for file in files)
                                 + "fake_fw-1.2.3.dist-info/RECORD,,\n")
    monkeypatch.syspath_prepend(str(site))
    maps = tmp_path / "maps"
    maps.write_text("".join(f"7f{i}-7f{i + 1} r-xp 00000000 08:01 {i} {site / file}\n"
                            for i, file in enumerate(files)))
    owners = {lib["name"]: lib["package"] for lib in provenance.loaded_libraries(maps)}
    assert owners == {"libtorch_fake.so": "fake-fw==1.2.3",
                      "libgomp-0a1b2c3d.so.1.0.0": "fake-fw==1.2.3"}


def test_framework_runtime_in_a_process_that_ran_pytorch():
    code = ("import json, torch; from fwbench.measure import provenance; "
            "torch.nn.Linear(2, 2)(torch.ones(1, 2)); "
            "r = provenance.framework_runtime('pytorch'); r['framework_build'].pop('config'); "
            "r['tensorflow'] = provenance.framework_runtime('tensorflow'); "
            "print(json.dumps(r))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, check=True)
    runtime = json.loads(proc.stdout.splitlines()[-1])
    build = runtime["framework_build"]
    assert build["version"].startswith("2.14.1") and build["cuda"] and "cudnn" in build
    libs = {lib["name"]: lib for lib in runtime["loaded_libraries"]}
    assert libs["libtorch_cpu.so"]["package"] == "torch==2.14.1"
    assert "not imported" in runtime["tensorflow"]["framework_build"]["unavailable"]


def _env(container, **change) -> dict:
    env = {"hostname": "h", "python": "3.11.7", "framework_version": "2.14.1", "cuda": "13.0",
           "cudnn": 92400, "container": container,
           "packages": {"torch": "2.14.1", "numpy": "2.4.6"},
           "gpus": {"available": True, "driver": "580.65.06", "count": 1,
                    "devices": [{"name": "H100", "uuid": "GPU-1"}]},
           "cpu": {"model": "EPYC", "logical_cores": 16}, "os": {"name": "Debian", "kernel": "6.1"},
           "workflow": {"git_commit": "abc", "git_dirty": False},
           "loaded_libraries": [{"name": "libcudnn.so.9", "version": "9",
                                 "package": "nvidia-cudnn-cu13==9.24.0.43"}],
           "environment_variables": {"CUDA_VISIBLE_DEVICES": "0"}}
    env.update(change)
    return env


IMAGE = {"reference": "docker://r/p@sha256:" + "1" * 64, "digest": "sha256:" + "1" * 64,
         "tag": "r/p:t", "label": {"base_image": "python@sha256:" + "2" * 64}}


def test_versions_table_per_framework_environment():
    rows = versions.versions_table([("pytorch", _env(IMAGE)), ("pytorch", _env(IMAGE)),
                                      ("tensorflow", _env("none", framework_version="2.21.0"))])
    by = {(r["framework"], r["item"]): r for r in rows}
    assert by[("pytorch", "image digest")]["value"] == IMAGE["digest"]
    assert by[("pytorch", "image digest")]["environment"] == IMAGE["reference"]
    assert by[("pytorch", "image digest")]["trials"] == 2
    assert by[("pytorch", "loaded libcudnn.so.9")]["value"] == "nvidia-cudnn-cu13==9.24.0.43"
    assert by[("pytorch", "package numpy")]["value"] == "2.4.6"
    assert by[("tensorflow", "container")]["value"] == "none"
    assert by[("tensorflow", "container")]["environment"] == "native on h"
    assert by[("pytorch", "NVIDIA driver")]["value"] == "580.65.06"


def test_trials_that_disagree_show_two_rows():
    rows = versions.versions_table([("pytorch", _env(IMAGE)),
                                      ("pytorch", _env(IMAGE, cuda="12.8"))])
    assert sorted(r["value"] for r in rows if r["item"] == "framework CUDA (build)") == \
        ["12.8", "13.0"]


def test_diff_between_two_runs_names_what_changed(tmp_path):
    this = versions.versions_table([("pytorch", _env(IMAGE))])
    other_image = {**IMAGE, "digest": "sha256:" + "3" * 64, "reference": "docker://r/p@x"}
    other_env = _env(other_image, packages={"torch": "2.14.0"})
    other = versions.versions_table([("pytorch", other_env)])
    diff = {(r["framework"], r["item"]): r for r in versions.diff_versions(this, other)}
    assert diff[("pytorch", "image digest")]["change"] == "changed"
    assert diff[("pytorch", "package torch")]["other_run"] == "2.14.0"
    assert diff[("pytorch", "package numpy")]["change"] == "only in this run"
    assert ("pytorch", "python") not in diff
    assert versions.diff_versions(this, this) == []


def test_audit_tables_round_trip_and_diff_command(tmp_path):
    rows = versions.versions_table([("pytorch", _env(IMAGE)), ("tensorflow", _env("none"))])
    out = tmp_path / "versions.csv"
    versions.write_csv(rows, versions.AUDIT_FIELDS, out)
    assert [dict(r, trials=int(r["trials"])) for r in versions.read_csv(out)] == rows
    assert versions.main(["diff", "--out", str(tmp_path / "d.csv"), str(out), str(out)]) == 0
    with open(tmp_path / "d.csv") as f:
        assert list(csv.reader(f)) == [versions.DIFF_FIELDS]
