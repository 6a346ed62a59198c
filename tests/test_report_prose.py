"""Prose agrees with tables, in every shipped run's report as a reader gets it (the report.html
its rebuild writes byte for byte, tests/test_rebuild.py): every ratio the text states is in a
table of the report, and the counts the method states about the sensitivity table are its
rows."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest

from fwbench.analysis.claims.catalog import load_claims
from tests.reference_runs import SHIPPED

# A ratio or level as the report writes it: 0.783, 1.42 (three significant digits).
RATIO = re.compile(r"(?<![\d.])\d\.\d{2,3}(?![\d.])")


class _Report(HTMLParser):
    """The report's text split into table cells and prose: paragraphs outside tables and
    captions (a caption describes its table or figure, the prose states what they show)."""

    def __init__(self):
        super().__init__()
        self.open, self.cells, self.prose = [], [], []

    def handle_starttag(self, tag, attrs):
        self.open.append(tag)

    def handle_endtag(self, tag):
        while self.open and self.open.pop() != tag:
            pass

    def handle_data(self, data):
        if {"td", "th"} & set(self.open):
            self.cells.append(data)
        elif "p" in self.open and not {"table", "caption", "figcaption"} & set(self.open):
            self.prose.append(data)


def _read(run) -> _Report:
    report = _Report()
    report.feed((run / "report" / "report.html").read_text())
    return report


# The papers' settings quote their numbers (a learning rate of 0.01), and a p-value in prose
# is a test's result, not a table's ratio.
QUOTED = {n for paper in load_claims()["papers"].values()
          for n in RATIO.findall(str(paper.get("setting", "")))}


@pytest.mark.parametrize("run", SHIPPED, ids=lambda p: p.name)
def test_every_ratio_the_prose_states_is_in_a_table(run):
    report = _read(run)
    tabled = set(RATIO.findall(" ".join(report.cells)))
    prose = " ".join(report.prose)
    stated = [m for m in RATIO.finditer(prose)
              if not re.search(r"p = $", prose[:m.start()]) and m.group() not in QUOTED]
    assert stated or run.name == "gpu-sitting", "the prose states no ratio"
    missing = [prose[max(0, m.start() - 60):m.end()] for m in stated if m.group() not in tabled]
    assert not missing, missing


@pytest.mark.parametrize("run", SHIPPED, ids=lambda p: p.name)
def test_the_not_estimable_comparisons_the_method_counts_are_rows_of_the_sensitivity_table(run):
    html = (run / "report" / "report.html").read_text()
    said = re.search(r"out of (\d+) comparisons?: (\d+) of them not estimable", html)
    rows = html.count("not estimable (n = 0)")
    if said is None:
        assert rows == 0
    else:
        assert int(said.group(2)) == rows <= int(said.group(1))


# What tells a developer where to look, and a reader nothing: paths, the statistics' file
# names, config keys and cell ids ("throughput/cpu/pytorch/...").
DEVELOPER_WORDS = re.compile(r"\S*(?:presets/|docs/|stats/|tables/|\.ya?ml\b|\.csv\b|"
                             r"config key|config experiment|throughput/|batch_size|input_shape|"
                             r"world_size|peak_flops|\bdevice (?:cpu|cuda)\b|\bfwbench\.\w|"
                             r"git diff)\S*")


@pytest.mark.parametrize("run", SHIPPED, ids=lambda p: p.name)
def test_what_was_not_measured_the_captions_and_page_1_read_as_sentences_for_a_reader(run):
    page = (run / "report" / "report.html").read_text()
    left_out = re.search(r'<div id="unmeasured-list">(.*?)</div>', page, re.S).group(1)
    captions = re.findall(r"<(figcaption|caption)\b[^>]*>(.*?)</\1>", page, re.S)
    boxes = re.findall(r'<aside class="warnings[^"]*" id="\w+">(.*?)</aside>', page, re.S)
    for text in (left_out, *(c for _, c in captions), *boxes):
        words = html_text(text)
        assert not DEVELOPER_WORDS.findall(words), words
    items = re.findall(r"<li>(.*?)</li>", left_out, re.S)
    assert all(html_text(i)[:1].isupper() for i in items), items


def html_text(fragment: str) -> str:
    """A fragment of the page as its reader sees the words."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


@pytest.mark.parametrize("run", SHIPPED, ids=lambda p: p.name)
def test_every_listed_reference_is_cited_and_every_citation_listed(run):
    page = (run / "report" / "report.html").read_text()
    listed = set(re.findall(r'<li id="ref-(\w+)"', page))
    cited = set(re.findall(r'href="#ref-(\w+)"', page))
    assert listed == cited, (f"listed, never cited: {sorted(listed - cited)}; cited, not "
                             f"listed: {sorted(cited - listed)}")
