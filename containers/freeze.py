"""Write containers/<framework>/requirements.lock from the environment this runs in.

The image locks are cut from the native environment that the test suite runs (the repository's
requirements.lock): the framework, what it depends on, and the few packages a benchmark job
imports (fwbench's trial side: numpy, jsonschema, PyYAML, psutil, nvidia-ml-py) — each at the
exact version installed here, closed over their dependencies (environment markers evaluated for
Linux x86_64, CPython 3.11). Host-side packages (pandas, matplotlib, Snakemake…) stay out.

The one thing this environment cannot tell is the CUDA wheels TensorFlow's ``and-cuda`` extra
pulls in: this machine has the CPU build (tensorflow-cpu), and TensorFlow declares those
wheels as version ranges. They are written as the ranges TensorFlow declares, marked
UNRESOLVED, and `containers/build.sh` prints what the build resolved (the label file keeps
`pip freeze`), to be copied back here. Nothing is invented.

Usage::

    .venv/bin/python containers/freeze.py            # rewrites both locks
    .venv/bin/python containers/freeze.py --check    # exit 1 if a lock is out of date
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import sys
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

HERE = Path(__file__).resolve().parent
TRIAL_SIDE = ["numpy", "jsonschema", "PyYAML", "psutil", "nvidia-ml-py"]
ROOTS = {
    "pytorch": ["torch", "torchvision", *TRIAL_SIDE],
    # The GPU image installs `tensorflow`; this environment has the same release as tensorflow-cpu.
    "tensorflow": ["tensorflow-cpu", *TRIAL_SIDE],
}
RENAME = {"tensorflow-cpu": "tensorflow"}
UNRESOLVED_EXTRA = {"tensorflow": ("tensorflow-cpu", "and-cuda")}
# Build tools pip may leave out of `pip freeze` but packages require at run time.
ALWAYS = {"setuptools"}


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


def unresolved(dist_name: str, extra: str) -> list[str]:
    """The requirements an extra adds, as declared (ranges): not installed here."""
    lines = []
    for line in md.distribution(dist_name).requires or []:
        req = Requirement(line)
        if req.marker and req.marker.evaluate(_environment(extra)) \
                and not req.marker.evaluate(_environment("")):
            lines.append(f"{req.name}{req.specifier}")
    return sorted(lines, key=str.lower)


def render(framework: str) -> str:
    pins = closure(ROOTS[framework])
    lines = [
        f"# containers/{framework}/requirements.lock — what the {framework} image installs "
        "(pip install --no-deps).",
        "# Cut by containers/freeze.py from the native environment the tests run "
        "(requirements.lock):",
        "# exact versions, closed over dependencies for Linux x86_64, CPython 3.11. "
        "Do not edit by hand.",
    ]
    for name, version in sorted(pins.items()):
        lines.append(f"{RENAME.get(name, name)}=={version}")
    if framework in UNRESOLVED_EXTRA:
        dist, extra = UNRESOLVED_EXTRA[framework]
        lines += [
            f"# UNRESOLVED: the CUDA wheels of {RENAME.get(dist, dist)}[{extra}], as TensorFlow "
            "declares them (ranges).",
            "# This machine has the CPU build, so nobody here resolved them. containers/build.sh "
            "prints what",
            "# the image resolved (pip freeze, also in /opt/fwbench/image.json); copy the exact "
            "versions here.",
            *unresolved(dist, extra),
        ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a lock would change")
    args = parser.parse_args(argv)
    stale = []
    for framework in ROOTS:
        path = HERE / framework / "requirements.lock"
        text = render(framework)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print("out of date (run containers/freeze.py): " + ", ".join(stale), file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
