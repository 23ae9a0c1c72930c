#!/usr/bin/env bash
# keyer IN -o OUT --model people: the main job keys the walkers of OpenCV's street clip
# (vtest.avi, Debian's opencv-doc; skipped when absent) through the session; the mask output
# has people (some pixels on) but little of the frame; a missing model file is named.
set -u
k=${KEYER_BIN:?}
vtest=${KEYER_VTEST:-/usr/share/doc/opencv-doc/examples/data/vtest.avi}
[ -f "$vtest" ] || { echo "SKIP: $vtest missing (opencv-doc)"; exit 77; }
command -v ffmpeg >/dev/null || { echo "SKIP: ffmpeg missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# the first 4 frames, as a clip the main job reads
ffmpeg -loglevel error -i "$vtest" -frames:v 4 -c:v ffv1 "$tmp/in.mkv" || fail "ffmpeg cut"
"$k" "$tmp/in.mkv" -o "$tmp/mask.mp4" --model people --mask --threads 2 > "$tmp/log" 2>&1 ||
    fail "people run: $(cat "$tmp/log")"
grep -q "model people" "$tmp/log" || fail "the report does not name model people: $(cat "$tmp/log")"
# the last frame's mask: fraction of pixels >= 128 (grey output, one byte per pixel)
ffmpeg -loglevel error -i "$tmp/mask.mp4" -vf "select=eq(n\,3)" -frames:v 1 -f rawvideo \
    -pix_fmt gray "$tmp/last.gray" || fail "ffmpeg decode"
frac=$(od -An -v -tu1 "$tmp/last.gray" | tr -s ' ' '\n' | awk 'NF { n++; if ($1 >= 128) on++ }
    END { printf "%.4f", on / n }')
echo "mask covers $frac of the last frame"
awk -v f="$frac" 'BEGIN { exit !(f > 0.002 && f < 0.05) }' ||
    fail "mask covers $frac of the frame (want people: 0.2% to 5%)"

out=$(KEYER_MODELS_DIR="$tmp/nomodels" "$k" "$tmp/in.mkv" -o "$tmp/x.mp4" --model people 2>&1) &&
    fail "missing models accepted"
echo "$out" | grep -q "pose_detection.tflite" || fail "message does not name the model file: $out"
echo "PASS"
