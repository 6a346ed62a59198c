"""What ``fwbench compare`` shows: the differences between two runs' environments and the
verdict on every cell, as terminal text, as CSV and as one HTML page
(report/templates/compare.html.j2). The verdicts are fwbench.analysis.compare's; this module
only writes them out.

    comparison = compare_runs(load_run("results/reference"), load_run("results/default"))
    print(summary(comparison))
    write_comparison(comparison, "results/compare-reference-default")
    print(gate_line(comparison, 10))   # PASS or FAIL at --fail-on-slowdown 10
"""

from __future__ import annotations

from pathlib import Path

from fwbench import __version__
from fwbench.analysis.claims.numbers import fmt
from fwbench.analysis.claims.wording import fmt_duration, fmt_interval, missing, percent, sig
from fwbench.analysis.compare import NOT_COMPARED, POWER, Comparison, slowdowns
from fwbench.files import write_atomic, write_csv
from fwbench.report.render import REPORT_DIR

__all__ = ["summary", "gate_line", "write_comparison", "page_context"]

TEMPLATE = "compare.html.j2"


def _interval(row) -> str:
    if missing(row.ratio_ci_low) or missing(row.ratio_ci_high):
        return ""
    return fmt_interval(row.ratio_ci_low, row.ratio_ci_high)


def _verdict(row) -> str:
    return f"{row.verdict} (exploratory)" if row.exploratory is True else str(row.verdict)


def cell_rows(comparison: Comparison) -> list[dict]:
    """Each cell as text, changes first (slower, faster), then the rest, in cell order."""
    order = {"slower": 0, "faster": 1, "inconclusive": 2, "same": 3, NOT_COMPARED: 4}
    frame = comparison.cells.assign(_order=comparison.cells["verdict"].map(order))
    rows = []
    for row in frame.sort_values(["_order", "cell_id"], kind="stable").itertuples():
        compared = row.verdict != NOT_COMPARED
        rows.append({
            "cell_id": row.cell_id, "framework": row.framework, "verdict": _verdict(row),
            "kind": str(row.verdict).replace(" ", "-"),
            "ratio": sig(row.ratio) if compared else "", "interval": _interval(row),
            "detectable": "" if missing(row.detectable_slowdown) else sig(row.detectable_slowdown),
            "n": f"{int(row.n_a)} / {int(row.n_b)}" if compared else "",
            "time_a": fmt_duration(row.time_a_ns) if compared else "",
            "time_b": fmt_duration(row.time_b_ns) if compared else "",
            "note": row.note,
        })
    return rows


def _method(comparison: Comparison) -> str:
    compared = comparison.compared
    if compared.empty:
        return "The two runs share no cell with ok trials on both sides: nothing was compared."
    m = int(compared["family_size"].iloc[0])
    level = 1 - (1 - comparison.confidence) / m
    return (f"{m} cells compared, one error control over all of them: each interval at "
            f"{percent(level)} (Bonferroni over {m} cells; together at least "
            f"{percent(comparison.confidence)}), margin ±{percent(comparison.rope)} "
            "(run A's statistics.rope). B/A above 1: B is slower. Detectable: the smallest "
            f"true B/A the cell's interval calls slower with {percent(POWER)} power, given its "
            "spreads and trials.")


def _environment_lines(comparison: Comparison) -> list[str]:
    """Each section's items that are the same in one line ("the same" only where none
    differs), then every item that differs."""
    same, differ, differing = {}, [], set()
    for row in comparison.environment:
        where = " ".join(p for p in (row["section"], row["framework"]) if p)
        if row["differs"]:
            differing.add(where)
            differ.append(f"  {where} · {row['item']}: {row['a'] or '(none)'} -> "
                          f"{row['b'] or '(none)'}")
        else:
            same.setdefault(where, []).append(f"{row['item']} {row['a']}")
    lines = [f"  {where}: {'alike only in' if where in differing else 'the same'} "
             f"({'; '.join(items)})" for where, items in same.items()]
    if not any(row["section"] == "versions" for row in comparison.environment):
        lines.append("  versions: no item of the version audit differs")
    return lines + differ


