#!/usr/bin/env bash
# keyer INPUT -o OUTPUT --detect ...: faces found, tracked with one stable id and drawn on a clip
# the test makes (a pan over tests/data/grace_hopper.jpg), with and without keying; the
# --export file has one JSON object per frame; a drawn frame differs from the input only
# around the face; bad combinations fail with a usage error.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

"$bin" make-sample "$tmp/in.mp4" --image "$data/grace_hopper.jpg" --size 640x360 --frames 20 \
    --fps 30 --preset ultrafast 2>/dev/null || fail "make-sample failed"

# detection alone: the input's pixels with boxes and ids drawn, and the export
"$bin" "$tmp/in.mp4" -o "$tmp/det.mp4" --detect faces --draw boxes,ids,keypoints \
    --export "$tmp/det.jsonl" --device cpu --preset ultrafast 2>"$tmp/log" ||
    { cat "$tmp/log"; fail "detect run failed"; }
cat "$tmp/log"
grep -q "model none" "$tmp/log" || fail "detection alone still ran the segmentation model"
grep -q "detector face-short" "$tmp/log" || fail "faces alone did not use the session's detector"
out=$("$bin" probe "$tmp/det.mp4") || fail "probe of the output failed"
[ "$(echo "$out" | field frames)" = 20 ] || fail "output has $(echo "$out" | field frames) frames"
[ "$(wc -l < "$tmp/det.jsonl")" = 20 ] || fail "export has $(wc -l < "$tmp/det.jsonl") lines"
# every line is one object for its frame, in order; the pan shows the face in the first
# ten frames and has moved down to the jacket by the last (no face there)
for i in 0 5 10 19; do
    line=$(sed -n "$((i + 1))p" "$tmp/det.jsonl")
    echo "$line" | grep -q "^{\"stream\":0,\"input\":\"$tmp/in.mp4\",\"frame\":$i," ||
        fail "line $((i + 1)) is not frame $i: ${line:0:120}"
    if [ $i -lt 19 ]; then
        echo "$line" | grep -q '"faces":\[{"id":' || fail "no face in frame $i: ${line:0:200}"
        echo "$line" | grep -q '"box":\[' || fail "frame $i has no box"
    else
        echo "$line" | grep -q '"faces":\[\]' || fail "a face on the jacket in frame $i"
    fi
done
# once the tracker confirms it (after 3 hits), the face keeps one id while it is in view
ids=$(sed -n '3,10p' "$tmp/det.jsonl" | grep -o '"faces":\[{"id":[0-9]*' | sort -u)
[ "$(echo "$ids" | wc -l)" = 1 ] || fail "the face changed ids: $ids"
echo "$ids" | grep -q '"id":0$' && fail "the face was never confirmed"
grep -q "1 face id" "$tmp/log" || fail "summary does not count one face id"
# the drawing changed the frame near the face only: a high PSNR against the input overall
"$bin" compare "$tmp/in.mp4" "$tmp/det.mp4" --every 5 > "$tmp/cmp" || fail "compare failed"
awk -F= '/^min_psnr=/ { exit !($2 > 20 && $2 < 60) }' "$tmp/cmp" ||
    { cat "$tmp/cmp"; fail "the output is not the input with overlays"; }

# detection with keying: blurred background, boxes drawn, same faces exported
"$bin" "$tmp/in.mp4" -o "$tmp/blurdet.mp4" --blur --detect faces --export "$tmp/b.jsonl" \
    --device cpu --preset ultrafast 2>"$tmp/log2" || { cat "$tmp/log2"; fail "blur + detect failed"; }
[ "$("$bin" probe "$tmp/blurdet.mp4" | field frames)" = 20 ] || fail "blur + detect lost frames"
[ "$(wc -l < "$tmp/b.jsonl")" = 20 ] || fail "blur + detect: export lines missing"
cmp <(grep -o '"frame":[0-9]*,.*"faces":\[{"id":[0-9]*' "$tmp/det.jsonl" | cut -d, -f1) \
    <(grep -o '"frame":[0-9]*,.*"faces":\[{"id":[0-9]*' "$tmp/b.jsonl" | cut -d, -f1) ||
    fail "blur + detect found faces in other frames than detection alone"

# with the face mesh: per-stream analysers (the frame callback), landmarks exported, a face in
# every frame where the session's detector found one (the mesh follows the face a few frames
# further as it leaves the picture)
"$bin" "$tmp/in.mp4" -o "$tmp/mesh.mp4" --detect faces --draw boxes,mesh --export "$tmp/m.jsonl" \
    --device cpu --preset ultrafast 2>"$tmp/log4" || { cat "$tmp/log4"; fail "mesh run failed"; }
grep -q "detector face-short" "$tmp/log4" && fail "the mesh run used the session's detector"
[ "$(wc -l < "$tmp/m.jsonl")" = 20 ] || fail "mesh: export lines missing"
sed -n 5p "$tmp/m.jsonl" | grep -q '"landmarks":\[\[' || fail "mesh: no landmarks in frame 4"
missed=$(comm -23 <(grep -o '"frame":[0-9]*,.*"faces":\[{"id":[0-9]*' "$tmp/det.jsonl" | cut -d, -f1 | sort) \
                  <(grep -o '"frame":[0-9]*,.*"faces":\[{"id":[0-9]*' "$tmp/m.jsonl" | cut -d, -f1 | sort))
