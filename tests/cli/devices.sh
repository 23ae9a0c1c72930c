#!/usr/bin/env bash
# keyer devices: works with and without a GPU or driver; prints either the devices or
# "no CUDA device", and exits 0.
set -u
bin=${KEYER_BIN:?KEYER_BIN is not set}
fail() { echo "FAIL: $*"; exit 1; }
out=$("$bin" devices 2>&1) || { echo "$out"; fail "keyer devices exited with $?"; }
echo "$out"
echo "$out" | grep -q "^keyer .*CUDA backends" || fail "no header line"
echo "$out" | grep -qE "^no CUDA device|^cuda:0 " || fail "neither devices nor 'no CUDA device'"
if echo "$out" | grep -q "^cuda:0 "; then
    echo "$out" | grep -q "GiB" || fail "no memory size"
    echo "$out" | grep -q "NVENC: h264_nvenc" || fail "no NVENC line"
fi
"$bin" devices --bogus >/dev/null 2>&1 && fail "a bad option was accepted"
echo "PASS"
