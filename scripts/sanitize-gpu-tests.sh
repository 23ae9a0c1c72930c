#!/usr/bin/env bash
# compute-sanitizer over every GPU test (issue 31: "all GPU tests pass under compute-sanitizer"):
# memcheck, initcheck, synccheck and racecheck, one process per test program or per test case,
# several at once on each GPU, spread over the GPUs from one queue. Run from the repository root
# after a CUDA build; docs/notes/compute-sanitizer.md has the plan's reasons and its results.
#
#   usage: scripts/sanitize-gpu-tests.sh [--build DIR] [--tool T[,T...]|all] [--gpus "0 1"]
#            [--jobs N] [--timeout S] [--full] [--progress] [--brief] [--list] [REGEX]
#
#  --build DIR   the CUDA build (default build); its tests/ holds the test programs
#  --tool        memcheck, initcheck, synccheck, racecheck, a comma-separated list of them, or
#                all (the default): which runs of the table below
#  --gpus        the GPUs to spread the runs over (default 0); the CPU cores this process may
#                use are split evenly between them, each run pinned to its GPU's share; a run
#                marked gpus=all sees every one of them (and its test skips with one)
#  --jobs N      runs at once per GPU (default 12)
#  --timeout S   seconds per run (default 300); a run cut there is reported "out of time"
#  --full        without the tests' short mode (KEYER_TEST_SHORT unset): their whole runs
#  --progress    also print each run's line ("done: ...") as soon as it ends, so that a caller
#                that cuts the script short still has the runs that ended
#  --brief       in the table of runs at the end, only the runs that are not clean (the summary
#                table still counts every run)
#  --list        print the runs and exit
#  REGEX         only the runs whose "tool test case" line matches (grep -E)
#
# The plan. Every GPU test program (the ctest label gpu, and test_backend_ops, whose cuda
# variants run every operator) under the four tools, in the tests' short mode (KEYER_TEST_SHORT=1,
# tests/common/kt_gpu.h: fewer frames, streams or sizes, the same checks; not with --full):
#   - memcheck, initcheck, synccheck: every test, whole or case by case (KEYER_TEST_FILTER) for
#     the long ones, every kernel checked;
#   - racecheck, whose cost is in the network kernels (each shared-memory access is tracked:
#     six racecheck runs of one network case each were still going at 180 s, on one frame)
#     is split in two so that every kernel is racechecked somewhere, on small shapes:
#       * the network kernels (every kernel declared in src/nn/cuda) in test_backend_ops, every
#         operator and the fused chains at every precision and schedule (KEYER_BACKEND_OPS_CUDA
#         picks the variant: f32 per node, f16 per node, persistent f32 and f16), and the
#         cluster segment kernel (segment_kernel: only whole selfie models take it) in
#         test_nn_cuda_gpu;
#       * every other kernel (kNN, overlay, refinement, compositing, crops, heatmaps, masks) in
#         every other GPU test, with the network kernels excluded: `--kernel-name-exclude
#         kns=_Z<length><name>` for each kernel name in src/nn/cuda (read from the sources at
#         start; a kernel whose name is also declared elsewhere is reported, since the filter
#         cannot tell them apart). An excluded kernel runs unchecked, at its own speed. These
#         runs also schedule the networks per node (KEYER_CUDA_SCHEDULE=kernels, keyer/nn.h):
#         in session 10 the four cases that key frames at batch 1, where AUTO runs the models
#         as the (excluded) persistent kernel with a cluster segment, ended in "Internal
#         Sanitizer Error: ... failed to handle a hardware exception" (reported "TOOL ERROR"),
#         while the cases whose networks ran per node passed (pose, mesh, u2netp: 23-106 s);
#         session 11 showed the cause: the cluster segment kernel running unchecked (clean
#         per node, with persistent-grid or an emulated 8.0; docs/notes/compute-sanitizer.md).
#         The persistent kernel is racechecked in test_backend_ops (cuda-pers, cuda-pers-f16),
#         the segment kernel in test_nn_cuda_gpu.
#
#   test (program)              cases run apart     memcheck initcheck synccheck  racecheck
#   test_backend_ops            per test x variant  all      all       all        all kernels
#   test_nn_cuda_gpu            per test; test_models per model (8), test_auto_batch_limits per
#                               model (3): KEYER_TEST_MODELS
#                                                   all      all       all        test_models of
#                                   selfie and selfie-landscape only: segment_kernel (the rest
#                                   of the test's kernels are src/nn/cuda's)
#   network tests (keying, people, people_device, pipeline, mesh, pose, onnx_oracle: per
#     test; precision, nn_onnx, gpu_caps, effects, model_desc, multigpu: whole)
#                                                   all      all       all        non-nn kernels,
#                                                                                 networks per node
#   no network (knn, overlay, people_switch, io_nvdec, io_encoder)  all  all  all    all kernels
#
# Table columns: tool, test program, case (a cmocka pattern, * for the whole program), kernels
# (all; no-nn: the network kernels excluded; no-nn+NAME: the same but NAME checked), then
# options: full (no short mode: the pose test's forced-f16 case, whose end-to-end check allows
# 4 frames where only one side finds a pose, which the short mode's faster pan does not keep),
# gpus=all, VAR=value (set for the run: KEYER_BACKEND_OPS_CUDA, KEYER_TEST_MODELS,
# KEYER_CUDA_SCHEDULE). Longest runs first: they start first.
#
# Each run: KEYER_TEST_SHORT=1, KEYER_TEST_FILTER=its case (test_backend_ops reads it too), its
# own GPU and cores; `SAN_CS --tool T --error-exitcode 9 [filters] PROGRAM`. The script waits for
# every run it started (each one's sanitizer, test program and `timeout` included), then prints
# one line per run in the table's order: verdict, GPU, seconds, the tool's summary, cmocka's
# count, and the first lines of any error; then the summary table: per test program and tool,
# the errors (or the worst verdict) and the seconds of its runs added up. A run whose shell ended
# without writing its line (killed from outside) is reported "no result" with the end of its
# log; a run never started (the script stopped first) "not started". Exit status 0 when every
# run finished clean (rc 0, 0 errors or 0 hazards) or skipped (a test's own skip: no second
# GPU), 1 otherwise (also after SIGINT or SIGTERM, which stop the runs and still print both
# tables); 2 on a usage error.
#
# Environment: SAN_CS, the sanitizer to run (default compute-sanitizer from PATH or CUDA's
# bin/; tests/cli/sanitize_gpu_tests.sh runs the script with a fake one on the CPU).
set -uo pipefail
build=build
tool=all
gpus=0
jobs=12
limit=300
short=1
list=0
progress=0
brief=0
pattern=
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --tool) tool=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    --full) short=0; shift ;;
    --progress) progress=1; shift ;;
    --brief) brief=1; shift ;;
    --list) list=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "sanitize-gpu-tests: unknown option $1" >&2; exit 2 ;;
    *) pattern=$1; shift ;;
  esac
