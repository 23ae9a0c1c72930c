#!/usr/bin/env bash
# Streams fail alone: among several inputs, one that is not a video at all and one cut in the
# middle (head -c of a Matroska clip) fail without stopping the others. The fine stream is
# complete and the same bytes as its run alone, the cut one's output is finalised (probe-able)
# with the frames before the cut, the exit status is 1, and the summary and --stats name each
# failed stream and why.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

"$bin" make-sample "$tmp/fine.mp4" --image "$data/grace_hopper.jpg" --size 160x96 --frames 30 \
    --preset ultrafast 2>/dev/null || fail "make-sample fine"
"$bin" make-sample "$tmp/clip.mkv" --image "$data/messi5.jpg" --size 160x96 --frames 60 \
    --preset ultrafast 2>/dev/null || fail "make-sample clip"
size=$(stat -c %s "$tmp/clip.mkv")
head -c $((size / 2)) "$tmp/clip.mkv" > "$tmp/cut.mkv"
printf 'this is not a video\n' > "$tmp/notes.mp4"

opts=(--mask --model selfie --batch 4 --device cpu --preset ultrafast --threads 1)
"$bin" "$tmp/fine.mp4" -o "$tmp/alone.mp4" "${opts[@]}" 2>/dev/null || fail "the fine input alone"

# one input that is not a video, one fine
"$bin" "$tmp/notes.mp4" "$tmp/fine.mp4" -o "$tmp/a/" --stats "$tmp/a.json" "${opts[@]}" \
    2>"$tmp/a.log"
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/a.log"; fail "not a video + fine: exit $rc, expected 1"; }
grep -q "notes.mp4 -> .*FAILED after 0 frames: .*notes.mp4: cannot open" "$tmp/a.log" ||
    { cat "$tmp/a.log"; fail "the summary does not name the failed input and why"; }
grep -q "fine.mp4 -> .*: 30 frames" "$tmp/a.log" || { cat "$tmp/a.log"; fail "fine stream not complete"; }
grep -q "1 of 2 streams failed" "$tmp/a.log" || { cat "$tmp/a.log"; fail "no failure count"; }
[ ! -e "$tmp/a/notes.mp4" ] || fail "an input that cannot be opened left an output behind"
cmp -s "$tmp/a/fine.mp4" "$tmp/alone.mp4" || fail "the fine output differs from its run alone"
grep -q '"failed_streams": 1' "$tmp/a.json" || fail "--stats lacks failed_streams 1"
grep '"input": "[^"]*notes.mp4"' "$tmp/a.json" | grep -q '"error": "[^"]*cannot open' ||
    { cat "$tmp/a.json"; fail "--stats does not name the failed input and why"; }
grep '"input": "[^"]*fine.mp4"' "$tmp/a.json" | grep -q '"status": "ok"' ||
    fail "--stats: the fine stream is not ok"

# one input cut in the middle, one fine
"$bin" "$tmp/cut.mkv" "$tmp/fine.mp4" -o "$tmp/b/" --stats "$tmp/b.json" "${opts[@]}" \
    2>"$tmp/b.log"
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/b.log"; fail "cut + fine: exit $rc, expected 1"; }
grep -q "cut.mkv -> .*FAILED after [0-9]* frames: .*cut.mkv: the input stops after" "$tmp/b.log" ||
    { cat "$tmp/b.log"; fail "the summary does not name the cut input and why"; }
grep -q "fine.mp4 -> .*: 30 frames" "$tmp/b.log" || { cat "$tmp/b.log"; fail "fine stream not complete"; }
cmp -s "$tmp/b/fine.mp4" "$tmp/alone.mp4" || fail "the fine output differs from its run alone"
p=$("$bin" probe "$tmp/b/cut.mkv") || fail "the cut stream's output is not finalised"
frames=$(echo "$p" | field frames)
[ "$frames" -ge 10 ] && [ "$frames" -lt 60 ] || fail "the cut output holds $frames frames"
grep '"input": "[^"]*cut.mkv"' "$tmp/b.json" | grep -q '"error": "[^"]*stops after' ||
    { cat "$tmp/b.json"; fail "--stats does not name the cut input and why"; }
grep -q '"failed_streams": 1' "$tmp/b.json" || fail "--stats lacks failed_streams 1 (cut)"

# an output that cannot be written fails its stream alone
mkdir -p "$tmp/c"
mkdir "$tmp/c/clip.mkv" # a directory where the output file would go
"$bin" "$tmp/clip.mkv" "$tmp/fine.mp4" -o "$tmp/c/" -y "${opts[@]}" 2>"$tmp/c.log"
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/c.log"; fail "unwritable output: exit $rc, expected 1"; }
grep -q "clip.mkv -> .*FAILED" "$tmp/c.log" || { cat "$tmp/c.log"; fail "the unwritable output is not named"; }
cmp -s "$tmp/c/fine.mp4" "$tmp/alone.mp4" || fail "the fine output differs (unwritable neighbour)"
echo "PASS"
