"""Pinned framework images: the lock, `make pin-images`, the in-image check, and the workflow run
with --use-singularity through the fake apptainer (tests/fakes/apptainer) on a tiny config."""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from fwbench.environment import images, pinning
from fwbench.plan.config import validate
from fwbench.plan.sweep import Plan
from tests.conftest import BIN, REPO, TINY_CONFIG, snakemake

FAKES = REPO / "tests" / "fakes"


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _fake_bin(tmp_path: Path, *tools: str) -> Path:
    """A directory holding only the named fakes, to put first on PATH."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        link = bin_dir / tool
        if not link.exists():
            link.symlink_to(FAKES / ("skopeo" if tool == "crane" else tool))
    return bin_dir


def _write_lock(path: Path, digests: dict[str, str | None], packages=None) -> None:
    lock = images.load_lock(images.LOCK_PATH)
    lock["base"]["digest"] = digests.get("base")
    for framework, entry in lock["images"].items():
        entry["digest"] = digests.get(framework)
        if packages:
            entry["package"], entry["version"] = packages[framework]
    images.write_lock(lock, path)


# --- the shipped files --------------------------------------------------------------------

def test_shipped_lock_is_valid_and_pins_nothing_it_did_not_resolve():
    lock = images.load_lock(images.LOCK_PATH)   # checks every digest is null or sha256:<64 hex>
    assert set(lock["images"]) == {"pytorch", "tensorflow"}
    for framework, entry in lock["images"].items():
        pins = (REPO / entry["lock"]).read_text()
        pin = rf"\n{entry['package']}=={entry['version']} --hash=sha256:[0-9a-f]{{64}}\n"
        assert re.search(pin, pins), framework
        assert entry["lock"] == f"containers/{framework}/requirements-cuda.lock"


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_every_image_lock_line_is_an_exact_pin_with_its_wheel_hash(framework):
    for variant in ("cuda", "cpu"):
        lines = [line for line in (REPO / "containers" / framework /
                                   f"requirements-{variant}.lock").read_text().splitlines()
                 if line and not line.startswith("#")]
        assert lines and all(re.fullmatch(r"[a-z0-9.-]+==\S+ --hash=sha256:[0-9a-f]{64}", line)
                             for line in lines), (framework, variant)
    cpu = (REPO / "containers" / "tensorflow" / "requirements-cpu.lock").read_text()
    cuda = (REPO / "containers" / "tensorflow" / "requirements-cuda.lock").read_text()
    assert "\ntensorflow-cpu==2.21.0 " in cpu and "nvidia-" not in cpu.replace("nvidia-ml-py", "")
    assert "\ntensorflow==2.21.0 " in cuda and "\nnvidia-cudnn-cu12==" in cuda


def test_image_locks_match_the_tested_native_environment():
    """containers/<fw>/requirements.lock are cut from this environment by containers/freeze.py."""
    proc = subprocess.run([sys.executable, str(REPO / "containers" / "freeze.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_dockerfile_and_apptainer_definition_build_the_same_image(framework):
    folder = REPO / "containers" / framework
    dockerfile, definition = (folder / "Dockerfile").read_text(), \
        (folder / f"{framework}.def").read_text()
    for text in (dockerfile, definition):
        assert "--no-deps --require-hashes --no-compile $from" in text
        assert "--requirement /opt/fwbench/requirements.lock" in text
        assert '--no-index --find-links /mnt"' in text                 # the wheelhouse
        assert "--invalidation-mode unchecked-hash" in text
        assert f"write_label.py --framework {framework}" in text
        assert "FWBENCH_IMAGE_LABEL=/opt/fwbench/image.json" in text
        assert "PYTHONNOUSERSITE=1" in text
    assert "FROM ${BASE_IMAGE}" in dockerfile and "From: {{ BASE_IMAGE }}" in definition
    assert f"COPY {framework}/requirements-${{VARIANT}}.lock /opt/fwbench/requirements.lock" \
        in dockerfile
    assert f"{framework}/requirements-{{{{ VARIANT }}}}.lock /opt/fwbench/requirements.lock" \
        in definition
    for argument in ("BASE_IMAGE", "PYTHON", "VARIANT", "INDEX_URL", "SOURCE_DATE_EPOCH"):
        assert f"ARG {argument}" in dockerfile and f"    {argument}=" in definition, argument
    assert '"${PYTHON}" -m venv /opt/venv' in dockerfile
    assert '"{{ PYTHON }}" -m venv /opt/venv' in definition


def test_label_writer_records_what_the_job_checks(tmp_path):
    out = tmp_path / "image.json"
    lock = REPO / "containers" / "pytorch" / "requirements-cpu.lock"
    subprocess.run([sys.executable, str(REPO / "containers" / "write_label.py"),
                    "--framework", "pytorch", "--variant", "cpu",
                    "--image", "example.org/fwbench-pytorch:t1", "--base", f"python@{_digest('b')}",
                    "--lock", str(lock), "--builder", "dockerfile", "--out", str(out)],
                   check=True, capture_output=True,
                   env={**os.environ, "SOURCE_DATE_EPOCH": "86400"})
    label = json.loads(out.read_text())
    assert label["framework"] == "pytorch" and label["image"] == "example.org/fwbench-pytorch:t1"
    assert label["prefix"] == sys.prefix
    assert label["site_packages"] == sysconfig.get_paths()["purelib"]
    assert label["version"] == "2.14.1"
    assert any(p.startswith("torch==") for p in label["pip_freeze"])
    assert label["package"] == "torch" and label["variant"] == "cpu"
    assert label["base_digest"] == _digest("b")
    assert label["lock_sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    assert label["source_date"] == "1970-01-02T00:00:00+00:00"      # not the clock: reproducible
    bad = subprocess.run([sys.executable, str(REPO / "containers" / "write_label.py"),
                          "--framework", "pytorch", "--variant", "cpu", "--image", "x/y:t",
                          "--base", "python:3.11", "--builder", "dockerfile", "--out", str(out)],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "the base must be pinned" in bad.stderr


def test_profile_passes_nv_cleanenv_caches_and_serialises_gpu_jobs():
    profile = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())
    args = profile["apptainer-args"].split()
    assert "--nv" in args and "--cleanenv" in args
    envs = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--env")
    assert envs["PYTHONNOUSERSITE"] == "1"
    for cache in ("TORCH_HOME", "KERAS_HOME", "XDG_CACHE_HOME", "MPLCONFIGDIR"):
        assert envs[cache].startswith(".cache"), cache   # in the working directory
    assert profile["resources"]["gpu"] == 1 and profile["resources"]["benchmark_slot"] == 1
    assert "cuda" in profile["set-resources"]["run_trial"]["gpu"]
    assert {"params", "software-env"} <= set(profile["rerun-triggers"])


# --- make pin-images ----------------------------------------------------------------------

def test_pin_images_writes_only_what_the_registry_answered(tmp_path, monkeypatch):
    lock = tmp_path / "images.lock"
    _write_lock(lock, {})
    entries = images.load_lock(lock)
    registry = {images.tag_reference(entries["base"]): _digest("base"),
                images.tag_reference(entries["images"]["pytorch"]): _digest("pytorch")}
    (tmp_path / "registry.json").write_text(json.dumps(registry))
    monkeypatch.setenv("FAKE_REGISTRY", str(tmp_path / "registry.json"))
    monkeypatch.setenv("FAKE_REGISTRY_LOG", str(tmp_path / "registry.log"))
    monkeypatch.setenv("PATH", f"{_fake_bin(tmp_path, 'skopeo')}{os.pathsep}{os.environ['PATH']}")

    assert pinning.pin_command(lock) == 1     # tensorflow's tag is unknown to the registry
    pinned = images.load_lock(lock)
    assert pinned["base"]["digest"] == _digest("base")
    assert pinned["images"]["pytorch"]["digest"] == _digest("pytorch")
    assert pinned["images"]["tensorflow"]["digest"] is None     # never guessed
    assert lock.read_text().startswith(images.LOCK_HEADER)
    calls = [json.loads(line) for line in (tmp_path / "registry.log").read_text().splitlines()]
    assert all(c[:3] == ["inspect", "--format", "{{.Digest}}"] for c in calls) and len(calls) == 3

    # The registry now answers everything; a second pin changes only what moved.
    registry[images.tag_reference(entries["images"]["tensorflow"])] = _digest("tf")
    (tmp_path / "registry.json").write_text(json.dumps(registry))
    assert pinning.pin_command(lock) == 0
    assert images.load_lock(lock)["images"]["tensorflow"]["digest"] == _digest("tf")
    before = lock.stat().st_mtime_ns
    report = pinning.pin_images(lock)
    assert all(r["new"] == r["old"] for r in report.values()) and lock.stat().st_mtime_ns == before


def test_pin_images_through_crane_and_without_any_tool(tmp_path, monkeypatch):
    lock = tmp_path / "images.lock"
    _write_lock(lock, {})
    refs = [images.tag_reference(e) for e in (images.load_lock(lock)["base"],
                                               *images.load_lock(lock)["images"].values())]
    (tmp_path / "registry.json").write_text(json.dumps({r: _digest(r) for r in refs}))
    monkeypatch.setenv("FAKE_REGISTRY", str(tmp_path / "registry.json"))
    crane = str(_fake_bin(tmp_path, "crane") / "crane")
    resolver = pinning.registry_resolver(which=lambda tool: crane if tool == "crane" else None)
    pinned = pinning.pin_images(lock, resolver).values()
    assert all(r["new"] == _digest(r["reference"]) for r in pinned)

    with pytest.raises(images.ImageError, match="skopeo, crane or docker"):
        pinning.registry_resolver(which=lambda tool: None)
    report = pinning.pin_images(lock, resolver=lambda ref: "latest")   # not a digest: kept out
    assert all(r["error"] and "not a sha256 digest" in r["error"] for r in report.values())
    assert images.load_lock(lock)["base"]["digest"] == _digest(refs[0])


def test_a_hand_written_tag_or_bad_digest_is_rejected(tmp_path):
    lock = yaml.safe_load(images.LOCK_PATH.read_text())
    lock["images"]["pytorch"]["digest"] = "sha256:abc"
    (tmp_path / "a.lock").write_text(yaml.safe_dump(lock))
    with pytest.raises(images.ImageError, match="pytorch.digest"):
        images.load_lock(tmp_path / "a.lock")
    lock["images"]["pytorch"].update(digest=None, repository="ghcr.io/x/y:latest")
    (tmp_path / "b.lock").write_text(yaml.safe_dump(lock))
    with pytest.raises(images.ImageError, match="no tag or digest"):
        images.load_lock(tmp_path / "b.lock")


# --- the workflow side and the in-image check ----------------------------------------------

def test_workflow_images_stop_on_a_missing_digest_and_name_the_command(tmp_path):
    lock = tmp_path / "images.lock"
    _write_lock(lock, {"pytorch": _digest("p")})
    assert images.workflow_images(["pytorch", "tensorflow"], requested=False, path=lock) == {}
    with pytest.raises(images.ImageError,
                       match=r"no digest for tensorflow .*make images.*make pin-images"):
        images.workflow_images(["pytorch", "tensorflow"], requested=True, path=lock, environ={})
    environ = {}
    expected = images.workflow_images(["pytorch"], requested=True, path=lock, environ=environ)
    assert expected["pytorch"]["reference"] == \
        f"docker://ghcr.io/fwbench/fwbench-pytorch@{_digest('p')}"
    assert images.container_for(expected, "pytorch") == expected["pytorch"]["reference"]
    assert images.container_for({}, "pytorch") is None
    assert environ["APPTAINERENV_PYTHONPATH"] == str(images.SOURCE_DIR)
    plan = Plan.from_config(validate(TINY_CONFIG))
    settings = plan.trial_settings(plan.trials[0])
    assert images.with_images(settings, {}) is settings
    assert images.with_images(settings, expected).to_dict()["images"] == expected


def test_source_tree_is_bound_only_when_outside_the_working_directory(tmp_path):
    environ = {"APPTAINER_BIND": "/data"}
    images.export_source(environ, source=REPO, cwd=REPO)
    assert environ["APPTAINER_BIND"] == "/data"
    images.export_source(environ, source=REPO, cwd=tmp_path)
    images.export_source(environ, source=REPO, cwd=tmp_path)
    assert environ["APPTAINER_BIND"] == f"/data,{REPO}:{REPO}:ro"


def _label(tmp_path, **change) -> dict:
    label = {"framework": "pytorch", "image": "ghcr.io/fwbench/fwbench-pytorch:t",
             "prefix": sys.prefix, "site_packages": sysconfig.get_paths()["purelib"],
             **change}
    (tmp_path / "label.json").write_text(json.dumps(label))
    return {"APPTAINER_CONTAINER": str(tmp_path / "x.simg"),
            "FWBENCH_IMAGE_LABEL": str(tmp_path / "label.json")}


EXPECTED = {"pytorch": {"reference": f"docker://ghcr.io/fwbench/fwbench-pytorch@{_digest('p')}",
                        "tag": "ghcr.io/fwbench/fwbench-pytorch:t", "package": "torch",
                        "version": "2.14.1"}}


def test_check_runtime_natively_records_no_container():
    assert images.check_runtime("pytorch", None, environ={}) == {"container": "none"}
    with pytest.raises(images.ImageError, match="outside any container"):
        images.check_runtime("pytorch", EXPECTED, environ={})


def test_check_runtime_accepts_the_expected_image_and_records_its_digest(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "_verified", None)
    environ = _label(tmp_path)
    found = images.check_runtime("pytorch", EXPECTED, environ=environ)["container"]
    assert found["reference"] == EXPECTED["pytorch"]["reference"]
    assert found["digest"] == _digest("p") and found["framework_version"] == "2.14.1"
    assert found["framework_path"].endswith("torch/__init__.py")
    assert found["image_file_matches_reference"] is False     # not the file Snakemake pulled
    assert images.runtime_container(environ)["digest"] == _digest("p")   # for env.json


@pytest.mark.parametrize("change, message", [
    ({"framework": "tensorflow"}, "names framework 'tensorflow'"),
    ({"image": "ghcr.io/fwbench/fwbench-pytorch:other"}, "the lock 'ghcr.io"),
    ({"prefix": "/opt/venv"}, "not from the image's /opt/venv"),
    ({"site_packages": "/opt/venv/lib/python3.11/site-packages"}, "outside the image's"),
])
def test_check_runtime_fails_in_the_wrong_image(tmp_path, monkeypatch, change, message):
    monkeypatch.setattr(images, "_verified", None)
    with pytest.raises(images.ImageError, match=re.escape(message)):
        images.check_runtime("pytorch", EXPECTED, environ=_label(tmp_path, **change))


def test_check_runtime_fails_without_label_or_with_another_version(tmp_path):
    environ = _label(tmp_path)
    with pytest.raises(images.ImageError, match="torch is 2.14.1, the lock says 9.9"):
        images.check_runtime("pytorch", {"pytorch": {**EXPECTED["pytorch"], "version": "9.9"}},
                             environ=environ)
    environ["FWBENCH_IMAGE_LABEL"] = str(tmp_path / "missing.json")
    with pytest.raises(images.ImageError, match="no label file"):
        images.check_runtime("pytorch", EXPECTED, environ=environ)


# --- the workflow under --use-singularity, through the fake apptainer ----------------------

def _uses_audit_rules() -> bool:
    return "rules/audit.smk" in (REPO / "Snakefile").read_text()


def _container_run(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the workflow with --use-singularity; until the Snakefile includes rules/audit.smk,
    through a wrapper that adds it (the profile is then named explicitly)."""
    if _uses_audit_rules():
        return snakemake(workdir, "--use-singularity", *args)
    wrapper = workdir / "Snakefile.audit"
    wrapper.write_text(f'include: "{REPO}/Snakefile"\ninclude: "{REPO}/rules/audit.smk"\n')
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        [str(BIN / "snakemake"), "--snakefile", str(wrapper), "--workflow-profile",
         str(REPO / "profiles" / "default"), "--directory", str(workdir), "--use-singularity",
         *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


def _images_setup(workdir: Path, digests: dict[str, str]) -> dict[str, str]:
    """A lock pinned to fake digests, and the fake registry's images: this environment stands
    in for both images (a label naming each framework, this Python as the image's)."""
    lock = workdir / "images.lock"
    _write_lock(lock, {"base": _digest("base"), **digests},
                packages={"pytorch": ("torch", "2.14.1"),
                          "tensorflow": ("tensorflow-cpu", "2.21.0")})
    entries = images.load_lock(lock)["images"]
    urls = {f: images.container_url(e) for f, e in entries.items()}
    registry = {url: {"label": {"framework": f, "image": images.tag_reference(entries[f]),
                                "prefix": sys.prefix,
                                "site_packages": sysconfig.get_paths()["purelib"]},
                      "env": {"PATH": f"{BIN}:/usr/bin:/bin"}} for f, url in urls.items()}
    images_file = workdir / "fake-images.json"
    old = json.loads(images_file.read_text()) if images_file.exists() else {}
    images_file.write_text(json.dumps({**old, **registry}))
    return urls


def _exec_calls(log: Path) -> list[dict]:
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [c for c in calls if c["command"] == "exec"]


# The tests that read the one container run share a worker, and so the run (`make test`
# distributes --dist loadgroup).
CONTAINER_RUN = "container_run"


@pytest.fixture(scope="module")
def container_run(tmp_path_factory):
    """The tiny config run once with --use-singularity through the fake apptainer."""
    workdir = tmp_path_factory.mktemp("container-run")
    (workdir / "config.yaml").write_text(yaml.safe_dump(TINY_CONFIG))
    urls = _images_setup(workdir, {"pytorch": _digest("pytorch-1"),
                                   "tensorflow": _digest("tensorflow-1")})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{_fake_bin(workdir, 'apptainer')}{os.pathsep}{os.environ['PATH']}")
        mp.setenv("FAKE_APPTAINER_IMAGES", str(workdir / "fake-images.json"))
        mp.setenv("FAKE_APPTAINER_LOG", str(workdir / "apptainer.log"))
        mp.setenv("FWBENCH_IMAGES_LOCK", str(workdir / "images.lock"))
        mp.setenv("LEAKED_HOST_VARIABLE", "must not reach a job")
        proc = _container_run(workdir, "--cores", "1", "all", "audit")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        yield workdir, urls, proc


def _trial_results(workdir: Path) -> list[Path]:
    return sorted(p for p in (workdir / "results").rglob("trial-*.json")
                  if re.fullmatch(r"trial-\d+\.json", p.name))


@pytest.mark.slow
@pytest.mark.xdist_group(CONTAINER_RUN)
def test_use_singularity_runs_every_trial_in_its_pinned_image_and_nothing_else(container_run):
    workdir, urls, proc = container_run
    trials = _trial_results(workdir)
    assert len(trials) == 2
    log = workdir / "apptainer.log"

    # Every benchmark job, and only those, went through apptainer exec with --nv, --cleanenv
    # and its own framework's image, pulled by digest.
    calls = _exec_calls(log)
    pulls = [json.loads(line) for line in log.read_text().splitlines()
             if json.loads(line)["command"] == "pull"]
    assert sorted(p["url"] for p in pulls) == sorted(urls.values())
    cells = {t.parent for t in trials}      # each cell's calibration trial is a benchmark job too
    assert len(calls) == len(trials) + len(cells)
    assert sum("/calibration.json" in c["argv"][-1] for c in calls) == len(cells)
    for call in calls:
        command = call["argv"][-1]
        assert "python -m fwbench trial" in command, command   # no host-side rule in here
        framework = "pytorch" if "/pytorch/" in command else "tensorflow"
        assert call["url"] == urls[framework] and re.fullmatch(
            r"docker://[^:@]+@sha256:[0-9a-f]{64}", call["url"])
        assert {"--nv", "--cleanenv"} <= set(call["flags"])
        assert "PYTHONNOUSERSITE=1" in call["argv"] and "TORCH_HOME=.cache/torch" in call["argv"]
    out = proc.stdout + proc.stderr
    for rule in ("collect_tables", "summarise_results", "build_report", "audit_versions"):
        assert re.search(rf"rule {rule}:", out), rule

    # Each trial recorded the image it verified; host variables stayed out.
    for trial in trials:
        env = json.loads(trial.with_name(trial.name.replace(".json", ".env.json")).read_text())
        framework = json.loads(trial.read_text())["cell"]["framework"]
        assert env["container"]["reference"] == urls[framework]
        assert env["container"]["image_file_matches_reference"] is True
        assert env["container"]["label"]["framework"] == framework
        assert env["workflow"]["git_commit"]
        assert "LEAKED_HOST_VARIABLE" not in json.dumps(env)
    versions = (workdir / "results" / "tiny" / "audit" / "versions.csv").read_text()
    assert urls["pytorch"] in versions and urls["tensorflow"] in versions


@pytest.mark.slow
@pytest.mark.xdist_group(CONTAINER_RUN)
def test_rebuilding_the_report_from_results_reruns_no_experiment(container_run):
    workdir, _, _ = container_run
    rebuild = _container_run(workdir, "--cores", "1", "--dry-run", "--forcerun", "collect_tables")
    assert rebuild.returncode == 0, rebuild.stderr[-3000:]
    assert "collect_tables" in rebuild.stdout and "run_trial" not in rebuild.stdout


@pytest.mark.slow
@pytest.mark.xdist_group(CONTAINER_RUN)
def test_a_new_digest_for_one_framework_reruns_its_cells_and_their_partners(container_run,
                                                                            monkeypatch):
    workdir, _, _ = container_run
    lock = workdir / "images-2.lock"
    _images_setup(workdir, {"pytorch": _digest("pytorch-2"), "tensorflow": _digest("tensorflow-1")})
    (workdir / "images.lock").replace(lock)   # the first run's lock stays as it was
    _images_setup(workdir, {"pytorch": _digest("pytorch-1"), "tensorflow": _digest("tensorflow-1")})
    monkeypatch.setenv("FWBENCH_IMAGES_LOCK", str(lock))
    dry = _container_run(workdir, "--cores", "1", "--dry-run", "benchmarks_only")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "params have changed" in dry.stdout.lower()
    assert set(re.findall(r"framework=(\w+)", dry.stdout)) == {"pytorch", "tensorflow"}
    assert re.search(r"run_trial\s+2\b", dry.stdout), dry.stdout[-3000:]


@pytest.mark.slow
def test_use_singularity_stops_before_any_job_when_a_digest_is_missing(tmp_path, monkeypatch):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(TINY_CONFIG))
    _write_lock(tmp_path / "images.lock", {"pytorch": _digest("p")})
    fake_bin = _fake_bin(tmp_path, "apptainer")
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FWBENCH_IMAGES_LOCK", str(tmp_path / "images.lock"))
    monkeypatch.setenv("FAKE_APPTAINER_LOG", str(tmp_path / "apptainer.log"))
    proc = snakemake(tmp_path, "--cores", "1", "--use-singularity")
    assert proc.returncode != 0
    assert "make pin-images" in proc.stderr and "tensorflow" in proc.stderr
    assert not (tmp_path / "apptainer.log").exists() and not (tmp_path / "results").exists()


