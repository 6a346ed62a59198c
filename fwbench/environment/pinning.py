"""Pinning the registry lock: every tag in containers/images.lock resolved to the digest it
points to now (``make pin-images``, ``python -m fwbench pin-images``).

A digest is written only from the registry's answer (skopeo, crane or docker); a tag that
cannot be resolved keeps what it had and is reported, so nothing is ever guessed.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from fwbench.environment.images import (
    DIGEST,
    ImageError,
    load_lock,
    registry_lock_path,
    tag_reference,
    write_lock,
)

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
    path = Path(lock_path) if lock_path else registry_lock_path()
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
                raise ImageError(f"the registry tool answered {digest[:100]!r}, "
                                 "not a sha256 digest")
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
                             f"copy of {ref}; install skopeo or crane, or the buildx "
                             "plugin") from None
        repository = ref.rsplit(":", 1)[0]
        for item in json.loads(out) or []:
            if item.split("@")[0] in (repository, repository.removeprefix("docker.io/")):
                return item.split("@", 1)[1]
        raise ImageError(f"the local copy of {ref} has no registry digest (never pushed or pulled)")
    return resolve


def pin_command(lock_path: str | os.PathLike | None = None,
                resolver: Resolver | None = None) -> int:
    """``make pin-images``: pin, print one line per image, exit 1 if any tag stayed unresolved."""
    path = Path(lock_path) if lock_path else registry_lock_path()
    try:
        report = pin_images(path, resolver)
    except ImageError as exc:
        print(f"fwbench: {exc}", file=sys.stderr)
        return 1
    print(format_pin_report(report, path))
    return 1 if any(row["error"] for row in report.values()) else 0
