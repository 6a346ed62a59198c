"""The report's data appendices: tables too long for a paper (every hypothesis test, every
package of the version audit, every trial, every claim), written beside the report as CSV, to
read with any tool, and as HTML, to read in the browser; the PDF summarises each and links it.

Each file is written from the frame the report read, so nothing is lost by leaving the paper.
The HTML pages write their numbers through the report's formatting (``fmt``, quantity
``data``); the CSV
keeps every value as the table holds it, floats at 10 significant digits as in every CSV the
workflow writes (fwbench.files.write_csv).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fwbench.analysis.claims import wording
from fwbench.files import write_csv
from fwbench.report.formatting import fmt


def links(name: str, title: str, description: str, rows: int, href: str) -> dict:
    """What the report shows of one data appendix: its title, its two files and its size."""
    return {"title": title, "csv": f"{href}/{name}.csv", "html": f"{href}/{name}.html",
            "rows": rows, "description": description}


# The stylesheet every HTML page of the folder links: one copy beside them, so the folder reads
# the same wherever it is opened, without the report beside it.
STYLESHEET = "style.css"


def write_data_files(folder: Path, frames: dict[str, tuple[str, str, pd.DataFrame]],
                     render_page, css: str) -> None:
    """Write each ``name -> (title, description, frame)`` as CSV and HTML into ``folder``, and
    ``css`` as the STYLESHEET the pages link; ``render_page(name, title, description, columns,
    rows)`` lays out an HTML page."""
    (folder / STYLESHEET).write_text(css)
    for name, (title, description, frame) in frames.items():
        frame = frame.reset_index(drop=True)
        write_csv(frame, folder / f"{name}.csv")
        rows = [[cell(v) for v in row] for row in frame.itertuples(index=False)]
        (folder / f"{name}.html").write_text(
            render_page(name, title, description, [str(c) for c in frame.columns], rows))


def cell(value) -> str:
    """A table value as the report writes it: numbers to 4 significant digits, nothing for a
    value that was not recorded."""
    if wording.missing(value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return wording.text(value) if value.is_integer() else fmt(value, "data")
    return str(value)


def claims_frame(rows: list[dict]) -> pd.DataFrame:
    """Every claim with its verdict, as the claims table shows it and more."""
    return pd.DataFrame([{
        "id": r["id"], "paper": r["paper"], "quote": r["quote"], "location": r["location"],
        "figure": r["figure"], "published": r["published"], "ours": r["ours"],
        "verdict": r["verdict"], "verdict_in_this_setting": r.get("verdict_here", ""),
        "what_differs": "; ".join(r.get("differs", [])), "exploratory": r["exploratory"],
        "how_we_test_it": r["how"], "what_may_explain_a_difference": r["differences"],
    } for r in rows])
