"""The one formatting layer (fwbench.analysis.claims.numbers): every number the report writes
goes through ``fmt(value, quantity)``, rounded to the digits of its quantity, with its unit;
the short names the sections use are that function; and no module of the report rounds a
number another way."""

from __future__ import annotations

import math
import re

import pytest

from fwbench import SOURCE_DIR
from fwbench.analysis.claims import wording
from fwbench.analysis.claims.numbers import QUANTITIES, fmt
from fwbench.report import formatting


@pytest.mark.parametrize(("value", "quantity", "text"), [
    (0.84712, "ratio", "0.847"), (1.4, "ratio", "1.40"), (1234.5, "value", "1234"),
    (0.99996, "ratio", "1.00"),                       # rounds up to a new digit, still 3
    (3.2e-5, "value", "3.20 × 10⁻⁵"), (0, "value", "0"),
    (812, "duration", "812 ns"), (228_400, "duration", "228 µs"), (2.44e6, "duration", "2.44 ms"),
    (1.2e9, "duration", "1.20 s"),
    (3.896559845095909e-18, "p", "3.9 × 10⁻¹⁸"), (0.4851894147442428, "p", "0.485"),
    (0.95, "level", "95 %"), (0.875, "level", "87.5 %"), (0.456, "share", "46 %"),
    (0.8307, "accuracy", "83.1 %"), (85, "utilization", "85.0 %"),
    (3 * 2**20, "memory", "3.00 MiB"), (0.9, "setting", "0.9"), (10, "setting", "10"),
    (0.223, "log_ratio", "+0.223"), (0.67, "ratio_tick", "0.67×"), (1, "ratio_tick", "1×"),
    (100, "tick", "100"), (1000, "tick", "1k"), (20_000, "tick", "20k"), (1e9, "tick", "1G"),
    (0.05, "tick", "0.05"), (2.25, "tick", "2.25"), (0.83, "ratio_cell", "0.83"),
    (7.0, "count", "7"),
])
def test_each_quantity_is_written_with_its_digits_and_unit(value, quantity, text):
    assert fmt(value, quantity) == text


def test_the_unit_can_be_left_to_a_header_and_bounds_keep_their_estimates_unit():
    assert fmt(0.8307, "accuracy", unit=False) == "83.1"
    assert fmt(3 * 2**20, "memory", unit=False) == "3.00"
    assert fmt(1.5e6, "duration", unit=False, like=228_400) == "1500"   # in µs, as 228 µs
    assert fmt(math.nan, "ratio") == "not measured"


def test_every_quantity_writes_a_number_and_the_short_names_are_fmt():
    for quantity in QUANTITIES:
        assert re.search(r"\d", fmt(0.5, quantity)), quantity
    assert wording.sig(0.84712) == fmt(0.84712, "value")
    assert wording.ratio(1.4) == fmt(1.4, "ratio")
    assert wording.fmt_duration(2.44e6) == fmt(2.44e6, "duration")
    assert wording.fmt_p(1e-9) == fmt(1e-9, "p")
    assert wording.percent(0.95) == fmt(0.95, "level")
    assert wording.count(1.0, "trial") == "1 trial" and wording.count(3, "trial") == "3 trials"
    assert formatting.fmt is fmt


# A format specification that rounds (":.3f", ":.0%", ":g", ":.2e") or round( in a module of the
# report: numbers are written by fmt only.
ROUNDING = re.compile(r"\{[^{}]*:[+ ]?\.?\d*[efgG%]\}|:\.\d+[efgG%]|\bround\(\s*[^,()]+,\s*\d\)")


def test_no_module_of_the_report_rounds_a_number_itself():
    modules = sorted((SOURCE_DIR / "fwbench" / "report").rglob("*.py"))
    modules += sorted((SOURCE_DIR / "fwbench" / "analysis" / "claims").glob("*.py"))
    found = [f"{path.relative_to(SOURCE_DIR)}:{n}: {line.strip()}"
             for path in modules if path.name != "numbers.py"
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if ROUNDING.search(line)]
    assert found == []


@pytest.mark.parametrize(("low", "high", "labels"), [
    (150, 9000, ["200", "500", "1k", "2k", "5k", "10k"]),    # samples per second
    (3e9, 2e12, ["10G", "100G", "1T"]),                       # FLOP/s over three decades
    (0.021, 0.026, ["0.02", "0.025", "0.03"]),                # inside one step: widened to two
])
def test_a_log_axis_reads_plain_numbers_with_two_labelled_ticks_or_more(low, high, labels):
    from fwbench.report.figures import style

    fig = style.new_figure(3, 2)
    ax = fig.add_subplot()
    ax.plot([low, high], [0, 1])
    style.log_axis(ax, "x")
    shown = [t.get_text() for t in ax.get_xticklabels()]
    assert shown == labels
    assert not any("10^" in s or "$" in s for s in shown)
