"""The framework images: the lock file, digest pinning, and the check a benchmark job makes.

``containers/images.lock`` names, per framework, the image a benchmark job runs in: the repository
and tag it was pushed under and the ``sha256`` digest that tag resolved to. A digest is written only
by :func:`pin_images`, which asks the registry (through skopeo, crane or docker); nothing here ever
invents one. The workflow turns a pinned entry into ``docker://<repository>@sha256:<digest>``, never
a mutable tag.

Three users of this module:

- the workflow at parse time (``rules/common.smk``): :func:`workflow_images` stops with a message
  naming ``make pin-images`` when containers are requested and a digest is missing; the expected
  images go into every trial's settings (:func:`with_images`), so they are job params too;
- a benchmark job, first thing (``fwbench.trial.run_trial``): :func:`check_runtime` fails unless the
  job runs in the expected image (label file, framework imported from the image, expected version);
- ``make pin-images`` (``python -m fwbench pin-images``): :func:`pin_images`.

Framework-free: nothing here imports torch or tensorflow.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from fwbench.errors import FwbenchError

SOURCE_DIR = Path(__file__).resolve().parent.parent
LOCK_PATH = SOURCE_DIR / "containers" / "images.lock"
LOCK_VARIABLE = "FWBENCH_IMAGES_LOCK"       # another lock file (tests, another image set)
LABEL_VARIABLE = "FWBENCH_IMAGE_LABEL"      # set by the image (Dockerfile ENV / %environment)
LABEL_PATH = "/opt/fwbench/image.json"      # written into the image at build time
LOCK_VERSION = 1
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
MODULES = {"pytorch": "torch", "tensorflow": "tensorflow"}

LOCK_HEADER = """\
# The images benchmark jobs run in, one per framework. Written by `make pin-images`
# (python -m fwbench pin-images), which asks the registry what each tag points to now.
# Edit repositories and tags by hand; never write a digest by hand. `digest: null` means
# nobody has resolved that tag yet: runs with --use-singularity stop until it is pinned.
# Commit this file after pinning; docs/containers.md says how images are built and pushed.
"""


class ImageError(FwbenchError):
    """The image lock is invalid, a digest is missing, or a job runs in the wrong place."""


# --- the lock file ----------------------------------------------------------------------

def default_lock_path() -> Path:
    """The lock in use: ``$FWBENCH_IMAGES_LOCK`` if set, else ``containers/images.lock``."""
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


def write_lock(lock: dict, path: str | os.PathLike) -> None:
    """Write the lock atomically, with its header comment."""
    path = Path(path)
    _check_lock(lock, path)
    text = LOCK_HEADER + yaml.safe_dump(lock, sort_keys=False, default_flow_style=False)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def tag_reference(entry: dict) -> str:
    """``repository:tag`` — what the registry is asked about."""
    return f"{entry['repository']}:{entry['tag']}"


def container_url(entry: dict) -> str:
    """``docker://repository@sha256:…`` for a pinned entry; :class:`ImageError` if unpinned."""
    if not entry.get("digest"):
        raise ImageError(f"{tag_reference(entry)} has no digest in the image lock")
    return f"docker://{entry['repository']}@{entry['digest']}"


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

    Each entry: ``reference`` (``docker://repository@sha256:…``, for ``container:``), ``tag``,
    ``package`` and ``version``. When requested, every framework needs a digest, or this stops
    the workflow before any job starts, with a message naming ``make pin-images``. It also
    makes this work tree's fwbench importable inside the containers (see :func:`export_source`).

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
            f"{names}. On a machine that reaches the registry, run `make pin-images` and commit "
            f"the lock; or run natively, without --use-singularity. docs/containers.md explains "
            "how the images are built and pushed first.")
    export_source(os.environ if environ is None else environ)
    return {f: {"reference": container_url(lock["images"][f]),
                "tag": tag_reference(lock["images"][f]),
                "package": lock["images"][f]["package"],
                "version": str(lock["images"][f]["version"])} for f in frameworks}


def export_source(environ, source: Path = SOURCE_DIR, cwd: Path | None = None) -> None:
    """Make this work tree's fwbench importable in the containers, and its git state known:
    the images hold the frameworks only (no fwbench, no git), and jobs import fwbench from the
    tree they belong to. Apptainer reads
    ``APPTAINERENV_PYTHONPATH`` (it crosses ``--cleanenv``) and ``APPTAINER_BIND`` from the
    host; the bind is needed only when the tree is not under the working directory, which
    Snakemake mounts as the container's home."""
    from fwbench.provenance import GIT_STATE_VARIABLE, git_state

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


def with_images(settings: dict, images: Mapping[str, dict]) -> dict:
    """A trial's settings with every framework's expected image added when containers are
    requested (unchanged natively). Being part of the job's params, a new digest for one
    framework reruns its cells together with their partners, so pairs stay interleaved."""
    return {**settings, "images": dict(images)} if images else settings


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

    Usage (first thing in ``fwbench.trial.run_trial``, before any measurement)::

        images.check_runtime(settings["cell"]["framework"], settings.get("images"))
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
    problems = []
    if label.get("framework") != framework:
        problems.append(f"its label names framework {label.get('framework')!r}, not {framework!r}")
    if label.get("image") != expected["tag"]:
        problems.append(f"its label names image {label.get('image')!r}, the lock {expected['tag']!r}")
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
    if problems:
        raise ImageError(f"{where}: " + "; ".join(problems))
    reference = expected["reference"]
    _verified = {
        **container, "reference": reference, "digest": reference.rsplit("@", 1)[1],
        "tag": expected["tag"], "framework_path": found["path"],
        "framework_version": found["version"],
        # Snakemake names the image it pulled after the URL: this ties the file to the digest.
        "image_file_matches_reference":
            Path(container["image_file"]).name == image_file_name(reference)}
    return {"container": dict(_verified)}


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


