"""The paper's sections, one module each, in document order; each sits beside its template block
report/templates/sections/<module>.html.j2 and builds that block's context (``context``: its
tables, numbered in document order, and sentences) and, where it shows figures, chooses and draws
them (``figures``).

    warnings           "Read this first", in the paper's head
    abstract           the abstract
    (introduction)     Section 1: text only, a template block without a module
    method             Section 2: what was measured, settings, the two environments, statistics
    results            Sections 3.1-3.6: pair by pair, every cell, batch size, tests, energy
    why                Section 3.7: the ablation, where the time goes, patel2023's explanation
    accuracy           Section 3.8: the real-data experiments' accuracy
    distributed        Section 3.9: beyond one device
    memory             Section 3.10: peak memory
    latency            Section 3.11: latency percentiles
    reproduction       Section 4: every published claim's verdict, each paper's figures
    threats            Section 5: threats to validity
    audit              Appendix A: the version audit
    failures           Appendix B: every trial that did not end ok
    hypothesis_tests   Appendix C: every hypothesis test

Results' subsections that a run shows only when it has something to show (why, accuracy,
distributed, memory, latency, origins) declare themselves: each module's ``SUBSECTION`` gives
its key (its context's and its template block's), title, place, context, figures and when it is
shown, and the outline, the context, the figures and the template read them
(``results_subsections``). Adding one is two files: its module and its template block.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fwbench.report.figures.style import Figure
    from fwbench.report.inputs import Inputs
    from fwbench.report.tables import Numbering


@dataclass(frozen=True)
class Subsection:
    """A subsection of Results shown only when ``shown(context)`` (the whole context, its
    figures numbered); placed by ``order`` among the others."""

    key: str
    title: str
    order: int
    context: Callable[[Numbering, Inputs], dict]
    shown: Callable[[dict], bool]
    figures: Callable[[Inputs, Path], dict[str, Figure]] | None = None


@cache
def results_subsections() -> tuple[Subsection, ...]:
    """Every module of this package that declares a ``SUBSECTION``, in order."""
    found = [getattr(importlib.import_module(f"{__name__}.{module.name}"), "SUBSECTION", None)
             for module in pkgutil.iter_modules(__path__)]
    return tuple(sorted((s for s in found if s), key=lambda s: s.order))


def drawn(context: dict, *keys: str) -> bool:
    """Whether any of the figures ``keys`` was drawn (it has a number)."""
    return any(context["figures"][key]["number"] for key in keys)