done
tools_re=
for t in ${tool//,/ }; do
  case "$t" in
    memcheck|initcheck|synccheck|racecheck) tools_re="$tools_re${tools_re:+|}$t" ;;
    all) tools_re="memcheck|initcheck|synccheck|racecheck" ;;
    *) echo "sanitize-gpu-tests: --tool memcheck|initcheck|synccheck|racecheck[,...]|all" >&2; exit 2 ;;
  esac
done
[ -n "$tools_re" ] || { echo "sanitize-gpu-tests: --tool: no tool named" >&2; exit 2; }
case "$jobs" in ''|*[!0-9]*|0) echo "sanitize-gpu-tests: --jobs N (N >= 1)" >&2; exit 2 ;; esac
case "$limit" in ''|*[!0-9]*|0) echo "sanitize-gpu-tests: --timeout S (S >= 1)" >&2; exit 2 ;; esac

# The runs. The tests that run networks, case by case where they are long: the same cases for
# memcheck, initcheck and synccheck (every kernel) and for racecheck (no-nn).
net_cases=$(cat <<'EOF'
test_people_device_gpu test_auto_people_cuda
test_pipeline_pose_gpu test_pose_stage_f16 full
test_pipeline_pose_gpu test_pose_stage_three_streams
test_pipeline_pose_gpu test_pose_stage_f32
test_pipeline_pose_gpu test_pose_stage_nvdec_files
test_pipeline_pose_gpu test_pose_stage_gpu_failure
test_nn_onnx_cuda_gpu *
test_onnx_oracle_gpu test_u2netp_cuda_f32
test_onnx_oracle_gpu test_u2netp_cuda_f16
test_people_device_gpu test_people_session_cuda
test_people_device_gpu test_people_device_frames
test_pipeline_gpu test_cuda_file_matches_cpu
test_pipeline_gpu test_forced_gpu_failure_loses_nothing
test_pipeline_gpu test_pushed_frames_on_cuda
test_pipeline_gpu test_session_detect_on_cuda
test_pipeline_mesh_gpu test_mesh_stage_f32
test_pipeline_mesh_gpu test_mesh_stage_f16
test_pipeline_mesh_gpu test_mesh_stage_nvdec_files
test_pipeline_mesh_gpu test_mesh_stage_gpu_failure
test_pipeline_mesh_gpu test_crops_cuda_equal_cpu
test_effects_gpu *
test_people_gpu test_photos
test_people_gpu test_vtest
test_people_gpu test_keying
test_keying_gpu *
test_onnx_oracle_gpu test_ops_cuda_*
test_gpu_caps_gpu *
test_precision_gpu *
test_model_desc_gpu *
test_pipeline_multigpu_gpu * gpus=all
EOF
)
# test_nn_cuda_gpu: every shipped model at full size, every schedule and precision, batches 1
# and 4 (test_models), and AUTO's batch limits (test_auto_batch_limits), one model per run
# (KEYER_TEST_MODELS, tests/common/kt_gpu.h; all models in one run took more than 135 s under
# memcheck); the other cases whole. Under racecheck only test_models of the two models with a
# cluster segment, selfie and selfie-landscape: the segment kernel checked (no-nn+segment_kernel:
# its launches at batch 1 and 4), every other kernel of the test being one of src/nn/cuda's.
nn_cuda_models="pose-heavy pose-full face-mesh face-full selfie-landscape selfie pose-lite face-short"
nn_cuda_limit_models="selfie selfie-landscape face-short"
nn_cuda_segment_models="selfie selfie-landscape"
# The tests without a network: every kernel under every tool.
plain_cases=$(cat <<'EOF'
test_io_nvdec_gpu *
test_knn_gpu *
test_overlay_gpu *
test_io_encoder_gpu *
test_people_switch_gpu *
EOF
)
# test_backend_ops: racecheck per test (a cmocka pattern) and per group of cuda variants (the
# single operators per variant); the other tools per test with every variant.
bo_tests=(test_ops_all_backends 'test_*_chains' 'test_*_stems' test_u2net_block test_onnx_one_output
          test_gather_folds)
