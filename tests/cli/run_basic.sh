#!/usr/bin/env bash
# keyer INPUT -o OUTPUT: the main job end to end on a clip the test makes itself (a pan over
# tests/data/grace_hopper.jpg with a tone). Checks the output's frame count, size, duration and
# audio; sampled frames of a --mask run against the photo path ('keyer key' on the same input
# frames, an independent route through the effects); alpha, colour and image replacement
# outputs; the --stats and --trace files.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

"$bin" make-sample "$tmp/in.mp4" --image "$data/grace_hopper.jpg" --size 640x360 --frames 45 \
    --fps 30 --preset ultrafast 2>/dev/null || fail "make-sample failed"
in=$("$bin" probe "$tmp/in.mp4") || fail "probe of the input failed"
[ "$(echo "$in" | field frames)" = 45 ] || fail "the sample has $(echo "$in" | field frames) frames"

# blur (the default effect), with statistics and a trace
"$bin" "$tmp/in.mp4" -o "$tmp/blur.mp4" --blur 16 --device cpu --preset ultrafast \
    --stats "$tmp/stats.json" --trace "$tmp/trace.json" 2>"$tmp/log" || { cat "$tmp/log"; fail "blur run failed"; }
grep -q "45 frames in" "$tmp/log" || { cat "$tmp/log"; fail "no summary line"; }
out=$("$bin" probe "$tmp/blur.mp4") || fail "probe of the output failed"
echo "$out"
for k in frames width height fps; do
    [ "$(echo "$out" | field $k)" = "$(echo "$in" | field $k)" ] ||
        fail "$k: output $(echo "$out" | field $k), input $(echo "$in" | field $k)"
done
awk -v a="$(echo "$in" | field duration)" -v b="$(echo "$out" | field duration)" \
    'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 0.05) }' || fail "duration changed"
[ "$(echo "$out" | field audio_streams)" -ge 1 ] || fail "the audio was not copied"
# the background changed, the picture is still the input's
"$bin" compare "$tmp/in.mp4" "$tmp/blur.mp4" --every 15 > "$tmp/cmp" || fail "compare failed"
awk -F= '/^min_psnr=/ { exit !($2 > 18 && $2 < 45) }' "$tmp/cmp" || { cat "$tmp/cmp"; fail "blur output is not a blurred input"; }

for k in keyer_stats_version stages bottleneck latency_ms p99 queue streams; do
    grep -q "\"$k\"" "$tmp/stats.json" || fail "stats lack $k"
done
grep -q '"written": 45' "$tmp/stats.json" || fail "stats do not count 45 frames"
grep -q '"traceEvents"' "$tmp/trace.json" || fail "trace lacks traceEvents"
[ "$(grep -o '"name":"composite","cat"' "$tmp/trace.json" | wc -l)" -eq 45 ] || fail "trace lacks composite events"
if command -v python3 >/dev/null; then
    python3 -c "import json,sys; json.load(open(sys.argv[1])); json.load(open(sys.argv[2]))" \
        "$tmp/stats.json" "$tmp/trace.json" || fail "stats or trace is not valid JSON"
fi

# sampled frames of the matte against the photo path on the same input frames
"$bin" "$tmp/in.mp4" -o "$tmp/mask.mp4" --mask --smooth 0 --model selfie-landscape -q 2>/dev/null ||
    fail "mask run failed"
for k in 0 22 44; do
    "$bin" probe "$tmp/in.mp4" --frame $k --png "$tmp/in$k.png" >/dev/null || fail "frame $k"
    "$bin" probe "$tmp/mask.mp4" --frame $k --png "$tmp/mask$k.png" >/dev/null || fail "mask frame $k"
    "$bin" key "$tmp/in$k.png" -o "$tmp/want$k.png" --mask --model selfie-landscape >/dev/null 2>&1 ||
        fail "keyer key on frame $k failed"
    "$bin" compare "$tmp/want$k.png" "$tmp/mask$k.png" --min-psnr 30 > "$tmp/cmp$k" ||
        { cat "$tmp/cmp$k"; fail "matte of frame $k differs from the photo path"; }
done

# alpha: ProRes 4444 in .mov keeps an alpha channel; the decoded frames are RGBA
"$bin" "$tmp/in.mp4" -o "$tmp/alpha.mov" --alpha -q 2>/dev/null || fail "alpha run failed"
a=$("$bin" probe "$tmp/alpha.mov") || fail "probe of the alpha output failed"
[ "$(echo "$a" | field frames)" = 45 ] || fail "alpha output frames"
[ "$(echo "$a" | field format)" = rgba ] || fail "alpha output has no alpha ($(echo "$a" | field format))"

# replacement by a colour (against the photo path) and by a picture
"$bin" "$tmp/in.mp4" -o "$tmp/green.mp4" --replace '#00ff00' --smooth 0 --model selfie-landscape -q \
    2>/dev/null || fail "colour replacement failed"
"$bin" probe "$tmp/green.mp4" --frame 22 --png "$tmp/green22.png" >/dev/null || fail "green frame"
"$bin" key "$tmp/in22.png" -o "$tmp/wgreen22.png" --replace 00ff00 --model selfie-landscape \
    >/dev/null 2>&1 || fail "keyer key --replace failed"
"$bin" compare "$tmp/wgreen22.png" "$tmp/green22.png" --min-psnr 28 > "$tmp/cmpg" ||
    { cat "$tmp/cmpg"; fail "colour replacement differs from the photo path"; }
"$bin" "$tmp/in.mp4" -o "$tmp/photo.mp4" --replace "$data/messi5.jpg" -q 2>/dev/null ||
    fail "image replacement failed"
[ "$("$bin" probe "$tmp/photo.mp4" | field frames)" = 45 ] || fail "image replacement frames"
# a video behind the person: its frames in step, looped (10 frames under 45)
"$bin" make-sample "$tmp/bg.mp4" --image "$data/messi5.jpg" --size 320x240 --frames 10 \
    --preset ultrafast --no-audio 2>/dev/null || fail "make-sample bg"
"$bin" "$tmp/in.mp4" -o "$tmp/video.mp4" --replace "$tmp/bg.mp4" -q 2>/dev/null ||
    fail "video replacement failed"
[ "$("$bin" probe "$tmp/video.mp4" | field frames)" = 45 ] || fail "video replacement frames"
# the background moves: frame 5 is not frame 0 with a still background
for k in 0 5; do "$bin" probe "$tmp/video.mp4" --frame $k --png "$tmp/v$k.png" >/dev/null; done
"$bin" compare "$tmp/v0.png" "$tmp/v5.png" --min-psnr 40 >/dev/null 2>&1 &&
    fail "the background video does not move"
# --realtime reads at the frame rate: 45 frames at 30 fps take at least 1.4 s
t0=$(date +%s%N)
"$bin" "$tmp/in.mp4" --blur --realtime --mode latency --stats "$tmp/rt.json" -q 2>/dev/null ||
    fail "realtime run failed"
t1=$(date +%s%N)
[ $(( (t1 - t0) / 1000000 )) -ge 1400 ] || fail "--realtime took $(( (t1 - t0) / 1000000 )) ms"
grep -q '"mode": "latency"' "$tmp/rt.json" || fail "latency mode not reported"
echo "PASS"
