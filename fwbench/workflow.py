"""Helpers around Snakemake runs of this workflow: safe unlocking before a resume, the config
a run keeps in its folder, the rebuild of a run's tables, statistics and report from its cell
files, the cause of a failed job on the terminal, and the progress line each trial job prints."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import sys
from datetime import datetime
from pathlib import Path, PurePosixPath

import yaml

from fwbench.errors import FwbenchError, ResultError


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


# The rules that read cell files and write tables, statistics, audit and report: rebuilding a
# run allows only these, so a missing cell file is an error rather than a new measurement.
HOST_RULES = ("collect_tables", "collect_controls", "collect_profiles",
              "collect_telemetry_trace", "audit_versions", "summarise_results",
              "summarise_ablation", "summarise_distributed", "summarise_flops",
              "summarise_controls", "check_gate", "build_report", "all")
# The first host steps; everything after them reruns because its inputs are then newer. The
# A/A controls' collection joins them only in a run that has controls: --forcerun runs a rule
# even where nothing asks for its output.
COLLECT_RULES = ("collect_tables", "collect_profiles", "collect_telemetry_trace",
                 "audit_versions")


def own_python_first(environ) -> None:
    """Put the folder of the interpreter running Snakemake first on the jobs' PATH, so a host
    job's `python -m fwbench` runs in the workflow's own environment whatever PATH held (as
    Snakemake runs `script:` rules with it); a job in a container gets its image's PATH from
    Apptainer instead. The folder is resolved, as every path the workflow records."""
    environ["PATH"] = os.pathsep.join([os.path.realpath(os.path.dirname(sys.executable)),
                                       environ.get("PATH", os.defpath)])


# numpy's variable naming the SIMD targets it must not dispatch to (read once, at its import).
NUMPY_DISPATCH = "NPY_DISABLE_CPU_FEATURES"


def baseline_numpy(environ) -> None:
    """Have the host jobs' numpy run its baseline kernels only, on any processor, so that a
    rebuild gives the same bytes everywhere. numpy picks faster kernels at run time by what the
    processor offers, and its AVX-512 ones (SVML's log, exp, power) differ from the others in
    last bits: on an AVX-512 host, a log axis's coordinates moved in an SVG's sixth decimal.
    Rounding inputs cannot help where matplotlib takes the logarithm itself. Every target this
    numpy build dispatches to is disabled (AVX2 too: its tanh differs from the baseline's). The
    measuring processes drop the variable (``fwbench.measure.supervisor``): a framework is timed
    with numpy as it comes."""
    from numpy._core import _multiarray_umath

    environ[NUMPY_DISPATCH] = " ".join(_multiarray_umath.__cpu_dispatch__)


def restore_times(run_dir: str | os.PathLike) -> int:
    """Give every measured file of a run the modification time of its measurement, read from
    the results themselves (``ended_at``), and return how many files were set. A git clone or
    a copy without ``-p`` stamps files with the time of the copy, in any order; Snakemake's
    mtime trigger then takes warm-up records and first members of pairs for newer than the
    trials after them, and a resume re-measures finished trials. The run's environment
    records (idle baseline, data) come before all of them; a cell's warm-up record and profile
    come right after what they are made from (its last calibration, its last trial)."""
    run_dir = Path(run_dir)
    set_count = 0
    stamps = {}
    for result in run_dir.glob("cells/*/*/*/*/*/*.json"):
        stem = result.name.removesuffix(".json")
        if re.fullmatch(r"calibration(-\d+)?|trial-\d+", stem):
            stamp = _ended_at(result)
            if stamp is not None:
                stamps[result.parent, stem] = stamp
    step = 0.001
    last, calibrated = {}, {}
    for (cell, stem), stamp in stamps.items():
        for path in cell.glob(f"{stem}.*"):
            set_count += _set_mtime(path, stamp)
        if stem.startswith("calibration"):
            calibrated[cell] = max(stamp, calibrated.get(cell, stamp))
        last[cell] = max(stamp, last.get(cell, stamp))
    for cell, stamp in calibrated.items():
        set_count += _set_mtime(cell / "warmup.json", stamp + step)
    for cell, stamp in last.items():
        set_count += _set_mtime(cell / "profile.json", stamp + step)
    if stamps:
        first = min(stamps.values()) - 1
        for path in (run_dir / "environment").glob("*.json"):
            set_count += _set_mtime(path, first)
    return set_count


def _ended_at(result: Path) -> float | None:
    """When a result says its measurement ended (seconds since the epoch), None if it does
    not say; a result that does not read is refused before any file's time is set."""
    try:
        data = json.loads(result.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultError(f"cannot read {result}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:  # as fwbench.measure.results.read_json says it
        why = ("the file is empty" if not exc.doc.strip() else
               f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): the "
               "file is truncated or damaged")
        raise ResultError(f"cannot read {result}: {why}") from exc
    except UnicodeDecodeError as exc:
        raise ResultError(f"cannot read {result}: not UTF-8 text ({exc.reason})") from exc
    if not isinstance(data, dict):
        raise ResultError(f"cannot read {result}: it holds a JSON {type(data).__name__}, not "
                          "a result")
    ended = data.get("ended_at")
    try:
        return datetime.fromisoformat(ended).timestamp() if ended else None
    except (TypeError, ValueError):
        raise ResultError(f"{result}: ended_at {ended!r} is not an ISO 8601 time") from None


def _set_mtime(path: Path, stamp: float) -> int:
    if not path.is_file():
        return 0
    os.utime(path, (stamp, stamp))
    return 1


# The resolved config a run measured with, in its folder (fwbench.plan.config.save, when the
# run starts): what rebuilds it, and what the commands over several runs read.
RUN_CONFIG = "config.yaml"


def rebuild_arguments(run_dir: str | os.PathLike, snakefile: str | os.PathLike) -> list[str]:
    """Snakemake's arguments that rebuild results/<run>/ from its cell files alone, planned by
    the config the run saved (its RUN_CONFIG) and nothing else: not the config.yaml of the
    folder it runs in, which may have changed since."""
    run_dir = Path(run_dir).resolve()
    if run_dir.parent.name != "results":
        raise ValueError(f"{run_dir} is not a run folder: expected results/<run>")
    if not (run_dir / RUN_CONFIG).is_file():
        raise FwbenchError(
            f"{run_dir / RUN_CONFIG} is missing: a run saves the config it measured with when "
            "it starts, and rebuilds from it; copy that config there (its `run` may differ)")
    saved = yaml.safe_load((run_dir / RUN_CONFIG).read_text()) or {}
    collect = [*COLLECT_RULES, *(["collect_controls"] if saved.get("controls") else [])]
    return ["--snakefile", str(snakefile), "--directory", str(run_dir.parent.parent),
            "--cores", str(_trial_cores(saved)),
            "--configfile", str(run_dir / RUN_CONFIG), "--replace-workflow-config",
            "--config", f"run={run_dir.name}", "--forcerun", *collect,
            "--allowed-rules", *HOST_RULES]


def _trial_cores(config: dict) -> int:
    """The most cores a trial of the run took (threads per process, times the processes of a
    distributed cell, as fwbench.plan.sweep.Plan.threads counts them): the workflow refuses to
    plan trials on fewer, though a rebuild runs none."""
    processes = [1]
    if config.get("experiment") == "distributed":
        processes = config.get("distributed", {}).get("world_sizes") or processes
    return config.get("threads", 1) * max(processes)


# What a rebuild writes and its checksums, one "sha256  path" line per file: the proof that the
# shipped reference run rebuilds byte for byte (fwbench rebuild --check). Beside them, RECORDED
# keeps a copy of the tables and figures the checksums were taken from (under 2 MB a run), so
# that a table or figure which differs is shown at its first differing value, not only named.
MANIFEST = "rebuild.sha256"
RECORDED = "recorded"
TABLES = ("tables/*.parquet", "stats/*.csv", "audit/*.csv", "report/data/*.csv")
FIGURES = ("report/figures/*.svg",)
REBUILT = (*TABLES, *FIGURES, "report/data/*.html", "report/data/*.css", "report/report.html",
           "report/report.pdf", "README.md")


def manifest(run_dir: str | os.PathLike, patterns=REBUILT) -> dict[str, str]:
    """Checksum of every file a rebuild of ``run_dir`` writes (those ``patterns`` match), by
    path within the run."""
    run_dir = Path(run_dir)
    files = sorted({p for pattern in patterns for p in run_dir.glob(pattern)})
    return {p.relative_to(run_dir).as_posix(): _sha256(p) for p in files}


def write_manifest(run_dir: str | os.PathLike) -> None:
    """Record the checksums of what the rebuild wrote, and a copy of its tables and figures
    (RECORDED)."""
    from fwbench.files import staged_directory, write_atomic

    run_dir = Path(run_dir)
    digests = manifest(run_dir)
    with staged_directory(run_dir / RECORDED) as copies:
        for path in filter(_is_kept, digests):
            (copies / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run_dir / path, copies / path)
    write_atomic(run_dir / MANIFEST, "".join(f"{d}  {p}\n" for p, d in digests.items()))


def check_manifest(run_dir: str | os.PathLike, patterns=REBUILT) -> list[str]:
    """What differs between the rebuilt files and the run's recorded checksums (empty: none),
    one line per file; a table's line says where it first differs, when the run keeps its
    recorded copy. ``patterns``: only the files they match, after a rebuild that stopped
    before the report (the tables and statistics, a fraction of a full rebuild's time)."""
    run_dir = Path(run_dir)
    recorded = {path: digest for digest, path in (
        line.split("  ", 1) for line in Path(run_dir, MANIFEST).read_text().splitlines() if line)
        if _matches(path, patterns)}
    rebuilt = manifest(run_dir, patterns)
    return ([f"{p}: differs{_where(run_dir, p, recorded[p])}" for p in recorded
             if p in rebuilt and rebuilt[p] != recorded[p]]
            + [f"{p}: not rebuilt" for p in recorded if p not in rebuilt]
            + [f"{p}: rebuilt but not recorded" for p in rebuilt if p not in recorded])


def first_difference(recorded: str | os.PathLike, rebuilt: str | os.PathLike) -> str:
    """Where two versions of one table (CSV or Parquet) first differ: ``at row 129, column p:
    recorded '0.406991412431537', rebuilt '0.4069914124315368'``. Rows count from 1 under the
    header; a CSV's values are its text, a Parquet table's as Python prints them."""
    (old_columns, old), (new_columns, new) = _cells(recorded), _cells(rebuilt)
    if old_columns != new_columns:
        added = [c for c in new_columns if c not in old_columns]
        removed = [c for c in old_columns if c not in new_columns]
        if not (added or removed) or len(added) + len(removed) > 5:
            return f"in its columns: recorded {old_columns}, rebuilt {new_columns}"
        return "in its columns: " + ", ".join(
            [f"rebuilt adds {c!r}" for c in added] + [f"rebuilt lacks {c!r}" for c in removed])
    for row, (old_row, new_row) in enumerate(zip(old, new), 1):
        for column, a, b in zip(old_columns, old_row, new_row):
            if a != b:
                return f"at row {row}, column {column}: recorded {a!r}, rebuilt {b!r}"
    if len(old) != len(new):
        return f"in its number of rows: recorded {len(old)}, rebuilt {len(new)}"
    return "in its bytes only: every value is the same"


def svg_difference(recorded: str | os.PathLike, rebuilt: str | os.PathLike) -> str:
    """Where two versions of one SVG first differ: the element, counted in document order,
    and the attribute or text, from its first differing word, with the nearest element that
    has an id (matplotlib names each artist's group): ``at element 224, a <path> in <g
    id="patch_4">, attribute d: recorded 'M 25.332188', rebuilt 'M 25.332187'``. Names that
    matplotlib derives from coordinates (clip-path ids and the references to them) are shown
    only when nothing else differs."""
    from xml.etree import ElementTree

    root = ElementTree.parse(recorded).getroot()
    old, new = list(root.iter()), list(ElementTree.parse(rebuilt).iter())
    differences = list(_svg_differences(old, new))
    if differences:
        number, key, x, y = next((d for d in differences if not _is_reference(*d[1:])),
                                 differences[0])
        parents = {child: parent for parent in root.iter() for child in parent}
        named = old[number - 1]
        while named is not None and named.get("id") is None:
            named = parents.get(named)
        where = f"at element {number}, a <{_tag(old[number - 1])}>" + (
            f' in <{_tag(named)} id="{named.get("id")}">' if named is not None else "")
        if key == "tag":
            return f"{where}: rebuilt a <{y}> instead"
        x, y = _first_words(x, y)
        return f"{where}, {'text' if key is None else f'attribute {key}'}: recorded {x!r}, " \
               f"rebuilt {y!r}"
    if len(old) != len(new):
        return f"in its number of elements: recorded {len(old)}, rebuilt {len(new)}"
    return "in its bytes only: every element is the same"


def _svg_differences(old: list, new: list):
    """(element number, attribute or None for the text or "tag", recorded, rebuilt) of every
    difference between two lists of elements, in document order."""
    for number, (a, b) in enumerate(zip(old, new), 1):
        if a.tag != b.tag:
            yield number, "tag", _tag(a), _tag(b)
            return
        for key in [*sorted(a.attrib.keys() | b.attrib.keys()), None]:
            x, y = (a.get(key) if key else a.text, b.get(key) if key else b.text)
            if (x or "") != (y or ""):
                yield number, key, x or "", y or ""


def _is_reference(key: str | None, recorded: str, rebuilt: str) -> bool:
    return key == "id" or recorded.startswith(("url(#", "#"))


def _tag(element) -> str:
    return element.tag.rpartition("}")[2]


def _first_words(a: str, b: str) -> tuple[str, str]:
    """The first word where ``a`` and ``b`` differ, with the word before it."""
    x, y = a.split(), b.split()
    k = next((k for k, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
    start = max(k - 1, 0)
    return " ".join(x[start:k + 1]), " ".join(y[start:k + 1])


def _where(run_dir: Path, path: str, digest: str) -> str:
    if path.endswith(".pdf"):
        return _pdf_fonts()
    if not _is_kept(path):
        return ""
    copy = run_dir / RECORDED / path
    if not copy.is_file():
        return f" (no recorded copy, {RECORDED}/{path}, to show where)"
    if _sha256(copy) != digest:
        return f" ({RECORDED}/{path} is not the file recorded: record again to show where)"
    differ = svg_difference if path.endswith(".svg") else first_difference
    return f" {differ(copy, run_dir / path)}"


def subsets_fonts_with_harfbuzz() -> bool:
    """Whether WeasyPrint subsets the PDF's fonts with HarfBuzz-Subset (>= 4.1), as every
    recorded report was made. Without it WeasyPrint falls back to fontTools, whose subsets
    differ in their bytes (timestamps, tables), so the PDF cannot match its checksum."""
    from weasyprint.text.ffi import harfbuzz, harfbuzz_subset

    return bool(harfbuzz_subset) and bool(harfbuzz.hb_version_atleast(4, 1, 0))


def _pdf_fonts() -> str:
    if subsets_fonts_with_harfbuzz():
        return ""
    return (" (this machine lacks HarfBuzz-Subset, so WeasyPrint subset the fonts with fontTools,"
            " in other bytes than the recorded PDF's: install libharfbuzz-subset0 on Debian or"
            " Ubuntu, harfbuzz elsewhere, and rebuild)")


def _is_kept(path: str) -> bool:
    return _matches(path, (*TABLES, *FIGURES))


def _matches(path: str, patterns) -> bool:
    return any(PurePosixPath(path).match(pattern) for pattern in patterns)


def _cells(path: str | os.PathLike) -> tuple[list[str], list[list[str]]]:
    """A table's column names and its rows, each value as text."""
    if Path(path).suffix == ".parquet":
        import pandas as pd

        table = pd.read_parquet(path).to_dict("split")
        return list(table["columns"]), [[str(v) for v in row] for row in table["data"]]
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return (rows[0] if rows else []), rows[1:]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- why a run failed ----------------------------------------------------------------------

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


# --- progress of a sweep ------------------------------------------------------------------

# The environment variable naming the file descriptor a trial job writes its progress line to:
# the terminal's stderr, kept open by the job's shell while the trial's own output goes to its
# log (rules/benchmark.smk).
PROGRESS_FD = "FWBENCH_PROGRESS_FD"
FAILED = ("oom", "timeout", "error", "crashed")


def planned_list(run_dir: str | os.PathLike) -> Path:
    """The run's planned trial results, one path a line, written when a run starts."""
    return Path(run_dir, "progress", "planned.txt")


def write_planned(trial_paths: list[str], run_dir: str | os.PathLike) -> None:
    """Record the plan's trial results for the progress lines of this run's trials."""
    path = planned_list(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(f"{p}\n" for p in trial_paths))
    os.replace(tmp, path)


def progress(run_dir: str | os.PathLike) -> dict | None:
    """Trials planned, finished, failed and unsupported, and the seconds each trial still to
    run is expected to take (the mean duration of the finished ones), from the result files
    present now. Adding the median pause between trials (job start-up) made the estimate worse
    on the default run: 25% mean absolute error of the time left against 17% without.

    Each result is read once: its status and times are kept in progress/seen.tsv, keyed by path
    and modification time, so a trial job reads only the results new since the last one (and
    stats every planned path: 10,000 in about 20 ms). None when the run recorded no plan (a
    trial run by hand)."""
    try:
        planned = planned_list(run_dir).read_text().splitlines()
    except OSError:
        return None
    cache_path = planned_list(run_dir).with_name("seen.tsv")
    seen = _read_seen(cache_path)
    finished, changed = {}, False
    for path in planned:
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            continue
        entry = seen.get(path)
        if entry is None or entry[0] != mtime:
            entry = (mtime, *_status_and_times(path))
            changed = True
        finished[path] = entry
    if changed or len(finished) != len(seen):
        _write_seen(cache_path, finished)
    statuses = [status for _, status, _, _ in finished.values()]
    durations = [end - start for _, _, start, end in finished.values() if start is not None]
    per_trial = sum(durations) / len(durations) if durations else None
    return {"planned": len(planned), "done": len(finished),
            "failed": sum(s in FAILED for s in statuses),
            "unsupported": statuses.count("unsupported"), "per_trial_s": per_trial}


def progress_line(state: dict) -> str:
    """``fwbench: trial 17/72 done (1 failed) · ~4 min 10 s left``."""
    notes = [f"{state['failed']} failed"]
    if state["unsupported"]:
        notes.append(f"{state['unsupported']} unsupported")
    left = state["planned"] - state["done"]
    if not left:
        eta = "all planned trials done"
    elif state["per_trial_s"] is None:
        eta = "time left unknown"
    else:
        eta = f"~{_duration(left * state['per_trial_s'])} left"
    return f"fwbench: trial {state['done']}/{state['planned']} done ({', '.join(notes)}) · {eta}"


def report_progress(result_path: str | os.PathLike) -> None:
    """After a trial: its run's progress line to the descriptor named by FWBENCH_PROGRESS_FD,
    when a workflow job set it. Never fails the trial."""
    fd = os.environ.get(PROGRESS_FD)
    parts = Path(result_path).parts
    if not fd or "cells" not in parts:
        return
    try:
        state = progress(Path(*parts[:parts.index("cells")]))
        if state:
            os.write(int(fd), (progress_line(state) + "\n").encode())
    except (OSError, ValueError) as exc:
        print(f"fwbench: no progress line: {exc}", file=sys.stderr)


def _status_and_times(path: str) -> tuple[str, float | None, float | None]:
    """A result's status, and its start and end as seconds since the epoch (None if absent)."""
    with open(path) as f:
        result = json.load(f)
    try:
        start, end = (datetime.fromisoformat(result[k]).timestamp()
                      for k in ("started_at", "ended_at"))
    except (KeyError, TypeError, ValueError):
        start = end = None
    return result.get("status", "error"), start, end


def _read_seen(path: Path) -> dict[str, tuple]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    seen = {}
    for line in lines:
        fields = line.split("\t")
        if len(fields) == 5:
            start, end = (float(v) if v else None for v in fields[3:])
            seen[fields[0]] = (int(fields[1]), fields[2], start, end)
    return seen


def _write_seen(path: Path, seen: dict) -> None:
    def text(value) -> str:
        return "" if value is None else repr(value)

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(f"{p}\t{m}\t{s}\t{text(a)}\t{text(b)}\n"
                           for p, (m, s, a, b) in seen.items()))
    os.replace(tmp, path)


def _duration(seconds: float) -> str:
    """4 min 10 s, 1 h 5 min, 40 s."""
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"
