"""Write the image locks, containers/<framework>/requirements-<variant>.lock, from this environment.

The image locks are cut from the native environment that the test suite runs (the repository's
requirements.lock): the framework, what it depends on, and the few packages a benchmark job
imports (fwbench's trial side: numpy, jsonschema, PyYAML, psutil, nvidia-ml-py, and pandas,
which the trial's child imports through fwbench.plan.ablation) — each at the
exact version installed here, closed over their dependencies (environment markers evaluated for
Linux x86_64, CPython 3.11). Host-side packages (pandas, matplotlib, Snakemake…) stay out.

Two variants per framework, chosen at build time by one build argument (``VARIANT``):

- ``requirements-cuda.lock`` (``cuda``, the GPU image): ``torch`` as installed here (PyPI's Linux
  wheel is a CUDA build) and ``tensorflow[and-cuda]``, whose CUDA wheels TensorFlow declares as
  ranges: pip resolves them once (``--resolve``) and the exact versions are written here;
- ``requirements-cpu.lock`` (``cpu``, for machines without a GPU): ``tensorflow-cpu`` exactly as
  installed here; for PyTorch the same wheel as the GPU image, because the CPU build of this
  release (``torch==2.14.1+cpu``) is published only on download.pytorch.org, which the machines
  this repository is developed on cannot reach (see containers/README.md).

Every line carries the sha256 of the wheel for Linux x86_64, CPython 3.11, as the index
publishes it, so a wheelhouse fetched once (``containers/build.py``) and the image builds
(``pip install --require-hashes``) check every file. Hashes are kept for pins that did not
change; new pins are resolved by asking pip (``pip install --dry-run --report`` for the image's
platform: the index's published hashes, no install).

Usage::

    .venv/bin/python containers/freeze.py            # rewrite the four locks (pip asked if needed)
    .venv/bin/python containers/freeze.py --check    # exit 1 if a lock is out of date (offline)
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fwbench.plan.frameworks import FRAMEWORKS  # noqa: E402  (the repository's, beside this folder)

# What a benchmark job imports beside the framework (pandas: fwbench.plan.ablation, in the child).
TRIAL_SIDE = ["numpy", "jsonschema", "PyYAML", "psutil", "nvidia-ml-py", "pandas"]
ROOTS = {name: [*f.image_packages, *TRIAL_SIDE] for name, f in FRAMEWORKS.items()}
VARIANTS = {"cuda": "requirements-cuda.lock", "cpu": "requirements-cpu.lock"}
# cuda variant: distribution renamed, and the extra whose wheels are resolved by pip.
CUDA_RENAME = {cpu: cuda for f in FRAMEWORKS.values() for cpu, (cuda, _) in f.cuda_variant.items()}
CUDA_EXTRA = {name: (cpu, extra) for name, f in FRAMEWORKS.items()
              for cpu, (_, extra) in f.cuda_variant.items()}
# Build tools pip may leave out of `pip freeze` but packages require at run time.
ALWAYS = {"setuptools"}
# The images' platform: pip is asked for wheels of exactly this (glibc 2.36 is Debian 12's).
PLATFORM_ARGS = ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
                 "--abi", "cp311",
                 *[a for m in range(36, 16, -1) for a in ("--platform", f"manylinux_2_{m}_x86_64")],
                 *[a for p in ("manylinux2014", "manylinux2010", "manylinux1", "linux")
                   for a in ("--platform", f"{p}_x86_64")]]
LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<spec>[=<>!~][^#\s]*)"
                  r"(?P<hashes>(?:\s+--hash=sha256:[0-9a-f]{64})*)\s*$")


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _environment(extra: str = "") -> dict:
    env = default_environment()
    env.update(sys_platform="linux", platform_system="Linux", platform_machine="x86_64",
               os_name="posix", python_version="3.11", implementation_name="cpython",
               platform_python_implementation="CPython", extra=extra)
    return env


def closure(roots: list[str]) -> dict[str, str]:
    """name -> installed version, for ``roots`` and everything they require (with extras)."""
    found: dict[str, str] = {}
    todo: list[tuple[str, frozenset]] = [(r, frozenset()) for r in roots]
    seen = set()
    while todo:
        name, extras = todo.pop()
        if (_name(name), extras) in seen:
            continue
        seen.add((_name(name), extras))
        dist = md.distribution(name)
        found[_name(dist.metadata["Name"])] = dist.version
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker:
                wanted = [""] + sorted(extras)
                if not any(req.marker.evaluate(_environment(e)) for e in wanted):
                    continue
            todo.append((req.name, frozenset(req.extras)))
    for name in ALWAYS:
        found.setdefault(name, md.version(name))
    return found


def extra_requirements(dist_name: str, extra: str) -> list[Requirement]:
    """The requirements an extra adds, as declared (ranges): not installed here."""
    found = []
    for line in md.distribution(dist_name).requires or []:
        req = Requirement(line)
        if req.marker and req.marker.evaluate(_environment(extra)) \
                and not req.marker.evaluate(_environment("")):
            found.append(req)
    return sorted(found, key=lambda r: _name(r.name))


def read_lock(path: Path) -> dict[str, dict]:
    """name -> {"spec": "==1.2" or a range, "hashes": [...]} of an existing lock."""
    entries = {}
    if not path.exists():
        return entries
    for raw in path.read_text().splitlines():
        match = LINE.match(raw.strip())
        if match:
            entries[_name(match["name"])] = {
                "display": match["name"], "spec": match["spec"],
                "hashes": re.findall(r"sha256:[0-9a-f]{64}", match["hashes"] or "")}
    return entries


def wanted(framework: str, variant: str, old: dict[str, dict]) -> dict[str, dict]:
    """What a lock must hold: display name -> {"spec", "hashes"} (hashes kept from ``old`` when
    the pin did not change). The cuda extra keeps its earlier resolution while it still
    satisfies TensorFlow's declared range; otherwise it is the range, to be resolved."""
    pins = closure(ROOTS[framework])
    rename = CUDA_RENAME if variant == "cuda" else {}
    entries = {}
    for name, version in sorted(pins.items()):
        display = rename.get(name, name)
        entries[display] = {"spec": f"=={version}", "hashes": []}
    if variant == "cuda" and framework in CUDA_EXTRA:
        for req in extra_requirements(*CUDA_EXTRA[framework]):
            before = old.get(_name(req.name), {}).get("spec", "")
            pinned = (before.startswith("==")
                      and req.specifier.contains(before[2:], prereleases=True))
            entries[_name(req.name)] = {"spec": before if pinned else str(req.specifier),
                                        "hashes": []}
    for display, entry in entries.items():
        previous = old.get(_name(display))
        if previous and previous["spec"] == entry["spec"] and entry["spec"].startswith("=="):
            entry["hashes"] = previous["hashes"]
    return entries


