"""The framework images built for real, and the workflow run in them (`make test-containers`).

scripts/containers/test.sh builds both images with Podman from the repository's recipes on a
stand-in base, then runs this file with $FWBENCH_BUILT_IMAGES naming the lock it wrote. Every
benchmark job runs inside its image through scripts/containers/apptainer, which turns the
apptainer calls Snakemake makes into `podman run` of the same image. Without those images
(`make test`), everything here skips.
"""

from __future__ import annotations

import csv
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fwbench.environment import images
from fwbench.plan.config import validate
from fwbench.plan.sweep import Plan
from tests.conftest import BIN, REPO, TINY_CONFIG

BUILT = os.environ.get("FWBENCH_BUILT_IMAGES")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not BUILT or not shutil.which("podman"),
    reason="needs images built here: make test-containers (root, Podman)")]
SHIM = REPO / "scripts" / "containers"
PODMAN = ["podman", "--runtime", "runc"]
# As the shim passes them: $APPTAINER_SHIM_ULIMITS where the engine refuses the host's.
LIMITS = (os.environ.get("APPTAINER_SHIM_ULIMITS") or " ".join(
    f"{name}={soft}:{hard}" for name, (soft, hard) in
    (("nofile", resource.getrlimit(resource.RLIMIT_NOFILE)),
     ("nproc", resource.getrlimit(resource.RLIMIT_NPROC))))).split()
# Distributions of the host's environment that the images do not hold.
HOST_ONLY = ("snakemake", "matplotlib", "scipy", "pyarrow")


@pytest.fixture(scope="module")
def lock() -> dict:
    return images.load_lock(BUILT)


def podman_run(image_id: str, *command: str, mounts=()) -> subprocess.CompletedProcess:
    limits = [a for limit in LIMITS for a in ("--ulimit", limit)]
    volumes = [a for m in mounts for a in ("--volume", m)]
    return subprocess.run([*PODMAN, "run", "--rm", "--network=none", *limits, *volumes,
                           "--entrypoint", json.dumps(list(command)), image_id],
                          capture_output=True, text=True, timeout=600)


def engine_holds(digest: str) -> bool:
    return subprocess.run([*PODMAN, "image", "exists", digest]).returncode == 0


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_each_image_holds_what_its_lock_says(lock, framework):
    """python -m fwbench.environment.images check, inside the image: label, version, pip check,
    import."""
    entry = lock["images"][framework]
    assert engine_holds(entry["digest"])
    proc = podman_run(entry["digest"], "env", f"PYTHONPATH={REPO}", "python", "-m",
                      "fwbench.environment.images", "check", "--framework", framework,
                      "--lock", BUILT,
                      mounts=[f"{REPO}:{REPO}:ro", f"{Path(BUILT).parent}:{Path(BUILT).parent}:ro"])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    found = json.loads(proc.stdout)
    assert found["installed"] == found["label"]["version"] == str(entry["version"])
    assert found["imported"][0].startswith(str(entry["version"]))
    assert found["pip_check"] == "No broken requirements found."
    assert found["label"]["base_image"] == "localhost/fwbench-standin-base:bookworm"  # stand-in
    assert found["label"]["variant"] == entry["variant"] == "cpu"


# --- the sweep, every benchmark job in its image --------------------------------------------

def _environ(workdir: Path, lock_path, log: Path) -> dict:
    return {**os.environ, "PATH": f"{SHIM}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}",
            "FWBENCH_IMAGES_LOCK": str(lock_path), "APPTAINER_SHIM_LOG": str(log),
            "LEAKED_HOST_VARIABLE": "must not reach a job",
            "PYTHONPATH": str(workdir / "host-only")}


def _snakemake(workdir: Path, lock_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory",
         str(workdir), "--cores", "1", "--use-singularity", *args], cwd=workdir,
        env=_environ(workdir, lock_path, workdir / "shim.log"), capture_output=True, text=True,
        timeout=1800)


