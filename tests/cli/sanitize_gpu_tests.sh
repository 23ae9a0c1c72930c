#!/usr/bin/env bash
# scripts/sanitize-gpu-tests.sh on the CPU, with a fake sanitizer (SAN_CS) and fake test
# programs: the script must start every run of its table once (four tools, every GPU test,
# from one queue over both GPUs), with that run's case filter, short mode, GPUs, environment
# and kernel filters (the racecheck runs of the network tests exclude every kernel declared in
# src/nn/cuda and nothing else, and run the networks per node; test_nn_cuda_gpu's keeps
# segment_kernel, for the selfie models only; its long cases one model per run), wait for all of them
# and print one line per run in the table's order with the right verdict, then the summary
# table (errors or the worst verdict per test and tool), whatever its runs do:
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
[ "$runs" -ge 150 ] || fail "the table lists $runs runs"
# every case of the table is a test of its program (a pattern: at least one)
while read -r t prog c rest; do
    [ "$c" = '*' ] && continue
    grep -qE "cmocka_unit_test\(${c//\*/[a-z0-9_]*}\)" "$repo"/tests/*/"$prog".c ||
        fail "$prog has no test '$c'"
done < <(bash "$script" --list | sort -u -k2,3)
for t in memcheck initcheck synccheck racecheck; do
    # every GPU test program of the tree under every tool
    for f in "$repo"/tests/*/test_*_gpu.c; do
        bash "$script" --list "^$t $(basename "$f" .c) " > /dev/null 2>&1 ||
            fail "no $t run of $(basename "$f" .c)"
    done
    bash "$script" --list "^$t test_backend_ops " > /dev/null 2>&1 || fail "no $t run of test_backend_ops"
done

# The fake sanitizer: called as  fake --tool T --error-exitcode 9 [--kernel-name-exclude F]...
# PROGRAM; records the call (its filters in a file of their own), then behaves as the run
# (tool, program, case) says.
cat > "$tmp/fake" <<'EOF'
#!/usr/bin/env bash
tool=$2 prog=$(basename "${!#}") excl=()
[ "$3 $4" = "--error-exitcode 9" ] || { echo "fake: called as $*"; exit 3; }
set -- "${@:5:$#-5}"
while [ $# -gt 0 ]; do
    [ "$1" = --kernel-name-exclude ] || { echo "fake: unknown option $1"; exit 3; }
    excl+=("$2"); shift 2
done
call="$tool $prog $KEYER_TEST_FILTER short=${KEYER_TEST_SHORT:-unset} gpu=$CUDA_VISIBLE_DEVICES models=${KEYER_TEST_MODELS:-all} schedule=${KEYER_CUDA_SCHEDULE:-auto} cuda=${KEYER_BACKEND_OPS_CUDA:-all}"
echo "$call" >> "$FAKE_CALLS"
echo "$call ${excl[*]} " >> "$FAKE_CALLS.filters"
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
    "synccheck test_people_gpu test_vtest")                # a filter that matches nothing
        echo "[  PASSED  ] 0 test(s)."; summary 0; exit 0 ;;
    "racecheck test_keying_gpu *")                         # the tool fails, not the code
        echo "========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception."
        echo "[  FAILED  ] 3 test(s)."; summary 1; exit 9 ;;
    "initcheck test_keying_gpu *")
        kill -SEGV $$ ;;
    "racecheck test_overlay_gpu *")
        sleep 3 ;;                                          # the last to end (8 s allowed: the machine may be loaded)
    "racecheck test_pipeline_mesh_gpu test_crops_cuda_equal_cpu")
        if [ -n "${FAKE_HANG:-}" ]; then exec sleep 60; fi ;;
    *" test_pipeline_multigpu_gpu "*)                      # one GPU: the test skips
        case "$CUDA_VISIBLE_DEVICES" in *,*) ;; *) echo "[  SKIPPED ] 1 test(s)."; summary 0; exit 77 ;; esac ;;
esac
echo "[  PASSED  ] 1 test(s)."
summary 0
exit 0
EOF
chmod +x "$tmp/fake"

