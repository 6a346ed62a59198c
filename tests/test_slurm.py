"""profiles/slurm: the workflow through snakemake-executor-plugin-slurm against a real cluster.

The cluster is the single-node one scripts/slurm/start.sh starts from Debian's packages (munge,
slurmctld, slurmd, slurmdbd with MariaDB, so sacct answers). The run test is skipped, saying how
to start it, when no cluster answers: it needs root, five daemons and about two minutes, so it is
a target of its own (`make test-slurm`, docs/distributed.md) rather than part of `make test`.

The profile's own file is checked everywhere; the run uses it with only what a one-node test
cluster must change: its one partition, memory that fits the node, no Apptainer (no container
runtime here; tests/test_containers.py covers that boundary), and short status intervals.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, TINY_CONFIG, snakemake

PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
CLUSTER_DIR = Path(os.environ.get("FWBENCH_SLURM_DIR", "/tmp/fwbench-slurm"))


def _shipped_profile() -> dict:
    return yaml.safe_load(PROFILE.read_text())


def test_profile_submits_through_slurm_with_apptainer_and_per_rule_resources():
    profile = _shipped_profile()
    assert profile["executor"] == "slurm"
    assert profile["software-deployment-method"] == "apptainer"
    assert "--nv" in profile["apptainer-args"]
    trial = profile["set-resources"]["run_trial"]
    for key in ("slurm_partition", "gpu", "cpus_per_gpu", "mem_mb", "runtime"):
        assert key in trial, key
    # Profiles/default's decisions are repeated (a workflow profile replaces it).
    default = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())
    assert profile["rerun-triggers"] == default["rerun-triggers"]
    assert profile["apptainer-args"].split() == default["apptainer-args"].split()


@pytest.mark.parametrize("cell,device,gpus", [
    ("train-b32-3x32x32-fp32-eager-matched", "cuda", 1),
    ("train-b32-3x32x32-fp32-eager-matched", "cpu", 0),
    ("train-b32-3x32x32-fp32-eager-matched-multi_process-w4", "cuda", 4),
    ("train-b32-3x32x32-fp32-eager-matched-multi_process-w2", "cpu", 0),
])
def test_a_trial_asks_for_the_gpus_of_its_cell(cell, device, gpus):
    from types import SimpleNamespace

    expression = _shipped_profile()["set-resources"]["run_trial"]["gpu"]
    assert eval(expression, {"wildcards": SimpleNamespace(cell=cell, device=device)}) == gpus


# --- a real run against the test cluster --------------------------------------------------

def _cluster_environment() -> dict[str, str]:
    """The environment that reaches the test cluster, or a skip saying how to start one."""
    conf = os.environ.get("SLURM_CONF") or str(CLUSTER_DIR / "slurm.conf")
    if not shutil.which("sinfo") or not Path(conf).exists():
        pytest.skip("no SLURM test cluster: run scripts/slurm/install.sh and "
                    "scripts/slurm/start.sh as root (or `make test-slurm`, which does both)")
    env = {**os.environ, "SLURM_CONF": conf}
    proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True,
                          text=True, timeout=30)
    if proc.returncode or not any(s.startswith(("idle", "mixed", "alloc"))
                                  for s in proc.stdout.split()):
        pytest.skip(f"the SLURM test cluster ({conf}) does not answer or has no usable node: "
                    f"{(proc.stderr or proc.stdout).strip()[:200]}; start it with "
                    "scripts/slurm/start.sh")
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        pytest.skip("snakemake-executor-plugin-slurm is not installed (requirements.lock)")
    return env


def _test_profile(tmp_path: Path) -> Path:
    """The shipped profile, changed only where a one-node, container-less cluster must differ."""
    profile = _shipped_profile()
    del profile["software-deployment-method"]
    profile["default-resources"].update(slurm_partition="'debug'", slurm_account="'fwbench'",
                                        mem_mb=1000, runtime=15)
    for resources in profile["set-resources"].values():
        if "slurm_partition" in resources:
            resources["slurm_partition"] = "'debug'"
        if "mem_mb" in resources:
            resources["mem_mb"] = 1000
    profile["set-resources"]["run_trial"]["runtime"] = 15
    profile["slurm-init-seconds-before-status-checks"] = 2
    profile["jobs"] = 2
    folder = tmp_path / "profile"
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump(profile))
    return folder


def _results(workdir: Path) -> dict[str, str]:
    """cell id -> status of every trial result a run wrote."""
    found = {}
    for path in sorted(workdir.glob("results/*/cells/**/trial-*.json")):
        if path.name.count(".") == 1:
            result = json.loads(path.read_text())
            found[f"{result['cell_id']}#{result['trial']}"] = result["status"]
    return found


def _sacct(env: dict, since: str) -> list[dict]:
    fields = ["JobIDRaw", "JobName", "State", "ExitCode", "Comment"]
    proc = subprocess.run(["sacct", "-X", "--parsable2", "--noheader", "--starttime", since,
                           f"--format={','.join(fields)}"], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    return [dict(zip(fields, line.split("|", len(fields) - 1)))
            for line in proc.stdout.splitlines() if line]


@pytest.mark.slow
def test_every_trial_runs_as_a_slurm_job_and_the_cells_match_a_local_run(tmp_path, monkeypatch):
    env = _cluster_environment()
    monkeypatch.setenv("SLURM_CONF", env["SLURM_CONF"])
    config = yaml.safe_dump(TINY_CONFIG)
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    for workdir in (local, cluster):
        workdir.mkdir()
        (workdir / "config.yaml").write_text(config)

    proc = snakemake(local, "--configfile", "config.yaml", "--cores", "1", "benchmarks_only")
    assert proc.returncode == 0, proc.stderr[-3000:]

    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 5))
    proc = snakemake(cluster, "benchmarks_only", "--workflow-profile",
                     str(_test_profile(tmp_path)), "--configfile", "config.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]

    local_cells, cluster_cells = _results(local), _results(cluster)
    assert cluster_cells == local_cells and set(cluster_cells.values()) == {"ok"}

    jobs = [j for j in _sacct(env, since) if j["Comment"].startswith("rule_run_trial")]
    assert len(jobs) == len(cluster_cells), jobs
    assert {j["State"] for j in jobs} == {"COMPLETED"}, jobs
    # Each trial's job is named in the plugin's per-job log folder, by its SLURM job id.
    logged = {p.stem for p in cluster.glob("logs/slurm/rule_run_trial/**/*.log")}
    assert {j["JobIDRaw"] for j in jobs} <= logged