[ -z "$missed" ] || fail "the mesh run found no face in frames where the detector did: $missed"

# the face mesh on the session's device (the default device): the session's detector and its
# face-mesh stage, and on the CPU exactly the per-stream analysers' export (the same crops,
# tracking and ids); on a GPU the same frames with faces, with landmarks
"$bin" "$tmp/in.mp4" -o "$tmp/mesh2.mp4" --detect faces --draw boxes,mesh --export "$tmp/m2.jsonl" \
    --preset ultrafast 2>"$tmp/log5" || { cat "$tmp/log5"; fail "mesh stage run failed"; }
grep -q "detector face-short" "$tmp/log5" || fail "the mesh stage run did not use the session's detector"
[ "$("$bin" probe "$tmp/mesh2.mp4" | field frames)" = 20 ] || fail "mesh stage: frames lost"
if grep -q " on cpu," "$tmp/log5"; then
    cmp "$tmp/m.jsonl" "$tmp/m2.jsonl" || fail "the mesh stage's export differs from the per-stream analysers'"
else
    cmp <(grep -o '"frame":[0-9]*,.*"faces":\[{"id":[0-9]*' "$tmp/m.jsonl" | cut -d, -f1) \
        <(grep -o '"frame":[0-9]*,.*"faces":\[{"id":[0-9]*' "$tmp/m2.jsonl" | cut -d, -f1) ||
        fail "the mesh stage found faces in other frames than the per-stream analysers"
    sed -n 5p "$tmp/m2.jsonl" | grep -q '"landmarks":\[\[' || fail "mesh stage: no landmarks in frame 4"
fi

# the pose: with --device cpu the per-stream trackers (the frame callback); on the session's
# device its detector (full range, the seeding) and pose stage, and on the CPU exactly the
# per-stream trackers' export (the same crops, seeding and tracking); the skeleton drawn the
# same; on a GPU the same frames with a pose
"$bin" "$tmp/in.mp4" -o "$tmp/pose.mp4" --detect pose --draw skeleton --export "$tmp/p.jsonl" \
    --device cpu --preset ultrafast 2>"$tmp/log6" || { cat "$tmp/log6"; fail "pose run failed"; }
grep -q "detector face-full" "$tmp/log6" && fail "the --device cpu pose run used the session's detector"
[ "$(grep -c '"pose":{"presence"' "$tmp/p.jsonl")" -ge 5 ] || fail "pose: fewer than 5 frames with a pose"
"$bin" "$tmp/in.mp4" -o "$tmp/pose2.mp4" --detect pose --draw skeleton --export "$tmp/p2.jsonl" \
    --preset ultrafast 2>"$tmp/log7" || { cat "$tmp/log7"; fail "pose stage run failed"; }
grep -q "detector face-full" "$tmp/log7" || fail "the pose stage run did not use the session's detector"
[ "$("$bin" probe "$tmp/pose2.mp4" | field frames)" = 20 ] || fail "pose stage: frames lost"
if grep -q " on cpu," "$tmp/log7"; then
    cmp "$tmp/p.jsonl" "$tmp/p2.jsonl" || fail "the pose stage's export differs from the per-stream trackers'"
    "$bin" compare "$tmp/pose.mp4" "$tmp/pose2.mp4" --every 5 > "$tmp/cmp2" || fail "compare failed"
    awk -F= '/^min_psnr=/ { exit !($2 >= 99) }' "$tmp/cmp2" ||
        { cat "$tmp/cmp2"; fail "the pose stage's skeleton is drawn differently"; }
else
    cmp <(grep -o '"frame":[0-9]*,.*"pose":.' "$tmp/p.jsonl" | sed 's/,.*"pose"/ /') \
        <(grep -o '"frame":[0-9]*,.*"pose":.' "$tmp/p2.jsonl" | sed 's/,.*"pose"/ /') ||
        echo "note: the pose stage on the GPU found a pose in other frames than the CPU trackers"
fi

# usage errors
"$bin" "$tmp/in.mp4" -o "$tmp/x.mp4" --draw boxes 2>/dev/null
[ $? = 2 ] || fail "--draw without --detect was accepted"
"$bin" "$tmp/in.mp4" -o "$tmp/x.mp4" --detect faces --mask 2>/dev/null
[ $? = 2 ] || fail "--mask with drawing was accepted"
"$bin" "$tmp/in.mp4" -o "$tmp/x.mp4" --detect elephants 2>/dev/null
[ $? = 2 ] || fail "an unknown --detect was accepted"
"$bin" "$tmp/in.mp4" -o "$tmp/x.mp4" --detect faces --draw graph:k=99 2>/dev/null
[ $? = 2 ] || fail "graph:k=99 was accepted"
# an export path that cannot be written: a clear error, exit 1
"$bin" "$tmp/in.mp4" -o "$tmp/x.mp4" --detect faces --export "$tmp/no/such/dir.jsonl" 2>"$tmp/log3"
[ $? = 1 ] || fail "an unwritable export path did not fail"
grep -q "no/such/dir.jsonl" "$tmp/log3" || fail "the error does not name the export file"
echo "detect: ok"
