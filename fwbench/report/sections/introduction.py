"""Section 1, Introduction: fixed text in its template block, with no context of its own."""

from __future__ import annotations

from fwbench.report.sections import Section

SECTION = Section(key="introduction", place="body", order=10, title="Introduction")
