"""The framework images: the lock files and the checks a benchmark job makes.

Two kinds of lock name, per framework, the image a benchmark job runs in, by content digest:

- ``containers/images.lock`` (committed): images published to a registry, the repository and tag
  they were pushed under and the ``sha256`` digest that tag resolved to. A digest is written only
  by ``fwbench.environment.pinning.pin_images``, which asks the registry (skopeo, crane or
  docker); nothing here ever invents one. An entry becomes
  ``docker://<repository>@sha256:<digest>``, never a mutable tag.
- ``containers/build/images.lock`` (this machine's, written by ``make images``): images built
  here, each with the digest its engine gave (SIF sha256, or image ID) and the file Apptainer
  runs, named by that digest: a SIF (run in place) or a docker-archive
  (``docker-archive://<file>``). No registry is involved. While it exists, it is the lock in use.

Its users:

- the workflow at parse time (``rules/common.smk``): :func:`workflow_images` stops with a message
  naming ``make pin-images`` when containers are requested and a digest is missing; the expected
  images go into every trial's settings (:func:`with_images`), so they are job params too;
- a benchmark job, first thing (``fwbench.measure.trial.run_trial``): :func:`check_runtime` fails
  unless the job runs in the expected image (label file, framework imported from the image,
  expected version);
- ``make pin-images`` (``python -m fwbench pin-images``): ``fwbench.environment.pinning``;
- ``make test-containers``, inside each built image: ``python -m fwbench.environment.images
  check`` (label, framework version against the lock, ``pip check``; :func:`check_image`);
  ``make test-cuda-images`` also runs its ``stack`` (the CUDA stack against the label and the
  requirements lock, the oldest driver: :func:`check_stack`) and ``gpu`` (one line:
  :func:`gpu_report`).

Framework-free: nothing here imports torch or tensorflow.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import yaml

from fwbench import SOURCE_DIR
from fwbench.errors import FwbenchError
from fwbench.files import write_atomic
from fwbench.plan import frameworks
from fwbench.plan.contract import Image, TrialSettings

LOCK_PATH = SOURCE_DIR / "containers" / "images.lock"                  # the registry's
LOCAL_LOCK_PATH = SOURCE_DIR / "containers" / "build" / "images.lock"   # make images
LOCK_VARIABLE = "FWBENCH_IMAGES_LOCK"       # another lock file (tests, another image set)
LABEL_VARIABLE = "FWBENCH_IMAGE_LABEL"      # set by the image (Dockerfile ENV / %environment)
LABEL_PATH = "/opt/fwbench/image.json"      # written into the image at build time
LOCK_VERSION = 1
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
MODULES = frameworks.each("module")     # the module each framework's image must provide

LOCK_HEADER = """\
# The images benchmark jobs run in, one per framework. Written by `make pin-images`
# (python -m fwbench pin-images), which asks the registry what each tag points to now.
# Edit repositories and tags by hand; never write a digest by hand. `digest: null` means
# nobody has resolved that tag yet: runs with --use-singularity stop until it is pinned.
# Commit this file after pinning; docs/containers.md says how images are built and pushed.
"""
LOCAL_LOCK_HEADER = """\
# The images built on this machine by `make images` (containers/build.py): per framework, the
# content digest the engine gave (the SIF file's sha256, or the Podman/Docker image ID) and the
# file Apptainer runs (a SIF, or a docker-archive named by that digest). Machine-specific and
# not committed; while it exists, `snakemake --use-singularity` runs these images instead of
# the registry's (containers/images.lock). Rebuild with `make images`; never edit by hand.
"""


class ImageError(FwbenchError):
    """The image lock is invalid, a digest is missing, or a job runs in the wrong place."""


# --- the lock file ----------------------------------------------------------------------

def default_lock_path() -> Path:
    """The lock in use: ``$FWBENCH_IMAGES_LOCK`` if set, else the images ``make images`` built
    here (``containers/build/images.lock``) if any, else the registry's
    ``containers/images.lock``."""
    if os.environ.get(LOCK_VARIABLE):
        return Path(os.environ[LOCK_VARIABLE])
    return LOCAL_LOCK_PATH if LOCAL_LOCK_PATH.exists() else LOCK_PATH


def registry_lock_path() -> Path:
    """The lock ``make pin-images`` writes: ``$FWBENCH_IMAGES_LOCK`` or
    ``containers/images.lock``."""
    return Path(os.environ.get(LOCK_VARIABLE) or LOCK_PATH)


def load_lock(path: str | os.PathLike | None = None) -> dict:
    """Read and check the lock file; returns ``{"version", "base", "images"}``.

    Usage::

        lock = load_lock()                       # containers/images.lock
        lock["images"]["pytorch"]["digest"]      # None until pinned
    """
    path = Path(path) if path else default_lock_path()
    try:
        lock = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ImageError(f"cannot read the image lock {path}: {exc}") from exc
    _check_lock(lock, path)
    return lock


def _check_lock(lock, path) -> None:
    def fail(what):
        raise ImageError(f"image lock {path}: {what}")

    if not isinstance(lock, dict) or lock.get("version") != LOCK_VERSION:
        fail(f"expected `version: {LOCK_VERSION}` at the top, got {lock!r:.80}")
    entries = {"base": lock.get("base"), **{f"images.{k}": v for k, v in
                                            (lock.get("images") or {}).items()}}
    if set(lock.get("images") or {}) - set(MODULES):
        fail(f"images must be among {sorted(MODULES)}, got {sorted(lock['images'])}")
    for name, entry in entries.items():
        if not isinstance(entry, dict) or not entry.get("repository") or not entry.get("tag"):
            fail(f"`{name}` needs a repository and a tag, got {entry!r}")
        if entry.get("digest") is not None and not DIGEST.match(str(entry["digest"])):
            fail(f"`{name}.digest` must be null or sha256:<64 hex digits>, got {entry['digest']!r}")
        if "@" in entry["repository"] or ":" in entry["repository"].rsplit("/", 1)[-1]:
            fail(f"`{name}.repository` must hold no tag or digest, got {entry['repository']!r}")
    for framework, entry in (lock.get("images") or {}).items():
        if not entry.get("package") or not entry.get("version"):
            fail(f"`images.{framework}` needs the framework `package` and `version` it holds")
        if entry.get("file") is not None and (not entry.get("digest") or "/" in entry["file"]
                                              or not entry["file"].endswith((".sif", ".tar"))):
            fail(f"`images.{framework}.file` must be a .sif or .tar file name beside the lock, "
                 f"with a digest, got {entry.get('file')!r}")


def write_lock(lock: dict, path: str | os.PathLike, header: str = LOCK_HEADER) -> None:
    """Write the lock atomically, with its header comment."""
    path = Path(path)
    _check_lock(lock, path)
    write_atomic(path, header + yaml.safe_dump(lock, sort_keys=False, default_flow_style=False))


def tag_reference(entry: dict) -> str:
    """``repository:tag`` — what the registry is asked about."""
    return f"{entry['repository']}:{entry['tag']}"


def container_url(entry: dict, lock_dir: str | os.PathLike | None = None) -> str:
    """What Snakemake's ``container:`` gets: ``docker://repository@sha256:…`` for a pinned
    registry entry; for an image built here, the SIF's path (run in place) or
    ``docker-archive://<path>`` (Apptainer converts it once), resolved: a job param and the
    name of Snakemake's converted image, it is the same however the lock's folder is reached
    (through a link or not). :class:`ImageError` if unpinned."""
    if not entry.get("digest"):
        raise ImageError(f"{tag_reference(entry)} has no digest in the image lock")
    if entry.get("file"):
        path = Path(lock_dir or LOCAL_LOCK_PATH.parent).resolve() / entry["file"]
        return str(path) if entry["file"].endswith(".sif") else f"docker-archive://{path}"
    return f"docker://{entry['repository']}@{entry['digest']}"


def archive_digest(path: str | os.PathLike) -> str:
    """The image ID (config digest) a docker-archive file holds, from its manifest.json."""
    import tarfile

    try:
        with tarfile.open(path) as archive:
            manifest = json.load(archive.extractfile("manifest.json"))
        config = manifest[0]["Config"]
    except (OSError, KeyError, IndexError, ValueError, tarfile.TarError) as exc:
        raise ImageError(
            f"{path} is not a docker-archive image file ({exc}): run `make images`") from exc
    return "sha256:" + re.sub(r"^.*?([0-9a-f]{64})(\.json)?$", r"\1", config)


def check_image_file(entry: dict, lock_dir: Path) -> None:
    """An image built here must still be the file its lock names, holding the locked digest
    (archives are read; a SIF is checked by name and size, hashing it on every start is slow)."""
    path = lock_dir / entry["file"]
    if not path.is_file():
        raise ImageError(f"the image file {path} of the lock {lock_dir / 'images.lock'} is "
                         "missing: run `make images` again (or remove that lock to use the "
                         "registry's images)")
    found = archive_digest(path) if path.suffix == ".tar" else (
        entry["digest"] if entry["digest"][7:23] in path.name
        and path.stat().st_size == entry.get("size_bytes", path.stat().st_size) else "changed")
    if found != entry["digest"]:
        raise ImageError(f"the image file {path} holds {found}, its lock says {entry['digest']}: "
                         "run `make images` again")


def unpinned(lock: dict, frameworks) -> list[str]:
    """Frameworks among ``frameworks`` whose image has no digest (or no entry) in the lock."""
    return [f for f in frameworks if not (lock["images"].get(f) or {}).get("digest")]


# --- the workflow side ------------------------------------------------------------------

def containers_requested(workflow) -> bool:
    """True when Snakemake runs with --use-singularity / --use-apptainer."""
    from snakemake_interface_executor_plugins.settings import DeploymentMethod

    return DeploymentMethod.APPTAINER in workflow.deployment_settings.deployment_method


def workflow_images(frameworks, *, requested: bool, path=None,
                    environ: dict | None = None) -> dict[str, dict]:
    """The expected image per framework, ``{}`` when containers are not requested.

    Each entry: ``reference`` (for ``container:``, see :func:`container_url`), ``digest``,
    ``engine`` (``registry`` or the engine that built it here), ``tag``, ``package``,
    ``version`` and the image lock's ``lock_sha256`` when known. When requested, every framework
    needs a digest, or this stops the workflow before any job starts, with a message naming
    ``make images`` and ``make pin-images``; an image built here must still be the file its lock
    names. It also makes this work tree's fwbench importable inside the containers (see
    :func:`export_source`).

    Usage (``rules/common.smk``)::

        IMAGES = images.workflow_images(config["frameworks"],
                                        requested=images.containers_requested(workflow))
    """
    if not requested:
        return {}
    path = Path(path) if path else default_lock_path()
    lock = load_lock(path)
    missing = unpinned(lock, frameworks)
    if missing:
        names = ", ".join(f"{f} ({tag_reference(lock['images'][f])})" if f in lock["images"]
                          else f"{f} (no entry)" for f in missing)
        raise ImageError(
            f"containers were requested (--use-singularity) but {path} has no digest for "
            f"{names}. Build the images here with `make images` (Apptainer, Podman or Docker; "
            f"no registry needed), or, for images published to a registry, run `make pin-images` "
            f"and commit the lock; or run natively, without --use-singularity. "
            "docs/containers.md explains both.")
    found = {}
    for framework in frameworks:
        entry = lock["images"][framework]
        if entry.get("file"):
            check_image_file(entry, path.parent)
        found[framework] = {
            "reference": container_url(entry, path.parent), "digest": entry["digest"],
            "engine": entry.get("engine", "registry"), "tag": tag_reference(entry),
            "package": entry["package"], "version": str(entry["version"]),
            **({"lock_sha256": entry["lock_sha256"]} if entry.get("lock_sha256") else {})}
    export_source(os.environ if environ is None else environ)
    kind = "images built here by `make images`" if any(
        lock["images"][f].get("file") for f in frameworks) else "registry images"
    print(f"fwbench: containers from {path} ({kind}): " + ", ".join(
        f"{f} {e['digest'][:19]}" for f, e in found.items()), file=sys.stderr)
    return found


def export_source(environ, source: Path = SOURCE_DIR, cwd: Path | None = None) -> None:
    """Make this work tree's fwbench importable in the containers, and its git state known:
    the images hold the frameworks only (no fwbench, no git), and jobs import fwbench from the
    tree they belong to. Apptainer reads
    ``APPTAINERENV_PYTHONPATH`` (it crosses ``--cleanenv``) and ``APPTAINER_BIND`` from the
    host; the bind is needed only when the tree is not under the working directory, which
    Snakemake mounts as the container's home."""
    from fwbench.environment.source import GIT_STATE_VARIABLE, git_state
    environ["APPTAINERENV_PYTHONPATH"] = str(source)
    # The images hold no git: jobs record the commit and dirty flag the workflow started from.
    environ[f"APPTAINERENV_{GIT_STATE_VARIABLE}"] = json.dumps(git_state(source))
    cwd = Path.cwd() if cwd is None else cwd
    if not source.resolve().is_relative_to(cwd.resolve()):
        binds = [b for b in environ.get("APPTAINER_BIND", "").split(",") if b]
        bind = f"{source}:{source}:ro"
        if bind not in binds:
            environ["APPTAINER_BIND"] = ",".join([*binds, bind])


