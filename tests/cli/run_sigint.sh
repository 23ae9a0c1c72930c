#!/usr/bin/env bash
# Interrupting a run (SIGINT, as Ctrl-C does) stops reading, finishes the frames already read and
# finalises the output: the file is valid, holds every frame the summary reports and keeps the
# audio; the exit status is 130. A second signal is not needed.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

"$bin" make-sample "$tmp/long.mp4" --image "$data/grace_hopper.jpg" --size 640x360 --frames 900 \
    --fps 30 --preset ultrafast 2>/dev/null || fail "make-sample failed"
"$bin" "$tmp/long.mp4" -o "$tmp/cut.mp4" --device cpu --no-progress 2>"$tmp/log" &
pid=$!
# wait until frames are flowing (the fragmented MP4 grows), then interrupt
for _ in $(seq 1 100); do
    size=$(stat -c %s "$tmp/cut.mp4" 2>/dev/null || echo 0)
    [ "$size" -gt 20000 ] && break
    sleep 0.1
done
kill -INT $pid
wait $pid
rc=$?
cat "$tmp/log" | grep -v '^\[' 
[ $rc -eq 130 ] || fail "exit status $rc, expected 130"
grep -q "interrupted" "$tmp/log" || fail "no 'interrupted' message"
n=$(sed -n 's/^keyer: \([0-9]*\) frames* in .*/\1/p' "$tmp/log")
[ -n "$n" ] || fail "no summary"
out=$("$bin" probe "$tmp/cut.mp4") || fail "the interrupted output is not readable"
echo "$out"
[ "$(echo "$out" | field frames)" = "$n" ] || fail "the file holds $(echo "$out" | field frames) frames, the summary says $n"
[ "$n" -gt 0 ] && [ "$n" -lt 900 ] || fail "$n frames: not an interrupted run"
[ "$(echo "$out" | field audio_streams)" -ge 1 ] || fail "the audio is missing"
echo "PASS"
