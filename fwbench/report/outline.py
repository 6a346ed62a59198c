"""The paper's outline: which sections this run has (a section with nothing measured is left
out, and "What this run did not measure" says so), their numbers in document order, and the
table of contents."""

from __future__ import annotations

from string import ascii_uppercase

from fwbench.report.sections import placed


def outline(context: dict) -> dict:
    """``num``: section id -> its number ("3.2", or an appendix's letter); ``toc``: the entries
    of the table of contents, in order, each {id, number, title, level}. The sections and their
    numbered parts are those they declare (fwbench.report.sections)."""
    num, toc, n = {}, [], 0
    for section in [s for s in placed("body") if s.title]:
        n += section.numbered
        number = str(n) if section.numbered else ""
        num[section.id] = number
        toc.append({"id": section.id, "number": number, "title": section.title, "level": 2})
        parts = section.parts(context) if section.parts else []
        for j, (part, title) in enumerate(parts, 1):
            num[part] = f"{n}.{j}"
            toc.append({"id": part, "number": num[part], "title": title, "level": 3})
    appendices = [s for s in placed("appendix") if s.title]
    for letter, section in zip(ascii_uppercase, appendices):
        num[section.id] = letter
    toc += [{"id": s.id, "number": f"Appendix {num[s.id]}", "title": s.title, "level": 2}
            for s in appendices]
    return {"num": num, "toc": toc}
