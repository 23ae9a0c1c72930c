#!/usr/bin/env bash
# keyer's full test run (what `make test` and CI run):
#   1. set-up (system packages, models)            scripts/setup.sh
#   2. optimised build + every CPU test             build/
#   3. AddressSanitizer + UBSan build + CPU tests   build-asan/
#   4. libFuzzer targets built with clang, each fuzzed for KEYER_FUZZ_SECONDS (default 30)
#   5. GPU tests (ctest label gpu) when a CUDA device is present; otherwise skipped, with the reason
# Exits non-zero if any step fails. Environment: KEYER_JOBS (default: all cores).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
jobs=${KEYER_JOBS:-$(nproc)}
fuzz_seconds=${KEYER_FUZZ_SECONDS:-30}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

step() { printf '\n==== %s ====\n' "$*"; }

step "set-up"
scripts/setup.sh

have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then have_gpu=1; fi

# With CUDA found, the library's default build compiles for seven GPU architectures (about an
# hour of nvcc on two cores). The test build compiles for the GPU present (native), or, with no
# GPU, for one architecture (sm_90a, the wgmma code too) as a compile check: set CUDAARCHS to
# choose another list.
if [ -z "${CUDAARCHS:-}" ]; then
    if [ "$have_gpu" = 1 ]; then export CUDAARCHS=native; else export CUDAARCHS=90a; fi
fi

step "build (optimised)"
cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKEYER_CUDA=AUTO >/dev/null
cmake --build build -j "$jobs"

step "tests (optimised build)"
ctest --test-dir build -LE gpu --output-on-failure -j "$jobs"

step "build (AddressSanitizer + UndefinedBehaviorSanitizer)"
cmake -S . -B build-asan "${gen[@]}" -DCMAKE_BUILD_TYPE=Debug -DKEYER_SANITIZE=ON -DKEYER_CUDA=OFF >/dev/null
cmake --build build-asan -j "$jobs"

step "tests (sanitizers)"
ctest --test-dir build-asan -LE gpu --output-on-failure -j "$jobs"

step "fuzzing (libFuzzer, ${fuzz_seconds}s per target)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz "${gen[@]}" -DCMAKE_BUILD_TYPE=Debug -DKEYER_FUZZ=ON \
    -DKEYER_SANITIZE=ON -DKEYER_CUDA=OFF >/dev/null
cmake --build build-fuzz -j "$jobs"
shopt -s nullglob
for fuzzer in build-fuzz/tests/fuzz_*; do
    name=$(basename "$fuzzer")
    corpus_src="tests/fuzz/corpus/${name#fuzz_}"
    corpus=$(mktemp -d)
    [ -d "$corpus_src" ] && cp -r "$corpus_src"/. "$corpus"/
    echo "fuzz: $name for ${fuzz_seconds}s (seeds from $corpus_src)"
    "$fuzzer" -max_total_time="$fuzz_seconds" -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
    rm -rf "$corpus"
done

step "GPU tests"
if [ "$have_gpu" = 1 ]; then
    ctest --test-dir build -L gpu --output-on-failure
else
    echo "skipped: no CUDA device on this machine (nvidia-smi lists no GPU); the gpu-labelled tests run on a GPU machine"
fi

step "all tests passed"
