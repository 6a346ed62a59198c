"""report/claims.yaml loaded and checked: the claims to judge, and the context (a belief a paper
sets out to examine, an explanation it offers: ``role: context``), listed but neither judged
nor counted. Each entry gets its setting and the numbers its paper states (published.yaml),
which must stand on its figure and in its setting: the two files cannot drift apart unseen."""

from __future__ import annotations

import re
from functools import cache

import yaml

from fwbench import SOURCE_DIR
from fwbench.analysis.claims import published
from fwbench.analysis.claims.setting import CONDITIONS, merged_setting

CLAIMS_PATH = SOURCE_DIR / "report" / "claims.yaml"
CLAIM_KINDS = {"direction", "mixed", "sometimes", "batch_trend", "normality", "telemetry",
               "power_batch", "strategy_comparison", "scaling", "pending", "untestable",
               "first_epoch", "higher", "time_to_accuracy"}
ROLES = ("claim", "context")


@cache
def load_claims(path: str = str(CLAIMS_PATH)) -> dict:
    """The catalog: ``claims`` to judge and ``context`` (their ``role``), checked
    (``_check``). Each entry's ``setting`` is its paper's ``setting_axes`` with its own, its
    ``published_values`` the numbers the paper states for it (report/published.yaml), and
    ``published_ratio`` the time ratio among them, as [low, high]."""
    with open(path) as f:
        catalog = yaml.safe_load(f)
    entries = catalog["claims"]
    for entry in entries:
        entry["setting"] = merged_setting(entry, catalog["papers"])
        entry["published_values"] = published.for_claim(entry["id"])
        ratios = [published.bounds(v) for v in entry["published_values"]
                  if v["quantity"] == "ratio"]
        if ratios:
            entry["published_ratio"] = list(ratios[0])
        _check(entry, path)
    catalog["claims"] = [e for e in entries if e.get("role", "claim") == "claim"]
    catalog["context"] = [e for e in entries if e.get("role") == "context"]
    return catalog


def _check(entry: dict, path: str) -> None:
    """A claim has a test of a known kind and context none; a published value stands on the
    claim's figure and states the claim's setting (dataset, input shape, device, precision)."""
    role, test = entry.get("role", "claim"), entry.get("test")
    where = f"{path}: {entry['id']}"
    if role not in ROLES:
        raise ValueError(f"{where}: role {role!r} is not one of {', '.join(ROLES)}")
    if (role == "context") != (test is None):
        raise ValueError(f"{where}: " + ("context is neither judged nor counted: it has no "
                                         "test" if test else "a claim needs a test"))
    if test and test["kind"] not in CLAIM_KINDS:
        raise ValueError(f"{where}: unknown test kind {test['kind']!r}")
    for value in entry["published_values"]:
        if str(value["figure"]) not in re.findall(r"\d+", entry["figure"]):
            raise ValueError(f"{where}: published.yaml puts {value['what']!r} on figure "
                             f"{value['figure']}, the claim on {entry['figure']!r}")
        for axis in CONDITIONS:
            stated, wanted = value["setting"][axis], entry["setting"].get(axis)
            if stated is not None and wanted is not None and [str(stated)] != \
                    [str(w) for w in wanted]:
                raise ValueError(f"{where}: published.yaml states {value['what']!r} for "
                                 f"{axis} {stated}, the claim's setting is {wanted}")
