"""The paper: one Jinja2 template renders the HTML; WeasyPrint renders the PDF from that HTML.

Framework-free. Reads the tidy tables and the statistics only, never cell files. Each section of
the paper is a module of ``fwbench.report.sections`` beside its template block in
report/templates/sections/, declared by its ``SECTION``: it turns the tables into plain dicts of
formatted text (a value that was not measured becomes ``NotMeasured`` with its reason, never
"nan" or "None") and chooses its figures; this module builds the sections in document order,
and the template, which computes nothing, lays out the blocks of those the run has.

Usage::

    build_report({"iterations": ..., "trials": ..., "cells": ..., "cell_stats": ...,
                  "comparisons": ..., "tests": ...,
                  "versions": "results/default/audit/versions.csv"},  # optional
                 html="results/default/report/report.html",
                 pdf="results/default/report/report.pdf",
                 figures="results/default/report/figures", run="default",
                 statistics=config["statistics"],  # the analysis plan in force
                 data="results/default/report/data")  # the data appendices, CSV and HTML
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from fwbench import SOURCE_DIR, __version__
from fwbench.files import staged_directory, write_atomic
from fwbench.report import datafiles, outline, readme
from fwbench.report.facts import failure_reasons, run_facts, software
from fwbench.report.figures.style import Figure
from fwbench.report.inputs import Inputs, load_inputs, source_date_epoch
from fwbench.report.sections import Build, audit, placed, sections
from fwbench.report.tables import Numbering, figure_entry

if TYPE_CHECKING:  # imported where used, like jinja2
    import markupsafe

REPORT_DIR = SOURCE_DIR / "report"
TEMPLATE = "report.html.j2"


def make_figures(data: Inputs, folder: Path, failures: dict) -> dict[str, Figure]:
    """Every figure of the report, in document order, drawn into ``folder`` or left out."""
    return {key: figure for s in sections() if s.figures
            for key, figure in s.figures(data, folder, failures).items()}


def build_context(data: Inputs, *, run: str, figures: dict, href: str, epoch: int,
                  data_href: str = "data") -> dict:
    """Everything the template shows, as plain dicts of text: one entry per section, its
    tables numbered in document order; ``data_href`` is where the data appendices lie."""
    numbering = Numbering()
    facts = run_facts(data, run, epoch)
    context = {"facts": facts, "software": software(data.trials), "data_href": data_href,
               "figures": {key: figure_entry(numbering, f, href) for key, f in figures.items()}}
    build = Build(numbering, data, run, facts, context["software"], failure_reasons(data.trials),
                  figures, context)
    # In document order, so that each section numbers its tables as the reader meets them;
    # the late ones last (they read the others' contexts).
    for section in sorted(sections(), key=lambda s: s.late):
        if section.context:
            context[section.key] = section.context(build)
    context["blocks"] = {place: [s.block for s in placed(place) if s.block and _shown(s, context)]
                         for place in dict.fromkeys(s.place for s in sections())}
    context["data_files"] = {name: datafiles.links(name, title, description, len(frame),
                                                   data_href)
                             for name, (title, description, frame)
                             in data_appendices(data, context).items()}
    context["cite"] = {entry["key"]: entry["mark"] for entry in context["references"]}
    return {**context, **outline.outline(context),
            "title": "PyTorch and TensorFlow, measured: " + (facts["run"] or "run")
                     + (" (preliminary)" if context["preliminary"] else ""),
            "print": False,
            "created": datetime.fromtimestamp(epoch, timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ"),
            "generator": f"fwbench {__version__}",
            "css": (REPORT_DIR / "style.css").read_text()}


@cache
def _environment():
    import jinja2

    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(REPORT_DIR / "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined,
                              lstrip_blocks=True, keep_trailing_newline=True)
    environment.filters["code"] = code_spans
    return environment


def code_spans(text) -> markupsafe.Markup:
    """Escape ``text``, then show its `backticked` spans as code."""
    import re

    import markupsafe

    escaped = str(markupsafe.escape(text))
    return markupsafe.Markup(re.sub(r"`([^`<>]+)`", r"<code>\1</code>", escaped))


def render_html(context: dict) -> str:
    return _environment().get_template(TEMPLATE).render(**context)


def render_data_page(name: str, title: str, description: str, columns: list[str],
                     rows: list) -> str:
    """One data appendix as an HTML page of its own (report/templates/data.html.j2), linking
    the stylesheet written beside it."""
    return _environment().get_template("data.html.j2").render(
        title=title, description=description, columns=columns, rows=rows, csv=f"{name}.csv",
        stylesheet=datafiles.STYLESHEET)


@contextmanager
def _source_date_epoch(epoch: int):
    old = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = str(epoch)
    try:
        yield
    finally:
        if old is None:
            del os.environ["SOURCE_DATE_EPOCH"]
        else:
            os.environ["SOURCE_DATE_EPOCH"] = old


def render_pdf(html: str, base_url: Path, epoch: int) -> bytes:
    """The PDF of ``html``; the same HTML and figures give the same bytes."""
    import weasyprint

    with _source_date_epoch(epoch):
        document = weasyprint.HTML(string=html, base_url=str(base_url) + os.sep)
        return document.write_pdf(pdf_identifier=f"fwbench-{epoch}".encode())


def build_report(inputs: dict, *, html: str, pdf: str, figures: str, run: str,
                 statistics: dict | None = None, data: str | None = None,
                 readme_path: str | None = None) -> None:
    """Write the report's HTML, its PDF, the figures folder both reference, the data
    appendices (CSV and HTML, in ``data``: by default report/data beside the HTML) and, when
    ``readme_path`` is given, the run's README (fwbench.report.readme).

    ``inputs`` maps iterations, trials, cells (parquet) and cell_stats, comparisons, tests (CSV)
    to paths; optionally ablation, gaps, profiles, scaling, strategies, flops, telemetry_trace,
    sensitivity and ``versions``, the version audit's versions.csv (rules/audit.smk), whose
    diff-<other>.csv files beside it are shown when present. ``statistics`` is the analysis
    plan in force (the config's block), which the method section prints. Every output is
    written atomically; the PDF's date is the end of the last trial, so the same inputs give a
    byte-identical PDF.
    """
    tables = load_inputs(inputs, statistics)
    epoch = source_date_epoch(tables.every_trial)
    html_path, figures_dir = Path(html), Path(figures)
    data_dir = Path(data) if data else html_path.parent / "data"
    href = Path(os.path.relpath(figures_dir, html_path.parent)).as_posix()
    data_href = Path(os.path.relpath(data_dir, html_path.parent)).as_posix()
    with staged_directory(figures_dir) as stage:
        drawn = make_figures(tables, stage, failure_reasons(tables.trials))
    context = build_context(tables, run=run, figures=drawn, href=href, epoch=epoch,
                            data_href=data_href)
    with staged_directory(data_dir) as stage:
        datafiles.write_data_files(stage, data_appendices(tables, context), render_data_page,
                                   css=(REPORT_DIR / "style.css").read_text())
    text = render_html(context)
    # The PDF names the data appendices rather than linking them: a link would carry this
    # machine's absolute path.
    document = render_pdf(render_html({**context, "print": True}), html_path.parent, epoch)
    write_atomic(html_path, text.encode())
    write_atomic(Path(pdf), document)
    if readme_path:
        write_atomic(Path(readme_path),
                     readme.readme(tables, context["claims"]["rows"], run=run).encode())


def _shown(section, context: dict) -> bool:
    return section.shown is None or section.shown(context)


def data_appendices(data: Inputs, context: dict) -> dict:
    """The data appendices, name -> (title, description, frame); the appendices link them."""
    return {
        "claims": ("Every published claim", "Every quantitative claim of the five papers with "
                   "its verdict, what this run measured and what differs from the paper's "
                   "setting; then the context (beliefs a paper examines, explanations it "
                   "offers), neither judged nor counted.",
                   datafiles.claims_frame(context["claims"]["rows"]
                                          + context["claims"]["context"])),
        "tests": ("Every hypothesis test", "Every hypothesis test the statistics ran "
                  "(stats/tests.csv), with its family, p-values and decision.", data.tests),
        "versions": ("Version audit", "Every item the version audit recorded per framework "
                     "environment: image, framework build, loaded libraries, environment "
                     "variables and every installed package (audit/versions.csv); temporary "
                     "and home paths redacted.", audit.redacted(data.versions)),
        "trials": ("Every trial", "One row per trial (tables/trials.parquet): its cell, "
                   "status, timings, settings and provenance; paths redacted.",
                   audit.redacted(data.trials)),
    }
