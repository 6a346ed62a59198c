"""profiles/slurm: the workflow through snakemake-executor-plugin-slurm against a real cluster.

The cluster is the single-node one scripts/slurm/start.sh starts from Debian's packages (munge,
slurmctld, slurmd, slurmdbd with MariaDB, so sacct answers). The run test is skipped, saying how
to start it, when no cluster answers: it needs root, five daemons and a few minutes, so it is
a target of its own (`make test-slurm`, docs/distributed.md) rather than part of `make test`.

The profile's own file is checked everywhere, and so are the job groups that keep each pair
(trial k of both frameworks of a cell) in one cluster job (a dry-run needs no cluster). The run
uses the profile with only what a one-node test cluster must change: its one partition, memory
that fits the node, no Apptainer (no container runtime here; tests/test_containers.py covers
that boundary), and short status intervals. Its sweep has two pairs of one cell group, so
without the groups the second pair's first member, queued beside the first pair, would start
between the first pair's members.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from fwbench.analysis.tables import collect_tables
from fwbench.plan.config import validate
from fwbench.plan.sweep import Plan
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


def _two_pairs() -> dict:
    """The tiny config with two trials: two pairs of one cell group."""
    return {**TINY_CONFIG, "trials": 2}


def _pair_groups() -> dict[str, set[str]]:
    """Each pair's job group (Plan.pair_group) -> the result paths of its members."""
    plan = Plan.from_config(validate(_two_pairs()))
    groups: dict[str, set[str]] = {}
    for trial in plan.trials:
        groups.setdefault(plan.pair_group(trial), set()).add(trial.path(plan.run))
    return groups


def test_the_two_members_of_each_pair_form_one_job_group(tmp_path):
    groups = _pair_groups()
    assert len(groups) == 2 and all(len(members) == 2 for members in groups.values())
    # Snakemake forms one group job per pair (groups show in a dry-run; a local run ignores them).
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(_two_pairs()))
    proc = snakemake(tmp_path, "--configfile", "config.yaml", "--cores", "1", "--dry-run",
                     "--printshellcmds", "benchmarks_only")
    assert proc.returncode == 0, proc.stderr[-3000:]
    formed = {}
    for block in re.split(r"^.*Group job ", proc.stdout + proc.stderr, flags=re.M)[1:]:
        groupid = block.split(" (jobs", 1)[0]
        formed[groupid] = set(re.findall(r"output: (\S+/trial-\d+\.json)", block))
    assert formed == groups


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


def _results(workdir: Path) -> dict[str, dict]:
    """'cell id#trial' -> every trial result a run wrote, by its path relative to the run."""
    found = {}
    for path in sorted(workdir.glob("results/*/cells/**/trial-*.json")):
        if path.name.count(".") == 1:
            result = json.loads(path.read_text())
            found[f"{result['cell_id']}#{result['trial']}"] = {
                **result, "path": str(path.relative_to(workdir)),
                "hostname": json.loads(path.with_suffix(".env.json").read_text())["hostname"]}
    return found


def _sacct(env: dict, since: str) -> list[dict]:
    """The jobs that started since then; Start and End in seconds since the epoch."""
    fields = ["JobIDRaw", "JobName", "State", "ExitCode", "NodeList", "Start", "End", "Comment"]
    proc = subprocess.run(["sacct", "-X", "--parsable2", "--noheader", "--starttime", since,
                           f"--format={','.join(fields)}"],
                          env={**env, "SLURM_TIME_FORMAT": "%s"}, capture_output=True,
                          text=True, timeout=60, check=True)
    return [dict(zip(fields, line.split("|", len(fields) - 1)))
            for line in proc.stdout.splitlines() if line]


def _seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


@pytest.mark.slow
def test_each_pair_runs_as_one_slurm_job_on_one_node_back_to_back(tmp_path, monkeypatch):
    env = _cluster_environment()
    monkeypatch.setenv("SLURM_CONF", env["SLURM_CONF"])
    config = yaml.safe_dump(_two_pairs())
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

    local_trials, trials = _results(local), _results(cluster)
    assert {k: r["status"] for k, r in trials.items()} == \
        {k: r["status"] for k, r in local_trials.items()}
    assert {r["status"] for r in trials.values()} == {"ok"} and len(trials) == 4

    # One SLURM job per pair, which the plugin names by the group (`rule_<group>_run_trial`),
    # and none for a single trial; each cell's calibration is a job of its own.
    jobs = _sacct(env, since)
    assert {j["State"] for j in jobs} == {"COMPLETED"}, jobs
    pair_jobs = {j["Comment"][len("rule_"):-len("_run_trial")]: j for j in jobs
                 if j["Comment"].endswith("_run_trial")}
    groups = _pair_groups()
    assert set(pair_jobs) == set(groups), jobs
    assert not [j for j in jobs if j["Comment"].startswith("rule_run_trial")], jobs
    assert len([j for j in jobs if j["Comment"].startswith("rule_calibrate_cell")]) == 2, jobs
    by_path = {r["path"]: r for r in trials.values()}
    for group, members in groups.items():
        job = pair_jobs[group]
        for path in members:
            # Both members ran on the job's node, while the job ran.
            result = by_path[path]
            assert result["hostname"].split(".")[0] == job["NodeList"], (path, job)
            assert int(job["Start"]) <= _seconds(result["started_at"]), (path, job)
            assert _seconds(result["ended_at"]) <= int(job["End"]) + 1, (path, job)
    # Back to back: no other trial started between the members of any pair (trials table).
    table = collect_tables([cluster / path for path in by_path])["trials"]
    assert table["pair_adjacent"].all() and (table["pair_gap_trials"] == 0).all(), table
    # Each pair's job has its log in the plugin's log folder, by its SLURM job id.
    logged = {p.stem for p in cluster.glob("logs/slurm/group_*/**/*.log")}
    assert {j["JobIDRaw"] for j in pair_jobs.values()} <= logged