def container_for(images: Mapping[str, dict], framework: str) -> str | None:
    """The ``container:`` of a job of ``framework``: its reference, or None natively."""
    return images[framework]["reference"] if images else None


def with_images(settings: TrialSettings, images: Mapping[str, dict]) -> TrialSettings:
    """A trial's settings with every framework's expected image added when containers are
    requested (unchanged natively). Being part of the job's params, a new digest for one
    framework reruns its cells together with their partners, so pairs stay interleaved."""
    if not images:
        return settings
    return replace(settings, images={framework: Image.from_dict(image)
                                     for framework, image in images.items()})


# --- the job side -----------------------------------------------------------------------

def image_file_name(url: str) -> str:
    """The name Snakemake gives the image it pulls for ``url`` (md5 of the URL, ``.simg``)."""
    return hashlib.md5(url.encode(), usedforsecurity=False).hexdigest() + ".simg"


def read_label(environ: Mapping[str, str] | None = None) -> dict | None:
    """The label file written into the image at build time; None when there is none."""
    environ = os.environ if environ is None else environ
    path = Path(environ.get(LABEL_VARIABLE) or LABEL_PATH)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


_verified: dict | None = None  # what check_runtime found in this process, for provenance


def runtime_container(environ: Mapping[str, str] | None = None) -> dict | str:
    """What this process runs in: ``"none"`` natively, else the image file and its label, with
    the reference and digest once :func:`check_runtime` has verified them in this process."""
    environ = os.environ if environ is None else environ
    image_file = environ.get("APPTAINER_CONTAINER") or environ.get("SINGULARITY_CONTAINER")
    if not image_file:
        return "none"
    if _verified and _verified["image_file"] == image_file:
        return dict(_verified)
    label = read_label(environ)
    return {"image_file": image_file, "reference": None, "digest": None,
            "tag": (label or {}).get("image"), "label": label}


