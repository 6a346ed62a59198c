"""Appendix A, Version audit: every provenance value the trials recorded, the audit's versions
table per framework environment (results/<run>/audit/versions.csv), and what differs from other
runs (diff-<other>.csv); or how to produce them."""

from __future__ import annotations

import sys

import pandas as pd

from fwbench import __version__
from fwbench.analysis.claims import wording
from fwbench.report.formatting import Notes, redact
from fwbench.report.inputs import Inputs
from fwbench.report.sections import Section
from fwbench.report.tables import Legend, Numbering, table


def context(numbering: Numbering, data: Inputs, run: str) -> dict:
    return {"provenance": audit_table(numbering, data), **audit_appendix(numbering, data, run)}


# Provenance columns the trials table may carry; each one absent is named in the version audit.
AUDIT_COLUMNS = {
    "framework_version": "framework version",
    "python": "Python",
    "cuda": "CUDA (framework build)",
    "cudnn": "cuDNN (framework build)",
    "driver": "NVIDIA driver",
    "device_name": "device name",
    "cpu_model": "CPU model",
    "cpu_count": "CPU count",
    "platform": "platform",
    "hostname": "host",
    "container": "container",
    "image_digest": "image digest",
    "git_commit": "workflow commit",
    "git_dirty": "uncommitted changes",
}


def audit_table(numbering: Numbering, data: Inputs) -> dict:
    """Every provenance value the trials recorded, one column per framework."""
    trials, notes, rows = data.trials, Notes(), []
    frameworks = wording.unique(trials, "framework")
    for column, title in AUDIT_COLUMNS.items():
        values = []
        for framework in frameworks or [""]:
            if column not in trials:
                values.append(notes.missing(f"the trials table has no `{column}` column; the "
                                            "trial's env.json side file may hold it"))
                continue
            part = trials[trials["framework"].astype(str) == framework]
            values.append(redact(wording.join(_audit_values(part[column]))) or notes.missing(
                f"no trial recorded its {title}"))
        rows.append([title, *values])
    built = ", ".join(f"{name} {version}" for name, version in builder_versions().items())
    return table(numbering, "audit", "Provenance every trial recorded, per framework. This "
                 f"report was built with {built}.",
                 ["Item", *[wording.label(f) for f in frameworks or ["value"]]], rows, notes,
                 "No trial recorded provenance.", classes=["", *["id"] * max(len(frameworks), 1)])


def _audit_values(series: pd.Series) -> list[str]:
    return sorted({wording.text(v) for v in series if not wording.missing(v)})


# The versions table's items (fwbench.analysis.versions.audit_items), grouped for reading, in order.
AUDIT_IMAGE_ITEMS = ("container", "image digest", "image tag", "image base", "image built")

AUDIT_GROUPS = ["Image", "Python and framework build", "Libraries loaded (mapped shared objects)",
                "Machine and workflow", "Environment variables that change behaviour",
                "Installed packages"]


def _audit_group(item: str) -> int:
    if item in AUDIT_IMAGE_ITEMS or item.startswith("image "):
        return 0
    if item == "python" or item.startswith("framework "):
        return 1
    for index, prefix in ((2, "loaded "), (4, "env "), (5, "package ")):
        if item.startswith(prefix):
            return index
    return 3


