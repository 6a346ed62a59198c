"""The proof that a run rebuilds byte for byte: the checksums of what a rebuild writes, a copy
of its tables and figures, and where a rebuilt file first differs from the recorded one."""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
from pathlib import Path, PurePosixPath

# What a rebuild writes and its checksums, one "sha256  path" line per file: the proof that the
# shipped reference run rebuilds byte for byte (fwbench rebuild --check). Beside them, RECORDED
# keeps a copy of the tables and figures the checksums were taken from (under 2 MB a run), so
# that a table or figure which differs is shown at its first differing value, not only named.
MANIFEST = "rebuild.sha256"
RECORDED = "recorded"
TABLES = ("tables/*.parquet", "stats/*.csv", "audit/*.csv", "report/data/*.csv")
FIGURES = ("report/figures/*.svg",)
REBUILT = (*TABLES, *FIGURES, "report/data/*.html", "report/data/*.css", "report/report.html",
           "report/report.pdf", "README.md")


def manifest(run_dir: str | os.PathLike, patterns=REBUILT) -> dict[str, str]:
    """Checksum of every file a rebuild of ``run_dir`` writes (those ``patterns`` match), by
    path within the run."""
    run_dir = Path(run_dir)
    files = sorted({p for pattern in patterns for p in run_dir.glob(pattern)})
    return {p.relative_to(run_dir).as_posix(): _sha256(p) for p in files}


def write_manifest(run_dir: str | os.PathLike) -> None:
    """Record the checksums of what the rebuild wrote, and a copy of its tables and figures
    (RECORDED)."""
    from fwbench.files import staged_directory, write_atomic

    run_dir = Path(run_dir)
    digests = manifest(run_dir)
    with staged_directory(run_dir / RECORDED) as copies:
        for path in filter(_is_kept, digests):
            (copies / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run_dir / path, copies / path)
    write_atomic(run_dir / MANIFEST, "".join(f"{d}  {p}\n" for p, d in digests.items()))


def check_manifest(run_dir: str | os.PathLike, patterns=REBUILT) -> list[str]:
    """What differs between the rebuilt files and the run's recorded checksums (empty: none),
    one line per file; a table's line says where it first differs, when the run keeps its
    recorded copy. ``patterns``: only the files they match, after a rebuild that stopped
    before the report (the tables and statistics, a fraction of a full rebuild's time)."""
    run_dir = Path(run_dir)
    recorded = {path: digest for digest, path in (
        line.split("  ", 1) for line in Path(run_dir, MANIFEST).read_text().splitlines() if line)
        if _matches(path, patterns)}
    rebuilt = manifest(run_dir, patterns)
    return ([f"{p}: differs{_where(run_dir, p, recorded[p])}" for p in recorded
             if p in rebuilt and rebuilt[p] != recorded[p]]
            + [f"{p}: not rebuilt" for p in recorded if p not in rebuilt]
            + [f"{p}: rebuilt but not recorded" for p in rebuilt if p not in recorded])


def first_difference(recorded: str | os.PathLike, rebuilt: str | os.PathLike) -> str:
    """Where two versions of one table (CSV or Parquet) first differ: ``at row 129, column p:
    recorded '0.406991412431537', rebuilt '0.4069914124315368'``. Rows count from 1 under the
    header; a CSV's values are its text, a Parquet table's as Python prints them."""
    (old_columns, old), (new_columns, new) = _cells(recorded), _cells(rebuilt)
    if old_columns != new_columns:
        added = [c for c in new_columns if c not in old_columns]
        removed = [c for c in old_columns if c not in new_columns]
        if not (added or removed) or len(added) + len(removed) > 5:
            return f"in its columns: recorded {old_columns}, rebuilt {new_columns}"
        return "in its columns: " + ", ".join(
            [f"rebuilt adds {c!r}" for c in added] + [f"rebuilt lacks {c!r}" for c in removed])
    for row, (old_row, new_row) in enumerate(zip(old, new), 1):
        for column, a, b in zip(old_columns, old_row, new_row):
            if a != b:
                return f"at row {row}, column {column}: recorded {a!r}, rebuilt {b!r}"
    if len(old) != len(new):
        return f"in its number of rows: recorded {len(old)}, rebuilt {len(new)}"
    return "in its bytes only: every value is the same"