def check_runtime(framework: str, expected_images: Mapping[str, dict] | None,
                  environ: Mapping[str, str] | None = None) -> dict:
    """Fail unless this job runs where the workflow asked; returns what it runs in.

    ``expected_images`` is the trial settings' ``images`` (see :func:`with_images`): absent when
    the workflow runs natively, and then this returns ``{"container": "none"}`` (or what it runs
    in, if started in a container by hand). When containers were requested, the job must run
    inside an image whose label names this framework and the locked tag, whose Python is the
    image's, and from which the framework resolves with the locked version; otherwise
    :class:`ImageError` says what differs. What it verified (reference, digest, label, where
    the framework resolves from) is returned and kept for :func:`provenance.environment`, so
    the trial's env.json records it.

    Usage (first thing in ``fwbench.measure.trial.run_trial``, before any measurement)::

        images.check_runtime(settings.cell.framework, settings.to_dict().get("images"))
    """
    global _verified
    environ = os.environ if environ is None else environ
    expected_all = dict(expected_images or {})
    container = runtime_container(environ)
    if not expected_all:
        return {"container": container}
    if container == "none":
        raise ImageError(
            f"containers were requested (--use-singularity) but this {framework} job runs "
            "outside any container: the rule has no container or the job was started by hand. "
            "Run it through Snakemake with --use-singularity, or run the whole workflow natively.")
    expected = expected_all.get(framework)
    if expected is None:
        raise ImageError(f"no image is expected for {framework}; the workflow expected "
                         f"{sorted(expected_all)}")
    label = container["label"]
    where = f"image {container['image_file']} (expected {expected['reference']})"
    if label is None:
        raise ImageError(f"{where} has no label file {environ.get(LABEL_VARIABLE) or LABEL_PATH}: "
                         f"it was not built from containers/{framework}/")
    problems, found = _runtime_problems(framework, expected, label)
    if problems:
        raise ImageError(f"{where}: " + "; ".join(problems))
    reference = expected["reference"]
    _verified = {
        **container, "reference": reference,
        "digest": expected.get("digest") or reference.rsplit("@", 1)[1],
        "engine": expected.get("engine", "registry"),
        "tag": expected["tag"], "framework_path": found["path"],
        "framework_version": found["version"],
        "image_file_matches_reference": image_file_matches(container["image_file"], reference)}
    return {"container": dict(_verified)}


