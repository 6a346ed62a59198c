"""The shipped report read as a reader reads it: the PDF of results/reference/report/ as pages
and text (poppler-utils), its HTML in headless Chromium. The rebuild check keeps these files
current (tests/test_rebuild.py); these tests say whether they read as a paper: a body of at most
12 pages and data appendices of at most 3, nothing past the margins, no raw float, "(s)" or
machine path, no console error and no dead link.

Each test skips only when its tool is missing (`make test-tools` installs both)."""

from __future__ import annotations

import html as htmllib
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from fwbench import SOURCE_DIR

SHIPPED = SOURCE_DIR / "results" / "reference" / "report"
BODY_PAGES, APPENDIX_PAGES = 12, 3
MARGIN_PT = 14 / 25.4 * 72  # the stylesheet's left and right page margins (14 mm)

# A float as Python prints it, never as the report writes it: 6+ digits after the point, or
# an exponent on a long mantissa (3.896559845095909e-18).
RAW_FLOAT = re.compile(r"\d\.\d{6,}|\d\.\d{4,}e[-+]?\d+")
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:tmp|var/tmp|root|home/[^/\s]+)/")


def _need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed (apt-get install -y {package}; make test-tools)")
    return path


def _pages() -> list[str]:
    _need("pdftotext", "poppler-utils")
    text = subprocess.run(["pdftotext", "-layout", SHIPPED / "report.pdf", "-"],
                          capture_output=True, text=True, check=True).stdout
    return text.split("\f")[:-1]


def _first_page(pages: list[str], heading: str) -> int:
    """The 1-based page on which a line starts with ``heading`` (a section's title)."""
    pattern = re.compile(rf"^\s*{re.escape(heading)}\s*$", re.M)
    found = [n for n, page in enumerate(pages, 1) if pattern.search(page)]
    assert found, f"no page has the heading {heading!r}"
    return found[-1]


def test_the_body_fits_twelve_pages_and_the_data_appendices_three():
    pages = _pages()
    body_end = _first_page(pages, "References")  # threats end where the references begin
    appendices = len(pages) - _first_page(pages, "Appendix A: Version audit") + 1
    assert body_end <= BODY_PAGES, f"abstract to threats: {body_end} pages"
    assert appendices <= APPENDIX_PAGES, f"appendices: {appendices} pages"
    assert "Contents" in pages[0] and "Abstract" in pages[0]


def test_every_page_renders_and_no_text_runs_past_the_margins(tmp_path):
    _need("pdftoppm", "poppler-utils")
    info = subprocess.run([_need("pdfinfo", "poppler-utils"), SHIPPED / "report.pdf"],
                          capture_output=True, text=True, check=True).stdout
    count = int(re.search(r"Pages:\s+(\d+)", info).group(1))
    subprocess.run(["pdftoppm", "-r", "30", "-png", SHIPPED / "report.pdf", tmp_path / "p"],
                   check=True)
    assert len(list(tmp_path.glob("p*.png"))) == count
    subprocess.run(["pdftotext", "-bbox", SHIPPED / "report.pdf", tmp_path / "words.html"],
                   check=True)
    root = ET.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", (tmp_path / "words.html").read_text())
                         .replace('xmlns="http://www.w3.org/1999/xhtml"', ""))
    outside = []
    for number, page in enumerate(root.iter("page"), 1):
        width = float(page.get("width"))
        for word in page.iter("word"):
            if float(word.get("xMin")) < MARGIN_PT - 1 or \
                    float(word.get("xMax")) > width - MARGIN_PT + 1:
                outside.append(f"page {number}: {word.text!r}")
    assert not outside, outside[:10]


def test_the_text_has_no_raw_float_plural_placeholder_or_machine_path():
    text = "\n".join(_pages())
    assert not RAW_FLOAT.findall(text), RAW_FLOAT.findall(text)[:5]
    assert "(s)" not in text
    assert not MACHINE_PATH.findall(text), MACHINE_PATH.findall(text)[:5]
    for code in ("pytorch_faster", "tensorflow_faster", "notsupported"):
        assert code not in text, code


# Loaded after the page: lists broken images and internal links whose target is missing.
PROBE = ("<script>window.addEventListener('load', () => {"
         "const bad = [...document.images].filter(i => !i.complete || !i.naturalWidth)"
         ".map(i => i.getAttribute('src'));"
         "const dead = [...document.querySelectorAll('a[href^=\"#\"]')]"
         ".map(a => a.getAttribute('href').slice(1)).filter(id => !document.getElementById(id));"
         "const files = [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))"
         ".filter(h => !h.startsWith('#'));"
         "document.body.setAttribute('data-probe', JSON.stringify({images: "
         "document.images.length, broken: bad, dead: dead, files: files}));});</script>")


def test_the_html_opens_in_chromium_without_an_error_or_a_dead_link(tmp_path):
    browser = shutil.which("chromium") or _need("chromium-browser", "chromium")
    copy = tmp_path / "report"
    shutil.copytree(SHIPPED, copy)
    page = copy / "report.html"
    page.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    run = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--enable-logging=stderr", "--v=0",
         "--allow-file-access-from-files", f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180)
    match = re.search(r"data-probe=\"([^\"]*)\"", run.stdout)
    assert match, run.stderr[-2000:]
    probe = json.loads(htmllib.unescape(match.group(1)))
    assert probe["images"] >= 3 and probe["broken"] == []
    assert probe["dead"] == [], probe["dead"]
    assert probe["files"], "the data appendices are linked"
    assert [f for f in probe["files"] if not (copy / f).is_file()] == []
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console
