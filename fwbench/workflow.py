"""Helpers around Snakemake runs of this workflow: safe unlocking before a resume, and the
rebuild of a run's tables, statistics and report from its cell files."""

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
        if any(Path(a.decode(errors="replace")).name == "snakemake" for a in argv[:2]) \
                and cwd == directory:
            pids.append(int(proc.name))
    return pids


def stale_locks(directory: str | os.PathLike = ".") -> bool:
    """True when .snakemake/locks holds locks but no Snakemake process is alive to own them."""
    locks = Path(directory, ".snakemake", "locks")
    return locks.is_dir() and any(locks.iterdir()) and not snakemake_alive(directory)


# The rules that read cell files and write tables, statistics, audit and report: rebuilding a
# run allows only these, so a missing cell file is an error rather than a new measurement.
HOST_RULES = ("collect_tables", "collect_profiles", "collect_telemetry_trace", "audit_versions",
              "summarise_results", "summarise_ablation", "summarise_distributed",
              "summarise_flops", "build_report", "all")
# The first host steps; everything after them reruns because its inputs are then newer.
COLLECT_RULES = ("collect_tables", "collect_profiles", "collect_telemetry_trace",
                 "audit_versions")


def rebuild_command(run_dir: str | os.PathLike, snakefile: str | os.PathLike) -> list[str]:
    """The Snakemake command that rebuilds results/<run>/ from its cell files alone.

    The run's own config.yaml, when it ships one (results/reference/ does), plans the same cells
    the run measured; otherwise the workflow's config with ``run`` set to the folder's name.
    """
    run_dir = Path(run_dir).resolve()
    if run_dir.parent.name != "results":
        raise ValueError(f"{run_dir} is not a run folder: expected results/<run>")
    command = ["snakemake", "--snakefile", str(snakefile), "--directory",
               str(run_dir.parent.parent), "--cores", "1"]
    if (run_dir / "config.yaml").is_file():
        command += ["--configfile", str(run_dir / "config.yaml")]
    return [*command, "--config", f"run={run_dir.name}", "--forcerun", *COLLECT_RULES,
            "--allowed-rules", *HOST_RULES]
