#!/usr/bin/env bash
# keyer bench nn: the JSON report has every field with sane values, for a registry name and for a
# path; bad arguments and unknown models fail with a message and a non-zero exit status.
# Skipped (77) when the keyer binary has no 'bench' command wired in yet.
set -u
bin=${KEYER_BIN:?KEYER_BIN is not set}
probe=$("$bin" bench --help 2>&1)
if echo "$probe" | grep -q "unknown command"; then
    echo "SKIP: this keyer has no bench command"
    exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }

# One JSON object with the documented fields (checked with awk; no jq needed).
out=$("$bin" bench nn --model selfie --backend cpu --threads 1 --batch 2 --iterations 5 --warmup 1 --json) ||
    fail "bench nn --json exited with $?"
echo "$out"
[ "$(echo "$out" | wc -l)" -eq 1 ] || fail "expected one line of JSON"
for key in model backend threads batch median_ms p90_ms cpu_ms fps gflops arena_bytes weight_bytes; do
    echo "$out" | grep -q "\"$key\": " || fail "JSON lacks \"$key\""
done
echo "$out" | grep -q '"backend": "cpu"' || fail "backend is not cpu"
echo "$out" | grep -q '"threads": 1,' || fail "threads is not 1"
echo "$out" | grep -q '"batch": 2,' || fail "batch is not 2"
num() { echo "$out" | sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p"; }
awk -v m="$(num median_ms)" -v p="$(num p90_ms)" -v f="$(num fps)" -v g="$(num gflops)" \
    -v a="$(num arena_bytes)" -v w="$(num weight_bytes)" 'BEGIN {
        if (!(m > 0 && p >= m)) { print "median/p90 wrong"; exit 1 }
        # fps = batch / median
        if (f < 0.99 * 2000 / m || f > 1.01 * 2000 / m) { print "fps is not batch/median"; exit 1 }
        # 59.2 M MACs per frame (docs/models.md section 4)
        e = 2 * 59215744 * 2 / (m / 1000) / 1e9
        if (g < 0.99 * e || g > 1.01 * e) { print "gflops is not 2*MACs*batch/median"; exit 1 }
        if (!(a > 0 && w > 400000)) { print "arena/weight bytes missing"; exit 1 }
    }' || fail "inconsistent numbers"

# A path works too, and the table form prints.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
models=${KEYER_MODELS_DIR:-$repo/models}
"$bin" bench nn --model "$models/selfie_segmentation_landscape.tflite" --iterations 2 \
    --warmup 0 | grep -q "frames/s" || fail "table output for a path"

# Errors: non-zero exit and a message on stderr.
expect_error() {
    local want=$1; shift
    local err
    err=$("$bin" bench nn "$@" 2>&1 >/dev/null) && fail "'$*' succeeded"
    echo "$err" | grep -q "$want" || fail "'$*': message '$err' lacks '$want'"
}
expect_error "unknown model" --model no-such-model
expect_error "not found" --model /nonexistent/model.tflite
expect_error "integer >= 1" --model selfie --batch 0
expect_error "integer >= 1" --model selfie --iterations x
expect_error "backend" --model selfie --backend gpu-of-dreams
expect_error "model is required" --iterations 3
expect_error "unknown option" --model selfie --frobnicate
echo "PASS"
