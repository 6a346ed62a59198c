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
BASE=localhost/fwbench-standin-base:bookworm
started=$(date +%s)

missing=()
for package in podman runc mmdebstrap; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "make test-containers: installing ${missing[*]} needs root" >&2
        exit 1
    fi
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
mkdir -p "$OUT"

echo "================================================================================"
echo "STAND-IN BASE IMAGE: $BASE"
echo "  Debian 12 (bookworm) with Debian's python3 (3.11.2), made here by mmdebstrap from"
echo "  Debian's packages. It stands in for python:3.11.7-slim-bookworm, which no registry"
echo "  reachable here can serve; the images built on it are stand-ins for the published ones"
echo "  (same recipes, locks and wheels; another base and Python patch release)."
echo "================================================================================"
if ! podman image exists "$BASE"; then
    mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$OUT/rootfs.tar"
    podman import --message "STAND-IN base: mmdebstrap bookworm (make test-containers)" \
        "$OUT/rootfs.tar" "$BASE"
    rm -f "$OUT/rootfs.tar"
fi

# The shim finds by itself the open-file and process limits Podman accepts (the host's, else
# the nearest that runc takes: here it refuses nproc above 32768) and caches them;
# tests/test_images_built.py's own podman calls take the same, from $APPTAINER_SHIM_ULIMITS.
limits=$(scripts/containers/apptainer shim-ulimits "$BASE")
export APPTAINER_SHIM_ULIMITS=${APPTAINER_SHIM_ULIMITS:-$limits}
echo "containers get the limits the shim found: $APPTAINER_SHIM_ULIMITS"

"$BIN/python" containers/build.py --engine podman --variant cpu --base "$BASE" \
    --python /usr/bin/python3 --out "$OUT"

FWBENCH_BUILT_IMAGES="$PWD/$OUT/images.lock" PATH="$PWD/$BIN:$PATH" \
    "$BIN/pytest" -q -p no:xdist -p no:cacheprovider tests/test_images_built.py "$@"
echo "make test-containers: passed in $(( $(date +%s) - started )) s"
