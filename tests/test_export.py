"""`fwbench export <run>`: tidy files per table, a data dictionary of every column, MLflow."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

import fwbench
from fwbench.analysis.export import describe_column, dictionary, export_run
from tests.conftest import REBUILT_REFERENCE
from tests.reference_runs import REFERENCE, copy_shipped

REPO = Path(__file__).resolve().parent.parent
FWBENCH = [sys.executable, "-m", "fwbench"]


@pytest.fixture
def reference_run(rebuilt_reference) -> Path:
    """The shipped reference run, rebuilt (no experiment) in a folder of its own."""
    return rebuilt_reference.run


@pytest.mark.slow
@pytest.mark.xdist_group(REBUILT_REFERENCE)
def test_export_writes_every_table_in_both_formats_with_its_dictionary(reference_run):
    proc = subprocess.run([*FWBENCH, "export", str(reference_run)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    out = reference_run / "export"
    sources = sorted(reference_run.glob("tables/*.parquet")) + sorted(
        reference_run.glob("stats/*.csv"))
    data = json.loads((out / "data_dictionary.json").read_text())
    assert data["fwbench_version"] == fwbench.__version__ and data["run"] == "reference"
    assert sorted(data["tables"]) == sorted(f"{p.parent.name}/{p.stem}" for p in sources)
    assert data["undocumented"] == [], (
        f"add these columns to fwbench/data_dictionary.yaml: {data['undocumented']}")
    for source in sources:
        name = f"{source.parent.name}/{source.stem}"
        original = (pd.read_parquet(source) if source.suffix == ".parquet"
                    else pd.read_csv(source))
        table = data["tables"][name]
        assert table["row"], name
        assert [c["name"] for c in table["columns"]] == list(original.columns)
        for column in table["columns"]:
            assert column["unit"] in data["units"] and column["description"], (name, column)
        assert table["files"] == [f"{name}.parquet", f"{name}.csv"]
        parquet = pd.read_parquet(out / f"{name}.parquet")
        if source.suffix == ".csv":  # an empty CSV field comes back from Parquet as a null
            parquet, original = (f.astype(object).where(f.notna(), None)
                                 for f in (parquet, original))
        pd.testing.assert_frame_equal(parquet, original, check_dtype=source.suffix == ".parquet")
        assert len(pd.read_csv(out / f"{name}.csv")) == len(original) == table["rows"]
    trials = data["tables"]["tables/trials"]["columns"]
    units = {c["name"]: c["unit"] for c in trials}
    assert units["median_ns"] == "ns" and units["peak_rss_bytes"] == "B"
    assert units["energy_j"] == "J" and units["fwbench_version"] == "version"
    csv = pd.read_csv(out / "tables" / "trials.csv")
    assert csv["started_at"].str.match(r"\d{4}-\d\d-\d\dT").all()  # ISO 8601, as in the JSON


@pytest.mark.slow
@pytest.mark.xdist_group(REBUILT_REFERENCE)
def test_export_one_format_and_mlflow_absent(reference_run, tmp_path):
    pytest.importorskip("pyarrow")
    if subprocess.run([sys.executable, "-c", "import mlflow"]).returncode == 0:
        pytest.skip("mlflow is installed here; this checks the message when it is not")
    out = tmp_path / "csv"
    assert subprocess.run([*FWBENCH, "export", str(reference_run), "--format", "csv", "--out",
                           str(out)], check=True).returncode == 0
    assert not list(out.rglob("*.parquet")) and (out / "stats" / "comparisons.csv").exists()
    proc = subprocess.run([*FWBENCH, "export", str(reference_run), "--mlflow", "--out",
                           str(tmp_path / "m")], capture_output=True, text=True)
    assert proc.returncode == 2 and "pip install mlflow" in proc.stderr
    assert not (tmp_path / "m").exists()  # it failed before writing anything


class FakeMlflow(types.ModuleType):
    """FAKE mlflow: records the calls export makes (mlflow is not in fwbench's lock)."""

    def __init__(self):
        super().__init__("mlflow")
        self.calls = []
        for name in ("set_tracking_uri", "set_experiment", "set_tags", "log_params",
                     "log_metrics", "log_artifacts", "log_artifact"):
            setattr(self, name, lambda *a, _n=name, **k: self.calls.append((_n, a, k)))

    def start_run(self, **kwargs):
        self.calls.append(("start_run", (), kwargs))
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.calls.append(("end_run", (), {}))


def test_mlflow_run_holds_settings_ratios_and_files(tmp_path, monkeypatch):
    run_dir = tmp_path / "results" / "r"
    (run_dir / "stats").mkdir(parents=True)
    (run_dir / "config.yaml").write_text("trials: 3\nmodels: {lenet5: {}}\n")
    pd.DataFrame({"pair_id": ["p1", "p2"], "ratio": [1.5, float("nan")]}).to_csv(
        run_dir / "stats" / "comparisons.csv", index=False)
    fake = FakeMlflow()
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    written = export_run(run_dir, tmp_path / "out", formats=["csv"], mlflow=True)
    calls = {name: (args, kwargs) for name, args, kwargs in fake.calls}
    assert calls["start_run"][1] == {"run_name": "r"}
    params = calls["log_params"][0][0]
    assert params["fwbench_version"] == fwbench.__version__ and params["config.trials"] == "3"
    assert calls["log_metrics"][0][0] == {"ratio/p1": 1.5}   # NaN ratios are not logged
    assert calls["log_artifacts"][0][0] == str(tmp_path / "out" / "stats")
    assert [n for n, _, _ in fake.calls][-1] == "end_run"
    assert written[-1] == tmp_path / "out" / "mlruns"


def test_unknown_columns_get_a_unit_from_their_name_and_are_listed(tmp_path):
    assert describe_column("stats/cells", "p99_ns")[::2] == ("ns", False)
    assert describe_column("stats/strategies", "ratio")[1].startswith("multi-process")
    assert describe_column("stats/comparisons", "ratio")[1].startswith("PyTorch median")
    run_dir = tmp_path / "results" / "r"
    (run_dir / "tables").mkdir(parents=True)
    pd.DataFrame({"run": ["r"], "new_thing_bytes": [1]}).to_parquet(
        run_dir / "tables" / "trials.parquet")
    export_run(run_dir, formats=["parquet"])
    data = json.loads((run_dir / "export" / "data_dictionary.json").read_text())
    assert data["undocumented"] == ["tables/trials.new_thing_bytes"]
    assert data["tables"]["tables/trials"]["columns"][1]["unit"] == "B"


def test_every_unit_in_the_dictionary_is_explained():
    d = dictionary()
    entries = list(d["columns"].values()) + [e for t in d["overrides"].values()
                                             for e in t.values()]
    assert {unit for unit, _ in entries} <= set(d["units"])
    assert all(len(e) == 2 and e[1] for e in entries)


def test_a_run_without_tables_says_how_to_make_them(tmp_path):
    (tmp_path / "results" / "r" / "cells").mkdir(parents=True)
    proc = subprocess.run([*FWBENCH, "export", "results/r"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert proc.returncode == 2 and "fwbench rebuild results/r" in proc.stderr


def test_a_shipped_run_not_rebuilt_here_exports_its_recorded_tables(tmp_path):
    """As in a fresh clone: git gives a shipped run its recorded/ tables, no tables/ or stats/."""
    run = copy_shipped(REFERENCE, tmp_path)
    written = export_run(run, formats=["csv"])
    data = json.loads((run / "export" / "data_dictionary.json").read_text())
    recorded = sorted(run.glob("recorded/tables/*.parquet")) + sorted(
        run.glob("recorded/stats/*.csv"))
    assert sorted(data["tables"]) == sorted(f"{p.parent.name}/{p.stem}" for p in recorded)
    assert data["source"] == str(run / "recorded") and len(written) == len(recorded) + 1