tools=(racecheck memcheck initcheck synccheck)
# The table, longest runs first (the queue starts them first): test_backend_ops' single
# operators under racecheck, the network cases under each tool, the rest.
table() {
  local t prog c rest v k
  for v in cuda-f16 cuda-pers-f16 cuda cuda-pers; do
    echo "racecheck test_backend_ops test_ops_all_backends all KEYER_BACKEND_OPS_CUDA=$v"
  done
  for m in $nn_cuda_segment_models; do
    echo "racecheck test_nn_cuda_gpu test_models no-nn+segment_kernel KEYER_TEST_MODELS=$m"
  done
  # the network tests' racecheck runs: src/nn/cuda's kernels excluded, the networks per node
  while read -r prog c rest; do
    for t in "${tools[@]}"; do
      if [ $t = racecheck ]; then
        echo "$t $prog $c no-nn${rest:+ $rest} KEYER_CUDA_SCHEDULE=kernels"
      else
        echo "$t $prog $c all${rest:+ $rest}"
      fi
    done
  done <<<"$net_cases"
  for t in "${tools[@]:1}"; do
    for m in $nn_cuda_models; do
      echo "$t test_nn_cuda_gpu test_models all KEYER_TEST_MODELS=$m"
    done
    for m in $nn_cuda_limit_models; do
      echo "$t test_nn_cuda_gpu test_auto_batch_limits all KEYER_TEST_MODELS=$m"
    done
    for c in test_replay_and_stream test_errors; do echo "$t test_nn_cuda_gpu $c all"; done
  done
  for t in "${tools[@]}"; do
    if [ $t = racecheck ]; then
      for v in cuda-f16,cuda-pers-f16 cuda,cuda-pers; do
        for c in "${bo_tests[@]:1}"; do
          echo "racecheck test_backend_ops $c all KEYER_BACKEND_OPS_CUDA=$v"
        done
      done
    else
      for c in "${bo_tests[@]}"; do echo "$t test_backend_ops $c all"; done
    fi
  done
  while read -r prog c rest; do
    for t in "${tools[@]}"; do echo "$t $prog $c all${rest:+ $rest}"; done
  done <<<"$plain_cases"
}
runs=$(table | grep -E "^($tools_re) ")
[ -z "$pattern" ] || runs=$(grep -E -- "$pattern" <<<"$runs")
if [ -z "$runs" ]; then echo "sanitize-gpu-tests: no run matches" >&2; exit 2; fi
if [ $list = 1 ]; then echo "$runs"; exit 0; fi

