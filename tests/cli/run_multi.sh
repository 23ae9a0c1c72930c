#!/usr/bin/env bash
# Several inputs in one run (keyer a.mp4 b.mp4 -o outdir/): inputs of different sizes and frame
# rates share the batches, each keeps its own temporal state, and each output is the same as
# the output of a run with that input alone.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

"$bin" make-sample "$tmp/wide.mp4" --image "$data/grace_hopper.jpg" --size 480x270 --frames 40 \
    --fps 30 --preset ultrafast 2>/dev/null || fail "make-sample wide"
"$bin" make-sample "$tmp/tall.mp4" --image "$data/messi5.jpg" --size 240x320 --frames 30 \
    --fps 25 --preset ultrafast 2>/dev/null || fail "make-sample tall"
"$bin" make-sample "$tmp/square.mkv" --image "$data/grace_hopper.jpg" --size 256x256 --frames 20 \
    --fps 24 --preset ultrafast --no-audio 2>/dev/null || fail "make-sample square"

# one run, three streams; the model is fixed so that separate runs pick the same one
opts=(--mask --model selfie --batch 4 --device cpu --preset ultrafast)
"$bin" "$tmp/wide.mp4" "$tmp/tall.mp4" "$tmp/square.mkv" -o "$tmp/together/" "${opts[@]}" \
    2>"$tmp/log" || { cat "$tmp/log"; fail "the multi-stream run failed"; }
grep -q "90 frames in" "$tmp/log" || { cat "$tmp/log"; fail "the summary does not count 90 frames"; }
for f in wide.mp4 tall.mp4 square.mkv; do
    [ -f "$tmp/together/$f" ] || fail "no output $f in the directory"
done
# separately
mkdir -p "$tmp/alone"
for f in wide.mp4 tall.mp4 square.mkv; do
    "$bin" "$tmp/$f" -o "$tmp/alone/$f" "${opts[@]}" 2>/dev/null || fail "the run of $f alone failed"
done
for f in wide.mp4 tall.mp4 square.mkv; do
    a=$("$bin" probe "$tmp/together/$f") || fail "probe $f"
    b=$("$bin" probe "$tmp/$f") || fail "probe input $f"
    for k in frames width height fps audio_streams; do
        [ "$(echo "$a" | field $k)" = "$(echo "$b" | field $k)" ] ||
            fail "$f: $k is $(echo "$a" | field $k), the input's $(echo "$b" | field $k)"
    done
    "$bin" compare "$tmp/together/$f" "$tmp/alone/$f" --min-psnr 60 > "$tmp/cmp" ||
        { cat "$tmp/cmp"; fail "$f differs between the shared run and its own run"; }
done
echo "PASS"