def summary(comparison: Comparison) -> str:
    """The terminal text: what differs between the environments, then every cell's verdict."""
    out = [f"What differs between the environments of A ({comparison.a}) and B "
           f"({comparison.b}):", *_environment_lines(comparison), "", _method(comparison), ""]
    rows = cell_rows(comparison)
    out.append(f"  {'B/A':>6}  {'interval':<16}  {'detectable':>10}  {'verdict':<26}  cell")
    for row in rows:
        out.append(f"  {row['ratio']:>6}  {row['interval']:<16}  {row['detectable']:>10}  "
                   f"{row['verdict']:<26}  {row['cell_id']}"
                   + (f" ({row['note']})" if row["kind"] == "not-compared" else ""))
    counts = comparison.counts()
    not_compared = len(comparison.cells) - len(comparison.compared)
    out += ["", " · ".join(f"{v} {n}" for v, n in counts.items())
            + (f" · not compared {not_compared}" if not_compared else "")]
    return "\n".join(out)


def gate_line(comparison: Comparison, threshold: float) -> str:
    """The last line of ``--fail-on-slowdown``: FAIL and the cells that fail the gate
    (``compare.slowdowns``), the worst first, or PASS and how many cells could have seen such a
    slowdown (``detectable_slowdown``)."""
    compared = comparison.compared
    failed = slowdowns(compared, threshold).sort_values("ratio", ascending=False, kind="stable")
    by = f"{fmt(threshold, 'setting')} %"
    rule = f"(interval above 1, B/A above {fmt(1 + threshold / 100, 'setting')})"
    if len(failed):
        named = [f"{r.cell_id} {sig(r.ratio)} {_interval(r)}" for r in failed.head(3).itertuples()]
        more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
        return (f"FAIL: {len(failed)} of {len(compared)} cells are slower by more than {by} "
                f"{rule}: {'; '.join(named)}{more}")
    line = f"PASS: none of {len(compared)} cells is slower by more than {by} {rule}"
    blind = compared[~(compared["detectable_slowdown"] <= 1 + threshold / 100)]
    if blind.empty:
        return line
    detects = blind["detectable_slowdown"].dropna()
    span = f" (they detect {_span(detects)})" if len(detects) else ""
    return (f"{line}; {len(blind)} of them could not detect a {by} slowdown with "
            f"{percent(POWER)} power{span}")


def _span(values) -> str:
    low, high = min(values), max(values)
    return sig(low) if sig(low) == sig(high) else f"{sig(low)} to {sig(high)}"


def page_context(comparison: Comparison) -> dict:
    counts = comparison.counts()
    return {
        "title": f"fwbench compare: {comparison.a} (A) against {comparison.b} (B)",
        "generator": f"fwbench {__version__}", "a": comparison.a, "b": comparison.b,
        "environment": comparison.environment, "method": _method(comparison),
        "cells": cell_rows(comparison), "counts": counts,
        "css": (REPORT_DIR / "style.css").read_text(),
    }


def write_comparison(comparison: Comparison, folder: str | Path) -> list[Path]:
    """compare.csv (every cell), environment.csv (what was compared of the two environments)
    and compare.html in ``folder``, each written atomically, the CSVs at the one stated
    precision (fwbench.files.write_csv)."""
    import jinja2
    import pandas as pd

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "compare.csv", folder / "environment.csv", folder / "compare.html"]
    write_csv(comparison.cells, paths[0])
    write_csv(pd.DataFrame(comparison.environment,
                           columns=["section", "framework", "item", "a", "b", "differs"]),
              paths[1])
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(REPORT_DIR / "templates"),
                                     autoescape=True, undefined=jinja2.StrictUndefined,
                                     lstrip_blocks=True, trim_blocks=True)
    html = environment.get_template(TEMPLATE).render(**page_context(comparison))
    write_atomic(paths[2], html)
    return paths