def versions_table(numbering: Numbering, data: Inputs) -> dict:
    """The version audit summarised: the items that differ between the framework environments,
    the loaded libraries and packages counted; every item is in the linked data appendix."""
    frame, notes, legend, rows = data.versions, Notes(), Legend("E"), []
    needed = {"framework", "environment", "item", "value"}
    environments = []
    if not frame.empty and needed <= set(frame.columns):
        environments = sorted(set(zip(frame["framework"], frame["environment"])))
    columns = [f"{wording.label(f)} ({legend.cite([f'`{e}`'])})" for f, e in environments]
    same, counted = 0, {}
    if environments:
        first_seen = {item: i for i, item in reversed(list(enumerate(frame["item"])))}
        items = sorted(first_seen, key=lambda item: (_audit_group(item), first_seen[item]))
        cells = {}
        for (framework, environment, item), group in frame.groupby(
                ["framework", "environment", "item"], sort=False):
            cells[(framework, environment, item)] = redact(_audit_cell(group))
        for item in items:
            values = [cells.get((f, e, item), "—") for f, e in environments]
            if len(environments) > 1 and "—" not in values and len(set(values)) == 1:
                same += 1
                continue
            if _audit_group(item) in COUNTED_GROUPS:
                counts = counted.setdefault(_audit_group(item), [0] * len(environments))
                for i, value in enumerate(values):
                    counts[i] += value != "—"
                continue
            rows.append([item, *values])
        for group, counts in sorted(counted.items()):
            rows.append([f"{AUDIT_GROUPS[group].lower()} (different or in one only)",
                         *[str(n) for n in counts]])
    caption = (f"What differs between the framework environments in the version audit: "
               f"{same} items are the same in all, and are not listed; the loaded libraries "
               "and installed packages that differ are counted. Every item, each with its "
               "value, is in the data appendix Version audit; — where an environment did not "
               "record the item. The environments are listed below the table.")
    return table(numbering, "versions", caption, ["Item", *columns], rows, notes,
                 "The versions table has no rows: no trial's env.json was audited.",
                 classes=["id", *["id"] * len(columns)], legend=legend)


# Groups summarised by a count (their items are in the data appendix).
COUNTED_GROUPS = (2, 5)


def redacted(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with temporary and home paths redacted in every text column."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object:
            frame[column] = [redact(v) if isinstance(v, str) else v for v in frame[column]]
    return frame


def _audit_cell(group: pd.DataFrame) -> str:
    def text(value: str) -> str:
        return value if value.strip() else "not recorded"

    if len(group) == 1:
        return text(group["value"].iloc[0])
    counts = group.get("trials", pd.Series([""] * len(group), index=group.index))
    return "; ".join(f"{text(v)} ({n} trial{'' if str(n).strip() == '1' else 's'})"
                     if str(n).strip() else text(v) for v, n in zip(group["value"], counts))


def diff_tables(numbering: Numbering, data: Inputs) -> list[dict]:
    """One table per diff-<other>.csv of the audit: what differs from another run."""
    tables = []
    for other, frame in sorted(data.diffs.items()):
        rows = []
        if {"framework", "item", "change"} <= set(frame.columns):
            for _, row in frame.iterrows():
                rows.append([wording.label(row["framework"]), row["item"], row["change"],
                             row.get("this_run") or "—", row.get("other_run") or "—"])
        tables.append(table(
            numbering, f"audit-diff-{other}", f"What differs between this run's versions "
            f"table and run {other}'s (diff-{other}.csv), per framework and item; — where a "
            "run has no value for the item.",
            ["Framework", "Item", "Change", "This run", f"Run {other}"], rows, Notes(),
            f"No difference from run {other}: every item of both versions tables has the same "
            "values.", classes=["", "id", "", "id", "id"]))
    return tables


def audit_appendix(numbering: Numbering, data: Inputs, run: str) -> dict:
    """Appendix A beyond the trials' provenance: the versions table and the diffs, or how to
    produce them."""
    path = data.versions_path or f"results/{run}/audit/versions.csv"
    absent = None
    if data.versions.empty:
        why = data.problems.get("versions", "versions.csv has no rows")
        absent = (f"The version audit of this run is not available ({why}). "
                  f"`snakemake --cores 1 audit` writes it to `{path}` from every trial's "
                  "env.json, one versions table per framework environment, and a diff against "
                  "every other audited run under results/; build the report again after it.")
    return {
        "versions": versions_table(numbering, data),
        "versions_absent": absent,
        "diffs": diff_tables(numbering, data),
        "no_diffs": ("No diff against another run is present. `snakemake --cores 1 audit` "
                     "writes one (`diff-<other>.csv` beside versions.csv) against every other "
                     "run under results/ whose version audit exists."),
    }


def builder_versions() -> dict:
    """What built the report: fwbench, the packages requirements.lock pins, and Python to its
    minor version. The lock pins no patch release, and naming it would make a rebuild's bytes
    depend on the interpreter that happens to be installed (rebuild --check on another machine)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"fwbench": __version__, "Python": "{}.{}".format(*sys.version_info[:2])}
    for package in ("pandas", "matplotlib", "jinja2", "weasyprint"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "not installed"
    return out


SECTION = Section(key="audit", anchor="appendix-audit", place="appendix", order=10,
                  title="Version audit", context=lambda b: context(b.numbering, b.data, b.run))
