#!/usr/bin/env bash
# make test-cuda-images: build both CUDA images here with Podman, from the repository's recipes
# and the hash-checked wheelhouse, with no network during the build, and audit them without a
# GPU (tests/test_cuda_images.py): what each image reports of its CUDA stack against its lock
# and its label, the oldest driver it needs, one line saying there is no GPU, NVML telemetry
# recording "no GPU" as a state, and a second `--no-cache` build giving the same image IDs;
# then the GPU sitting's flow rehearsed on the CPU (tests/test_gpu_sitting.py, docs/gpu.md).
# Needs root, Debian's apt and PyPI (for the wheelhouse, once: the CUDA locks' 84 wheels, 6.1 GB).
#
# The base is the same STAND-IN as make test-containers' (Debian 12 and its python3 3.11.2,
# made by mmdebstrap): no registry here serves python:3.11.7-slim-bookworm.
# Everything lies under containers/build/cuda-stand-in/ (ignored by git), apart from the images
# Podman holds (about 6 and 7 GB); `podman rmi` them and remove that folder to start afresh.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-.venv/bin}
OUT=${FWBENCH_CUDA_STAND_IN_DIR:-containers/build/cuda-stand-in}
started=$(date +%s)

WHO="make test-cuda-images"
# podman, runc, mmdebstrap; the stand-in base ($BASE); the limits Podman accepts
. scripts/containers/stand_in.sh

built=$(date +%s)
"$BIN/python" containers/build.py --engine podman --variant cuda --base "$BASE" \
    --python /usr/bin/python3 --out "$OUT"
echo "make test-cuda-images: both CUDA images built (or found) in $(( $(date +%s) - built )) s"
podman --runtime runc images --filter reference='localhost/fwbench-*:*-cuda-*' \
    --format '{{.Repository}}:{{.Tag}} {{.ID}} {{.Size}}'

FWBENCH_CUDA_IMAGES="$PWD/$OUT/images.lock" FWBENCH_GPU_REHEARSAL=1 PATH="$PWD/$BIN:$PATH" \
    "$BIN/pytest" -q -s -p no:xdist -p no:cacheprovider tests/test_cuda_images.py \
    tests/test_gpu_sitting.py "$@"
echo "make test-cuda-images: passed in $(( $(date +%s) - started )) s"
