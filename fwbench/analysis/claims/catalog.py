"""report/claims.yaml loaded and checked: the claims to judge, and the context (a belief a paper
sets out to examine, an explanation it offers: ``role: context``), listed but neither judged
nor counted. Each entry gets its setting and the numbers its paper states (published.yaml),
which must stand on its figure and in its setting: the two files cannot drift apart unseen."""

from __future__ import annotations

import re
from functools import cache

import jsonschema
import yaml

from fwbench import SOURCE_DIR
from fwbench.analysis.claims import published
from fwbench.analysis.claims.kinds import KINDS
from fwbench.analysis.claims.setting import CONDITIONS, merged_setting

CLAIMS_PATH = SOURCE_DIR / "report" / "claims.yaml"
SCHEMA_PATH = SOURCE_DIR / "rules" / "schemas" / "claims.schema.yaml"


@cache
def load_claims(path: str = str(CLAIMS_PATH)) -> dict:
    """The catalog: ``claims`` to judge and ``context`` (their ``role``), checked
    (``_check``). Each entry's ``setting`` is its paper's ``setting_axes`` with its own, its
    ``published_values`` the numbers the paper states for it (report/published.yaml), and
    ``published_ratio`` the time ratio among them, as [low, high]."""
    with open(path) as f:
        catalog = yaml.safe_load(f)
    _check_schema(catalog, path)
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


def _check_schema(catalog, path: str) -> None:
    """The catalog as rules/schemas/claims.schema.yaml describes it, its test kinds the
    registered ones; else a ValueError naming where it breaks the schema, and how."""
    with open(SCHEMA_PATH) as f:
        schema = yaml.safe_load(f)
    test = schema["properties"]["claims"]["items"]["properties"]["test"]
    test["properties"]["kind"]["enum"] = sorted(KINDS)
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(catalog))
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "<top level>"
        raise ValueError(f"{path}: invalid at {where}: {error.message}")


def _check(entry: dict, path: str) -> None:
    """A claim has a test of a known kind and context none; a published value stands on the
    claim's figure and states the claim's setting (dataset, input shape, device, precision)."""
    role, test = entry.get("role", "claim"), entry.get("test")
    where = f"{path}: {entry['id']}"
    if (role == "context") != (test is None):
        raise ValueError(f"{where}: " + ("context is neither judged nor counted: it has no "
                                         "test" if test else "a claim needs a test"))
    if test and test["kind"] not in KINDS:
        raise ValueError(f"{where}: unknown test kind {test['kind']!r}; known: "
                         f"{', '.join(sorted(KINDS))}")
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
