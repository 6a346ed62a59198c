"""`fwbench compare RUN_A RUN_B`: each shared cell's ratio B/A with its interval and verdict
under one error control, what differs between the environments, the CSV and HTML it writes,
and the exit status --fail-on-slowdown gives. The runs are copies of the reference run's trial
files, one framework's times scaled in a copy."""

from __future__ import annotations

import csv
import math

import pytest

from fwbench.analysis.compare import compare_runs, compare_unpaired, slowdowns
from fwbench.analysis.run_folder import load_run
from fwbench.cli import main
from fwbench.files import CSV_DIGITS
from tests.reference_runs import CELLS, copy_run, move_machine, slow_down, small_run

PYTORCH, TENSORFLOW = "/pytorch/", "/tensorflow/"
# PyTorch's times in the slowed copy, multiplied: enough for every cell's interval of the
# reference's 8 pairs to lie above 1 (at 1.3 one cell's reached down to 0.9998).
SLOWER = 1.5


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """results/a (the reference run), results/same (a copy), results/slow (a copy whose PyTorch
    trials are 50 % slower, moved to another host and CPU with another numpy)."""
    results = tmp_path_factory.mktemp("compare") / "results"
    a, same, slow = (copy_run(results / name) for name in ("a", "same", "slow"))
    slow_down(slow, "pytorch", SLOWER)
    move_machine(slow, hostname="other", cpu_model="Intel Xeon", numpy="9.9.9")
    return a, same, slow


def _cells(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_run_compared_with_itself_shows_no_change(runs, capsys):
    a, same, _ = runs
    out = a.parent / "self"
    assert main(["compare", str(a), str(same), "--out", str(out),
                 "--fail-on-slowdown", "10"]) == 0
    text = capsys.readouterr().out
    assert "machine: the same (host vm; CPU model AMD EPYC" in text
    assert "versions: no item of the version audit differs" in text
    cells = _cells(out / "compare.csv")
    assert len(cells) == len(CELLS) and {c["verdict"] for c in cells} <= {"same", "inconclusive"}
    assert all(float(c["ratio"]) == 1.0 and c["family_size"] == str(len(CELLS)) for c in cells)
    # "same" exactly where the equivalence interval lies within the margin (how many do depends
    # on the run's spread: the reference's 8 trials a side leave some too wide)
    for c in cells:
        inside = (float(c["rope_low"]) <= float(c["equivalence_ci_low"])
                  and float(c["equivalence_ci_high"]) <= float(c["rope_high"]))
        assert (c["verdict"] == "same") == inside, c["cell_id"]
    assert "Every cell, B against A" in (out / "compare.html").read_text()


def test_one_framework_made_50_percent_slower_is_found(runs, capsys):
    a, _, slow = runs
    assert main(["compare", str(a), str(slow), "--fail-on-slowdown", "10"]) == 1
    text, errors = capsys.readouterr()
    cells = _cells(a.parent / "compare-a-slow" / "compare.csv")
    pytorch = [c for c in cells if PYTORCH in c["cell_id"]]
    tensorflow = [c for c in cells if TENSORFLOW in c["cell_id"]]
    assert all(math.isclose(float(c["ratio"]), SLOWER, rel_tol=1e-3) for c in pytorch)
    assert {c["verdict"] for c in pytorch} == {"slower"}
    assert not [c for c in tensorflow if c["verdict"] in ("slower", "faster")]
    assert all(float(c["ratio"]) == 1.0 for c in tensorflow)
    # the environment first, then the cells; each slowdown named on stderr
    assert text.index("CPU model: AMD EPYC -> Intel Xeon") < text.index("B/A")
    assert "host: vm -> other" in text and "package numpy" in text
    assert "machine: the same" not in text and "machine: alike only in (CPU cores" in text
    assert errors.count("is slower in B by more than 10%") == len(pytorch) == len(CELLS) // 2
    # the one CSV writer: every float at the stated precision, whatever the BLAS kernel gave
    floats = [v for c in cells for v in c.values() if _is_float(v)]
    assert floats and all(v == repr(float(f"{float(v):.{CSV_DIGITS}g}")) for v in floats)
    assert any(len(v.lstrip("-0.").replace(".", "")) > 6 for v in floats)  # not rounded coarser


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return "." in text or "e" in text.lower()


def test_fail_on_slowdown_needs_the_whole_interval_above_the_threshold(runs):
    a, _, slow = runs
    comparison = compare_runs(load_run(a), load_run(slow))
    assert len(slowdowns(comparison, 10)) == len(CELLS) // 2     # every PyTorch cell
    # 50 % slower is surely more than a threshold slower only where the interval is narrow
    # enough: between the lowest and the highest lower bound, some cells pass and some not
    # (where the bounds lie depends on the reference's spread, so they are read from it)
    lows = sorted(comparison.compared.loc[
        comparison.compared["cell_id"].str.contains(PYTORCH, regex=False), "ratio_ci_low"])
    between = (lows[0] + lows[-1]) / 2
    gated = slowdowns(comparison, (between - 1) * 100)
    assert 0 < len(gated) < len(CELLS) // 2 and (gated["ratio_ci_low"] > between).all()
    above = math.ceil((lows[-1] - 1) * 100) + 1
    assert slowdowns(comparison, above).empty
    assert main(["compare", str(a), str(slow), "--fail-on-slowdown", str(above)]) == 0


def test_runs_that_share_only_some_cells(tmp_path):
    """A holds lenet5 only; B holds lenet5's inference cells and resnet18: only lenet5's
    inference cells are compared, and the error control counts only them."""
    a = copy_run(tmp_path / "results" / "a", keep=lambda cell: "lenet5" in str(cell))
    b = copy_run(tmp_path / "results" / "b", keep=lambda cell: "lenet5/train" not in str(cell))
    comparison = compare_runs(load_run(a), load_run(b))
    cells = comparison.cells
    compared = comparison.compared
    assert sorted(compared["cell_id"]) == sorted(c for c in cells["cell_id"]
                                                 if "lenet5/infer" in c)
    shared = sum("lenet5/infer" in cell.as_posix() for cell in CELLS)
    assert len(compared) == shared and set(compared["family_size"]) == {shared}
    notes = cells.set_index("cell_id")["note"]
    assert {notes[c] for c in cells["cell_id"] if "lenet5/train" in c} == {"only in run A"}
    assert {notes[c] for c in cells["cell_id"] if "resnet18" in c} == {"only in run B"}
    assert len(cells) == len(CELLS)


def test_a_merged_run_is_refused(tmp_path):
    """Its cells pool machines: compare the runs it came from."""
    from fwbench.analysis.merge import merge_runs
    from fwbench.errors import FwbenchError

    sources = [small_run(tmp_path / "results" / n) for n in ("x", "y")]
    merged = tmp_path / "results" / "xy"
    merge_runs(sources, merged)
    with pytest.raises(FwbenchError, match="merged from 2 runs"):
        compare_runs(load_run(sources[0]), load_run(merged))


def test_equal_runs_with_little_spread_are_the_same():
    steps = [1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.00, 1.01]
    assert compare_unpaired(steps, steps[::-1], family_size=4)["verdict"] == "same"
    assert compare_unpaired(steps, [2 * s for s in steps], family_size=4)["verdict"] == "slower"
