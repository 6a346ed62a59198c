"""``fwbench export <run>``: a run's tables and statistics as tidy files for other tools.

One file per table and format under ``<out>/tables/`` and ``<out>/stats/`` (Parquet keeps the
types and every bit; CSV is for spreadsheets and R, floats at fwbench.files.CSV_DIGITS
significant digits), and ``data_dictionary.json``: per table what a row is, and per column its
type, unit and meaning, from ``fwbench/data_dictionary.yaml``. The tables are the run's rebuilt
ones or, where it was not rebuilt here, the recorded copy a shipped run keeps
(``run_folder.tables_folder``). With ``mlflow=True`` it also logs one MLflow run: the run's
settings as parameters, each comparison's ratio and each cell's median as metrics, and the
exported files as artifacts.

Usage::

    export_run("results/reference")                       # -> results/reference/export/
    export_run("results/reference", "out", formats=("csv",), mlflow=True)
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from functools import cache
from pathlib import Path

import yaml

from fwbench import __version__
from fwbench.analysis.run_folder import tables_folder
from fwbench.errors import FwbenchError, ResultError
from fwbench.files import write_atomic, write_csv

DICTIONARY = Path(__file__).with_name("data_dictionary.yaml")
FORMATS = ("parquet", "csv")
SOURCES = (("tables", ".parquet"), ("stats", ".csv"))
UNDOCUMENTED = "not in fwbench/data_dictionary.yaml yet"
# Units a column's name implies, for a column the dictionary does not know yet.
SUFFIX_UNITS = (("_ns", "ns"), ("_bytes", "B"), ("_sps", "samples/s"), ("_j", "J"), ("_w", "W"),
                ("_pct", "%"), ("_c", "°C"), ("_mhz", "MHz"), ("_s", "s"), ("_p", "probability"))


@cache
def dictionary() -> dict:
    return yaml.safe_load(DICTIONARY.read_text())


def describe_column(table: str, name: str) -> tuple[str, str, bool]:
    """``(unit, meaning, documented)`` of column ``name`` of ``table`` (e.g. "stats/cells")."""
    d = dictionary()
    entry = (d.get("overrides", {}).get(table) or {}).get(name) or d["columns"].get(name)
    if entry:
        return entry[0], entry[1], True
    unit = next((u for suffix, u in SUFFIX_UNITS if name.endswith(suffix)), "")
    return unit, UNDOCUMENTED, False


def load_tables(folder: Path) -> dict:
    """``{"tables/trials": DataFrame, "stats/cells": DataFrame, …}`` under ``folder`` (a run's,
    or its recorded copy)."""
    return {f"{sub}/{path.stem}": read_table(path) for sub, suffix in SOURCES
            for path in sorted((folder / sub).glob(f"*{suffix}"))}


def read_table(path: Path, required: tuple[str, ...] = ()):
    """One table (Parquet or CSV) as a DataFrame; one that does not read, or lacks a
    ``required`` column (a CSV cut short in its header), raises one ResultError naming it."""
    import pandas as pd

    try:
        table = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except pd.errors.EmptyDataError:  # a statistic with no row has no header either
        table = pd.DataFrame()
    except (OSError, ValueError) as exc:  # missing, cut short or damaged
        raise ResultError(f"cannot read table {path}: {' '.join(str(exc).split())}") from exc
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ResultError(f"cannot read table {path}: it has no column {', '.join(missing)}")
    return table


def export_run(run_dir, out=None, *, formats=None, mlflow: bool = False,
               mlflow_uri: str | None = None) -> list[Path]:
    """Write the run's tables, the data dictionary and, if asked, an MLflow run; returns the
    files written."""
    run_dir = Path(run_dir)
    out = Path(out) if out else run_dir / "export"
    if out.exists() and not out.is_dir():
        raise FwbenchError(f"{out} is a file; export into a folder")
    formats = tuple(dict.fromkeys(formats or FORMATS))
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise FwbenchError(f"unknown export format {', '.join(sorted(unknown))}; "
                           f"choose from {', '.join(FORMATS)}")
    source = tables_folder(run_dir)
    tables = load_tables(source)
    if not tables:
        raise FwbenchError(f"{run_dir} has no tables/*.parquet or stats/*.csv yet; make them "
                           f"with `fwbench rebuild {run_dir}` (or run the workflow), then export")
    if mlflow:  # before writing anything: fail early, naming the fix
        _import_mlflow()
        params = mlflow_params(run_dir)
    written = []
    files: dict[str, list[str]] = {}
    for name, frame in tables.items():
        for fmt in formats:
            path = out / f"{name}.{fmt}"
            _write(frame, path, fmt)
            written.append(path)
            files.setdefault(name, []).append(path.relative_to(out).as_posix())
    data = data_dictionary(tables, files, run=run_dir.name, source=source)
    path = out / "data_dictionary.json"
    write_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    written.append(path)
    if mlflow:
        written.append(log_mlflow(run_dir, tables, out, mlflow_uri, params))
    return written


def data_dictionary(tables: dict, files: dict, *, run: str, source) -> dict:
    """What every exported table holds: its rows, and each column's type, unit and meaning."""
    d = dictionary()
    out = {"fwbench_version": __version__, "run": run, "source": str(source),
           "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "units": d["units"], "tables": {}, "undocumented": []}
    for name, frame in tables.items():
        columns = []
        for column, dtype in frame.dtypes.items():
            unit, meaning, documented = describe_column(name, column)
            if not documented:
                out["undocumented"].append(f"{name}.{column}")
            columns.append({"name": column, "type": _type(frame[column], dtype), "unit": unit,
                            "description": meaning})
        out["tables"][name] = {"rows": len(frame), "row": d["tables"].get(name, ""),
                               "files": files.get(name, []), "columns": columns}
    return out


def _type(series, dtype) -> str:
    kind = getattr(dtype, "kind", "O")
    if kind == "O":  # pandas stores text, all-empty and mixed columns alike
        values = series.dropna()
        if values.empty:
            return "empty"
        first = values.iloc[0]
        return {bool: "boolean", int: "integer", float: "float"}.get(type(first), "string")
    return {"b": "boolean", "i": "integer", "u": "integer", "f": "float",
            "M": "timestamp", "m": "duration"}.get(kind, "string")


def _write(frame, path: Path, fmt: str) -> None:
    if fmt == "parquet":
        write_atomic(path, frame.to_parquet(index=False))
    else:
        flat = frame.copy()
        for column in flat.columns:
            if getattr(flat[column].dtype, "kind", "") == "M":  # ISO 8601, as in the JSON results
                flat[column] = flat[column].map(lambda t: t.isoformat() if t == t else None)
            # nested values (lists, dicts) as JSON, not Python's repr
            elif flat[column].dtype == object and flat[column].map(
                    lambda v: isinstance(v, (list, dict, tuple))).any():
                flat[column] = flat[column].map(
                    lambda v: json.dumps(_plain(v)) if isinstance(v, (list, dict, tuple)) else v)
        write_csv(flat, path)


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return [_plain(v) for v in value]
    return value.item() if hasattr(value, "item") else value


# --- MLflow --------------------------------------------------------------------------------

def _import_mlflow():
    try:
        import mlflow
    except ImportError:
        raise FwbenchError("--mlflow needs the mlflow package, which is not installed; "
                           "`pip install mlflow` (it is not part of fwbench's locked "
                           "environment), or export without --mlflow") from None
    return mlflow


_KEY = re.compile(r"[^A-Za-z0-9_\-./ ]")


def mlflow_params(run_dir: Path) -> dict:
    """The MLflow parameters: fwbench's version, the run, and each key of its config.yaml."""
    from fwbench.plan.config import read

    params = {"fwbench_version": __version__, "run": run_dir.name}
    config = run_dir / "config.yaml"
    if config.is_file():
        for key, value in read(config).items():
            params[f"config.{key}"] = json.dumps(value, sort_keys=True)[:500]
    return params


def log_mlflow(run_dir: Path, tables: dict, out: Path, uri: str | None,
               params: dict) -> Path:
    """One MLflow run holding the run's settings (``params``), its headline numbers and the
    exported files. Returns the tracking folder (or the URI's path)."""
    mlflow = _import_mlflow()
    uri = uri or (out / "mlruns").resolve().as_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("fwbench")
    metrics = {}
    for _, row in tables.get("stats/comparisons", _empty()).iterrows():
        if row.get("ratio") == row.get("ratio"):  # not NaN
            metrics[_KEY.sub("_", f"ratio/{row['pair_id']}")] = float(row["ratio"])
    for _, row in tables.get("stats/cells", _empty()).iterrows():
        if row.get("median_ns") == row.get("median_ns"):
            metrics[_KEY.sub("_", f"median_ns/{row['cell_id']}")] = float(row["median_ns"])
    with mlflow.start_run(run_name=run_dir.name):
        mlflow.set_tags({"fwbench.source": str(run_dir.resolve())})
        mlflow.log_params(params)
        if metrics:
            mlflow.log_metrics(metrics)
        for folder in ("tables", "stats"):
            if (out / folder).is_dir():
                mlflow.log_artifacts(str(out / folder), artifact_path=folder)
        mlflow.log_artifact(str(out / "data_dictionary.json"))
    return Path(uri.removeprefix("file://")) if uri.startswith("file://") else Path(uri)


def _empty():
    import pandas as pd

    return pd.DataFrame()