cd "$tmp" || fail "cd"
export FAKE_CALLS=$tmp/calls SAN_CS=$tmp/fake
t0=$SECONDS
out=$(bash "$script" --build "$tmp/build" --gpus "0 1" --jobs 3 --timeout 8 --progress 2>&1)
rc=$?
echo "$out"
# --progress: a "done:" line per run as it ends, then the table
[ "$(echo "$out" | grep -c '^done: ')" = $((runs - 1)) ] || fail "not one 'done:' line per run that wrote its line"
out=$(echo "$out" | grep -v '^done: ')
[ $rc = 1 ] || fail "exit status $rc, not 1"
[ $((SECONDS - t0)) -ge 8 ] || fail "the script ended before its slowest run (8 s)"
echo "$out" | grep -q "No such file" && fail "a file error"
[ "$(wc -l < "$tmp/calls")" = "$runs" ] || fail "$(wc -l < "$tmp/calls") sanitizer calls for $runs runs"
[ "$(sort -u "$tmp/calls" | wc -l)" = "$runs" ] || fail "a run started twice"
# every run reported once, in the table's order
got=$(echo "$out" | grep -E '^(memcheck|initcheck|synccheck|racecheck) ' | awk '{print $1, $2, $3}' | tr -d '[],')
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
line initcheck test_keying_gpu '\*' | grep -q "rc 139" ||
    fail "the run killed by SIGSEGV is not 'rc 139'"
line racecheck test_keying_gpu '\*' | grep -q ": TOOL ERROR " ||
    fail "an internal sanitizer error is not 'TOOL ERROR'"
echo "$out" | grep -q "Internal Sanitizer Error: The Sanitizer failed" || fail "the tool's error not shown"
line synccheck test_people_gpu test_vtest | grep -q ": no test ran " ||
    fail "a run that ran no test is not 'no test ran'"
line racecheck test_overlay_gpu '\*' | grep -q ": clean .*RACECHECK SUMMARY: 0 hazards" ||
    fail "the last run to end is not reported clean"
line memcheck test_pipeline_pose_gpu test_pose_stage_f16 | grep -q ", full" ||
    fail "the full run is not marked"
full=$(bash "$script" --list | grep -c ' full')
[ "$full" -ge 4 ] || fail "$full full runs"
[ "$(grep -c "test_pose_stage_f16 short=unset" "$tmp/calls")" = "$full" ] ||
    fail "a full run had the short mode"
[ "$(grep -c "short=1" "$tmp/calls")" = $((runs - full)) ] || fail "not every other run was short"
grep -q "gpu=1" "$tmp/calls" && grep -q "gpu=0 " "$tmp/calls" || fail "not spread over both GPUs"
[ "$(grep -c " test_pipeline_multigpu_gpu .* gpu=0,1 " "$tmp/calls")" = 4 ] ||
    fail "the two-GPU test does not see both GPUs under each tool"
# the kernel filters: racecheck of the network tests without src/nn/cuda's kernels (all of them
# excluded, nothing else), test_nn_cuda_gpu's without them but segment_kernel, no filter else
for k in conv_pw_mma binary_flat persistent_kernel segment_kernel conv_tc; do
    grep -rqE "\b$k\(" "$repo/src/nn/cuda" || fail "$k is no longer a kernel of src/nn/cuda"
done
f=$tmp/calls.filters
grep -E '^racecheck test_people_gpu test_keying ' "$f" | grep -q 'kns=_Z11conv_pw_mma ' ||
    fail "a network racecheck run does not exclude conv_pw_mma"
filtered=$(grep -c 'kns=' "$f")
[ "$filtered" -ge 28 ] || fail "$filtered filtered runs"
for k in kns=_Z11binary_flat kns=_Z17persistent_kernel kns=_Z7conv_tc kns=_Z11conv_pw_mma; do
    [ "$(grep -c "$k " "$f")" = "$filtered" ] || fail "$k not excluded from every filtered run"