# --- the apptainer shim finds the limits the engine accepts --------------------------------

SHIM = REPO / "scripts" / "containers" / "apptainer"
# An engine that refuses a process limit above $FAKE_MAX_NPROC as runc does here, its own
# default (no --ulimit) included; records every `run` in $FAKE_ENGINE_LOG and runs nothing.
FAKE_ENGINE = r'''#!/usr/bin/env python3
import json, os, sys
argv = sys.argv[1:]
if argv[:2] == ["image", "inspect"]:
    print("[]" if "{{json .Config.Env}}" in argv else "")
    sys.exit(0)
with open(os.environ["FAKE_ENGINE_LOG"], "a") as f:
    f.write(json.dumps(argv) + "\n")
nproc = [a.split("=")[1] for a in argv if a.startswith("nproc=")] or ["-1:-1"]
if any(v == "-1" or int(v) > int(os.environ["FAKE_MAX_NPROC"]) for v in nproc[0].split(":")):
    sys.exit("Error: runc: runc create failed: unable to start container process: error during "
             "container init: error setting rlimit type 6: operation not permitted")
'''


def _engine(tmp_path: Path, name: str) -> Path:
    engine = tmp_path / name
    engine.write_text(FAKE_ENGINE)
    engine.chmod(0o755)
    return engine


