"""The README's "How to cite" section, generated from CITATION.cff (the one source).

    python scripts/cite.py            print the section
    python scripts/cite.py --write    rewrite it in README.md
    python scripts/cite.py --check    exit 1 when README.md differs (tests/test_cite.py runs this)

Edit CITATION.cff, then run --write: the section is never edited by hand, so the citation that
GitHub, Zenodo and reference managers read from CITATION.cff is the one the README shows.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
BEGIN = ("<!-- BEGIN how-to-cite: generated from CITATION.cff by `python scripts/cite.py "
         "--write`; edit CITATION.cff, not this section -->")
END = "<!-- END how-to-cite -->"
REQUIRED = ("cff-version", "message", "title", "authors", "version", "date-released", "license")


class CitationError(Exception):
    pass


def load(path: Path = REPO / "CITATION.cff") -> dict:
    """CITATION.cff as a dict; CitationError naming what is missing."""
    cff = yaml.safe_load(Path(path).read_text())
    missing = [k for k in REQUIRED if not cff.get(k)]
    if missing:
        raise CitationError(f"{path}: missing {', '.join(missing)}; add them (see "
                            "https://citation-file-format.github.io)")
    for author in cff["authors"]:
        if not (author.get("name") or author.get("family-names")):
            raise CitationError(f"{path}: an author needs `name` (an entity) or `family-names`")
    return cff


def _person(author: dict, *, bibtex: bool) -> str:
    if author.get("name"):  # an entity: braced in BibTeX so it is not split into names
        return f"{{{author['name']}}}" if bibtex else author["name"]
    family, given = author["family-names"], author.get("given-names", "")
    if bibtex:
        return f"{family}, {given}".rstrip(", ")
    initials = " ".join(f"{part[0]}." for part in given.split())
    return f"{family}, {initials}".rstrip(", ")


def render(cff: dict) -> str:
    """The section's body: the message, a plain reference and a BibTeX entry."""
    year = str(cff["date-released"])[:4]
    version = str(cff["version"])
    link = cff.get("doi") and f"https://doi.org/{cff['doi']}" or cff.get("repository-code") \
        or cff.get("url")
    authors = [_person(a, bibtex=False) for a in cff["authors"]]
    plain = (f"{', '.join(authors[:-1])} & {authors[-1]}" if len(authors) > 1 else authors[0])
    reference = (f"{plain} ({year}). *{cff['title']}* (version {version}) [Computer software]. "
                 f"Licence: {cff['license']}." + (f" {link}" if link else ""))
    key = "fwbench_" + version.replace(".", "_")
    fields = [("author", " and ".join(_person(a, bibtex=True) for a in cff["authors"])),
              ("title", f"{{{cff['title']}}}"), ("version", version), ("year", year),
              ("date", str(cff["date-released"])), ("license", cff["license"])]
    if cff.get("doi"):
        fields.append(("doi", cff["doi"]))
    if link:
        fields.append(("url", link))
    bibtex = "\n".join([f"@software{{{key},"]
                       + [f"  {name:<7} = {{{value}}}," for name, value in fields] + ["}"])
    message = " ".join(str(cff["message"]).split())
    return f"{message}\n\n> {reference}\n\n```bibtex\n{bibtex}\n```\n"


def section(cff: dict) -> str:
    return f"{BEGIN}\n\n{render(cff)}\n{END}"


def replace_section(readme: str, new: str) -> str:
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise CitationError(f"README.md has no generated section: add the two lines\n{BEGIN}\n"
                            f"{END}\nunder its '## How to cite' heading, then run --write")
    return readme[:start] + new + readme[end + len(END):]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cff", type=Path, default=REPO / "CITATION.cff")
    parser.add_argument("--readme", type=Path, default=REPO / "README.md")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="rewrite the section in README")
    action.add_argument("--check", action="store_true", help="exit 1 when README differs")
    args = parser.parse_args(argv)
    try:
        new = section(load(args.cff))
        if not (args.write or args.check):
            print(new)
            return 0
        readme = args.readme.read_text()
        updated = replace_section(readme, new)
    except CitationError as exc:
        print(f"cite: {exc}", file=sys.stderr)
        return 1
    if args.check:
        if updated != readme:
            print(f"cite: the 'How to cite' section of {args.readme} differs from "
                  f"{args.cff}; run `python scripts/cite.py --write`", file=sys.stderr)
            return 1
        return 0
    if updated != readme:
        args.readme.write_text(updated)
        print(f"cite: rewrote the 'How to cite' section of {args.readme}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
