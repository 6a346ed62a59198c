# Sourced by make test-containers (test.sh) and make test-cuda-images (test_cuda.sh): podman,
# runc and mmdebstrap from Debian, then the STAND-IN base image and the limits Podman accepts.
# Needs $OUT (a folder for the base's root file system) and $WHO (the target, for messages).
BASE=localhost/fwbench-standin-base:bookworm

missing=()
for package in podman runc mmdebstrap; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "$WHO: installing ${missing[*]} needs root" >&2
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
# the nearest that runc takes: here it refuses nproc above 32768) and caches them; the tests'
# own podman calls take the same, from $APPTAINER_SHIM_ULIMITS.
limits=$(scripts/containers/apptainer shim-ulimits "$BASE")
export APPTAINER_SHIM_ULIMITS=${APPTAINER_SHIM_ULIMITS:-$limits}
echo "containers get the limits the shim found: $APPTAINER_SHIM_ULIMITS"
