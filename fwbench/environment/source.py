"""The source a trial runs from: the workflow's git commit and dirty flag, a hash of the code
and software that measure, and the workflow process that started it. Read on the host; inside an
image (no git) from what the host exported."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
from pathlib import Path

from fwbench import SOURCE_DIR

GIT_STATE_VARIABLE = "FWBENCH_GIT_STATE"


def git_state(source: Path = SOURCE_DIR) -> dict:
    """The workflow's commit and whether its tree was dirty; None where git cannot tell.

    Inside a container (the images hold no git) this falls back to ``$FWBENCH_GIT_STATE``, the
    state the workflow read on the host when it started
    (``fwbench.environment.images.export_source``).
    """
    def git(*args):
        return subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        try:
            exported = json.loads(os.environ[GIT_STATE_VARIABLE])
            return {"git_commit": exported["git_commit"], "git_dirty": exported["git_dirty"]}
        except (KeyError, ValueError, TypeError):
            return {"git_commit": None, "git_dirty": None}
    return {"git_commit": commit, "git_dirty": dirty}


# What measures: every file of the measuring code (the harness, the frameworks' backends, the
# bundled data) and of the plan a trial's settings are read through; natively also the lock the
# environment was installed from (in an image, its digest stands for it).
MEASURING_CODE = ("fwbench/measure", "fwbench/plan")
NATIVE_LOCK = "requirements.lock"


def measuring_code(image_digest: str | None = None, source: Path = SOURCE_DIR) -> str:
    """sha256 (16 hex digits) of what measures: the files of MEASURING_CODE and either the
    image's digest or, natively, requirements.lock. Two trials with one hash were measured by
    the same code on the same software whatever their commits, so a run may mix commits that
    changed nothing that measures (the shipping gate, fwbench.analysis.gate, reads it)."""
    digest = hashlib.sha256()
    files = sorted(path for folder in MEASURING_CODE for path in (source / folder).rglob("*")
                   if path.is_file() and "__pycache__" not in path.parts)
    if image_digest is None:
        files.append(source / NATIVE_LOCK)
    for path in files:
        digest.update(path.relative_to(source).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"missing")
        digest.update(b"\0")
    if image_digest is not None:
        digest.update(f"image {image_digest}".encode())
    return digest.hexdigest()[:16]


def workflow_session() -> str | None:
    """The workflow process that started this trial: host, pid and its start time.

    Trials of one cell group with different sessions were not measured together (a partial rerun).
    """
    ppid = os.getppid()
    try:
        # Field 22 of /proc/<pid>/stat is the start time; split after the command's closing paren.
        start = Path(f"/proc/{ppid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None
    return f"{socket.gethostname()}:{ppid}:{start}"
