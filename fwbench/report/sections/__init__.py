"""The paper's sections, one module each; each sits beside its template block
report/templates/sections/<template>.html.j2, builds that block's context from the run's tables
(its tables numbered in document order, and sentences) and, where it shows figures, chooses and
draws them.

Every module declares its ``SECTION``: its key (its context's), template, title and anchor in the
outline, place (the paper's head, its body, Results, the appendices) and order there, context,
figures, numbered subsections and when it is shown. The outline, the context, the figures and
the template read the declarations (``sections``), so adding a section is two files: its module
and its template block. In document order:

    head        preliminary (its gate, in the warnings block), warnings, abstract
    body        introduction, method, results (its subsections: why, accuracy, distributed,
                memory, latency, origins), reproduction, threats (with unmeasured), conclusion,
                references
    appendix    audit, failures, hypothesis_tests
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

# Where a section goes, in document order. A section placed at another's key is one of its
# subsections (Results' optional ones are placed at "results").
PLACES = ("head", "body", "appendix")


@dataclass
class Build:
    """What a section's context is built from: the run's tables, the numbering of its tables
    (the sections are built in document order), the run's facts and software, why its trials
    failed, the figures drawn, and the contexts built so far."""

    numbering: Numbering
    data: Inputs
    run: str
    facts: dict
    software: list[dict]
    reasons: dict
    figures: dict[str, Figure]
    context: dict


@dataclass(frozen=True)
class Section:
    """A section of the paper, built by ``context`` under its ``key`` and laid out by
    report/templates/sections/<template>.html.j2 (``template`` None: laid out by another's
    block). ``title``: its heading in the outline, at ``anchor`` (None: not in the outline);
    ``parts``: its numbered subsections there; ``shown``: whether this run has it; ``late``:
    built after every other section, whose contexts it reads (it numbers no table)."""

    key: str
    place: str
    order: int
    context: Callable[[Build], object] | None = None
    template: str | None = ""
    title: str | None = None
    anchor: str = ""
    numbered: bool = True
    parts: Callable[[dict], list[tuple[str, str]]] | None = None
    figures: Callable[[Inputs, Path, dict], dict[str, Figure]] | None = None
    shown: Callable[[dict], bool] | None = None
    late: bool = False

    @property
    def block(self) -> str | None:
        """Its template block's path under report/templates/, None where it has none."""
        return None if self.template is None else f"sections/{self.template or self.key}.html.j2"

    @property
    def id(self) -> str:
        """Its anchor in the outline."""
        return self.anchor or self.key


@cache
def sections() -> tuple[Section, ...]:
    """Every module of this package's ``SECTION``, in document order: each section followed by
    its subsections."""
    found = [getattr(importlib.import_module(f"{__name__}.{module.name}"), "SECTION", None)
             for module in pkgutil.iter_modules(__path__)]
    found = [s for s in found if s]
    top = sorted((s for s in found if s.place in PLACES),
                 key=lambda s: (PLACES.index(s.place), s.order))
    return tuple(section for s in top for section in
                 (s, *sorted((x for x in found if x.place == s.key), key=lambda x: x.order)))


def placed(place: str) -> list[Section]:
    """The sections of one place, in order."""
    return [s for s in sections() if s.place == place]


def drawn(context: dict, *keys: str) -> bool:
    """Whether any of the figures ``keys`` was drawn (it has a number)."""
    return any(context["figures"][key]["number"] for key in keys)
