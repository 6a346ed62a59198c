"""Why a run failed: the jobs Snakemake's log names as failed, and each one's cause read from
its own log, printed on the terminal."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path


def failed_jobs(snakemake_log: str | os.PathLike) -> list[tuple[str, list[str]]]:
    """(rule, its log files) of every job that failed, from Snakemake's log of the run."""
    text = Path(snakemake_log).read_text(errors="replace")
    failed = []
    for error in re.finditer(r"^Error in rule (\w+):\n((?:    .*\n?)*)", text, re.M):
        logs = re.search(r"^    log: (.+?)(?: \(check log file\(s\) for error details\))?$",
                         error.group(2), re.M)
        failed.append((error.group(1), logs.group(1).split(", ") if logs else []))
    return failed


def failure_cause(job_log: str | os.PathLike) -> str:
    """Why a job failed, from its log: the last exception line (the one a traceback ends
    with), else the last line."""
    try:
        lines = [line.strip() for line in
                 Path(job_log).read_text(errors="replace").splitlines() if line.strip()]
    except OSError as exc:
        return f"its log cannot be read ({exc.strerror})"
    raised = [line for line in lines if re.match(r"[\w.]*(Error|Exception|Exit)\b:? ", line)]
    return (raised or lines or ["its log is empty"])[-1]


def print_failures(snakemake_logs, file=None) -> None:
    """The cause of each failed job, one line each: the workflow's ``onerror`` handler, so
    ``make run``, ``fwbench rebuild`` and a plain ``snakemake`` end with it rather than with
    "check log file(s) for error details"."""
    if isinstance(snakemake_logs, (str, os.PathLike)):
        snakemake_logs = [snakemake_logs]
    for snakemake_log in snakemake_logs:
        for rule, logs in failed_jobs(snakemake_log):
            for job_log in logs or [None]:
                cause = failure_cause(job_log) if job_log else "it has no log"
                where = f" (log: {job_log})" if job_log else ""
                print(f"fwbench: rule {rule} failed: {cause}{where}", file=file or sys.stderr)
