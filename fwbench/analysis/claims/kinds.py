"""The kinds of claim report/claims.yaml names (``test.kind``), each with its judge and its hint.

A kind registers itself in the module that judges it (``register``): its judge gives a claim
its verdict ({verdict, ours, notes}) from the statistics' ``Tables`` and the plan's margin, and
its hint says why that verdict is only a hint ("" when it is not) from the same tables and the
least trials a verdict needs. The catalog (fwbench.analysis.claims.catalog) accepts only the
kinds registered here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class Tables:
    """The statistics' tables a claim is judged from; None where the run has none."""

    comparisons: pd.DataFrame
    cell_stats: pd.DataFrame
    tests: pd.DataFrame | None = None
    trials: pd.DataFrame | None = None
    scaling: pd.DataFrame | None = None
    strategies: pd.DataFrame | None = None


Judge = Callable[[dict, Tables, float], dict]
Hint = Callable[[dict, Tables, int], str]


def no_hint(claim: dict, tables: Tables, least: int) -> str:
    """The hint of a kind whose verdict is never drawn from too few trials."""
    return ""


@dataclass(frozen=True)
class ClaimKind:
    name: str
    judge: Judge
    hint: Hint = no_hint


KINDS: dict[str, ClaimKind] = {}


def register(name: str, judge: Judge, hint: Hint = no_hint) -> None:
    """Make ``name`` a kind of claim, judged by ``judge`` and hinted by ``hint``."""
    KINDS[name] = ClaimKind(name, judge, hint)
