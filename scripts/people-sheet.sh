#!/usr/bin/env bash
# The people-at-a-distance contact sheets (docs/images/people_vtest.png and
# docs/images/people_portrait.png) from the current code, with bench_people's --sheet:
#
#   scripts/people-sheet.sh BUILD_DIR OUT_DIR [cuda|cpu]      (default cuda)
#
#  1. OUT_DIR/people_vtest.png: the committed street clip tests/data/street_vtest.mp4 (the
#     first 49 frames of OpenCV's vtest.avi, people 10-30 m from the camera), every frame keyed
#     in order, rows at frames 0, 24 and 48;
#  2. OUT_DIR/people_portrait.png: a portrait near the camera (`keyer make-sample`: a pan over
#     tests/data/grace_hopper.jpg, 1280x720, 24 frames), rows at frames 0 and 23.
# Columns: left the selfie model (`--model selfie`), right people mode (`--model people`); each
# tile at half size: the frame in grey, the matte tinted green, the person detector's boxes
# (score >= 0.5) in red. bench_people's table (box coverage, outside, ms per frame) is printed
# for both inputs. With ffmpeg on the PATH the PNGs are reduced to a 64-colour palette as the
# committed ones are (else written in full colour). About 20 s on one H100; minutes on a CPU.
# KEYER_SHEET_FRAMES=N keys only the first N frames of each input (a quick check of the script
# itself; the rows are then spread over those frames).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:?usage: scripts/people-sheet.sh BUILD_DIR OUT_DIR [cuda|cpu]}
out=${2:?usage: scripts/people-sheet.sh BUILD_DIR OUT_DIR [cuda|cpu]}
backend=${3:-cuda}
bench=$build/bench/bench_people
keyer=$build/keyer
[ -x "$bench" ] || { echo "people-sheet: no $bench (build the target bench_people)"; exit 2; }
[ -x "$keyer" ] || { echo "people-sheet: no $keyer"; exit 2; }
export KEYER_MODELS_DIR=${KEYER_MODELS_DIR:-$repo/models}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# palette: the committed images' reduction (BENCHMARKS.md, people far from the camera)
reduce() {
    if command -v ffmpeg >/dev/null 2>&1; then
        ffmpeg -loglevel error -y -i "$1" -vf \
            "split[a][b];[a]palettegen=max_colors=64[p];[b][p]paletteuse=dither=none" \
            -pix_fmt pal8 "$2"
    else
        cp "$1" "$2"
    fi
}

frames=${KEYER_SHEET_FRAMES:-49}
every=$(( frames > 2 ? (frames - 1) / 2 : 1 ))
echo "== street clip (tests/data/street_vtest.mp4, $frames frames, $backend)"
"$bench" --backend "$backend" --model selfie --model people --frames "$frames" \
    --every "$every" --rows 3 --sheet "$tmp/street.png" "$repo/tests/data/street_vtest.mp4" |
    grep -E '^\||frames keyed'
reduce "$tmp/street.png" "$out/people_vtest.png"

echo "== portrait (make-sample over grace_hopper.jpg, 1280x720, 24 frames, $backend)"
"$keyer" make-sample "$tmp/portrait.mp4" --image "$repo/tests/data/grace_hopper.jpg" \
    --size 1280x720 --frames 24 --fps 30 --preset ultrafast --no-audio > /dev/null 2>&1 ||
    { echo "people-sheet: make-sample failed"; exit 1; }
pframes=$(( frames < 24 ? frames : 24 ))
"$bench" --backend "$backend" --model selfie --model people --frames "$pframes" \
    --every $(( pframes > 1 ? pframes - 1 : 1 )) --rows 2 --sheet "$tmp/portrait.png" \
    "$tmp/portrait.mp4" | grep -E '^\||frames keyed'
reduce "$tmp/portrait.png" "$out/people_portrait.png"
ls -l "$out/people_vtest.png" "$out/people_portrait.png" | awk '{print $5, $NF}'
