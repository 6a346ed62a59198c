#!/usr/bin/env bash
# make test-containers: build both framework images here, from the repository's own recipes, and
# run the workflow in them. Needs root, Debian's apt and PyPI (for the wheelhouse, once).
#
# 1. installs podman, runc and mmdebstrap from Debian (Apptainer is not packaged for Debian 12:
#    scripts/containers/apptainer, a shim over `podman run`, stands in for the command only);
# 2. makes a STAND-IN base image with mmdebstrap (Debian 12 and its python3), because no
#    registry can be reached to pull python:3.11.7-slim-bookworm;
# 3. builds the CPU variants of both images with `containers/build.py` (what `make images` runs),
#    from the hash-checked wheelhouse, with no network during the build;
# 4. runs tests/test_images_built.py: checks inside each image, a `--use-singularity` sweep,
#    the containerised against the native trial, digests that change and do not change, and
#    `make run-containers` from a fresh clone (the README's GPU section, on the CPU).
#
# Everything it makes lies under containers/build/stand-in/ (ignored by git), apart from the
# images Podman holds; `podman rmi` them and remove that folder to start afresh.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.venv/bin}
OUT=${FWBENCH_STAND_IN_DIR:-containers/build/stand-in}
started=$(date +%s)

WHO="make test-containers"
# podman, runc, mmdebstrap; the stand-in base ($BASE); the limits Podman accepts
. scripts/containers/stand_in.sh

"$BIN/python" containers/build.py --engine podman --variant cpu --base "$BASE" \
    --python /usr/bin/python3 --out "$OUT"

FWBENCH_BUILT_IMAGES="$PWD/$OUT/images.lock" PATH="$PWD/$BIN:$PATH" \
    "$BIN/pytest" -q -p no:xdist -p no:cacheprovider tests/test_images_built.py "$@"
echo "make test-containers: passed in $(( $(date +%s) - started )) s"
