"""Write the image's label file, /opt/fwbench/image.json, at build time (run by the image's Python).

A benchmark job reads it (fwbench.images.check_runtime) to make sure it runs in the image the
workflow asked for: this framework, this tag, this Python prefix, this framework version.
Standard library only: it runs inside the image, before anything of fwbench is there.
"""

import argparse
import hashlib
import importlib.metadata
import json
import platform
import sys
import sysconfig
from datetime import datetime, timezone
from pathlib import Path

MODULES = {"pytorch": "torch", "tensorflow": "tensorflow"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--framework", required=True, choices=sorted(MODULES))
    parser.add_argument("--package", required=True, help="distribution name: torch, tensorflow")
    parser.add_argument("--image", required=True, help="repository:tag this build is pushed as")
    parser.add_argument("--base", required=True, help="base image, repository@sha256:…")
    parser.add_argument("--lock", default="/opt/fwbench/requirements.lock")
    parser.add_argument("--source-commit", default="unknown")
    parser.add_argument("--builder", required=True, choices=["docker", "apptainer"])
    parser.add_argument("--out", default="/opt/fwbench/image.json")
    args = parser.parse_args()
    if "@sha256:" not in args.base:
        parser.error(f"--base must be pinned by digest (repository@sha256:…), got {args.base!r}")
    if ":" not in args.image.rsplit("/", 1)[-1]:
        parser.error(f"--image must be repository:tag, got {args.image!r}")
    label = {
        "label_version": 1,
        "framework": args.framework,
        "module": MODULES[args.framework],
        "package": args.package,
        "version": importlib.metadata.version(args.package),
        "image": args.image,
        "base_image": args.base,
        "lock_sha256": hashlib.sha256(Path(args.lock).read_bytes()).hexdigest(),
        "python": platform.python_version(),
        "prefix": sys.prefix,
        "site_packages": sysconfig.get_paths()["purelib"],
        "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "builder": args.builder,
        "source_commit": args.source_commit,
        "pip_freeze": sorted(f"{d.metadata['Name']}=={d.version}"
                             for d in importlib.metadata.distributions()),
    }
    Path(args.out).write_text(json.dumps(label, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: v for k, v in label.items() if k != "pip_freeze"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
