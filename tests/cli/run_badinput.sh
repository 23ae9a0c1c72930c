#!/usr/bin/env bash
# Bad inputs and bad usage of the main job: each gives a message naming the problem and a
# non-zero exit status (1 for failures, 2 for usage errors), and leaves no output behind.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

# expect STATUS PATTERN ARGS...: runs keyer ARGS, checks the exit status and the message
expect() {
    local want=$1 pattern=$2
    shift 2
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ $rc -eq "$want" ] || { cat "$tmp/err"; fail "keyer $*: exit $rc, expected $want"; }
    grep -qi -- "$pattern" "$tmp/err" || { cat "$tmp/err"; fail "keyer $*: message lacks '$pattern'"; }
}

"$bin" make-sample "$tmp/ok.mp4" --image "$data/grace_hopper.jpg" --size 160x96 --frames 5 \
    --preset ultrafast 2>/dev/null || fail "make-sample failed"

expect 1 "$tmp/missing.mp4" "$tmp/missing.mp4" -o "$tmp/o1.mp4"
printf 'this is not a video\n' > "$tmp/notes.mp4"
expect 1 "notes.mp4" "$tmp/notes.mp4" -o "$tmp/o2.mp4"
: > "$tmp/empty.mp4"
expect 1 "empty.mp4" "$tmp/empty.mp4" -o "$tmp/o3.mp4"
expect 1 "$tmp" "$tmp" -o "$tmp/o4.mp4"
head -c 3000 "$tmp/ok.mp4" > "$tmp/cut.mp4"
expect 1 "cut.mp4" "$tmp/cut.mp4" -o "$tmp/o5.mp4"
for o in o1 o2 o3 o4 o5; do
    [ ! -e "$tmp/$o.mp4" ] || fail "a failed run left $o.mp4 behind"
done

# usage
expect 2 "no input" -o "$tmp/x.mp4"
expect 2 "no output" "$tmp/ok.mp4"
expect 2 "unknown option '--frobnicate'" "$tmp/ok.mp4" -o "$tmp/x.mp4" --frobnicate
expect 2 "unknown device 'gpu'" "$tmp/ok.mp4" -o "$tmp/x.mp4" --device gpu
expect 2 "not a colour" "$tmp/ok.mp4" -o "$tmp/x.mp4" --replace "$tmp/nothing.jpg"
expect 2 "--threshold" "$tmp/ok.mp4" -o "$tmp/x.mp4" --threshold 3
expect 2 "batch" "$tmp/ok.mp4" -o "$tmp/x.mp4" --batch 1000
expect 2 "needs a value" "$tmp/ok.mp4" -o
expect 1 "no-such-model" "$tmp/ok.mp4" -o "$tmp/x.mp4" --model no-such-model
expect 1 "would overwrite its input" "$tmp/ok.mp4" -o "$tmp/ok.mp4" -y
# a second run does not overwrite without -y, and never with -n
"$bin" "$tmp/ok.mp4" -o "$tmp/done.mp4" -q 2>/dev/null || fail "a good run failed"
expect 1 "exists (use -y" "$tmp/ok.mp4" -o "$tmp/done.mp4"
expect 1 "-n was given" "$tmp/ok.mp4" -o "$tmp/done.mp4" -n
"$bin" "$tmp/ok.mp4" -o "$tmp/done.mp4" -y -q 2>/dev/null || fail "-y did not overwrite"
# an output the muxer cannot make
expect 1 "alpha" "$tmp/ok.mp4" -o "$tmp/alpha.mp4" --alpha --codec libx264
# configuration files
printf 'blur: 12\nfrobnicate: 3\n' > "$tmp/bad.yaml"
expect 2 "bad.yaml:2" "$tmp/ok.mp4" -o "$tmp/y.mp4" --config "$tmp/bad.yaml"
printf 'blur: [1, 2\n' > "$tmp/broken.yaml"
expect 2 "broken.yaml" "$tmp/ok.mp4" -o "$tmp/y.mp4" --config "$tmp/broken.yaml"
expect 2 "cannot open" "$tmp/ok.mp4" -o "$tmp/y.mp4" --config "$tmp/none.yaml"
echo "PASS"
