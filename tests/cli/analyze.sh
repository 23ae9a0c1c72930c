#!/usr/bin/env bash
# keyer analyze: faces (with the mesh), pose and a kNN graph drawn over the test photo and
# over a short clip; the summary reports what was found and the output changes the pixels.
# Skipped (77) when the keyer binary has no 'analyze' command wired in yet.
set -u
bin=${KEYER_BIN:?KEYER_BIN is not set}
probe=$("$bin" analyze --help 2>&1)
if echo "$probe" | grep -q "unknown command"; then
    echo "SKIP: this keyer has no analyze command"
    exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
data=${KEYER_TEST_DATA:-$repo/tests/data}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A still image in, a video out: one frame, a pose found.
out=$("$bin" analyze "$data/grace_hopper.jpg" -o "$tmp/gh.mkv" --mesh --pose --knn 3 --threads 2) ||
    fail "analyze exited with $?"
echo "$out"
echo "$out" | grep -q "1 frames" || fail "expected 1 frame"
echo "$out" | grep -q "pose in 1 frames" || fail "expected a pose"
[ -s "$tmp/gh.mkv" ] || fail "no output file"

# Usage errors: no output, a bad --knn, an unknown option.
"$bin" analyze "$data/grace_hopper.jpg" > /dev/null 2>&1 && fail "accepted a missing -o"
"$bin" analyze "$data/grace_hopper.jpg" -o "$tmp/x.mkv" --knn 0 > /dev/null 2>&1 &&
    fail "accepted --knn 0"
"$bin" analyze "$data/grace_hopper.jpg" -o "$tmp/x.mkv" --frobnicate > /dev/null 2>&1 &&
    fail "accepted an unknown option"
# A missing input fails with a message naming it.
msg=$("$bin" analyze "$tmp/missing.mp4" -o "$tmp/x.mkv" 2>&1) && fail "accepted a missing input"
echo "$msg" | grep -q "missing.mp4" || fail "the message does not name the input: $msg"
echo "PASS"
