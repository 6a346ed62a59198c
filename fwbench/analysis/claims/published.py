"""The numbers the papers state (report/published.yaml): which claim each belongs to, which of a
redrawn figure's rows it stands beside, and how it reads ("0.820–0.847", "83.1 %").

A value stands beside a row only when the row is one of its cells (``select``) measured in its
setting (dataset, input shape, device, precision): a CIFAR-10 GPU ratio says nothing about a
ratio on MNIST on a CPU, so it is named, not drawn, there.

    values = for_figure("tian2020", [2, 3])
    beside = matching(values, row)         # the values whose cells and setting the row has
    text(beside[0])                         # "0.820–0.847"
"""

from __future__ import annotations

from functools import cache

import yaml

from fwbench import SOURCE_DIR
from fwbench.analysis.claims.numbers import fmt
from fwbench.analysis.claims.setting import CONDITIONS

PUBLISHED_PATH = SOURCE_DIR / "report" / "published.yaml"


@cache
def load_published(path: str = str(PUBLISHED_PATH)) -> tuple[dict, ...]:
    """The values; each must name every axis of its setting (null: the paper does not say)."""
    with open(path) as f:
        values = tuple(yaml.safe_load(f)["values"])
    for value in values:
        lacking = [a for a in CONDITIONS if a not in (value.get("setting") or {})]
        if lacking:
            raise ValueError(f"{path}: {value['claim']}, {value['what']}: its setting names no "
                             f"{', '.join(lacking)} (write null where the paper states none)")
    return values


def for_claim(claim_id: str) -> list[dict]:
    return [v for v in load_published() if v["claim"] == claim_id]


def for_figure(paper: str, figures, quantity: str | None = None) -> list[dict]:
    """The values ``paper`` states with any of its ``figures`` (numbers), of ``quantity``."""
    figures = set(figures)
    return [v for v in load_published() if v["paper"] == paper and v["figure"] in figures
            and (quantity is None or v["quantity"] == quantity)]


def of_cells(values, row) -> list[dict]:
    """The values whose every selected axis ``row`` has, with the selected value, whatever its
    setting: the paper's cells, which a redrawn figure shows."""
    return [v for v in values if _holds(row, v.get("select", {}))]


def matching(values, row) -> list[dict]:
    """The values of ``row``'s cells stated for its setting too (``row`` needs a ``dataset``:
    fwbench.analysis.claims.setting.with_dataset): those drawn beside it."""
    return [v for v in of_cells(values, row)
            if _holds(row, {a: w for a, w in v["setting"].items() if w is not None})]


def _holds(row, select: dict) -> bool:
    def holds(axis, wanted) -> bool:
        have = row.get(axis) if hasattr(row, "get") else None
        options = wanted if isinstance(wanted, list) else [wanted]
        return have is not None and str(have) in {str(o) for o in options}

    return all(holds(a, w) for a, w in select.items())


def bounds(value: dict) -> tuple[float, float]:
    """The value as a range: (low, high), low == high for a single number."""
    number = value["value"]
    low, high = number if isinstance(number, list) else (number, number)
    return float(low), float(high)


def text(value: dict) -> str:
    """The number as the report writes its quantity: "0.820–0.847", "83.1 %", "3.9 × 10⁻¹⁸"."""
    low, high = bounds(value)
    if low == high:
        return fmt(low, value["quantity"])
    return f"{fmt(low, value['quantity'])}–{fmt(high, value['quantity'])}"


def source(value: dict, papers: dict) -> str:
    """Where it stands: "Tian 2020, Sec. 4.1, p. 6, Figure 2"."""
    return f"{papers[value['paper']]['short']}, {value['where']}"
