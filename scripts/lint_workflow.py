"""`snakemake --lint`, with each lint the workflow keeps on purpose allowed by a comment saying why.

Snakemake's linter has no way to silence one finding, so this runs it and drops each finding
whose rule (or, for a finding about a line of a file, that line) carries a comment

    # lint-ok KIND: the reason

in the comment block right above it; KIND names the lint (KINDS below). Every other finding
fails, and so does a `lint-ok` comment that silences nothing. Usage, in the workflow's folder
(`make lint` runs it in the repository):

    python scripts/lint_workflow.py [extra snakemake arguments]
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

# Snakemake's lint titles (snakemake/linting/*.py) by the name a `lint-ok` comment gives them.
KINDS = {
    "software": "Specify a conda environment or container for each rule.",
    "log": "No log directive defined",
    "absolute-path": "Absolute path ",
    "singularity": "Deprecated singularity directive",
}
MARKER = re.compile(r"#\s*lint-ok\s+([a-z-]+):\s*(\S.*)")
HEADER = re.compile(r"^Lints for (?:rule (\S+) \(line (\d+), (.+)\)|snakefile (.+)):$")
TITLE = re.compile(r"^    \* (.*):$")
LINE = re.compile(r" in line (\d+)")


def findings(output: str) -> list[tuple[str, Path, int | None, str]]:
    """(what, file, line, title) of each lint in `snakemake --lint`'s text output."""
    found, where = [], None
    for text in output.splitlines():
        if header := HEADER.match(text):
            rule, line, rule_file, snakefile = header.groups()
            where = (f"rule {rule}", Path(rule_file), int(line)) if rule else \
                ("snakefile", Path(snakefile), None)
        elif (title := TITLE.match(text)) and where:
            what, path, line = where
            if line is None and (at := LINE.search(title[1])):
                line = int(at[1])
            found.append((what, path, line, title[1]))
    return found


def markers_above(lines: list[str], line: int) -> dict[str, int]:
    """The `lint-ok` kinds on ``line`` (1-based) and in the comment block right above it."""
    kinds, index = {}, line - 1
    while index >= 0 and (index == line - 1 or lines[index].lstrip().startswith("#")):
        if marker := MARKER.search(lines[index]):
            kinds[marker[1]] = index + 1
        index -= 1
    return kinds


def _shown(path: Path) -> Path:
    here = Path.cwd().resolve()
    return path.resolve().relative_to(here) if path.resolve().is_relative_to(here) else path


def main(args: list[str]) -> int:
    snakemake = Path(sys.executable).with_name("snakemake")  # this environment's
    proc = subprocess.run([str(snakemake), "--lint", *args], capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    found = findings(output)
    if proc.returncode != 0 and not found:
        print(output, file=sys.stderr)
        print("snakemake --lint failed before linting (above)", file=sys.stderr)
        return 2
    used, failed = set(), []
    for what, path, line, title in found:
        kinds = markers_above(path.read_text().splitlines(), line) if line else {}
        kind = next((k for k, t in KINDS.items() if title.startswith(t) and k in kinds), None)
        if kind:
            used.add((path.resolve(), kinds[kind]))
        else:
            failed.append(f"{_shown(path)}:{line or ''} {what}: {title}")
    allowed = len(found) - len(failed)
    for path in [Path("Snakefile"), *sorted(Path("rules").glob("*.smk"))]:
        if not path.is_file():
            continue
        for number, text in enumerate(path.read_text().splitlines(), 1):
            marker = MARKER.search(text)
            if marker and (marker[1] not in KINDS or (path.resolve(), number) not in used):
                failed.append(f"{_shown(path)}:{number} `lint-ok {marker[1]}` silences no lint: "
                              f"remove it (kinds: {', '.join(KINDS)})")
    for message in failed:
        print(message, file=sys.stderr)
    print(f"snakemake --lint: {len(found) - allowed} to fix, {allowed} allowed by a `lint-ok` "
          "comment that says why", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
