"""Write the image's label file, /opt/fwbench/image.json, at build time (run by the image's Python).

A benchmark job reads it (fwbench.environment.images.check_runtime) to make sure it runs in the
image the workflow asked for: this framework, this tag, this Python prefix, this framework version,
this lock. `python -m fwbench.environment.images check` reads it too (make test-containers).
Standard library only: it runs inside the image, before anything of fwbench is there.
"""

import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import sys
import sysconfig
from datetime import datetime, timezone
from pathlib import Path

MODULES = {"pytorch": "torch", "tensorflow": "tensorflow"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--framework", required=True, choices=sorted(MODULES))
    parser.add_argument("--variant", required=True, choices=["cuda", "cpu"])
    parser.add_argument("--image", required=True, help="repository:tag of this image")
    parser.add_argument("--base", required=True, help="the base image as the build named it")
    parser.add_argument("--base-digest", default="unknown",
                        help="the base's digest or image ID, sha256:… "
                             "(needed unless --base has one)")
    parser.add_argument("--lock", default="/opt/fwbench/requirements.lock")
    parser.add_argument("--builder", required=True, choices=["dockerfile", "apptainer"])
    parser.add_argument("--out", default="/opt/fwbench/image.json")
    args = parser.parse_args()
    base_digest = args.base.split("@", 1)[1] if "@sha256:" in args.base else args.base_digest
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", base_digest):
        parser.error("the base must be pinned: --base repository@sha256:… or --base-digest "
                     f"sha256:…, got {args.base!r} and {args.base_digest!r}")
    if ":" not in args.image.rsplit("/", 1)[-1]:
        parser.error(f"--image must be repository:tag, got {args.image!r}")
    # The distribution that installed the module: tensorflow-cpu in the cpu variant.
    package = re.sub(r"[-_.]+", "-",
                     importlib.metadata.packages_distributions()[MODULES[args.framework]][0]).lower()
    # SOURCE_DATE_EPOCH (the recipe's date, set by containers/build.py) rather than the clock:
    # the label is part of the image, and one lock and wheelhouse must give one image.
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or 0)
    label = {
        "label_version": 2,
        "framework": args.framework,
        "module": MODULES[args.framework],
        "package": package,
        "version": importlib.metadata.version(package),
        "variant": args.variant,
        "image": args.image,
        "base_image": args.base,
        "base_digest": base_digest,
        "lock_sha256": hashlib.sha256(Path(args.lock).read_bytes()).hexdigest(),
        "python": platform.python_version(),
        "prefix": sys.prefix,
        "site_packages": sysconfig.get_paths()["purelib"],
        "source_date": datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds"),
        "builder": args.builder,
        "pip_freeze": sorted(f"{d.metadata['Name']}=={d.version}"
                             for d in importlib.metadata.distributions()),
    }
    Path(args.out).write_text(json.dumps(label, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: v for k, v in label.items() if k != "pip_freeze"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