CONFIG = {**TINY_CONFIG, "trials": 2, "iterations": 20, "warmup": {"min": 1, "max": 3}}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, lock):
    """The tiny config, two trials per cell (ABBA), with --use-singularity on the built images.
    Planted on the host: a module in the job's ~/.local and one on the host's PYTHONPATH."""
    workdir = tmp_path_factory.mktemp("sweep")
    (workdir / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    user_site = workdir / ".local" / "lib" / "python3.11" / "site-packages"
    for folder in (user_site, workdir / "host-only"):
        folder.mkdir(parents=True)
        (folder / "fwbench_leak_probe.py").write_text("LEAKED = True\n")
    proc = _snakemake(workdir, BUILT, "all", "audit")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return workdir, proc


def _trials(workdir: Path) -> list[Path]:
    return sorted(p for p in (workdir / "results").rglob("trial-*.json")
                  if re.fullmatch(r"trial-\d+\.json", p.name))


def _calls(log: Path, command: str = "exec") -> list[dict]:
    return [c for c in map(json.loads, log.read_text().splitlines()) if c["command"] == command]


def test_every_benchmark_job_and_nothing_else_ran_in_its_image(sweep, lock):
    workdir, proc = sweep
    trials = _trials(workdir)
    assert len(trials) == 4
    calls = _calls(workdir / "shim.log")
    # The benchmark jobs: every trial, and each cell's calibration trial (its warm-up); the
    # host-side rules never entered an image.
    cells = {t.parent for t in trials}
    assert len(calls) == len(trials) + len(cells)
    assert sum("/calibration.json" in c["argv"][-1] for c in calls) == len(cells)
    for call in calls:
        command = call["argv"][-1]
        assert "python -m fwbench trial" in command, command
        framework = "pytorch" if "/pytorch/" in command else "tensorflow"
        assert call["image_id"] == lock["images"][framework]["digest"]
        assert engine_holds(call["image_id"])
        assert {"--nv", "--cleanenv"} <= set(call["flags"])
        assert call["engine"][:4] == [*PODMAN, "run"]
    for rule in ("measure_idle", "collect_tables", "summarise_results", "build_report",
                 "audit_versions"):
        assert re.search(rf"rule {rule}:", proc.stdout + proc.stderr), rule


def test_each_trial_records_the_digest_podman_holds_and_versions_read_inside(sweep, lock):
    workdir, _ = sweep
    for trial in _trials(workdir):
        result = json.loads(trial.read_text())
        env = json.loads(trial.with_name(trial.name.replace(".json", ".env.json")).read_text())
        framework = result["cell"]["framework"]
        entry = lock["images"][framework]
        assert result["status"] == "ok", result["message"]
        container = env["container"]
        assert container["digest"] == entry["digest"] and engine_holds(container["digest"])
        assert container["engine"] == "podman"
        # Resolved, as every path the workflow records, however the checkout was reached.
        archive = Path(BUILT).resolve().parent / entry["file"]
        assert container["reference"] == f"docker-archive://{archive}"
        assert container["image_file_matches_reference"] is True
        assert container["framework_version"] == str(entry["version"])
        assert container["framework_path"].startswith("/opt/venv/")
        # Versions read inside: the image's Python and packages, not the host's.
        label = container["label"]
        assert env["python"] == label["python"] and env["python_build"]["prefix"] == "/opt/venv"
        image_packages = {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in
                          (p.split("==", 1) for p in label["pip_freeze"])}
        assert {k: v for k, v in env["packages"].items() if k != "fwbench"} == image_packages
        assert not set(HOST_ONLY) & set(env["packages"])
        assert env["framework_build"]["version"].startswith(str(entry["version"]))
        assert "LEAKED_HOST_VARIABLE" not in json.dumps(env)


def test_the_audit_lists_the_images_packages(sweep, lock):
    workdir, _ = sweep
    with (workdir / "results" / "tiny" / "audit" / "versions.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    for framework, entry in lock["images"].items():
        mine = {r["item"]: r["value"] for r in rows if r["framework"] == framework}
        assert mine["image digest"] == entry["digest"]
        assert mine[f"package {entry['package']}"] == str(entry["version"])
        assert not [i for i in mine if i in {f"package {p}" for p in HOST_ONLY}]


def test_no_host_site_packages_or_user_site_inside(sweep):
    """The exact apptainer call Snakemake made for a trial, with the command swapped for a probe:
    the host's environment stays out, and Python sees only the image's packages and the work
    tree's fwbench: no host site-packages and no ~/.local on its path, nothing importable from
    them (the files of a bound tree, such as a .venv in it, are there, as with Apptainer)."""
    workdir, _ = sweep
    call = _calls(workdir / "shim.log")[0]
    host_site = [p for p in sys.path if p.endswith("site-packages")]
    probe = ("import importlib.util as u, json, os, site, sys; print(json.dumps({"
             "'path': sys.path, 'user_site': site.ENABLE_USER_SITE, "
             "'leak': u.find_spec('fwbench_leak_probe') is not None, "
             "'host_only': [m for m in ('snakemake', 'matplotlib', 'scipy') if u.find_spec(m)], "
             "'home': os.environ['HOME'], 'leaked_var': 'LEAKED_HOST_VARIABLE' in os.environ}))")
    argv = [*call["argv"][:-1], f"python -c {shlex.quote(probe)}"]
    env = _environ(workdir, BUILT, workdir / "probe.log")
    images.export_source(env, cwd=workdir)        # as the workflow does for its jobs
    proc = subprocess.run([str(SHIM / "apptainer"), *argv], cwd=call["cwd"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["home"] == str(workdir)                  # the job's home: the working directory
    assert (workdir / ".local" / "lib" / "python3.11" / "site-packages").is_dir()
    assert seen["leak"] is False and seen["user_site"] is False
    assert seen["host_only"] == [] and seen["leaked_var"] is False
    assert not [p for p in seen["path"] if p in host_site or ".local" in p]
    assert all(p.startswith(("/opt/venv/", "/usr/lib/python3")) for p in seen["path"]
               if p not in ("", str(REPO))), seen["path"]


# --- the README's commands, from a fresh clone --------------------------------------------

STAND_IN = ["ENGINE=podman", "VARIANT=cpu", "BASE=localhost/fwbench-standin-base:bookworm",
            "IMAGE_PYTHON=/usr/bin/python3"]


def _fresh_clone(root: Path) -> Path:
    """A clone of this repository with its own environment, as `make` would set it up, made
    from this one's packages (a .pth line) so nothing is downloaded: fwbench installed editable
    from the clone, the `snakemake` command pip writes, and the install marker `make` checks.
    The wheels and image archives built here are linked in, as a copied wheelhouse would be."""
    clone = root / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    borrowed = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "locked-dependencies.pth").write_text("".join(f"{p}\n" for p in borrowed))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "--quiet", "--no-deps", "--no-build-isolation", "--editable",
                    str(clone)], check=True, cwd=root)
    (venv / "bin" / "snakemake").write_text(
        f"#!{venv}/bin/python\nimport sys\nfrom snakemake.cli import main\nsys.exit(main())\n")
    (venv / "bin" / "snakemake").chmod(0o755)
    (venv / ".installed").touch()
    subprocess.run(["cp", "-al", str(REPO / "containers" / "wheelhouse"),
                    str(clone / "containers")], check=True)
    (clone / "containers" / "build").mkdir()
    for archive in Path(BUILT).parent.glob("fwbench-*.tar"):
        os.link(archive, clone / "containers" / "build" / archive.name)
    return clone


def test_make_run_containers_from_a_fresh_clone_as_the_readme_says(lock, tmp_path):
    """The README's GPU section, but for its CUDA parts (no GPU here: the CPU variant on the
    stand-in base, no `devices=[cpu,cuda]`): in a fresh clone, with PATH holding nothing of any
    environment, `make run-containers` builds both images (`make images`: every step runs, from
    the layers and files already here) and runs the clone's sweep (config.yaml, cut to the tiny
    config) with every benchmark job in its image through the shim and every host job natively;
    run again, it neither rebuilds an image nor measures again."""
    clone = _fresh_clone(tmp_path)
    (clone / "config.yaml").write_text(yaml.safe_dump(TINY_CONFIG))
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "APPTAINER_SHIM_LOG": str(tmp_path / "shim.log"),
           **{k: v for k, v in os.environ.items() if k == "APPTAINER_SHIM_ULIMITS"}}
    make = ["make", "--no-print-directory", "-C", str(clone), "run-containers", *STAND_IN]
    first = subprocess.run(make, env=env, capture_output=True, text=True, timeout=1800)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    built = images.load_lock(clone / "containers" / "build" / "images.lock")["images"]
    assert "containers/build.py --engine podman --variant cpu" in first.stdout
    trials = sorted((clone / "results" / "tiny").rglob("trial-?.env.json"))
    assert len(trials) == 2
    for env_json in trials:
        container = json.loads(env_json.read_text())["container"]
        assert container["digest"] == built[container["label"]["framework"]]["digest"]
    calls = _calls(tmp_path / "shim.log")     # the 2 trials and the 2 cells' calibrations
    assert len(calls) == 4 and all("python -m fwbench trial" in c["argv"][-1] for c in calls)
    for rule in ("measure_idle", "audit_versions", "build_report"):
        assert re.search(rf"rule {rule}:", first.stdout + first.stderr), rule
    assert (clone / "results" / "tiny" / "report" / "report.pdf").is_file()

    again = subprocess.run(make, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Nothing to be done" in again.stdout + again.stderr and "build.py" not in again.stdout


# --- containerised against native: the same cell, interleaved --------------------------------

def _trial_command(settings, out: Path) -> str:
    params = json.dumps(settings.to_dict(), sort_keys=True)
    return (f"exec python -m fwbench trial --settings '{params}' "
            f"--result {out}.json --env {out}.env.json --telemetry {out}.telemetry.csv")


def test_a_containerised_trial_matches_a_native_one(sweep, lock, tmp_path):
    """One cell per framework, measured natively and in its image, alternately (ABAB, 3 each):
    same framework version, and the ratio of the trials' median iteration times is printed
    (docs/containers.md reports it); the bound is loose, a gross mismatch only."""
    workdir, _ = sweep
    plan = Plan.from_config(validate({**CONFIG}))
    exported: dict = {}
    expected = images.workflow_images(CONFIG["frameworks"], requested=True, path=BUILT,
                                      environ=exported)
    images.export_source(exported, cwd=workdir)   # as the workflow does for its jobs
    call = _calls(workdir / "shim.log")[0]
    head = call["argv"][:call["argv"].index(call["image"])]
    ratios = {}
    for framework in CONFIG["frameworks"]:
        trial = next(t for t in plan.trials if t.cell.framework == framework)
        settings = plan.trial_settings(trial)
        image = workdir / ".snakemake" / "singularity" / \
            images.image_file_name(expected[framework]["reference"])
        times = {"native": [], "container": []}
        versions = {}
        for k in range(3):
            for where in ("native", "container"):
                out = tmp_path / f"{framework}-{where}-{k}"
                if where == "native":
                    command = ["sh", "-c", _trial_command(settings, out)]
                    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
                else:
                    inside = images.with_images(settings, expected)
                    command = [str(SHIM / "apptainer"), *head, str(image), "sh", "-c",
                               _trial_command(inside, out)]
                    env = {**os.environ, **exported}
                proc = subprocess.run(command, cwd=workdir, env=env, capture_output=True,
                                      text=True, timeout=600)
                assert proc.returncode == 0, proc.stderr[-2000:]
                result = json.loads(Path(f"{out}.json").read_text())
                assert result["status"] == "ok", result["message"]
                times[where].append(statistics.median(result["iteration_ns"]))
                recorded = json.loads(Path(f"{out}.env.json").read_text())
                versions[where] = recorded["framework_build"]["version"]
                assert (recorded["container"] == "none") == (where == "native")
        assert versions["native"] == versions["container"], versions
        ratios[framework] = statistics.median(times["container"]) / statistics.median(
            times["native"])
        print(f"{framework}: container/native median iteration time {ratios[framework]:.3f} "
              f"(native {times['native']}, container {times['container']} ns)")
    assert all(0.67 < r < 1.5 for r in ratios.values()), ratios


# --- digests: another lock changes one, the same lock does not ------------------------------

def _build(context: Path, out: Path, *extra: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(context / "build.py"), "--engine", "podman", "--variant", "cpu",
         "--frameworks", "tensorflow", "--base", "localhost/fwbench-standin-base:bookworm",
         "--python", "/usr/bin/python3", "--out", str(out), *extra],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return images.load_lock(out / "images.lock")["images"]["tensorflow"]


def test_the_same_lock_and_wheelhouse_give_the_same_digest(lock, tmp_path):
    rebuilt = _build(REPO / "containers", tmp_path, "--no-cache")
    assert rebuilt["digest"] == lock["images"]["tensorflow"]["digest"]


def test_another_lock_changes_the_digest_and_remeasures_that_framework_with_its_partners(
        sweep, lock, tmp_path):
    workdir, _ = sweep
    context = tmp_path / "containers"
    shutil.copytree(REPO / "containers", context,
                    ignore=shutil.ignore_patterns("build", "wheelhouse", "__pycache__"))
    subprocess.run(["cp", "-al", str(REPO / "containers" / "wheelhouse"), str(context)],
                   check=True)
    with (context / "tensorflow" / "requirements-cpu.lock").open("a") as f:
        f.write("# another lock: the same pins, other bytes\n")
    rebuilt = _build(context, tmp_path / "build")
    assert rebuilt["digest"] != lock["images"]["tensorflow"]["digest"]
    # The new lock: this TensorFlow image, the same PyTorch image (its file linked beside it).
    lock_path = tmp_path / "build" / "images.lock"
    new_lock = images.load_lock(lock_path)
    new_lock["images"]["pytorch"] = lock["images"]["pytorch"]
    os.link(Path(BUILT).parent / lock["images"]["pytorch"]["file"],
            lock_path.parent / lock["images"]["pytorch"]["file"])
    images.write_lock(new_lock, lock_path, header=images.LOCAL_LOCK_HEADER)

    before = {p: p.stat().st_mtime_ns for p in _trials(workdir)}
    dry = _snakemake(workdir, lock_path, "--dry-run", "benchmarks_only")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert set(re.findall(r"framework=(\w+)", dry.stdout)) == {"pytorch", "tensorflow"}
    run = _snakemake(workdir, lock_path, "benchmarks_only")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for trial, mtime in before.items():
        assert trial.stat().st_mtime_ns != mtime, trial          # every trial measured again
        env = json.loads(trial.with_name(trial.name.replace(".json", ".env.json")).read_text())
        framework = json.loads(trial.read_text())["cell"]["framework"]
        assert env["container"]["digest"] == new_lock["images"][framework]["digest"]