cs=${SAN_CS:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
[ -x "$cs" ] || { echo "sanitize-gpu-tests: $cs: no sanitizer there (set SAN_CS)" >&2; exit 2; }
for t in $(awk '{print $2}' <<<"$runs" | sort -u); do
  [ -x "$build/tests/$t" ] || { echo "sanitize-gpu-tests: $build/tests/$t not built" >&2; exit 2; }
done
command -v flock > /dev/null || { echo "sanitize-gpu-tests: needs flock (util-linux)" >&2; exit 2; }
export KEYER_MODELS_DIR=${KEYER_MODELS_DIR:-$PWD/models} KEYER_TEST_DATA=${KEYER_TEST_DATA:-$PWD/tests/data}
# test_people_gpu's street case reads Debian's vtest.avi, or the committed re-encoding of it
vtest=/usr/share/doc/opencv-doc/examples/data/vtest.avi
[ -f "$vtest" ] || vtest=$PWD/tests/data/street_vtest.mp4
export KEYER_VTEST=${KEYER_VTEST:-$vtest}
if [ $short = 1 ]; then export KEYER_TEST_SHORT=1; else unset KEYER_TEST_SHORT; fi

SAN_LOGS=$(mktemp -d)
export SAN_LOGS
# removed at the very end only: every run has ended by then (see below)
trap 'rm -rf "$SAN_LOGS"' EXIT

# SIGINT / SIGTERM: no run starts any more, the started runs' process groups are stopped
# (their shells here stop with the signal), the script waits for them and prints what it has
stopped=0
stop() {
  stopped=1
  touch "$SAN_LOGS/stopped"
  local f
  for f in "$SAN_LOGS"/*.pid; do
    [ -f "$f" ] && kill -TERM -- "-$(cat "$f")" "$(cat "$f")" 2> /dev/null
  done
}
trap stop INT TERM

# The network kernels: every __global__ function declared in src/nn/cuda (any qualifiers,
# __launch_bounds__ included), as the substring its mangled name starts with (_Z, the name's
# length, the name: keyer's kernels are not in namespaces); the same names of the other CUDA
# sources, to report a name declared on both sides.
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/src
kernel_names() {
  python3 - "$@" <<'EOF'
import re, sys
decl = re.compile(r'__global__((?:\s+(?:static|inline|void|__noinline__|__forceinline__|'
                  r'extern\s+"C"|__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)))*)\s+([A-Za-z_]\w*)\s*\(')
names = set()
for path in sys.argv[1:]:
    text = re.sub(r'//[^\n]*|/\*.*?\*/', ' ', open(path, errors='replace').read(), flags=re.S)
    names.update(m.group(2) for m in decl.finditer(text))
print(' '.join(sorted(names)))
EOF
}
if grep -q ' no-nn' <<<"$runs"; then
  nn_names=$(kernel_names $(find "$src/nn/cuda" -name '*.cu' -o -name '*.cuh' | sort))
  other_names=$(kernel_names $(find "$src" -path "$src/nn" -prune -o \( -name '*.cu' -o -name '*.cuh' \) -print | sort))
  [ -n "$nn_names" ] || { echo "sanitize-gpu-tests: no kernel found in $src/nn/cuda" >&2; exit 2; }
  both=$(comm -12 <(tr ' ' '\n' <<<"$nn_names" | sort) <(tr ' ' '\n' <<<"$other_names" | sort) | tr '\n' ' ')
  echo "sanitize-gpu-tests: racecheck 'no-nn' runs exclude the $(wc -w <<<"$nn_names") kernel names of src/nn/cuda"
  [ -z "$both" ] || echo "sanitize-gpu-tests: also declared outside src/nn/cuda, so not racechecked in 'no-nn' runs: $both"
else
  nn_names=
fi
export SAN_CS=$cs SAN_BUILD=$build SAN_LIMIT=$limit SAN_PROGRESS=$progress SAN_NN_NAMES=$nn_names

# the cores this process may use, split evenly between the GPUs
read -r -a cores <<<"$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))')"
read -r -a gpu_list <<<"$gpus"
per=$(( ${#cores[@]} / ${#gpu_list[@]} )); [ $per -ge 1 ] || per=1
all_gpus=$(IFS=,; echo "${gpu_list[*]}")
export SAN_ALL_GPUS=$all_gpus

# One run: index, GPU, cores, tool, test, case, kernels, options; writes $SAN_LOGS/<index>.line
# and <index>.rec (through temporary names: a run killed before its end leaves neither).
# `timeout` puts itself and what it starts (taskset -> the sanitizer -> the test program) in a
# process group of its own, kills that group at the limit and, 10 s later, with SIGKILL; its
# pid (= the group's id) is in <index>.pid for stop() below.
one() {
  local i=$1 gpu=$2 cpus=$3 t=$4 prog=$5 filter=$6 kern=$7 opts=${8:-} log=$SAN_LOGS/$1.log s=$SECONDS rc
  local -a env=(KEYER_TEST_FILTER="$filter") args=() words
  local o name mark=
  read -r -a words <<<"$opts"
  for o in "${words[@]}"; do
    case "$o" in
      full) env=(-u KEYER_TEST_SHORT "${env[@]}"); mark="$mark, full" ;;
      gpus=all) gpu=$SAN_ALL_GPUS; mark="$mark, gpus $gpu" ;;
      KEYER_CUDA_SCHEDULE=*) env+=("$o"); mark="$mark, schedule ${o#*=}" ;;
      *=*) env+=("$o"); mark="$mark, ${o#*=}" ;;
    esac
  done
  case "$kern" in
    no-nn|no-nn+*)
      for name in $SAN_NN_NAMES; do
        [ "$kern" = "no-nn+$name" ] && continue
        args+=(--kernel-name-exclude "kns=_Z${#name}$name")
      done
      mark="$mark, $kern" ;;
  esac
  env "${env[@]}" CUDA_VISIBLE_DEVICES="$gpu" timeout -k 10 "$SAN_LIMIT" \
    taskset -c "$cpus" "$SAN_CS" --tool "$t" --error-exitcode 9 "${args[@]}" "$SAN_BUILD/tests/$prog" \
    > "$log" 2>&1 < /dev/null &
  echo $! > "$SAN_LOGS/$i.pid"
  [ -f "$SAN_LOGS/stopped" ] && kill -TERM -- "-$!" "$!" 2> /dev/null
  wait $!
  rc=$?
  local sum passed what errors
  sum=$(grep -hoE 'ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?, [0-9]+ warnings?\)' "$log" | tail -1)
  passed=$(grep -hoE '\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$log" | tr -s ' ' | tr '\n' ' ')
  errors=$(sed -nE 's/.*ERROR SUMMARY: ([0-9]+) error.*/\1/p; s/.*displayed \(([0-9]+) error.*/\1/p' <<<"$sum")
  case $rc in
    0) what=clean ;; 124|137) what="out of time" ;; 9) what="ERRORS" ;; 77) what=skipped ;; *) what="rc $rc" ;;
  esac
  # a case filter that matches no test (a renamed case) runs nothing: not clean
  [ $rc = 0 ] && grep -qE '\[ +PASSED +\] 0 test' "$log" && what="no test ran"
  # the tool's own failure (counted in its summary as an error), not a finding in the code
  grep -q 'Internal Sanitizer Error' "$log" && what="TOOL ERROR"
  {
    printf '%-9s %-26s %-40s GPU %s: %-11s %3d s; %s; %s\n' "$t" "$prog" "[$filter$mark]" "$gpu" \
      "$what" $((SECONDS - s)) "${sum:-no summary}" "${passed:-no cmocka result}"
    if [ $rc != 0 ]; then
      grep -hE 'Invalid|Hazard|Race|Uninitialized|Barrier|rror:|LINE|Program hit|out of memory|leak|where only|against|allowed|!= ' "$log" \
        | grep -v 'ERROR SUMMARY' | head -8 | cut -c1-240 | sed 's/^/    /'
    fi
  } > "$SAN_LOGS/$i.part"
  echo "$prog $t ${what// /_} ${errors:--} $((SECONDS - s))" > "$SAN_LOGS/$i.rpart"
  mv "$SAN_LOGS/$i.rpart" "$SAN_LOGS/$i.rec"
  mv "$SAN_LOGS/$i.part" "$SAN_LOGS/$i.line"
  [ "$SAN_PROGRESS" = 1 ] && echo "done: $(head -n 1 "$SAN_LOGS/$i.line")"
}