def _shim_with_nproc(soft: int, hard: int, *args: str, env: dict, cwd: Path):
    """The shim run with these process limits (lowered from this process's, never raised)."""
    return subprocess.run([sys.executable, str(SHIM), *args], env=env, cwd=cwd,
                          capture_output=True, text=True,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NPROC,
                                                                (soft, hard)))


def test_the_shim_finds_the_limits_the_engine_accepts_and_caches_them_per_engine(tmp_path):
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    hard = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if hard < 10_000:
        pytest.skip(f"the process limit here ({hard}) is below the fake engine's refusals")
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    nofile = "-1" if nofile == resource.RLIM_INFINITY else nofile
    log = tmp_path / "engine.log"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "FAKE_ENGINE_LOG": str(log),
           "FAKE_MAX_NPROC": str(hard - 1)}
    env.pop("APPTAINER_SHIM_ULIMITS", None)

    def runs() -> list[list[str]]:
        return [json.loads(line) for line in log.read_text().splitlines()]

    # The host's hard limit is refused: the current soft ones (`ulimit -n`, `ulimit -u`) pass.
    env["APPTAINER_SHIM_ENGINE"] = str(_engine(tmp_path, "podman"))
    found = _shim_with_nproc(hard - 1, hard, "shim-ulimits", "img", env=env, cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == [f"nofile={nofile}:{nofile}", f"nproc={hard - 1}:{hard - 1}"]
    assert len(runs()) == 2 and all(r[-3:] == ["--entrypoint", "true", "img"] for r in runs())
    assert "accepts" in found.stderr and "cached" in found.stderr

    # Cached: an exec asks the engine nothing more before its own run, and passes them.
    image = tmp_path / "i.simg"
    image.write_text(json.dumps({"apptainer_shim": "docker://img", "image_id": "sha256:ab"}))
    done = _shim_with_nproc(hard - 1, hard, "exec", "--home", str(tmp_path), str(image), "true",
                            env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(runs()) == 3 and f"nproc={hard - 1}:{hard - 1}" in runs()[-1]

    # Another engine is probed again: one refusing the soft limit and its own default gets the
    # low limits runc takes here.
    env.update(APPTAINER_SHIM_ENGINE=str(_engine(tmp_path, "docker")), FAKE_MAX_NPROC="5000")
    found = _shim_with_nproc(hard - 1, hard, "shim-ulimits", "img", env=env, cwd=tmp_path)
    assert found.stdout.split() == ["nofile=1024:1024", "nproc=4096:4096"]
    assert [r.count("--ulimit") for r in runs()[3:]] == [2, 2, 0, 2]  # host, soft, default, low

    # Limits given by hand are passed as they are, with no probe.
    env["APPTAINER_SHIM_ULIMITS"] = "nofile=64:64 nproc=64:64"
    assert _shim_with_nproc(hard - 1, hard, "shim-ulimits", "img", env=env,
                            cwd=tmp_path).stdout.split() == ["nofile=64:64", "nproc=64:64"]
    assert len(runs()) == 7
