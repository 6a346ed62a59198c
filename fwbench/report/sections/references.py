"""References: the five papers, then the methods the report cites (report/references.yaml),
each with its mark ("[1]"). The templates cite a reference as ``cite.<key>``; the marks are
numbered in the order of the list."""

from __future__ import annotations

import re
from functools import cache

import yaml

from fwbench import SOURCE_DIR
from fwbench.analysis.claims import PAPERS, load_claims
from fwbench.report.sections import Section

REFERENCES = SOURCE_DIR / "report" / "references.yaml"
TEMPLATES = SOURCE_DIR / "report" / "templates"


@cache
def _cited_by_templates() -> frozenset[str]:
    """The reference keys the report's templates cite in every run (``cite.<key>``)."""
    return frozenset(key for template in TEMPLATES.rglob("*.j2")
                     for key in re.findall(r"\bcite\.(\w+)", template.read_text()))


@cache
def bibliography(also: tuple[str, ...] = ()) -> list[dict]:
    """The references the report cites, in order (the five papers, then the methods), each
    with its mark: "[1]". ``also``: the methods only this run's tests cite (Appendix C's
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
    return entries


SECTION = Section(
    key="references", place="body", order=70, title="References", numbered=False, late=True,
    context=lambda b: bibliography(tuple(t["key"] for t in b.context["tests"]["cited"])))
