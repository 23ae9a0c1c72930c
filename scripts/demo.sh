#!/usr/bin/env bash
# `make demo`: set-up, build, then keyer's main job on a sample clip it makes itself.
#   1. scripts/setup.sh (missing Debian packages, pinned models)
#   2. cmake -S . -B build && cmake --build build
#   3. out/demo/sample.mp4: a few seconds of slow pan and zoom over tests/data/grace_hopper.jpg,
#      1280x720, 30 fps, with a 440 Hz tone, encoded by keyer itself (keyer make-sample)
#   4. keyer on it: background blurred, replaced by a picture, and the matte alone
# Prints every command it runs and the files it wrote. Works from a fresh clone; needs no GPU
# (KEYER_DEMO_DEVICE=cuda to insist on one; default auto). KEYER_JOBS sets the build's jobs.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
jobs=${KEYER_JOBS:-$(nproc)}
device=${KEYER_DEMO_DEVICE:-auto}
out=out/demo
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

say() { printf '\n==== %s ====\n' "$*"; }
run() { printf '+ %s\n' "$*"; "$@"; }

say "set-up"
run scripts/setup.sh

say "build"
# with CUDA found: code for the GPU present only (the default list of seven architectures takes
# about an hour of nvcc on two cores), sm_90 without a GPU; CUDAARCHS chooses another list
if [ -z "${CUDAARCHS:-}" ]; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        export CUDAARCHS=native
    else
        export CUDAARCHS=90a
    fi
fi
run cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
run cmake --build build -j "$jobs"
keyer=build/keyer
mkdir -p "$out"

say "sample clip"
run "$keyer" make-sample "$out/sample.mp4" --image tests/data/grace_hopper.jpg --size 1280x720 \
    --frames 120 --fps 30 2>/dev/null
run "$keyer" probe "$out/sample.mp4"

say "keyer: background blurred"
run "$keyer" "$out/sample.mp4" -o "$out/blur.mp4" --blur -y --device "$device" \
    --stats "$out/blur-stats.json"
say "keyer: background replaced by a picture"
run "$keyer" "$out/sample.mp4" -o "$out/replace.mp4" --replace tests/data/messi5.jpg -y \
    --device "$device"
say "keyer: the matte alone (white = person)"
run "$keyer" "$out/sample.mp4" -o "$out/matte.mp4" --mask -y --device "$device"
say "a still of each, for a quick look"
for f in blur replace; do
    run "$keyer" probe "$out/$f.mp4" --frame 60 --png "$out/$f-frame60.png" >/dev/null
done

say "done: the demo wrote"
for f in sample.mp4 blur.mp4 replace.mp4 matte.mp4 blur-frame60.png replace-frame60.png \
         blur-stats.json; do
    printf '  %s/%s\n' "$out" "$f"
done
echo "More: $keyer --help, docs/cli.md (transparent output: --alpha with a .mov or .webm name)."