def svg_difference(recorded: str | os.PathLike, rebuilt: str | os.PathLike) -> str:
    """Where two versions of one SVG first differ: the element, counted in document order,
    and the attribute or text, from its first differing word, with the nearest element that
    has an id (matplotlib names each artist's group): ``at element 224, a <path> in <g
    id="patch_4">, attribute d: recorded 'M 25.332188', rebuilt 'M 25.332187'``. Names that
    matplotlib derives from coordinates (clip-path ids and the references to them) are shown
    only when nothing else differs."""
    from xml.etree import ElementTree

    root = ElementTree.parse(recorded).getroot()
    old, new = list(root.iter()), list(ElementTree.parse(rebuilt).iter())
    differences = list(_svg_differences(old, new))
    if differences:
        number, key, x, y = next((d for d in differences if not _is_reference(*d[1:])),
                                 differences[0])
        parents = {child: parent for parent in root.iter() for child in parent}
        named = old[number - 1]
        while named is not None and named.get("id") is None:
            named = parents.get(named)
        where = f"at element {number}, a <{_tag(old[number - 1])}>" + (
            f' in <{_tag(named)} id="{named.get("id")}">' if named is not None else "")
        if key == "tag":
            return f"{where}: rebuilt a <{y}> instead"
        x, y = _first_words(x, y)
        return f"{where}, {'text' if key is None else f'attribute {key}'}: recorded {x!r}, " \
               f"rebuilt {y!r}"
    if len(old) != len(new):
        return f"in its number of elements: recorded {len(old)}, rebuilt {len(new)}"
    return "in its bytes only: every element is the same"


def _svg_differences(old: list, new: list):
    """(element number, attribute or None for the text or "tag", recorded, rebuilt) of every
    difference between two lists of elements, in document order."""
    for number, (a, b) in enumerate(zip(old, new), 1):
        if a.tag != b.tag:
            yield number, "tag", _tag(a), _tag(b)
            return
        for key in [*sorted(a.attrib.keys() | b.attrib.keys()), None]:
            x, y = (a.get(key) if key else a.text, b.get(key) if key else b.text)
            if (x or "") != (y or ""):
                yield number, key, x or "", y or ""


def _is_reference(key: str | None, recorded: str, rebuilt: str) -> bool:
    return key == "id" or recorded.startswith(("url(#", "#"))


def _tag(element) -> str:
    return element.tag.rpartition("}")[2]


def _first_words(a: str, b: str) -> tuple[str, str]:
    """The first word where ``a`` and ``b`` differ, with the word before it."""
    x, y = a.split(), b.split()
    k = next((k for k, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
    start = max(k - 1, 0)
    return " ".join(x[start:k + 1]), " ".join(y[start:k + 1])


def _where(run_dir: Path, path: str, digest: str) -> str:
    if path.endswith(".pdf"):
        return _pdf_fonts()
    if not _is_kept(path):
        return ""
    copy = run_dir / RECORDED / path
    if not copy.is_file():
        return f" (no recorded copy, {RECORDED}/{path}, to show where)"
    if _sha256(copy) != digest:
        return f" ({RECORDED}/{path} is not the file recorded: record again to show where)"
    differ = svg_difference if path.endswith(".svg") else first_difference
    return f" {differ(copy, run_dir / path)}"


def subsets_fonts_with_harfbuzz() -> bool:
    """Whether WeasyPrint subsets the PDF's fonts with HarfBuzz-Subset (>= 4.1), as every
    recorded report was made. Without it WeasyPrint falls back to fontTools, whose subsets
    differ in their bytes (timestamps, tables), so the PDF cannot match its checksum."""
    from weasyprint.text.ffi import harfbuzz, harfbuzz_subset

    return bool(harfbuzz_subset) and bool(harfbuzz.hb_version_atleast(4, 1, 0))


# What a machine without HarfBuzz-Subset lacks, and its remedy.
NO_HARFBUZZ = ("this machine lacks HarfBuzz-Subset, so WeasyPrint subsets the PDF's fonts with "
               "fontTools, in other bytes than a recorded PDF's: install libharfbuzz-subset0 on "
               "Debian or Ubuntu, harfbuzz elsewhere")


def _pdf_fonts() -> str:
    if subsets_fonts_with_harfbuzz():
        return ""
    return f" ({NO_HARFBUZZ}, and rebuild)"


def _is_kept(path: str) -> bool:
    return _matches(path, (*TABLES, *FIGURES))


def _matches(path: str, patterns) -> bool:
    return any(PurePosixPath(path).match(pattern) for pattern in patterns)


def _cells(path: str | os.PathLike) -> tuple[list[str], list[list[str]]]:
    """A table's column names and its rows, each value as text."""
    if Path(path).suffix == ".parquet":
        import pandas as pd

        table = pd.read_parquet(path).to_dict("split")
        return list(table["columns"]), [[str(v) for v in row] for row in table["data"]]
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return (rows[0] if rows else []), rows[1:]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
