"""Build the framework images here, with the engine this machine has, and lock what was built.

``make images`` runs this. For each framework it:

1. fills the wheelhouse (``containers/wheelhouse/``) with the wheels of
   ``containers/<framework>/requirements-<variant>.lock``: files already there are checked
   against the lock's sha256, missing ones fetched once with ``pip download --require-hashes``
   (so a machine without internet builds from a wheelhouse copied onto it);
2. builds the image from the repository's own recipe with the first engine found (or
   ``--engine``): Apptainer from ``<framework>.def``, Podman or Docker from the ``Dockerfile``,
   installing from the wheelhouse with no network (or from ``--index-url``);
3. records the image's content digest: for Apptainer the SIF file's sha256, for Podman/Docker the
   image ID; a Podman/Docker image is also saved as a ``docker-archive`` file, which Apptainer
   (``docker-archive://``) and Snakemake can use without any registry. File names carry the
   digest, so a rebuilt image is a new file and Snakemake never reuses a stale conversion;
4. writes ``containers/build/images.lock``, the lock ``snakemake --use-singularity`` reads when it
   exists (see fwbench.environment.images.default_lock_path).

Usage::

    python containers/build.py                       # both images, engine and variant found here
    python containers/build.py --variant cpu --engine podman \\
        --base localhost/fwbench-standin-base:bookworm --python /usr/bin/python3

The registry path (build, push, ``make pin-images``) stays for sites that publish images:
``--push`` tags the image as containers/images.lock names it and pushes it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fwbench.environment import images  # noqa: E402  (the repository's library, beside this folder)
from fwbench.plan.frameworks import FRAMEWORKS  # noqa: E402

PLATFORM = ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
            "--abi", "cp311",
            *[a for m in range(36, 16, -1) for a in ("--platform", f"manylinux_2_{m}_x86_64")],
            *[a for p in ("manylinux2014", "manylinux2010", "manylinux1", "linux")
              for a in ("--platform", f"{p}_x86_64")]]
# Podman as root on hosts like ours: crun fails on hybrid cgroups, and ulimits above the
# current ones are refused (docs/containers.md).
PODMAN = ["podman", "--runtime", "runc"]
PODMAN_LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
DEFAULT_BASE = "docker.io/library/python:3.11.7-slim-bookworm"
DEFAULT_PYTHON = "/usr/local/bin/python3"
# The framework's distributions: tensorflow-cpu in the cpu variant of the TensorFlow image.
PACKAGES = {name: f.distributions for name, f in FRAMEWORKS.items()}


def log(message: str) -> None:
    print(f"[images] {message}", file=sys.stderr, flush=True)


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    log("$ " + " ".join(argv))
    return subprocess.run(argv, check=True, **kwargs)


def output(argv: list[str]) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


# --- what to build with ------------------------------------------------------------------

def works(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def find_engine() -> str:
    """Apptainer if installed (its SIF runs as is), else Podman, else a Docker daemon."""
    if shutil.which("apptainer"):
        return "apptainer"
    if shutil.which("podman") and works(["podman", "--runtime", "runc", "info"]):
        return "podman"
    if shutil.which("docker") and works(["docker", "info"]):
        return "docker"
    raise SystemExit("make images: no container engine here. Install Apptainer (>= 1.2), Podman "
                     "or Docker (with its daemon running), or name one with ENGINE=…")


def find_variant() -> str:
    """cuda where an NVIDIA driver answers, else cpu."""
    return "cuda" if works(["nvidia-smi", "-L"]) else "cpu"


def source_date(paths: list[Path]) -> int:
    """The date of the last commit touching what goes into the image (recipe, lock, label
    writer): the same for every build of one recipe and lock, unlike the clock; 0 outside git."""
    try:
        stamp = output(["git", "-C", str(HERE), "log", "-1", "--format=%ct", "--",
                        *map(str, paths)])
        return int(stamp or 0)
    except (OSError, subprocess.SubprocessError, ValueError):
        return 0


# --- the wheelhouse ----------------------------------------------------------------------

def lock_hashes(lock: Path) -> dict[str, tuple[str, set[str]]]:
    """``name`` -> (version, {sha256 hex}) of every line of an image lock."""
    found = {}
    for line in lock.read_text().splitlines():
        match = re.match(
            r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)((?:\s+--hash=sha256:[0-9a-f]{64})+)", line)
        if match:
            found[_name(match[1])] = (match[2], set(re.findall(r"[0-9a-f]{64}", match[3])))
        elif line.strip() and not line.startswith("#"):
            raise SystemExit(f"{lock}: not an exact pin with a sha256: {line!r} "
                             "(run containers/freeze.py)")
    return found


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def missing_wheels(lock: Path, wheelhouse: Path) -> list[str]:
    """Pins of ``lock`` with no wheel in ``wheelhouse`` whose sha256 the lock names. A wheel of
    a pinned version with another hash is an error (a tampered or mixed-up file)."""
    wanted = lock_hashes(lock)
    have: dict[str, bool] = {}
    for wheel in sorted(wheelhouse.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        entry = wanted.get(_name(name))
        if entry and version == entry[0]:
            ok = _sha256(wheel) in entry[1]
            if not ok:
                raise SystemExit(f"{wheel}: its sha256 is not the one {lock} names: remove it "
                                 "and run make images again")
            have[_name(name)] = True
    return sorted(name for name in wanted if name not in have)


def fill_wheelhouse(locks: list[Path], wheelhouse: Path) -> None:
    wheelhouse.mkdir(parents=True, exist_ok=True)
    for lock in locks:
        missing = missing_wheels(lock, wheelhouse)
        if not missing:
            log(f"wheelhouse: every wheel of {lock.relative_to(HERE)} is there, hashes checked")
            continue
        log(f"wheelhouse: fetching {len(missing)} wheels of {lock.relative_to(HERE)}")
        run([sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
             "--dest", str(wheelhouse), *PLATFORM, "--requirement", str(lock)])
        still = missing_wheels(lock, wheelhouse)
        if still:
            raise SystemExit(f"wheelhouse: still missing after pip download: {still}")


# --- building ----------------------------------------------------------------------------

def base_digest(engine: str, base: str) -> str:
    """The base's digest as the engine knows it (image ID; pulled first if needed), or the
    digest written in the reference."""
    if "@sha256:" in base:
        return base.split("@", 1)[1]
    if engine == "apptainer":
        path = Path(base.split("://", 1)[-1])
        if path.is_file():
            return "sha256:" + _sha256(path)
        raise SystemExit(f"the base {base} is a tag: with Apptainer, name it by digest "
                         "(BASE=repository@sha256:…, see `make pin-images`) or as a local file")
    tool = PODMAN if engine == "podman" else ["docker"]
    if not works([*tool, "image", "inspect", base]):
        run([*tool, "pull", base])
    return image_id(tool, base)


def image_id(tool: list[str], reference: str) -> str:
    """``sha256:<hex>`` of an image the engine holds (podman prints the hex alone)."""
    found = output([*tool, "image", "inspect", "--format", "{{.Id}}", reference]).splitlines()[0]
    return found if found.startswith("sha256:") else f"sha256:{found}"


def split_reference(reference: str) -> tuple[str, str]:
    """(repository, tag) of ``repository[:tag][@digest]``; tag ``local`` when there is none."""
    name = reference.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        repository, tag = name.rsplit(":", 1)
        return repository, tag
    return name, "local"


def build_one(framework: str, args, base_id: str, out: Path) -> dict:
    """Build one image from the repository's recipe; returns its entry in the image lock."""
    lock = HERE / framework / f"requirements-{args.variant}.lock"
    pins = lock_hashes(lock)
    package = next(p for p in PACKAGES[framework] if p in pins)
    version = pins[package][0]
    tag = f"localhost/fwbench-{framework}:{PACKAGES[framework][0]}{version}-{args.variant}-py3.11"
    recipe = HERE / framework / (f"{framework}.def" if args.engine == "apptainer" else "Dockerfile")
    epoch = source_date([recipe, lock, HERE / "write_label.py"])
    build_args = {"BASE_IMAGE": args.base, "BASE_DIGEST": base_id, "PYTHON": args.python,
                  "VARIANT": args.variant, "INDEX_URL": args.index_url or "", "IMAGE": tag,
                  "SOURCE_DATE_EPOCH": str(epoch)}
    flags = [a for k, v in build_args.items() for a in ("--build-arg", f"{k}={v}")]
    network = [] if args.index_url else ["--network=none"]
    started = time.monotonic()
    if args.engine == "apptainer":
        bootstrap = "docker" if "://" not in args.base and not Path(args.base).is_file() else \
            {"sif": "localimage", "tar": "docker-archive"}.get(args.base.rsplit(".", 1)[-1],
                                                                "docker")
        flags += ["--build-arg", f"BOOTSTRAP={bootstrap}"]
        partial = out / f".fwbench-{framework}-{args.variant}.sif.partial"
        run(["apptainer", "build", "--force", "--bind", f"{args.wheelhouse}:/mnt", *flags,
             str(partial), f"{framework}/{framework}.def"], cwd=HERE)
        digest = "sha256:" + _sha256(partial)
        file = out / f"fwbench-{framework}-{args.variant}-{digest[7:23]}.sif"
        partial.replace(file)
    else:
        tool = PODMAN if args.engine == "podman" else ["docker"]
        # Podman's layer cache ignores --timestamp: a COPY layer cached by a build of another
        # commit keeps that commit's file times, and the image another ID (two clones here gave
        # two IDs for one content). So a Podman build runs every step, and its ID is its content's.
        extra = ["--timestamp", str(epoch), *PODMAN_LIMITS, "--no-cache"] \
            if args.engine == "podman" else []
        extra += ["--no-cache"] if args.no_cache and args.engine != "podman" else []
        run([*tool, "build", *network, *extra, *flags, "--file", f"{framework}/Dockerfile",
             "--tag", tag, "."], cwd=HERE)
        digest = image_id(tool, tag)
        file = out / f"fwbench-{framework}-{args.variant}-{digest[7:23]}.tar"
        if not file.exists() or args.engine == "docker":   # named by digest: kept if there
            partial = out / f".fwbench-{framework}-{args.variant}.tar.partial"
            run([*tool, "save", *(["--format", "docker-archive"] if args.engine == "podman"
                                  else []), "--output", str(partial), tag])
            # What Apptainer will read: the archive's configuration digest, which is Podman's
            # image ID; Docker's containerd store names images by manifest instead.
            digest = images.archive_digest(partial)
            file = out / f"fwbench-{framework}-{args.variant}-{digest[7:23]}.tar"
            partial.replace(file)
        if args.push:
            push(tool, framework, tag)
    seconds = round(time.monotonic() - started, 1)
    log(f"{framework}: {digest} ({args.engine}, {args.variant}) in {seconds} s -> {file.name}")
    return {"repository": tag.rsplit(":", 1)[0], "tag": tag.rsplit(":", 1)[1], "digest": digest,
            "package": package, "version": version, "variant": args.variant,
            "lock": str(lock.relative_to(HERE.parent)),
            "lock_sha256": hashlib.sha256(lock.read_bytes()).hexdigest(),
            "engine": args.engine, "file": file.name, "size_bytes": file.stat().st_size,
            "build_seconds": seconds}


