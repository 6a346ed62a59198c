#!/bin/sh
# Build one framework image from containers/<framework>/ and, with --push, push it under the tag
# in containers/images.lock. Needs a machine with Docker (or Apptainer >= 1.2) and the registry.
#
#   containers/build.sh pytorch              # docker build, tagged <repository>:<tag>
#   containers/build.sh pytorch --push       # then docker push; then run `make pin-images`
#   containers/build.sh tensorflow --apptainer   # fwbench-tensorflow.sif with the .def instead
#
# The base image must be pinned first (`make pin-images` resolves the base tag too): an image is
# never built FROM a mutable tag. After a push, `make pin-images` records the pushed image's
# digest; commit containers/images.lock.
set -eu

cd "$(dirname "$0")"
framework=${1:?usage: containers/build.sh pytorch|tensorflow [--push] [--apptainer]}
shift
push=no
builder=docker
for arg in "$@"; do
    case $arg in
        --push) push=yes ;;
        --apptainer) builder=apptainer ;;
        *) echo "build.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done
python=${PYTHON:-../.venv/bin/python}

read_lock() {
    PYTHONPATH=.. "$python" -c '
import sys
from fwbench import images
lock = images.load_lock()
base, image = lock["base"], lock["images"][sys.argv[1]]
if not base["digest"]:
    sys.exit("build.sh: the base image " + images.tag_reference(base) + " has no digest: "
             "run `make pin-images` first")
print(base["repository"] + "@" + base["digest"], images.tag_reference(image))
' "$framework"
}
info=$(read_lock)
set -- $info
base=$1
image=$2
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
echo "building $image from $base (commit $commit) with $builder"

if [ "$builder" = apptainer ]; then
    apptainer build --build-arg BASE_IMAGE="$base" --build-arg IMAGE="$image" \
        --build-arg SOURCE_COMMIT="$commit" "fwbench-$framework.sif" "$framework/$framework.def"
    apptainer exec "fwbench-$framework.sif" cat /opt/fwbench/image.json > "$framework/image.json.last"
else
    docker build --file "$framework/Dockerfile" --build-arg BASE_IMAGE="$base" \
        --build-arg IMAGE="$image" --build-arg SOURCE_COMMIT="$commit" --tag "$image" .
    docker run --rm "$image" cat /opt/fwbench/image.json > "$framework/image.json.last"
fi

# What the build resolved: the exact versions of anything the lock left as a range.
echo "label written to $framework/image.json.last; packages the lock does not pin exactly:"
"$python" - "$framework/requirements.lock" "$framework/image.json.last" <<'PY'
import json, re, sys
pinned = {re.split(r"[=<>!~]", l)[0].lower().replace("_", "-") for l in open(sys.argv[1])
          if "==" in l and not l.startswith("#")}
for line in json.load(open(sys.argv[2]))["pip_freeze"]:
    name = line.split("==")[0].lower().replace("_", "-")
    if name not in pinned and name not in ("pip",):
        print("   ", line)
PY

if [ "$push" = yes ]; then
    if [ "$builder" = apptainer ]; then
        echo "build.sh: --push works with the Docker build only (the workflow pulls docker://)" >&2
        exit 2
    fi
    docker push "$image"
    echo "pushed $image; now run \`make pin-images\` and commit containers/images.lock"
fi