def _runtime_problems(framework: str, expected: dict, label: dict) -> tuple[list[str], dict]:
    """How the image this job runs in differs from the one the lock expects (its label, its
    Python, where the framework resolves from and its version), and where the framework was
    found."""
    problems = []
    if label.get("framework") != framework:
        problems.append(f"its label names framework {label.get('framework')!r}, not {framework!r}")
    if label.get("image") != expected["tag"]:
        problems.append(f"its label names image {label.get('image')!r}, "
                        f"the lock {expected['tag']!r}")
    prefix = Path(label.get("prefix") or "/nonexistent")
    if Path(sys.prefix).resolve() != prefix.resolve():
        problems.append(f"Python runs from {sys.prefix}, not from the image's {prefix}")
    found = _framework_location(framework, expected["package"])
    if found["error"]:
        problems.append(found["error"])
    else:
        site = Path(label.get("site_packages") or prefix)
        if not Path(found["path"]).resolve().is_relative_to(site.resolve()):
            problems.append(f"{MODULES[framework]} resolves from {found['path']}, outside the "
                            f"image's {site}")
        if found["version"] != expected["version"]:
            problems.append(f"{expected['package']} is {found['version']}, the lock says "
                            f"{expected['version']}")
    if expected.get("lock_sha256") and label.get("lock_sha256") != expected["lock_sha256"]:
        problems.append(f"it was built from another lock (sha256 {label.get('lock_sha256')}, "
                        f"the image lock says {expected['lock_sha256']})")
    return problems, found


