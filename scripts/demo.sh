#!/usr/bin/env bash
# `make demo`: set-up, build, then the keying job on the project's sample photos.
# The results land in out/demo/ (PNG files a person can look at).
#
# What runs: `keyer key`, the whole keying chain on the public library (decode -> model input
# preparation -> neural net (cpu backend, XNNPACK) -> matte refinement -> compositing -> PNG),
# and `keyer infer`, the raw model outputs. The video main job (`keyer INPUT -o OUTPUT`) is not
# built yet (issue: pipeline and command line); this demo says so instead of faking it.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)"
out=out/demo
mkdir -p "$out"
k=build/keyer
$k --version
$k key tests/data/grace_hopper.jpg -o "$out/grace_hopper_blur.png" --blur 14
$k key tests/data/grace_hopper.jpg -o "$out/grace_hopper_blue.png" --replace 2050a0
$k key tests/data/grace_hopper.jpg -o "$out/grace_hopper_alpha.png" --alpha
$k key tests/data/grace_hopper.jpg -o "$out/grace_hopper_matte.png" --mask
$k key tests/data/messi5.jpg -o "$out/messi5_blur.png" --blur 16 --model selfie-landscape
$k key tests/data/messi5.jpg -o "$out/messi5_replaced.png" --replace tests/data/grace_hopper.jpg --model pose-lite
$k infer --model face-short --image tests/data/grace_hopper.jpg --output-dir "$out/face-short"
echo
echo "demo: results in $out/:"
ls -1 "$out" | sed 's/^/  /'
echo "demo: the video main job (keyer INPUT -o OUTPUT) is not part of this build yet."
