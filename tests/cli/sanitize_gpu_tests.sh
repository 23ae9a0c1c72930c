#!/usr/bin/env bash
# scripts/sanitize-gpu-tests.sh on the CPU, with a fake sanitizer (SAN_CS) and fake test
# programs: the script must start every run of its table once, with that run's case filter and
# short mode, wait for all of them and print one line per run in the table's order with the
# right verdict, whatever its runs do:
#  - end clean at once, or after the others (sleep);
#  - report errors (exit 9), die of a signal (SIGSEGV), run past --timeout;
#  - have their shell killed before they write a line (reported "no result", not a file error);
# and a SIGTERM to the script stops the runs and still prints the table.
# Needs no GPU, no build and no keyer binary.
set -u
fail() { echo "FAIL: $*"; exit 1; }
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
script=$repo/scripts/sanitize-gpu-tests.sh
command -v taskset > /dev/null || { echo "SKIP: no taskset"; exit 77; }
command -v python3 > /dev/null || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build/tests"
for t in $(bash "$script" --list | awk '{print $2}' | sort -u); do
    printf '#!/bin/sh\nexit 0\n' > "$tmp/build/tests/$t"
    chmod +x "$tmp/build/tests/$t"
done
runs=$(bash "$script" --list | wc -l)
[ "$runs" -ge 30 ] || fail "the table lists $runs runs"

# The fake sanitizer: called as  fake --tool T --error-exitcode 9 PROGRAM; records the call,
# then behaves as the run (tool, program, case) says.
cat > "$tmp/fake" <<'EOF'
#!/usr/bin/env bash
tool=$2 prog=$(basename "$5")
echo "$tool $prog $KEYER_TEST_FILTER short=${KEYER_TEST_SHORT:-unset} gpu=$CUDA_VISIBLE_DEVICES" >> "$FAKE_CALLS"
summary() {
    if [ "$tool" = racecheck ]; then
        echo "========= RACECHECK SUMMARY: $1 hazards displayed ($1 errors, 0 warnings)"
    else
        echo "========= ERROR SUMMARY: $1 errors"
    fi
}
case "$tool $prog $KEYER_TEST_FILTER" in
    "racecheck test_people_device_gpu test_people_device_frames")
        exec sleep 60 ;;                                    # past --timeout
    "memcheck test_pipeline_pose_gpu test_pose_stage_f32")
        echo "========= Invalid __global__ read of size 4 bytes"
        summary 2; exit 9 ;;
    "memcheck test_people_gpu test_photos")
        # the run's shell: the parent of `timeout`, the parent of this process (taskset execs)
        kill -KILL "$(awk '{print $4}' "/proc/$PPID/stat")"
        exit 0 ;;
    "memcheck test_keying_gpu test_cuda_frames_cuda_network")
        kill -SEGV $$ ;;
    "racecheck test_overlay_gpu *")
        sleep 3 ;;                                          # the last to end
    "racecheck test_pipeline_mesh_gpu test_crops_cuda_equal_cpu")
        if [ -n "${FAKE_HANG:-}" ]; then exec sleep 60; fi ;;
esac
echo "[  PASSED  ] 1 test(s)."
summary 0
exit 0
EOF
chmod +x "$tmp/fake"

cd "$tmp" || fail "cd"
export FAKE_CALLS=$tmp/calls SAN_CS=$tmp/fake
t0=$SECONDS
out=$(bash "$script" --build "$tmp/build" --gpus "0 1" --jobs 3 --timeout 4 --progress 2>&1)
rc=$?
echo "$out"
# --progress: a "done:" line per run as it ends, then the table
[ "$(echo "$out" | grep -c '^done: ')" = $((runs - 1)) ] || fail "not one 'done:' line per run that wrote its line"
out=$(echo "$out" | grep -v '^done: ')
[ $rc = 1 ] || fail "exit status $rc, not 1"
[ $((SECONDS - t0)) -ge 4 ] || fail "the script ended before its slowest run (4 s)"
echo "$out" | grep -q "No such file" && fail "a file error"
[ "$(wc -l < "$tmp/calls")" = "$runs" ] || fail "$(wc -l < "$tmp/calls") sanitizer calls for $runs runs"
[ "$(sort -u "$tmp/calls" | wc -l)" = "$runs" ] || fail "a run started twice"
# every run reported once, in the table's order
got=$(echo "$out" | grep -E '^(memcheck|racecheck) ' | awk '{print $1, $2, $3}' | tr -d '[],')
want=$(bash "$script" --list | awk '{print $1, $2, $3}')
[ "$got" = "$want" ] || fail "the lines are not the table's runs in order"
line() { echo "$out" | grep -E "^$1 +$2 +\[$3[],]"; }
line racecheck test_people_device_gpu test_people_device_frames | grep -q "out of time" ||
    fail "the run past --timeout is not 'out of time'"
line memcheck test_pipeline_pose_gpu test_pose_stage_f32 | grep -q "ERRORS .*ERROR SUMMARY: 2 errors" ||
    fail "errors not reported"
echo "$out" | grep -q "Invalid __global__ read" || fail "the error's first line not shown"
line memcheck test_people_gpu test_photos | grep -q "no result" ||
    fail "the run whose shell was killed is not 'no result'"
line memcheck test_keying_gpu test_cuda_frames_cuda_network | grep -q "rc 139" ||
    fail "the run killed by SIGSEGV is not 'rc 139'"
line racecheck test_overlay_gpu '\*' | grep -q ": clean .*RACECHECK SUMMARY: 0 hazards" ||
    fail "the last run to end is not reported clean"
line memcheck test_pipeline_pose_gpu test_pose_stage_f16 | grep -q ", full\]" ||
    fail "the full run is not marked"
grep -q "memcheck test_pipeline_pose_gpu test_pose_stage_f16 short=unset" "$tmp/calls" ||
    fail "the full run had the short mode"
[ "$(grep -c "short=1" "$tmp/calls")" = $((runs - 1)) ] || fail "not every other run was short"
grep -q "gpu=1" "$tmp/calls" && grep -q "gpu=0" "$tmp/calls" || fail "not spread over both GPUs"
clean=$((runs - 4))
echo "$out" | tail -1 | grep -q "$runs runs on GPU 0,1 (3 at once per GPU), $clean clean, 4 not" ||
    fail "the summary line"

# SIGTERM while a run hangs: the script stops it, prints the table and exits 1 at once
: > "$tmp/calls"
FAKE_HANG=1 bash "$script" --build "$tmp/build" --jobs 8 --timeout 50 'racecheck test_(overlay_gpu|pipeline_mesh_gpu test_crops)' \
    > "$tmp/out2" 2>&1 &
pid=$!
sleep 2
kill -TERM $pid
t1=$SECONDS
wait $pid
rc=$?
cat "$tmp/out2"
[ $rc = 1 ] || fail "exit status $rc after SIGTERM"
[ $((SECONDS - t1)) -le 10 ] || fail "the script took $((SECONDS - t1)) s to stop"
grep -q "racecheck test_pipeline_mesh_gpu .*test_crops_cuda_equal_cpu" "$tmp/out2" ||
    fail "the stopped run is not reported"
tail -1 "$tmp/out2" | grep -q "2 runs on GPU 0 .*stopped by a signal" || fail "the summary after SIGTERM"
sleep 1
pgrep -f "$tmp/" > /dev/null 2>&1 && fail "a run outlived the script"
echo "PASS"
