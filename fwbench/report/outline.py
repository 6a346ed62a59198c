"""The paper's outline: which sections this run has (a section with nothing measured is left
out, and "What this run did not measure" says so), their numbers in document order, the table
of contents, and the bibliography with its citation marks."""

from __future__ import annotations

import re
from functools import cache

import yaml

from fwbench import SOURCE_DIR
from fwbench.analysis.claims import PAPERS, load_claims
from fwbench.report.sections import drawn, results_subsections

REFERENCES = SOURCE_DIR / "report" / "references.yaml"
TEMPLATES = SOURCE_DIR / "report" / "templates"

# Section 2's subsections, always present.
METHOD = [("measured", "What was measured"), ("software", "Software and settings"),
          ("stack", "The two framework environments"), ("hardware", "Hardware"),
          ("timing", "Repetitions and timing"), ("statistics", "Statistics")]


def _results(context: dict) -> list[tuple[str, str]]:
    """Section 3's subsections that have something measured to show: its own four, then those
    that declare themselves (fwbench.report.sections.results_subsections)."""
    present = [
        ("relative", "Relative time", True),
        ("cells", "Every cell", True),
        ("batch", "Batch size", drawn(context, "inference_vs_batch")),
        ("energy", "Energy, achieved FLOP/s and telemetry",
         drawn(context, "energy", "flops", "telemetry")),
        *((s.key, s.title, s.shown(context)) for s in results_subsections()),
    ]
    return [(key, title) for key, title, shown in present if shown]


def outline(context: dict) -> dict:
    """``num``: section key -> its number ("3.2"); ``toc``: the entries of the table of
    contents, in order, each {id, number, title, level}."""
    papers = context["claims"]["papers"]
    top = [("introduction", "Introduction", []),
           ("method", "Method", METHOD),
           ("results", "Results", _results(context)),
           ("reproduction", "Reproduction of the source papers",
            [(f"paper-{p}", papers[p]["short"]) for p in PAPERS]),
           ("limits", "Limits of this run", [("unmeasured", "What this run did not measure"),
                                             ("threats", "Threats to validity")]),
           ("conclusion", "Conclusion", [])]
    num, toc = {}, []
    for i, (key, title, subsections) in enumerate(top, 1):
        num[key] = str(i)
        toc.append({"id": key, "number": str(i), "title": title, "level": 2})
        for j, (sub, sub_title) in enumerate(subsections, 1):
            num[sub] = f"{i}.{j}"
            toc.append({"id": sub, "number": num[sub], "title": sub_title, "level": 3})
    for letter, (key, _title) in zip("ABC", APPENDICES):
        num[key] = letter
    toc.append({"id": "references", "number": "", "title": "References", "level": 2})
    toc += [{"id": key, "number": f"Appendix {num[key]}", "title": title, "level": 2}
            for key, title in APPENDICES]
    return {"num": num, "toc": toc}


APPENDICES = [("appendix-audit", "Version audit"), ("appendix-failures", "Failures and trials"),
              ("appendix-tests", "Every hypothesis test")]


@cache
def _cited_by_templates() -> frozenset[str]:
    """The reference keys the report's templates cite in every run (``cite.<key>``)."""
    return frozenset(key for template in TEMPLATES.rglob("*.j2")
                     for key in re.findall(r"\bcite\.(\w+)", template.read_text()))


@cache
def bibliography(also: tuple[str, ...] = ()) -> tuple[list[dict], dict[str, str]]:
    """The references the report cites, in order (the five papers, then the methods), and
    each key's mark: "[1]". ``also``: the methods only this run's tests cite (Appendix C's
    Wilcoxon, Shapiro-Wilk, ...); a reference nothing cites is not listed."""
    catalog = load_claims()
    with open(REFERENCES) as f:
        methods = yaml.safe_load(f)
    cited = _cited_by_templates() | set(also)
    entries = [{"key": p, "text": f"{catalog['papers'][p]['authors']}. "
                                  f"{catalog['papers'][p]['title']}."} for p in PAPERS]
    entries += [{"key": m["key"], "text": m["text"]} for m in methods if m["key"] in cited]
    for n, entry in enumerate(entries, 1):
        entry["mark"] = f"[{n}]"
    return entries, {e["key"]: e["mark"] for e in entries}
