#!/usr/bin/env bash
# scripts/trace-latency.py on a made-up trace whose latencies are known: two streams of three
# frames at 30 frames/s, stream 1's frame 2 late (a slow write), one slow pose batch; and on a
# trace without a frame 0 (an error). The figures printed are checked against the hand-worked
# ones (release of frame f: frame 0's read start + f x 33,333.3 us).
set -u
fail() { echo "FAIL: $*"; exit 1; }
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py=$(command -v python3) || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ts and dur in microseconds. Stream 0 starts at 1000, stream 1 at 1500.
# stream 0: frame 0 written by 11000 (latency 10.0 ms), frame 1 released 34333.3, written by
#   46333.3 (12.0), frame 2 released 67666.7, written by 81666.7 (14.0);
# stream 1: frame 0 20.0 ms, frame 1 released 34833.3, 5.0 ms; frame 2 released 68166.7,
#   written by 128166.7 (60.0 ms: read 2.0, then 40.0 to the write, write 18.0).
cat > "$tmp/t.json" <<'EOF'
{"traceEvents":[
{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"read 0"}},
{"name":"read","ph":"X","pid":1,"tid":1,"ts":1000,"dur":0,"args":{"stream":0,"frame":0,"frames":1}},
{"name":"read","ph":"X","pid":1,"tid":1,"ts":34333.333,"dur":1000,"args":{"stream":0,"frame":1,"frames":1}},
{"name":"read","ph":"X","pid":1,"tid":1,"ts":67666.667,"dur":1000,"args":{"stream":0,"frame":2,"frames":1}},
{"name":"read","ph":"X","pid":1,"tid":2,"ts":1500,"dur":0,"args":{"stream":1,"frame":0,"frames":1}},
{"name":"read","ph":"X","pid":1,"tid":2,"ts":34833.333,"dur":1000,"args":{"stream":1,"frame":1,"frames":1}},
{"name":"read","ph":"X","pid":1,"tid":2,"ts":68166.667,"dur":2000,"args":{"stream":1,"frame":2,"frames":1}},
{"name":"write","ph":"X","pid":1,"tid":3,"ts":10000,"dur":1000,"args":{"stream":0,"frame":0,"frames":1}},
{"name":"write","ph":"X","pid":1,"tid":3,"ts":45333.333,"dur":1000,"args":{"stream":0,"frame":1,"frames":1}},
{"name":"write","ph":"X","pid":1,"tid":3,"ts":80666.667,"dur":1000,"args":{"stream":0,"frame":2,"frames":1}},
{"name":"write","ph":"X","pid":1,"tid":4,"ts":20500,"dur":1000,"args":{"stream":1,"frame":0,"frames":1}},
{"name":"write","ph":"X","pid":1,"tid":4,"ts":38833.333,"dur":1000,"args":{"stream":1,"frame":1,"frames":1}},
{"name":"write","ph":"X","pid":1,"tid":4,"ts":110166.667,"dur":18000,"args":{"stream":1,"frame":2,"frames":1}},
{"name":"pose","ph":"X","pid":1,"tid":5,"ts":5000,"dur":4000,"args":{"frames":2}},
{"name":"pose","ph":"X","pid":1,"tid":5,"ts":71000,"dur":30000,"args":{"frames":2}}
]}
EOF
out=$("$py" "$repo/scripts/trace-latency.py" "$tmp/t.json" --first 1 --worst 2) ||
    fail "exited with $?"
echo "$out"
# all six: 5, 10, 12, 14, 20, 60 -> p50 12.0 (3rd of 6), p99 and max 60.0
echo "$out" | grep -q "all 12.0 / 60.0 / 60.0 ms (6 frames)" || fail "latency over all frames"
echo "$out" | grep -q "frames 0-0 10.0 / 20.0 / 20.0 ms (2 frames)" || fail "the first frames"
echo "$out" | grep -q "frames 1+ 12.0 / 60.0 / 60.0 ms (4 frames)" || fail "the steady state"
echo "$out" | grep -q "slowest frame indices.*: 2: 60.0 / 14.0, 1; 0: 20.0 / 10.0, 0" ||
    fail "the slowest frame indices"
echo "$out" | grep -q "1/2: 60.0 = 2.0 \[2.0\] + 40.0 + 18.0; 1/0: 20.0 = 0.0 \[0.0\] + 19.0 + 1.0" ||
    fail "the slowest frames' split"
# the slow batch: 70 ms after the first release (1000 us) = frame 2.1, 2 frames, 30.0 ms
echo "$out" | grep -q "pose: 2 batches, mean 17.00 ms, p99 30.00; .*: 70 = f2.1, 2, 30.0; 4 = f0.1, 2, 4.0" ||
    fail "the pose batches"

# No frame 0: an error, exit 1.
grep -v '"frame":0,' "$tmp/t.json" > "$tmp/no0.json"
"$py" "$repo/scripts/trace-latency.py" "$tmp/no0.json" > /dev/null 2>&1 && fail "accepted a trace without frame 0"
echo "PASS"