def resolve(framework: str, entries: dict[str, dict]) -> dict[str, dict]:
    """Ask pip, for the images' platform, the exact version and published sha256 of every entry
    (ranges resolved together with the pins, as one install would). Needs the index."""
    with tempfile.TemporaryDirectory() as tmp:
        reqs = Path(tmp) / "requirements.txt"
        reqs.write_text("".join(f"{name}{e['spec']}\n" for name, e in entries.items()))
        report = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                   "--quiet", "--report", str(report), "--target", f"{tmp}/target",
                   *PLATFORM_ARGS, "--requirement", str(reqs)]
        print(f"resolving {framework}: pip {' '.join(command[3:8])} …", file=sys.stderr)
        subprocess.run(command, check=True)
        installs = json.loads(report.read_text())["install"]
    found = {}
    for item in installs:
        name = _name(item["metadata"]["name"])
        digest = (item["download_info"].get("archive_info") or {}).get("hash", "")
        if not digest.startswith("sha256="):
            raise SystemExit(f"freeze.py: the index published no sha256 for {name}")
        found[name] = (item["metadata"]["version"], digest.replace("=", ":", 1))
    missing = sorted(set(found) - {_name(d) for d in entries})
    if missing:
        raise SystemExit(f"freeze.py: {framework} also needs {missing}, which this environment "
                         "does not have: install them natively (requirements.lock) first")
    resolved = {}
    for display, _entry in entries.items():
        version, digest = found[_name(display)]
        resolved[display] = {"spec": f"=={version}", "hashes": [digest]}
    return resolved


def render(framework: str, variant: str, entries: dict[str, dict]) -> str:
    lines = [
        f"# containers/{framework}/{VARIANTS[variant]} — what the {framework} image installs "
        f"(VARIANT={variant}),",
        "# with pip install --no-deps --require-hashes. Cut by containers/freeze.py from the "
        "native",
        "# environment the tests run (requirements.lock): exact versions, closed over "
        "dependencies,",
        "# sha256 of each wheel for Linux x86_64, CPython 3.11. Do not edit by hand.",
    ]
    if variant == "cpu" and framework == "pytorch":
        lines += ["# The same wheels as requirements-cuda.lock: torch==2.14.1's CPU build is "
                  "published only on",
                  "# download.pytorch.org (2.14.1+cpu), out of reach here; PyPI's wheel is a CUDA "
                  "build that runs on the CPU."]
    if variant == "cuda" and framework in CUDA_EXTRA:
        dist, extra = CUDA_EXTRA[framework]
        lines += [f"# The nvidia-* wheels are {CUDA_RENAME.get(dist, dist)}[{extra}]'s, resolved "
                  "by pip within TensorFlow's declared ranges."]
    for display, entry in entries.items():
        lines.append(f"{display}{entry['spec']}"
                     + "".join(f" --hash={h}" for h in entry["hashes"]))
    return "\n".join(lines) + "\n"


def incomplete(entries: dict[str, dict]) -> list[str]:
    return [n for n, e in entries.items() if not e["spec"].startswith("==") or not e["hashes"]]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a lock would change or lacks a pin or hash (offline)")
    args = parser.parse_args(argv)
    stale = []
    for framework in ROOTS:
        for variant, file_name in VARIANTS.items():
            path = HERE / framework / file_name
            old = read_lock(path)
            entries = wanted(framework, variant, old)
            if args.check:
                if not path.exists() or path.read_text() != render(framework, variant, entries) \
                        or incomplete(entries):
                    stale.append(str(path))
                continue
            if incomplete(entries):
                entries = resolve(framework, entries)
            path.write_text(render(framework, variant, entries))
            print(f"wrote {path}")
    if stale:
        print("out of date (run containers/freeze.py): " + ", ".join(stale), file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