# The next run of the shared queue ("index tool test case kernels options"), or nothing when the
# queue is empty or the script is stopping; under a lock, so that each run starts once.
next_run() {
  (
    flock 9
    [ -f "$SAN_LOGS/stopped" ] && exit 1
    local n
    n=$(cat "$SAN_LOGS/next")
    sed -n "$((n + 1))p" "$SAN_LOGS/jobs" | grep . || exit 1
    echo $((n + 1)) > "$SAN_LOGS/next"
  ) 9> "$SAN_LOGS/lock"
}

# One GPU's share of the queue: at most $jobs runs at once, each taken from the queue when a
# slot is free; returns when the queue is empty and all of its runs have ended.
pool() {
  local gpu=$1 cpus=$2 job i t prog filter kern opts
  while :; do
    while [ "$(jobs -pr | wc -l)" -ge "$jobs" ]; do wait -n 2> /dev/null || sleep 0.2; done
    job=$(next_run) || break
    read -r i t prog filter kern opts <<<"$job"
    echo "$gpu" > "$SAN_LOGS/$i.gpu"
    one "$i" "$gpu" "$cpus" "$t" "$prog" "$filter" "$kern" "$opts" < /dev/null &
  done
  wait
}


t0=$SECONDS
i=0
: > "$SAN_LOGS/jobs"
echo 0 > "$SAN_LOGS/next"
# every field present ("-" for an empty one): the lines are split on blanks
while read -r t prog filter kern opts; do
  printf '%d %s %s %s %s %s\n' $i "$t" "$prog" "$filter" "$kern" "$opts" >> "$SAN_LOGS/jobs"
  i=$((i + 1))