done
nn_cuda=$(grep -c '^racecheck test_nn_cuda_gpu ' "$f")
[ "$nn_cuda" -ge 1 ] || fail "no racecheck run of test_nn_cuda_gpu"
[ "$(grep -c "kns=_Z14segment_kernel " "$f")" = $((filtered - nn_cuda)) ] ||
    fail "segment_kernel not excluded from every filtered run but test_nn_cuda_gpu's"
grep -E '^racecheck test_nn_cuda_gpu ' "$f" | grep -q 'kns=_Z11binary_flat' ||
    fail "test_nn_cuda_gpu's racecheck keeps the network kernels"
grep -E '^racecheck test_nn_cuda_gpu ' "$f" | grep -q 'segment_kernel' &&
    fail "test_nn_cuda_gpu's racecheck excludes segment_kernel"
grep -E 'kns=_Z[0-9]+(overlay_kernel|cand_kernel|morph_kernel|prepare_kernel|pack_kernel)' "$f" &&
    fail "a kernel outside src/nn/cuda excluded"
grep -E '^(memcheck|initcheck|synccheck) .*kns=' "$f" && fail "a memcheck, initcheck or synccheck run filtered"
grep -E '^racecheck test_(backend_ops|knn_gpu|overlay_gpu|people_switch_gpu|io_nvdec_gpu) .*kns=' "$f" &&
    fail "a racecheck run of the network kernels' own test or of a test without networks filtered"
n_excl=$(grep -E '^racecheck test_people_gpu test_keying ' "$f" | grep -o 'kns=' | wc -l)
[ "$n_excl" -ge 30 ] || fail "only $n_excl kernels excluded"
echo "$out" | grep -q "exclude the $n_excl kernel names of src/nn/cuda" || fail "the excluded count not printed"
# the network tests' racecheck runs schedule the networks per node (KEYER_CUDA_SCHEDULE), no
# other run does
sched_runs=$(grep -c ' schedule=kernels ' "$tmp/calls")
[ "$sched_runs" = $((filtered - nn_cuda)) ] ||
    fail "$sched_runs runs per node, not the $((filtered - nn_cuda)) racecheck runs of the network tests"
grep ' schedule=kernels ' "$tmp/calls" | grep -qvE '^racecheck ' && fail "a run per node that is not racecheck"
grep -E '^racecheck test_keying_gpu .* schedule=kernels ' "$tmp/calls" > /dev/null ||
    fail "test_keying_gpu's racecheck not per node"
line racecheck test_people_gpu test_keying | grep -q ', schedule kernels, no-nn\]' ||
    fail "the schedule is not on the run's line"
line memcheck test_nn_cuda_gpu test_models | grep -q ', pose-heavy\]' ||
    fail "the model is not on the run's line"
# test_nn_cuda_gpu's long cases: one run per model of the test's table (KEYER_TEST_MODELS) under
# memcheck, initcheck and synccheck; under racecheck test_models of selfie and selfie-landscape
models=$(sed -n '/^static const model_case cases\[\] = {/,/^};/p' "$repo/tests/unit/test_nn_cuda_gpu.c" |
         grep -oE '^ *\{"[a-z-]+"' | tr -d ' {"' | sort)
[ "$(wc -l <<<"$models")" -ge 8 ] || fail "the models of test_nn_cuda_gpu not found"
for t in memcheck initcheck synccheck; do
    got=$(grep -E "^$t test_nn_cuda_gpu test_models " "$tmp/calls" | grep -oE 'models=[a-z-]+' | cut -d= -f2 | sort)
    [ "$got" = "$models" ] || fail "$t test_models: not one run per model ($(echo $got))"
    [ "$(grep -cE "^$t test_nn_cuda_gpu test_auto_batch_limits .* models=(selfie|selfie-landscape|face-short) " "$tmp/calls")" = 3 ] ||
        fail "$t test_auto_batch_limits: not one run per model"
done
[ "$(grep -E '^racecheck test_nn_cuda_gpu ' "$tmp/calls" | grep -oE 'test_models .*models=[a-z-]+' | sed 's/ .*models=/ /' | sort | tr '\n' ' ')" = \
  "test_models selfie test_models selfie-landscape " ] || fail "racecheck of test_nn_cuda_gpu: not test_models of the selfie models"
