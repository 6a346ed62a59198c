"""Images built here without a registry: `make images` (containers/build.py) and its lock, the
workflow reading that lock, and the apptainer-on-podman shim's translation, each against a
small fake `podman` where this test cannot run the real one (make test-containers does)."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from fwbench.environment import images
from tests.conftest import REPO

SHIM = REPO / "scripts" / "containers" / "apptainer"
IMAGE_ID = "sha256:" + "ab" * 32

FAKE_PODMAN = r'''#!/usr/bin/env python3
"""FAKE PODMAN for tests: records each call in $FAKE_PODMAN_LOG, answers image queries,
and writes a tiny docker-archive for `save`. Never runs anything."""
import io, json, os, sys, tarfile
argv = [a for a in sys.argv[1:] if a not in ("--runtime", "runc")]
with open(os.environ["FAKE_PODMAN_LOG"], "a") as f:
    f.write(json.dumps(argv) + "\n")
image_id = os.environ["FAKE_PODMAN_ID"]
if argv[:2] == ["image", "inspect"] and "--format" not in argv:
    sys.exit(0 if argv[2] == image_id else 1)
if argv[:2] == ["image", "inspect"]:
    if "{{json .Config.Env}}" in argv:
        print(json.dumps(["PATH=/opt/venv/bin:/usr/bin:/bin", "PYTHONNOUSERSITE=1",
                          "FROM_IMAGE=image", "OVERRIDDEN=image"]))
    else:
        print(image_id.removeprefix("sha256:"))
elif argv[0] == "load":
    print("Loaded image: localhost/fake:latest")
elif argv[0] == "save":
    out = argv[argv.index("--output") + 1]
    with tarfile.open(out, "w") as archive:
        data = json.dumps([{"Config": image_id.removeprefix("sha256:") + ".json"}]).encode()
        info = tarfile.TarInfo("manifest.json"); info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
'''


def docker_archive(path: Path, image_id: str = IMAGE_ID) -> Path:
    """A minimal docker-archive: only its manifest, naming the config by the image ID."""
    with tarfile.open(path, "w") as archive:
        data = json.dumps([{"Config": image_id.removeprefix("sha256:") + ".json"}]).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def fake_podman(tmp_path, monkeypatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "podman").write_text(FAKE_PODMAN)
    (bin_dir / "podman").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_PODMAN_LOG", str(tmp_path / "podman.log"))
    monkeypatch.setenv("FAKE_PODMAN_ID", IMAGE_ID)
    monkeypatch.setenv("APPTAINER_SHIM_ENGINE", str(bin_dir / "podman"))
    return tmp_path / "podman.log"


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def local_lock(folder: Path, file_name: str, digest: str = IMAGE_ID, **extra) -> Path:
    lock = images.load_lock(images.LOCK_PATH)
    for _framework, entry in lock["images"].items():
        entry.update(digest=digest, file=file_name, engine="podman", lock_sha256="0" * 64,
                     **extra)
    path = folder / "images.lock"
    images.write_lock(lock, path, header=images.LOCAL_LOCK_HEADER)
    return path


# --- the lock the workflow reads ----------------------------------------------------------

def test_a_built_image_reaches_snakemake_as_its_file_named_by_digest(tmp_path):
    archive = docker_archive(tmp_path / f"fwbench-pytorch-cpu-{IMAGE_ID[7:23]}.tar")
    path = local_lock(tmp_path, archive.name)
    environ: dict = {}
    found = images.workflow_images(["pytorch", "tensorflow"], requested=True, path=path,
                                   environ=environ)
    assert found["pytorch"]["reference"] == f"docker-archive://{archive}"
    assert found["pytorch"]["digest"] == IMAGE_ID and found["pytorch"]["engine"] == "podman"
    assert found["pytorch"]["lock_sha256"] == "0" * 64
    assert environ["APPTAINERENV_PYTHONPATH"] == str(images.SOURCE_DIR)
    sif = {**images.load_lock(path)["images"]["pytorch"], "file": "x.sif"}
    assert images.container_url(sif, tmp_path) == str(tmp_path / "x.sif")   # run in place


def test_a_lock_reached_through_a_symlink_gives_the_resolved_reference(tmp_path):
    """Clusters reach home folders through links (/home -> /gpfs/home): the reference (a job
    param, the name of Snakemake's converted image, the audit's environment) is the resolved
    path, so a checkout reached either way plans, records and audits the same run."""
    real = tmp_path / "gpfs" / "home"
    real.mkdir(parents=True)
    (tmp_path / "home").symlink_to(real)
    archive = docker_archive(real / f"fwbench-pytorch-cpu-{IMAGE_ID[7:23]}.tar")
    local_lock(real, archive.name)
    found = {via: images.workflow_images(["pytorch"], requested=True, environ={},
                                         path=via / "images.lock")["pytorch"]["reference"]
             for via in (tmp_path / "home", real)}
    assert found == {via: f"docker-archive://{archive}" for via in found}


def test_a_missing_or_changed_image_file_stops_the_workflow(tmp_path):
    path = local_lock(tmp_path, "gone.tar")
    with pytest.raises(images.ImageError, match=r"gone.tar .* is missing: run `make images`"):
        images.workflow_images(["pytorch"], requested=True, path=path, environ={})
    docker_archive(tmp_path / "other.tar", image_id="sha256:" + "cd" * 32)
    path = local_lock(tmp_path, "other.tar")
    with pytest.raises(images.ImageError, match=r"holds sha256:cdcd.*lock says sha256:abab"):
        images.workflow_images(["pytorch"], requested=True, path=path, environ={})
    (tmp_path / f"fwbench-pytorch-cpu-{IMAGE_ID[7:23]}.sif").write_bytes(b"sif")
    path = local_lock(tmp_path, f"fwbench-pytorch-cpu-{IMAGE_ID[7:23]}.sif", size_bytes=4)
    with pytest.raises(images.ImageError, match="holds changed"):
        images.workflow_images(["pytorch"], requested=True, path=path, environ={})


def test_the_local_lock_is_used_while_it_exists_and_pinning_never_touches_it(tmp_path,
                                                                           monkeypatch):
    monkeypatch.delenv(images.LOCK_VARIABLE, raising=False)
    monkeypatch.setattr(images, "LOCAL_LOCK_PATH", tmp_path / "build" / "images.lock")
    assert images.default_lock_path() == images.LOCK_PATH
    (tmp_path / "build").mkdir()
    local_lock(tmp_path / "build", "x.tar")
    assert images.default_lock_path() == tmp_path / "build" / "images.lock"
    assert images.registry_lock_path() == images.LOCK_PATH
    monkeypatch.setenv(images.LOCK_VARIABLE, str(tmp_path / "other.lock"))
    assert images.default_lock_path() == images.registry_lock_path() == tmp_path / "other.lock"


def test_a_lock_entry_names_its_file_beside_the_lock(tmp_path):
    with pytest.raises(images.ImageError, match=r"\.sif or \.tar file name beside the lock"):
        local_lock(tmp_path, "../elsewhere/x.tar")


def test_check_runtime_refuses_an_image_built_from_another_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "_verified", None)
    label = {"framework": "pytorch", "image": "localhost/fwbench-pytorch:t", "prefix": sys.prefix,
             "site_packages": __import__("sysconfig").get_paths()["purelib"],
             "lock_sha256": "1" * 64}
    (tmp_path / "label.json").write_text(json.dumps(label))
    sif = tmp_path / "x.sif"
    environ = {"APPTAINER_CONTAINER": str(sif), "FWBENCH_IMAGE_LABEL": str(tmp_path / "label.json")}
    expected = {"pytorch": {"reference": str(sif), "digest": IMAGE_ID, "engine": "apptainer",
                            "tag": "localhost/fwbench-pytorch:t", "package": "torch",
                            "version": "2.14.1", "lock_sha256": "2" * 64}}
    with pytest.raises(images.ImageError, match="built from another lock"):
        images.check_runtime("pytorch", expected, environ=environ)
    expected["pytorch"]["lock_sha256"] = "1" * 64
    found = images.check_runtime("pytorch", expected, environ=environ)["container"]
    assert found["digest"] == IMAGE_ID and found["engine"] == "apptainer"
    assert found["image_file_matches_reference"] is True      # the SIF ran in place


# --- make images (containers/build.py) ------------------------------------------------------

def load_build():
    spec = importlib.util.spec_from_file_location("fwbench_build", REPO / "containers" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_wheelhouse_is_checked_against_the_lock(tmp_path):
    build = load_build()
    wheel = tmp_path / "demo_pkg-1.0-py3-none-any.whl"
    wheel.write_bytes(b"wheel bytes")
    digest = hashlib.sha256(b"wheel bytes").hexdigest()
    lock = tmp_path / "requirements-cpu.lock"
    lock.write_text(f"# comment\ndemo-pkg==1.0 --hash=sha256:{digest}\n"
                    f"other==2.0 --hash=sha256:{'0' * 64}\n")
    assert build.missing_wheels(lock, tmp_path) == ["other"]
    wheel.write_bytes(b"tampered")
    with pytest.raises(SystemExit, match="its sha256 is not the one"):
        build.missing_wheels(lock, tmp_path)
    lock.write_text("demo-pkg>=1.0\n")
    with pytest.raises(SystemExit, match="not an exact pin with a sha256"):
        build.lock_hashes(lock)
    assert build.split_reference("localhost/base:bookworm") == ("localhost/base", "bookworm")
    assert build.split_reference(f"python@{IMAGE_ID}") == ("python", "local")


def test_make_images_builds_with_podman_from_the_recipe_and_locks_the_image_id(tmp_path,
                                                                               fake_podman):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(REPO / "containers" / "build.py"), "--engine", "podman",
         "--variant", "cpu", "--frameworks", "tensorflow", "--base", "localhost/base:bookworm",
         "--python", "/usr/bin/python3", "--index-url", "http://index.invalid/simple",
         "--out", str(out)], capture_output=True, text=True, env=os.environ)
    assert proc.returncode == 0, proc.stderr[-3000:]
    build = next(c for c in calls(fake_podman) if c[0] == "build")
    args = dict(build[i + 1].split("=", 1) for i, a in enumerate(build) if a == "--build-arg")
    assert args["VARIANT"] == "cpu" and args["PYTHON"] == "/usr/bin/python3"
    assert args["BASE_IMAGE"] == "localhost/base:bookworm" and args["BASE_DIGEST"] == IMAGE_ID
    assert args["INDEX_URL"] == "http://index.invalid/simple" and "--network=none" not in build
    assert build[build.index("--file") + 1] == "tensorflow/Dockerfile"
    assert "--timestamp" in build and args["SOURCE_DATE_EPOCH"] == build[
        build.index("--timestamp") + 1]
    assert "--no-cache" in build     # Podman's cache would keep another commit's file times
    entry = images.load_lock(out / "images.lock")["images"]["tensorflow"]
    assert entry["digest"] == IMAGE_ID and entry["engine"] == "podman"
    assert entry["package"] == "tensorflow-cpu" and entry["version"] == "2.21.0"
    assert entry["file"] == f"fwbench-tensorflow-cpu-{IMAGE_ID[7:23]}.tar"
    assert entry["lock_sha256"] == hashlib.sha256(
        (REPO / "containers" / "tensorflow" / "requirements-cpu.lock").read_bytes()).hexdigest()
    assert images.archive_digest(out / entry["file"]) == IMAGE_ID
    assert (out / "images.lock").read_text().startswith(images.LOCAL_LOCK_HEADER)


# --- the apptainer-on-podman shim -----------------------------------------------------------

def shim(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SHIM), *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


def test_the_shim_pulls_an_archive_once_and_names_the_image_id(tmp_path, fake_podman):
    archive = docker_archive(tmp_path / "image.tar")
    env = {**os.environ, "APPTAINER_SHIM_LOG": str(tmp_path / "shim.log")}
    assert shim("--version", env=env, cwd=tmp_path).stdout.strip() == "apptainer version 1.3.6"
    proc = shim("pull", "--name", "abc.simg", f"docker-archive://{archive}", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "abc.simg").read_text())["image_id"] == IMAGE_ID
    assert not [c for c in calls(fake_podman) if c[0] == "load"]    # podman holds it already
    assert shim("inspect", "x", env=env, cwd=tmp_path).returncode == 2   # not a Snakemake call


def test_the_shim_runs_exec_in_the_image_with_apptainers_mounts_and_environment(tmp_path,
                                                                              fake_podman):
    archive = docker_archive(tmp_path / "image.tar")
    work, src = tmp_path / "work", tmp_path / "src"
    work.mkdir()
    src.mkdir()
    env = {**os.environ, "APPTAINER_SHIM_ULIMITS": "nofile=1024:1024 nproc=4096:4096",
           "HOST_ONLY": "1", "OVERRIDDEN": "host", "APPTAINERENV_OVERRIDDEN": "apptainerenv",
           "APPTAINERENV_PYTHONPATH": "/src", "APPTAINER_BIND": f"{src}:/src:ro"}
    assert shim("pull", "--name", "i.simg", f"docker-archive://{archive}", env=env,
                cwd=work).returncode == 0

    def run_exec(*options: str) -> list[str]:
        before = len(calls(fake_podman))
        proc = shim("--quiet", "--silent", "exec", "--home", str(work), *options, "i.simg",
                    "bash", "-c", "echo 'it''s'", env=env, cwd=work)
        assert proc.returncode == 0, proc.stderr
        return calls(fake_podman)[before:][-1]

    argv = run_exec("--nv", "--cleanenv", "--env", "PYTHONNOUSERSITE=1,TORCH_HOME=.cache/torch")
    assert argv[0] == "run" and argv[-3:] == [IMAGE_ID, "-c", "echo 'it''s'"]
    assert {"--rm", "--network=none", "--pid=host", "--ipc=host", "--uts=host",
            "--read-only"} <= set(argv)
    assert argv[argv.index("--entrypoint") + 1] == "bash"      # the image's entrypoint replaced
    assert argv[argv.index("--workdir") + 1] == str(work)
    volumes = {argv[i + 1] for i, a in enumerate(argv) if a == "--volume"}
    assert {f"{work}:{work}", "/tmp:/tmp", "/var/tmp:/var/tmp",
            "/etc/localtime:/etc/localtime:ro"} <= volumes
    assert "--ulimit" in argv and "nproc=4096:4096" in argv
    set_env = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--env")
    assert "HOST_ONLY" not in set_env                                 # --cleanenv
    assert set_env["PATH"] == "/opt/venv/bin:/usr/bin:/bin"           # the image's, not the host's
    assert set_env["OVERRIDDEN"] == "apptainerenv" and set_env["PYTHONPATH"] == "/src"
    assert set_env["PYTHONNOUSERSITE"] == "1" and set_env["TORCH_HOME"] == ".cache/torch"
    assert set_env["HOME"] == str(work) and set_env["APPTAINER_NAME"] == "i.simg"
    assert set_env["APPTAINER_CONTAINER"] == str(work / "i.simg")
    assert "--device" not in argv or Path("/etc/cdi/nvidia.yaml").exists()

    argv = run_exec("--pwd", "/tmp", "--bind", f"{tmp_path}:/data")   # no --cleanenv
    set_env = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--env")
    assert set_env["HOST_ONLY"] == "1" and set_env["PATH"] == "/opt/venv/bin:/usr/bin:/bin"
    assert set_env["OVERRIDDEN"] == "apptainerenv" and set_env["FROM_IMAGE"] == "image"
    assert argv[argv.index("--workdir") + 1] == "/tmp"
    assert f"{tmp_path}:/data" in argv and f"{src}:/src:ro" in argv
    missing = shim("exec", "--home", str(work), "--bind", "/nonexistent", "i.simg", "true",
                   env=env, cwd=work)
    assert missing.returncode != 0 and "mount source /nonexistent doesn't exist" in missing.stderr
