""""Read this first": what a reader must know before trusting the numbers (mixed commits or
versions, pairs not measured together, machine state that changed within a pair, unpinned
images, missing tables)."""

from __future__ import annotations

import re

import pandas as pd

from fwbench.analysis.claims import wording
from fwbench.report.facts import column_or_none, is_native, machine_columns, pinned, rows_where
from fwbench.report.formatting import count
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section

# A table's file as a reason names it ("comparisons.csv has no rows"): "its file", for a reader.
TABLE_FILE = re.compile(r"[\w.-]+[.](?:csv|parquet)\b")


def context(data: Inputs, soft: list[dict]) -> list[str]:
    """What a reader must know before trusting the numbers."""
    trials, out = data.trials, []
    commits = trials["git_commit"].dropna().astype(str) if "git_commit" in trials else []
    if len(set(commits)) > 1:
        counts = pd.Series(commits).value_counts().sort_index()
        listed = wording.join(f"{c[:12]} ({n} trials)" for c, n in counts.items())
        out.append(f"This run mixes {len(counts)} versions of the workflow (commits {listed}): "
                   "trials measured by different code are compared as if they were one run. "
                   "Unless the versions differ in nothing that measures, the older trials need "
                   "measuring again; Appendix A lists each trial's version.")
    if "git_commit" in trials and trials["git_commit"].isna().any():
        out.append(f"{count(int(trials['git_commit'].isna().sum()), 'trial')} recorded no workflow "
                   "commit (git could not tell).")
    if "git_dirty" in trials and trials["git_dirty"].fillna(False).astype(bool).any():
        n = int(trials["git_dirty"].fillna(False).astype(bool).sum())
        out.append(f"{count(n, 'trial')} ran from a work tree with uncommitted changes: their "
                   "commit does not identify the code that measured them.")
    if "measured_together" in trials and "pair_id" in trials:
        apart = trials[trials["measured_together"].eq(False)]["pair_id"].dropna().unique()
        if len(apart):
            were = "was" if len(apart) == 1 else "were"
            groups = trials[trials["pair_id"].isin(apart)].drop_duplicates("pair_id")
            also = wording.telling_apart(groups)
            names = sorted(wording.pair_name(row, also) for _, row in groups.iterrows())
            out.append(f"{count(len(apart), 'matched pair')} {were} not measured together (a "
                       "partial re-run measured one side later, or out of the planned order), "
                       "so drift can favour one framework: "
                       + wording.join(names[:5]) + (" …" if len(names) > 5 else "") + ".")
    threads = {s["threads_intra"] for s in soft}
    if len(threads) > 1:
        out.append("The frameworks ran with different intra-op thread counts ("
                   + wording.join(f"{s['label']} {s['threads_intra']}" for s in soft) + ").")
    for s in soft:
        if " and " in s["version"]:
            out.append(f"{s['label']} ran in several versions in this run: {s['version']}.")
    versions = wording.unique(trials, "fwbench_version")
    if len(versions) > 1:
        out.append(f"This run mixes fwbench versions ({wording.join(versions)}): trials "
                   "measured by different releases are compared as one run.")
    changed = data.plan.get("trials_other_plan", pd.Series(dtype=float)).fillna(0)
    if len(changed) and int(changed.iloc[0]):
        out.append(f"The analysis plan changed after the data were measured: "
                   f"{count(int(changed.iloc[0]), 'trial')} recorded another plan than the one "
                   "this report applies (Section 2.6).")
    out += machine_warnings(trials)
    out += unpinned_warnings(trials)
    out += [f"The {name.replace('_', ' ')} table is missing: {TABLE_FILE.sub('its file', why)}."
            for name, why in sorted(data.problems.items())
            if name in ("trials", "cell_stats", "comparisons")]
    return out


def machine_warnings(trials: pd.DataFrame) -> list[str]:
    """Clock, turbo, power-limit or similar settings that changed between the trials of one
    comparison: the two frameworks did not run on the same machine state."""
    out = []
    for column in machine_columns(trials):
        if column not in trials or "pair_id" not in trials:
            continue
        values = trials[["pair_id", column]].dropna().astype(str)
        differs = values.groupby("pair_id")[column].nunique()
        groups = sorted(differs[differs > 1].index)
        if groups:
            out.append(f"The machine's {column.replace('_', ' ')} changed between trials of "
                       f"{count(len(groups), 'cell group')} "
                       f"({wording.join(wording.unique(values, column))}), e.g. "
                       f"`{groups[0]}`: its frameworks did not run on the same machine state.")
    if "machine_note" in trials and trials["machine_note"].notna().any():
        out.append("Some trials ran on devices whose settings differ: "
                   + wording.join(wording.unique(trials, "machine_note")) + ".")
    return out


def unpinned_warnings(trials: pd.DataFrame) -> list[str]:
    """A trial in a container image without a sha256 digest, or with no environment record."""
    if "container" not in trials or "framework" not in trials:
        return []
    out = []
    digests = column_or_none(trials, "image_digest")
    unpinned = rows_where(trials, [not wording.missing(c) and not is_native(c) and not pinned(d)
                                   for c, d in zip(trials["container"], digests)])
    keys = [unpinned["framework"].astype(str), unpinned["container"].astype(str)]
    for (framework, image), group in unpinned.groupby(keys, sort=True):
        trials_of = count(len(group), f"{wording.label(framework)} trial")
        out.append(f"{trials_of} ran in the unpinned image "
                   f"`{image}`: no sha256 digest is on record, so the image that measured them "
                   "cannot be identified. Pin it (`make pin-images`), commit "
                   "containers/images.lock and re-run these trials.")
    unknown = int(trials["container"].isna().sum())
    if unknown:
        out.append(f"{count(unknown, 'trial')} recorded no environment (no env.json beside the "
                   "result): whether they ran natively or in a pinned image is unknown.")
    return out


SECTION = Section(key="warnings", place="head", order=20,
                  context=lambda b: context(b.data, b.software))
