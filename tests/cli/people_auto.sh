#!/usr/bin/env bash
# keyer IN -o OUT with no --model: the automatic choice between the selfie model and people
# mode (src/vision/people_switch.h). On OpenCV's street clip (the start of vtest.avi, committed
# as tests/data/street_vtest.mp4) the selfie model finds no one large, so after 5 frames the
# stream switches to people mode: the summary and --stats say so and count the frames. On the
# sample clip (a portrait near the camera) the stream stays with the selfie model and the
# output is byte for byte that of --model selfie (the same decoded frames).
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
command -v ffmpeg >/dev/null || { echo "SKIP: ffmpeg missing"; exit 77; }

# the sample clip: one person near the camera all along
"$bin" make-sample "$tmp/near.mp4" --image "$data/grace_hopper.jpg" --size 640x360 --frames 24 \
    --fps 30 --preset ultrafast 2>/dev/null || fail "make-sample failed"
"$bin" "$tmp/near.mp4" -o "$tmp/auto.mp4" --mask --device cpu --threads 2 --preset ultrafast \
    --stats "$tmp/auto.json" > "$tmp/log" 2>&1 || fail "default run: $(cat "$tmp/log")"
"$bin" "$tmp/near.mp4" -o "$tmp/selfie.mp4" --mask --device cpu --threads 2 --preset ultrafast \
    --model selfie-landscape > "$tmp/log2" 2>&1 || fail "selfie run: $(cat "$tmp/log2")"
cat "$tmp/log"
grep -q "people mode" "$tmp/log" && fail "the sample clip went to people mode: $(cat "$tmp/log")"
grep -q '"auto_people": true' "$tmp/auto.json" || fail "stats: auto_people is not true"
grep -q '"frames_people": 0' "$tmp/auto.json" || fail "stats: frames in people mode on the sample"
a=$(ffmpeg -loglevel error -i "$tmp/auto.mp4" -map 0:v -f framemd5 - | grep -v '^#') || fail "decode auto"
b=$(ffmpeg -loglevel error -i "$tmp/selfie.mp4" -map 0:v -f framemd5 - | grep -v '^#') || fail "decode selfie"
[ -n "$a" ] && [ "$a" = "$b" ] || fail "the default output differs from --model selfie-landscape's"
[ "$(echo "$a" | wc -l)" -eq 24 ] || fail "$(echo "$a" | wc -l) frames decoded, want 24"

# the street clip: the first 49 frames of vtest.avi, committed (tests/data/PROVENANCE.md);
# KEYER_VTEST names another copy (vtest.avi itself)
vtest=${KEYER_VTEST:-$data/street_vtest.mp4}
[ -f "$vtest" ] || fail "$vtest missing"
# 7 frames: the selfie model for the first 4, people mode from the fifth (5 frames in a row
# with no one large)
ffmpeg -loglevel error -i "$vtest" -frames:v 7 -c:v ffv1 "$tmp/street.mkv" || fail "ffmpeg cut"
"$bin" "$tmp/street.mkv" -o "$tmp/street.mp4" --mask --device cpu --threads 2 \
    --preset ultrafast --stats "$tmp/street.json" > "$tmp/log3" 2>&1 ||
    fail "street run: $(cat "$tmp/log3")"
cat "$tmp/log3"
grep -q "automatic model: selfie where someone is large in the frame, people mode on the other 3 frames" \
    "$tmp/log3" || fail "the summary does not say 3 frames in people mode"
grep -q "street.mp4: 7 frames, .*people mode on 3 frames" "$tmp/log3" ||
    fail "the stream's line does not say 3 frames in people mode"
grep -q '"frames_people": 3' "$tmp/street.json" || fail "stats do not count 3 people frames"
# the last frame's mask keys people, not the selfie model's blobs: a little of the frame
ffmpeg -loglevel error -i "$tmp/street.mp4" -vf "select=eq(n\,6)" -frames:v 1 -f rawvideo \
    -pix_fmt gray "$tmp/last.gray" || fail "ffmpeg decode"
frac=$(od -An -v -tu1 "$tmp/last.gray" | tr -s ' ' '\n' | awk 'NF { n++; if ($1 >= 128) on++ }
    END { printf "%.4f", on / n }')
echo "mask covers $frac of the last frame"
awk -v f="$frac" 'BEGIN { exit !(f > 0.002 && f < 0.05) }' ||
    fail "mask covers $frac of the frame (want people: 0.2% to 5%)"
# with --model selfie the same clip never switches
"$bin" "$tmp/street.mkv" -o "$tmp/street2.mp4" --mask --device cpu --threads 2 \
    --preset ultrafast --model selfie --stats "$tmp/street2.json" > "$tmp/log4" 2>&1 ||
    fail "street selfie run: $(cat "$tmp/log4")"
grep -q "people mode" "$tmp/log4" && fail "--model selfie switched: $(cat "$tmp/log4")"
grep -q '"auto_people": false' "$tmp/street2.json" || fail "--model selfie: auto_people not false"
echo "PASS"