grep -E ' models=' "$tmp/calls" | grep -v ' models=all ' | grep -qv ' test_nn_cuda_gpu ' &&
    fail "KEYER_TEST_MODELS set for another test"
# test_backend_ops' racecheck: each variant alone for the single operators, per precision else
for v in cuda cuda-f16 cuda-pers cuda-pers-f16; do
    grep -q "^racecheck test_backend_ops test_ops_all_backends .* cuda=$v\$" "$tmp/calls" ||
        fail "racecheck of the single operators in $v missing"
done
[ "$(grep -c "^racecheck test_backend_ops test_\*_chains .* cuda=cuda-f16,cuda-pers-f16" "$tmp/calls")" = 1 ] ||
    fail "racecheck of the f16 chains missing"
line racecheck test_backend_ops test_ops_all_backends | grep -q ', cuda-pers-f16\]' ||
    fail "the variant is not on the run's line"
# the summary table: per test, a column per tool
sum=$(echo "$out" | sed -n '/^summary/,$p')
echo "$sum" | grep -qE '^test +memcheck|^test +racecheck' || fail "no summary table"
echo "$sum" | grep -E '^test_pipeline_pose_gpu ' | grep -q ' 2 errors, ' || fail "the summary's error count"
echo "$sum" | grep -E '^test_people_device_gpu ' | grep -q 'out of time, ' || fail "the summary's worst verdict"
echo "$sum" | grep -E '^test_people_gpu ' | grep -q 'no result, ' || fail "the summary's 'no result'"
echo "$sum" | grep -E '^test_keying_gpu ' | grep -q 'TOOL ERROR, ' || fail "the summary's 'TOOL ERROR'"
[ "$(echo "$sum" | grep -cE '^test_[a-z_]+ ')" = "$(bash "$script" --list | awk '{print $2}' | sort -u | wc -l)" ] ||
    fail "not one summary row per test program"
clean=$((runs - 6))
echo "$out" | tail -1 | grep -q "$runs runs on GPU 0,1 (3 at once per GPU), $clean clean, 0 skipped, 6 not" ||
    fail "the summary line"

# --brief: only the runs that are not clean, then the same summary table
out4=$(bash "$script" --build "$tmp/build" --gpus "0 1" --jobs 3 --timeout 8 --brief 'test_pipeline_pose_gpu|test_knn_gpu' 2>&1)
echo "$out4"
echo "$out4" | grep -E '^[a-z]+check ' | grep -q ': clean ' && fail "--brief printed a clean run"
echo "$out4" | grep -qE '^memcheck +test_pipeline_pose_gpu +\[test_pose_stage_f32\].*ERRORS' ||
    fail "--brief left out the run with errors"
echo "$out4" | grep -qE '^test_knn_gpu +0 errors, ' || fail "--brief: the summary table"

# one GPU: the two-GPU test skips under every tool, a skip is no failure
out3=$(bash "$script" --build "$tmp/build" --gpus 1 --timeout 20 'test_pipeline_multigpu_gpu' 2>&1)
rc=$?
echo "$out3"
[ $rc = 0 ] || fail "exit status $rc with skipped runs only"
echo "$out3" | tail -1 | grep -q "4 runs on GPU 1 (12 at once per GPU), 0 clean, 4 skipped, 0 not" ||
    fail "the summary line with skipped runs"

# SIGTERM while a run hangs: the script stops it, prints the table and exits 1 at once
: > "$tmp/calls"
FAKE_HANG=1 bash "$script" --build "$tmp/build" --jobs 8 --timeout 50 'racecheck test_(overlay_gpu|pipeline_mesh_gpu test_crops)' \
    > "$tmp/out2" 2>&1 &
pid=$!
# once both runs have started (the hanging one sleeps), and 1 s more
for _ in $(seq 100); do [ "$(wc -l < "$tmp/calls")" -ge 2 ] && break; sleep 0.2; done
sleep 1
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