done <<<"$runs"
n=$i
pools=()
for g in "${!gpu_list[@]}"; do
  from=$(( g * per )); cpus=$(IFS=,; echo "${cores[*]:$from:$per}")
  # (the shells' own notes, "Killed" and the like, to a file: each run's line says it)
  pool "${gpu_list[$g]}" "$cpus" 2>> "$SAN_LOGS/shells.err" &
  pools+=($!)
done
# `wait` returns early when a trapped signal arrives: wait again until every pool has ended
# (a pool ends after its runs; a run after its timeout's group)
for p in "${pools[@]}"; do
  while kill -0 "$p" 2> /dev/null; do wait "$p"; done
done
[ $stopped = 1 ] && sleep 1 # the stopped runs' groups: their SIGTERM handlers
clean=0
skipped=0
while read -r i t prog filter kern opts; do
  what="[$filter$([ "$kern" = all ] || echo ", $kern")${opts:+, $opts}]"
  if [ -f "$SAN_LOGS/$i.line" ]; then
    if grep -q ': clean ' "$SAN_LOGS/$i.line"; then
      clean=$((clean + 1))
      [ $brief = 1 ] || cat "$SAN_LOGS/$i.line"
    else
      cat "$SAN_LOGS/$i.line"
    fi
    grep -q ': skipped ' "$SAN_LOGS/$i.line" && skipped=$((skipped + 1))
  elif [ -f "$SAN_LOGS/$i.gpu" ]; then
    printf '%-9s %-26s %-40s GPU %s: no result (the run ended without its line%s)\n' "$t" "$prog" \
      "$what" "$(cat "$SAN_LOGS/$i.gpu")" "$([ $stopped = 1 ] && echo ': stopped by a signal')"
    [ -s "$SAN_LOGS/$i.log" ] && tail -n 3 "$SAN_LOGS/$i.log" | cut -c1-240 | sed 's/^/    /'
    echo "$prog $t no_result - 0" > "$SAN_LOGS/$i.rec"
  else
    printf '%-9s %-26s %-40s not started\n' "$t" "$prog" "$what"
    echo "$prog $t not_started - 0" > "$SAN_LOGS/$i.rec"
  fi