# --- pinning ----------------------------------------------------------------------------

Resolver = Callable[[str], str]


def pin_images(lock_path: str | os.PathLike | None = None,
               resolver: Resolver | None = None) -> dict[str, dict]:
    """Resolve every tag in the lock to its digest now, and write the lock.

    ``resolver`` maps ``repository:tag`` to ``sha256:…``; by default the first of skopeo, crane
    or docker found on PATH asks the registry. A tag that cannot be resolved keeps the digest
    it had (possibly null) and is reported; nothing is ever guessed. Returns, per entry,
    ``{"reference", "old", "new", "error"}``.

    Usage (``make pin-images``)::

        report = pin_images()                   # containers/images.lock, registry tool on PATH
        failed = [k for k, r in report.items() if r["error"]]
    """
    path = Path(lock_path) if lock_path else default_lock_path()
    lock = load_lock(path)
    resolver = resolver or registry_resolver()
    updated = copy.deepcopy(lock)
    report = {}
    entries = {"base": updated["base"], **updated["images"]}
    for name, entry in entries.items():
        reference = tag_reference(entry)
        row = {"reference": reference, "old": entry.get("digest"), "new": None, "error": None}
        try:
            digest = resolver(reference).strip()
            if not DIGEST.match(digest):
                raise ImageError(f"the registry tool answered {digest[:100]!r}, not a sha256 digest")
        except (ImageError, OSError, subprocess.SubprocessError) as exc:
            row["error"] = str(exc)
        else:
            row["new"] = entry["digest"] = digest
        report[name] = row
    if updated != lock:
        write_lock(updated, path)
    return report


def format_pin_report(report: dict[str, dict], path) -> str:
    """One line per entry, then what to do next."""
    lines = []
    for name, row in report.items():
        if row["error"]:
            kept = row["old"] or "null"
            lines.append(f"{name}: {row['reference']}: NOT resolved ({row['error']}); "
                         f"digest stays {kept}")
        elif row["new"] == row["old"]:
            lines.append(f"{name}: {row['reference']} -> {row['new']} (unchanged)")
        else:
            lines.append(f"{name}: {row['reference']} -> {row['new']} (was {row['old'] or 'null'})")
    if any(r["new"] and r["new"] != r["old"] for r in report.values()):
        lines.append(f"Wrote {path}. Commit it: every benchmark job runs the pinned digests, and "
                     "a changed digest reruns that framework's cells and their partners.")
    return "\n".join(lines)


def registry_resolver(which: Callable[[str], str | None] = shutil.which) -> Resolver:
    """A resolver using the first of skopeo, crane or docker on PATH."""
    for tool, make in (("skopeo", _skopeo), ("crane", _crane), ("docker", _docker)):
        binary = which(tool)
        if binary:
            return make(binary)
    raise ImageError("pinning needs skopeo, crane or docker on PATH, and access to the registry: "
                     "install one (e.g. `apt-get install skopeo`) and run `make pin-images` again")


def _run(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip().splitlines() or ["no output"]
        raise ImageError(f"`{' '.join(argv)}` failed: {message[0][:300]}")
    return proc.stdout.strip()


# Each tool answers the digest of what the tag points to: for a multi-platform image, the
# index (manifest list), so the pin holds for every platform. skopeo's .Digest is that
# top-level digest; crane digest without --platform likewise.
def _skopeo(binary: str) -> Resolver:
    return lambda ref: _run([binary, "inspect", "--format", "{{.Digest}}", f"docker://{ref}"])


def _crane(binary: str) -> Resolver:
    return lambda ref: _run([binary, "digest", ref])


def _docker(binary: str) -> Resolver:
    def resolve(ref: str) -> str:
        try:  # the registry's answer, through the buildx plugin
            out = _run([binary, "buildx", "imagetools", "inspect", ref, "--format",
                        "{{json .Manifest}}"])
            return json.loads(out)["digest"]
        except (ImageError, ValueError, KeyError, TypeError) as exc:
            registry_error = exc
        # Without buildx: the digest the registry gave when this image was pushed or pulled here.
        try:
            out = _run([binary, "image", "inspect", "--format", "{{json .RepoDigests}}", ref])
        except ImageError:
            raise ImageError(f"docker cannot ask the registry ({registry_error}) and has no local "
                             f"copy of {ref}; install skopeo or crane, or the buildx plugin") from None
        repository = ref.rsplit(":", 1)[0]
        for item in json.loads(out) or []:
            if item.split("@")[0] in (repository, repository.removeprefix("docker.io/")):
                return item.split("@", 1)[1]
        raise ImageError(f"the local copy of {ref} has no registry digest (never pushed or pulled)")
    return resolve


def pin_command(lock_path: str | os.PathLike | None = None, resolver: Resolver | None = None) -> int:
    """``make pin-images``: pin, print one line per image, exit 1 if any tag stayed unresolved."""
    path = Path(lock_path) if lock_path else default_lock_path()
    try:
        report = pin_images(path, resolver)
    except ImageError as exc:
        print(f"fwbench: {exc}", file=sys.stderr)
        return 1
    print(format_pin_report(report, path))
    return 1 if any(row["error"] for row in report.values()) else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m fwbench.images pin [--lock PATH]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m fwbench.images", description=main.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    pin = commands.add_parser("pin", help="resolve every tag in the lock to its digest")
    pin.add_argument("--lock", help=f"lock file (default ${LOCK_VARIABLE} or {LOCK_PATH})")
    args = parser.parse_args(argv)
    return pin_command(args.lock)


if __name__ == "__main__":
    sys.exit(main())
