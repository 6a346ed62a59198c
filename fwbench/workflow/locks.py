"""Safe unlocking before a resume: which Snakemake processes work in a folder, and whether
its locks are stale (no live Snakemake owns them; ``fwbench run`` then unlocks)."""

from __future__ import annotations

import os
from pathlib import Path


def snakemake_alive(directory: str | os.PathLike = ".") -> list[int]:
    """Pids of live Snakemake processes working in ``directory`` (read from /proc)."""
    directory = Path(directory).resolve()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            cwd = Path(os.readlink(proc / "cwd"))
        except OSError:
            continue
        # `snakemake …`, `python …/snakemake …` or `python -m snakemake …`
        if any(Path(a.decode(errors="replace")).name == "snakemake" for a in argv[:3]) \
                and cwd == directory:
            pids.append(int(proc.name))
    return pids


def stale_locks(directory: str | os.PathLike = ".") -> bool:
    """True when .snakemake/locks holds locks but no Snakemake process is alive to own them."""
    locks = Path(directory, ".snakemake", "locks")
    return locks.is_dir() and any(locks.iterdir()) and not snakemake_alive(directory)