def push(tool: list[str], framework: str, tag: str) -> None:
    """For sites that publish: tag as containers/images.lock names it, push, then pin."""
    target = images.tag_reference(images.load_lock(images.LOCK_PATH)["images"][framework])
    run([*tool, "tag", tag, target])
    run([*tool, "push", target])
    log(f"pushed {target}; now run `make pin-images` and commit containers/images.lock")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["auto", "apptainer", "podman", "docker"],
                        default="auto")
    parser.add_argument("--variant", choices=["auto", "cuda", "cpu"], default="auto",
                        help="cuda (GPU image) or cpu; auto: cuda where nvidia-smi answers")
    parser.add_argument("--frameworks", nargs="+", choices=sorted(PACKAGES),
                        default=sorted(PACKAGES))
    parser.add_argument("--base", default=None, help=f"base image (default {DEFAULT_BASE}, "
                        "by the digest containers/images.lock pins when it has one)")
    parser.add_argument("--python", default=DEFAULT_PYTHON,
                        help=f"the base's Python 3.11 (default {DEFAULT_PYTHON})")
    parser.add_argument("--index-url", default=None,
                        help="install from this index instead of the wheelhouse")
    parser.add_argument("--wheelhouse", type=Path, default=HERE / "wheelhouse")
    parser.add_argument("--out", type=Path, default=HERE / "build",
                        help="where images and their lock go (default containers/build/)")
    parser.add_argument("--no-cache", action="store_true",
                        help="build every step again (Docker; Podman always does): to check "
                        "reproducibility")
    parser.add_argument("--push", action="store_true",
                        help="then push as containers/images.lock names it (Podman/Docker)")
    args = parser.parse_args(argv)
    args.engine = find_engine() if args.engine == "auto" else args.engine
    args.variant = find_variant() if args.variant == "auto" else args.variant
    if args.base is None:
        pinned = images.load_lock(images.LOCK_PATH)["base"]
        args.base = f"{pinned['repository']}@{pinned['digest']}" if pinned["digest"] \
            else DEFAULT_BASE
    if args.push and (args.engine == "apptainer" or args.variant != "cuda"):
        parser.error("--push publishes the cuda variant built with Podman or Docker")
    args.wheelhouse, args.out = args.wheelhouse.resolve(), args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    args.wheelhouse.mkdir(parents=True, exist_ok=True)   # the recipes mount it even when empty
    log(f"engine {args.engine}, variant {args.variant}, base {args.base} (Python {args.python})")
    if not args.index_url:
        fill_wheelhouse([HERE / f / f"requirements-{args.variant}.lock" for f in args.frameworks],
                        args.wheelhouse)
    base_id = base_digest(args.engine, args.base)
    lock_path = args.out / "images.lock"
    old = images.load_lock(lock_path)["images"] if lock_path.exists() else {}
    repository, tag = split_reference(args.base)
    lock = {"version": images.LOCK_VERSION,
            "base": {"repository": repository, "tag": tag, "digest": base_id}, "images": old}
    for framework in args.frameworks:
        lock["images"][framework] = build_one(framework, args, base_id, args.out)
        images.write_lock(lock, lock_path, header=images.LOCAL_LOCK_HEADER)
        for stale in args.out.glob(f"fwbench-{framework}-*"):   # earlier builds: no lock names them
            if stale.name != lock["images"][framework]["file"]:
                log(f"removing {stale.name} (an earlier build)")
                stale.unlink()
    print(json.dumps({f: {k: e[k] for k in ("digest", "file", "size_bytes", "build_seconds")}
                      for f, e in lock["images"].items()}, indent=1))
    log(f"wrote {lock_path}: `snakemake --cores 1 --use-singularity` now runs these images")
    return 0


if __name__ == "__main__":
    sys.exit(main())
