"""Trial k of both frameworks of a cell runs back to back in a real Snakemake run, across cell
groups, with no trial or profiled run between them; re-measuring one member re-measures only
that member (its pair is then recorded as apart, nothing else is lost). A run of twice as many
cell groups on the ordering before pairs had priorities (every trial waiting for the one
planned before it in its group) left 6 of its 16 pairs apart, up to 16 trials."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fwbench.plan.config import validate
from fwbench.plan.sweep import Plan
from tests.conftest import snakemake

pytestmark = pytest.mark.slow


def _trial_times(run: Path) -> list[dict]:
    """Every trial result of the run, in the order the trials started."""
    results = [json.loads(p.read_text()) for p in run.rglob("trial-*.json")
               if p.name.count(".") == 1]
    return sorted(results, key=lambda r: r["started_at"])


def _cell_files(run: Path) -> dict[Path, tuple[int, bytes]]:
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (run / "cells").rglob("*")
            if p.is_file()}


def _assert_aggregates(run: Path) -> None:
    versions = pd.read_csv(run / "audit" / "versions.csv")
    python = versions[versions["item"] == "python"]
    assert python.groupby("framework")["trials"].sum().to_dict() == {
        "pytorch": 4, "tensorflow": 4}
    trace = pd.read_parquet(run / "tables" / "telemetry_trace.parquet")
    assert {"marker", "cpu"} <= set(trace["source"])


def test_pairs_run_back_to_back_and_a_deleted_member_is_remeasured_alone(tmp_path, tiny_config):
    # 2 cell groups (a real and a too-small input shape), 2 trials.
    tiny_config.update(run="pairs", trials=2, phases=["infer"], batch_sizes=[2],
                       models={"lenet5": {"input_shapes": [[1, 28, 28], [1, 8, 8]]}},
                       profiling={"steps": 2})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(tiny_config))
    plan = Plan.from_config(validate(dict(tiny_config)))
    assert len({t.cell.pair_id for t in plan.trials}) == 2 and len(plan.trials) == 8
    run = tmp_path / "results" / "pairs"
    targets = [f"results/pairs/{name}" for name in (
        "tables/trials.parquet", "tables/profiles.parquet", "tables/telemetry_trace.parquet",
        "audit/versions.csv")]
    done = snakemake(tmp_path, "--configfile", "config.yaml", "--cores", "2", *targets)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    # Each trial job printed where the sweep is.
    counts = re.findall(r"^fwbench: trial (\d+)/8 done \(0 failed(?:, \d+ unsupported)?\) · ",
                        done.stderr, re.MULTILINE)
    assert list(map(int, counts)) == list(range(1, 9)), done.stderr[-3000:]
    assert "fwbench: trial 8/8 done (0 failed, 4 unsupported) · all planned trials done" \
        in done.stderr

    # From the recorded times: the two members of every pair started one after the other.
    started = [(r["pair_id"], r["trial"]) for r in _trial_times(run)]
    assert len(started) == 8
    for position in range(0, 8, 2):
        assert started[position] == started[position + 1], started
    # The idle baseline was measured before any trial started (only first members name it).
    idle_written = (run / "environment" / "idle.json").stat().st_mtime
    assert all(pd.Timestamp(r["started_at"]).timestamp() > idle_written
               for r in _trial_times(run))
    # The aggregates that read trial files but take only the trials table as input found them
    # all: every trial's env.json in the audit, the chosen trial's samples and markers.
    _assert_aggregates(run)
    # The trials table says the same.
    trials = pd.read_parquet(run / "tables" / "trials.parquet")
    assert trials["pair_adjacent"].all() and (trials["pair_gap_trials"] == 0).all()
    assert trials["pair_gap_s"].between(0, 60).all()
    # Profiled runs come after every trial, never between the members of a pair.
    last_end = max(pd.to_datetime(trials["ended_at"])).timestamp()
    profiles = list(run.rglob("profile.json"))
    assert len(profiles) == 4 and all(p.stat().st_mtime > last_end for p in profiles)

    # Delete the second member of the first pair that ran and ask for it again (Snakemake
    # re-creates a missing file only when asked for it or for something newer than it): only
    # it is measured again; its pair is recorded as apart.
    first = _trial_times(run)[1]
    second = next(t for t in plan.trials if t.cell.id == first["cell_id"]
                  and t.index == first["trial"])
    assert plan.partner_before(second) is not None
    for suffix in ("json", "env.json", "telemetry.csv", "telemetry.json"):
        (tmp_path / second.path(plan.run, suffix)).unlink()
    before = _cell_files(run)
    again = snakemake(tmp_path, "--configfile", "config.yaml", "--cores", "2",
                      second.path(plan.run), *targets)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    after = _cell_files(run)
    changed = {p for p in after if before.get(p) != after[p]}
    assert changed == {tmp_path / second.path(plan.run, s)
                       for s in ("json", "env.json", "telemetry.csv", "telemetry.json")}
    # The re-measured trial re-made the aggregates through the trials table.
    for rule in ("collect_tables", "collect_telemetry_trace", "audit_versions"):
        assert re.search(rf"^(local)?rule {rule}:", again.stdout + again.stderr, re.MULTILINE), rule
    _assert_aggregates(run)
    trials = pd.read_parquet(run / "tables" / "trials.parquet")
    apart = trials[~trials["pair_adjacent"]]
    assert set(zip(apart["cell_id"], apart["trial"])) == {
        (second.cell.id, second.index), (plan.partner_before(second).cell.id, second.index)}
    assert (apart["pair_gap_trials"] == len(plan.trials) - 2).all()   # every other trial
