"""Where a number came from: the workflow's git state and the machine a trial ran on."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent.parent


def git_state(source: Path = SOURCE_DIR) -> dict:
    """The workflow's commit and whether its tree was dirty; None where git cannot tell."""
    def git(*args):
        return subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}
    return {"git_commit": commit, "git_dirty": dirty}


def environment() -> dict:
    """The machine and interpreter of this process (the container is recorded as none natively)."""
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "container": os.environ.get("APPTAINER_CONTAINER") or "none",
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


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