def image_file_matches(image_file: str, reference: str) -> bool:
    """Whether Apptainer ran the file of ``reference``: the SIF itself, or the file Snakemake
    pulled for the URL (named after it), whose name carries the digest. This ties the file to
    the digest the trial records."""
    if "://" not in reference:
        return Path(image_file).resolve() == Path(reference).resolve()
    return Path(image_file).name == image_file_name(reference)


def _framework_location(framework: str, package: str) -> dict:
    """Where the framework would be imported from, and its installed version, without importing
    it (the parent process stays framework-free; the child resolves the same path)."""
    module = MODULES[framework]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return {"error": f"{module} cannot be imported here", "path": None, "version": None}
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return {"error": f"package {package} is not installed (found {module} at {spec.origin})",
                "path": spec.origin, "version": None}
    return {"error": None, "path": spec.origin, "version": version}


# --- inside an image ----------------------------------------------------------------

def check_image(framework: str, lock_path: str | os.PathLike | None = None,
                environ: Mapping[str, str] | None = None) -> dict:
    """Run inside a built image: does it hold what its lock says? Returns what was found,
    with ``problems`` (empty when it does): the label names this framework, the lock's tag and
    the lock's file (sha256); the framework's installed version is the lock's and the label's;
    ``pip check`` passes; the framework imports (in a child process, as a trial's does) and
    reports that version.

    Usage (``make test-containers``, in each image)::

        python -m fwbench.environment.images check --framework pytorch
        python -m fwbench.environment.images check --framework tensorflow --lock PATH
    """
    path = Path(lock_path) if lock_path else default_lock_path()
    entry = load_lock(path)["images"][framework]
    label = read_label(environ) or {}
    found = _framework_location(framework, entry["package"])
    # The image's own packages: without PYTHONPATH, which adds the work tree's fwbench.
    pip = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    module = MODULES[framework]
    imported = subprocess.run(
        [sys.executable, "-c", f"import {module}; print({module}.__version__)"],
        capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    version = str(entry["version"])
    result = {"framework": framework, "lock": str(path), "label": {k: label.get(k) for k in (
        "framework", "image", "package", "version", "variant", "lock_sha256", "python",
        "base_image", "base_digest")}, "installed": found["version"],
        "imported": imported.stdout.strip().splitlines()[-1:] or None,
        "pip_check": (pip.stdout or pip.stderr).strip()}
    problems = []
    if not label:
        problems.append("no label file: not an image built from containers/")
    if label.get("framework") != framework:
        problems.append(f"label framework {label.get('framework')!r}")
    if label.get("image") != tag_reference(entry):
        problems.append(f"label image {label.get('image')!r}, the lock {tag_reference(entry)!r}")
    if entry.get("lock_sha256") and label.get("lock_sha256") != entry["lock_sha256"]:
        problems.append("built from another requirements lock than the image lock names")
    if found["error"] or found["version"] != version or label.get("version") != version:
        problems.append(f"{entry['package']} installed {found['version']}, label "
                        f"{label.get('version')}, lock {version} {found['error'] or ''}".strip())
    if pip.returncode != 0:
        problems.append(f"pip check failed: {result['pip_check'][:300]}")
    if imported.returncode != 0 or not (result["imported"] or [""])[0].startswith(version):
        problems.append(f"import {module} gave {imported.stdout[-200:]}{imported.stderr[-300:]}")
    return {**result, "problems": problems}


def main(argv: list[str] | None = None) -> int:
    """Inside an image:
    ``python -m fwbench.environment.images check --framework F [--lock PATH]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m fwbench.environment.images",
                                     description=main.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="inside an image: label, version, pip check")
    check.add_argument("--framework", required=True, choices=sorted(MODULES))
    check.add_argument("--lock", help="image lock (default: the one the workflow would use)")
    stack = commands.add_parser("stack", help="inside an image: its CUDA stack against its "
                                "label and its requirements lock, the driver it needs, and "
                                "one line about GPUs")
    stack.add_argument("--framework", required=True, choices=sorted(MODULES))
    gpu = commands.add_parser("gpu", help="one line: the GPUs the framework sees here")
    gpu.add_argument("--framework", required=True, choices=sorted(MODULES))
    args = parser.parse_args(argv)
    from fwbench.environment.cuda_stack import check_stack, gpu_report

    if args.command == "gpu":
        print(gpu_report(args.framework)[1])
        return 0
    if args.command == "stack":
        found = check_stack(args.framework, read_label() or {},
                            Path(os.environ.get(LABEL_VARIABLE) or LABEL_PATH))
        print(json.dumps(found, indent=1, sort_keys=True))
        for problem in found["problems"]:
            print(f"fwbench: {args.framework} image: {problem}", file=sys.stderr)
        return 1 if found["problems"] else 0
    found = check_image(args.framework, args.lock)
    print(json.dumps(found, indent=1))
    for problem in found["problems"]:
        print(f"fwbench: {args.framework} image: {problem}", file=sys.stderr)
    return 1 if found["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
