"""The source a trial runs from: the workflow's git commit and dirty flag, and the workflow
process that started it. Read on the host; inside an image (no git) from what the host exported."""

from __future__ import annotations

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