done < "$SAN_LOGS/jobs"

# The summary table: per test program (first appearance in the table) and tool, the errors
# added up over its runs when all of them ended with a summary (else the worst verdict: ERRORS,
# TOOL ERROR (an internal sanitizer error), no test ran, rc N, out of time, no result, not
# started, skipped) and their seconds added up.
echo
echo "summary (errors, or the worst verdict; seconds of the runs added up):"
for i in $(seq 0 $((n - 1))); do cat "$SAN_LOGS/$i.rec"; done | awk '
  function rank(v) {
    if (v == "ERRORS") return 8
    if (v == "TOOL_ERROR") return 7
    if (v == "no_test_ran") return 6
    if (v ~ /^rc_/) return 5
    if (v == "out_of_time") return 4
    if (v == "no_result") return 3
    if (v == "not_started") return 2
    return v == "skipped" ? 1 : 0
  }
  {
    p = $1; t = $2; k = p SUBSEP t
    if (!(p in seen)) { seen[p] = 1; order[++np] = p }
    if (!(t in tseen)) { tseen[t] = 1; tools[++nt] = t }
    runs[k]++; secs[k] += $5
    if ($4 != "-") errs[k] += $4; else noerr[k] = 1
    if (!(k in worst) || rank($3) > rank(worst[k])) worst[k] = $3
  }
  END {
    printf "%-26s", "test"; for (j = 1; j <= nt; j++) printf " %-22s", tools[j]; printf "\n"
    for (q = 1; q <= np; q++) {
      p = order[q]; printf "%-26s", p
      for (j = 1; j <= nt; j++) {
        k = p SUBSEP tools[j]
        if (!(k in runs)) { printf " %-22s", "-"; continue }
        w = worst[k]
        if (w == "clean" || (w == "ERRORS" && !(k in noerr))) cell = errs[k] + 0 " errors"
        else { cell = w; gsub("_", " ", cell) }
        printf " %-22s", sprintf("%s, %d s (%d)", cell, secs[k], runs[k])
      }
      printf "\n"
    }
  }'
echo "sanitize-gpu-tests: $n runs on GPU ${gpus// /,} ($jobs at once per GPU$([ $short = 1 ] || echo ', full runs')), $clean clean, $skipped skipped, $((n - clean - skipped)) not$([ $stopped = 1 ] && echo ', stopped by a signal'); $((SECONDS - t0)) s"
[ $((clean + skipped)) = $n ]
