#!/usr/bin/env bash
# compute-sanitizer over the GPU tests of the face and body chain (issue 31: "all GPU tests pass
# under compute-sanitizer"), one process per test case so that every run stays short, several at
# once on each GPU. Run from the repository root after a CUDA build.
#
#   usage: scripts/sanitize-gpu-tests.sh [--build DIR] [--tool memcheck|racecheck|all]
#            [--gpus "0 1"] [--jobs N] [--timeout S] [--full] [--progress] [--list] [REGEX]
#
#  --build DIR   the CUDA build (default build); its tests/ holds the test programs
#  --tool        which runs of the table below (default all)
#  --gpus        the GPUs to spread the runs over (default 0); the CPU cores this process may
#                use are split evenly between them, each run pinned to its GPU's share
#  --jobs N      runs at once per GPU (default 4)
#  --timeout S   seconds per run (default 120); a run cut there is reported "out of time"
#  --full        without the tests' short mode (KEYER_TEST_SHORT unset): their whole runs
#  --progress    also print each run's line ("done: ...") as soon as it ends, so that a caller
#                that cuts the script short still has the runs that ended
#  --list        print the runs and exit
#  REGEX         only the runs whose "tool test case" line matches (grep -E)
#
# Every run has KEYER_TEST_SHORT=1 (tests/common/kt_gpu.h: the tests that document a short mode
# run fewer frames, with the same checks; not with --full) and KEYER_TEST_FILTER set to its
# case. The script waits for every run it started (each one's sanitizer, test program and
# `timeout` included), then prints one line per run in the table's order: its verdict, seconds,
# the tool's summary, cmocka's count, and the first lines of any error. A run whose shell ended
# without writing its line (killed from outside) is reported "no result" with the end of its
# log. Exit status 0 when every run finished clean (rc 0, 0 errors or 0 hazards), 1 otherwise
# (also after SIGINT or SIGTERM, which stop the runs and still print the table); 2 on a usage
# error.
#
# Environment: SAN_CS, the sanitizer to run (default compute-sanitizer from PATH or CUDA's
# bin/); it is called as `SAN_CS --tool T --error-exitcode 9 PROGRAM` (tests/cli/
# sanitize_gpu_tests.sh runs the script with a fake one on the CPU).
#
# memcheck runs every case of every test below. racecheck runs where the kernels a case drives
# use shared memory: the kNN graph (overlay/cuda/knn.cu), the overlay renderer
# (overlay/cuda/overlay.cu), the matte refinement (render/cuda/refine.cu) and the network
# kernels the detectors and landmark models run on (nn/cuda: convolutions, pooling, the
# persistent and cluster schedules); not on test_people_switch_gpu, whose packing kernel
# (vision/cuda/people_switch.cu) uses none, nor for the crops (render/cuda/prepare.cu), the
# pose heatmap gather (vision/cuda/pose_heatmap.cu), the segmentation mask and sigmoid
# kernels (vision/cuda/segmask.cu, sigmoid.cu), which use none either.
# Racecheck's time goes to the network kernels, not to the frames: on one H200 with six runs
# at once, each of the six racecheck runs of a case that runs a network was still going at
# 180 s, test_people_gpu's one 548x342 frame and test_keying_gpu's three photos included.
set -uo pipefail
build=build
tool=all
gpus=0
jobs=4
limit=120
short=1
list=0
progress=0
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
    --list) list=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "sanitize-gpu-tests: unknown option $1" >&2; exit 2 ;;
    *) pattern=$1; shift ;;
  esac
done
case "$tool" in memcheck|racecheck|all) ;; *) echo "sanitize-gpu-tests: --tool memcheck|racecheck|all" >&2; exit 2 ;; esac

# tool, test program, case (longest first: they start first), and "full" for a run without the
# short mode (the pose test's forced-f16 case: its end-to-end check allows 4 frames where only
# one side finds a pose, which the short mode's faster pan does not keep)
runs=$(cat <<'EOF'
racecheck test_people_device_gpu test_people_device_frames
racecheck test_pipeline_pose_gpu test_pose_stage_three_streams
racecheck test_people_gpu test_keying
racecheck test_pipeline_mesh_gpu test_mesh_stage_f32
racecheck test_keying_gpu test_cuda_frames_cuda_network
racecheck test_pipeline_gpu test_session_detect_on_cuda
memcheck test_people_device_gpu test_auto_people_cuda
memcheck test_people_device_gpu test_people_device_frames
memcheck test_people_device_gpu test_people_session_cuda
memcheck test_pipeline_pose_gpu test_pose_stage_gpu_failure
memcheck test_pipeline_pose_gpu test_pose_stage_nvdec_files
memcheck test_pipeline_pose_gpu test_pose_stage_three_streams
memcheck test_pipeline_pose_gpu test_pose_stage_f32
memcheck test_pipeline_pose_gpu test_pose_stage_f16 full
memcheck test_people_gpu test_keying
memcheck test_people_gpu test_photos
memcheck test_people_gpu test_vtest
memcheck test_pipeline_mesh_gpu test_mesh_stage_gpu_failure
memcheck test_pipeline_mesh_gpu test_mesh_stage_nvdec_files
memcheck test_pipeline_mesh_gpu test_mesh_stage_f32
memcheck test_pipeline_mesh_gpu test_mesh_stage_f16
memcheck test_pipeline_mesh_gpu test_crops_cuda_equal_cpu
memcheck test_pipeline_gpu test_session_detect_on_cuda
memcheck test_keying_gpu test_cuda_frames_cuda_network
memcheck test_knn_gpu *
memcheck test_overlay_gpu *
memcheck test_people_switch_gpu *
racecheck test_knn_gpu test_sets
racecheck test_knn_gpu test_paths
racecheck test_knn_gpu test_face_mesh
racecheck test_knn_gpu test_arguments
racecheck test_knn_gpu test_curves
racecheck test_overlay_gpu *
racecheck test_pipeline_mesh_gpu test_crops_cuda_equal_cpu
EOF
)
[ "$tool" = all ] || runs=$(grep "^$tool " <<<"$runs")
[ -z "$pattern" ] || runs=$(grep -E -- "$pattern" <<<"$runs")
if [ -z "$runs" ]; then echo "sanitize-gpu-tests: no run matches" >&2; exit 2; fi
if [ $list = 1 ]; then echo "$runs"; exit 0; fi

cs=${SAN_CS:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
[ -x "$cs" ] || { echo "sanitize-gpu-tests: $cs: no sanitizer there (set SAN_CS)" >&2; exit 2; }
for t in $(awk '{print $2}' <<<"$runs" | sort -u); do
  [ -x "$build/tests/$t" ] || { echo "sanitize-gpu-tests: $build/tests/$t not built" >&2; exit 2; }
done
export KEYER_MODELS_DIR=${KEYER_MODELS_DIR:-$PWD/models} KEYER_TEST_DATA=${KEYER_TEST_DATA:-$PWD/tests/data}
# test_people_gpu's street case reads Debian's vtest.avi, or the committed re-encoding of it
vtest=/usr/share/doc/opencv-doc/examples/data/vtest.avi
[ -f "$vtest" ] || vtest=$PWD/tests/data/street_vtest.mp4
export KEYER_VTEST=${KEYER_VTEST:-$vtest}
if [ $short = 1 ]; then export KEYER_TEST_SHORT=1; else unset KEYER_TEST_SHORT; fi
export SAN_CS=$cs SAN_BUILD=$build SAN_LIMIT=$limit SAN_PROGRESS=$progress
SAN_LOGS=$(mktemp -d)
# removed at the very end only: every run has ended by then (see below)
trap 'rm -rf "$SAN_LOGS"' EXIT

# the cores this process may use, split evenly between the GPUs
read -r -a cores <<<"$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))')"
read -r -a gpu_list <<<"$gpus"
per=$(( ${#cores[@]} / ${#gpu_list[@]} )); [ $per -ge 1 ] || per=1

# One run: index, GPU, cores, tool, test, case, mode ("full" or "-"); writes $SAN_LOGS/<index>.line
# (through a temporary name: a run killed before its end leaves none). `timeout` puts itself and
# what it starts (taskset -> the sanitizer -> the test program) in a process group of its own,
# kills that group at the limit and, 10 s later, with SIGKILL; its pid (= the group's id) is in
# <index>.pid for stop() below.
one() {
  local i=$1 gpu=$2 cpus=$3 t=$4 prog=$5 filter=$6 mode=${7#-} log=$SAN_LOGS/$1.log s=$SECONDS rc
  [ "$mode" = full ] && unset KEYER_TEST_SHORT
  CUDA_VISIBLE_DEVICES=$gpu KEYER_TEST_FILTER="$filter" timeout -k 10 "$SAN_LIMIT" \
    taskset -c "$cpus" "$SAN_CS" --tool "$t" --error-exitcode 9 "$SAN_BUILD/tests/$prog" \
    > "$log" 2>&1 < /dev/null &
  echo $! > "$SAN_LOGS/$i.pid"
  wait $!
  rc=$?
  local sum passed what
  sum=$(grep -hoE 'ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?, [0-9]+ warnings?\)' "$log" | tail -1)
  passed=$(grep -hoE '\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$log" | tr -s ' ' | tr '\n' ' ')
  case $rc in
    0) what=clean ;; 124|137) what="out of time" ;; 9) what="ERRORS" ;; 77) what=skipped ;; *) what="rc $rc" ;;
  esac
  {
    printf '%-9s %-24s %-32s GPU %s: %-11s %3d s; %s; %s\n' "$t" "$prog" "[$filter${mode:+, $mode}]" "$gpu" \
      "$what" $((SECONDS - s)) "${sum:-no summary}" "${passed:-no cmocka result}"
    if [ $rc != 0 ]; then
      grep -hE 'Invalid|Hazard|Race|rror:|LINE|Program hit|out of memory|leak|where only|against|allowed|!= ' "$log" \
        | grep -v 'ERROR SUMMARY' | head -8 | cut -c1-240 | sed 's/^/    /'
    fi
  } > "$SAN_LOGS/$i.part"
  mv "$SAN_LOGS/$i.part" "$SAN_LOGS/$i.line"
  [ "$SAN_PROGRESS" = 1 ] && echo "done: $(head -n 1 "$SAN_LOGS/$i.line")"
}

# One GPU's runs (lines "index cores tool test case mode" on stdin), at most $jobs at once, the
# table's order; returns when all of them have ended.
pool() {
  local gpu=$1 i cpus t prog filter mode
  while read -r i cpus t prog filter mode; do
    while [ "$(jobs -pr | wc -l)" -ge "$jobs" ]; do wait -n 2> /dev/null || sleep 0.2; done
    one "$i" "$gpu" "$cpus" "$t" "$prog" "$filter" "$mode" < /dev/null &
  done
  wait
}

# SIGINT / SIGTERM: the runs' process groups are stopped (their shells here stop with the
# signal), the script waits for them and prints what it has
stopped=0
stop() {
  stopped=1
  local f
  for f in "$SAN_LOGS"/*.pid; do
    [ -f "$f" ] && kill -TERM -- "-$(cat "$f")" "$(cat "$f")" 2> /dev/null
  done
}
trap stop INT TERM

t0=$SECONDS
i=0
: > "$SAN_LOGS/jobs"
# every field present ("-" for an empty one): the lines are split on blanks
while read -r t prog filter mode; do
  g=$(( i % ${#gpu_list[@]} ))
  from=$(( g * per )); cpus=$(IFS=,; echo "${cores[*]:$from:$per}")
  printf '%d %s %s %s %s %s %s\n' $i "${gpu_list[$g]}" "$cpus" "$t" "$prog" "$filter" "${mode:--}" >> "$SAN_LOGS/jobs"
  i=$((i + 1))
done <<<"$runs"
n=$i
pools=()
for g in "${gpu_list[@]}"; do
  awk -v g="$g" '$2 == g { $2 = ""; print }' "$SAN_LOGS/jobs" > "$SAN_LOGS/jobs.$g"
  # (the shells' own notes, "Killed" and the like, to a file: each run's line says it)
  pool "$g" < "$SAN_LOGS/jobs.$g" 2>> "$SAN_LOGS/shells.err" &
  pools+=($!)
done
# `wait` returns early when a trapped signal arrives: wait again until every pool has ended
# (a pool ends after its runs; a run after its timeout's group)
for p in "${pools[@]}"; do
  while kill -0 "$p" 2> /dev/null; do wait "$p"; done
done
[ $stopped = 1 ] && sleep 1 # the stopped runs' groups: their SIGTERM handlers
clean=0
while read -r i g cpus t prog filter mode; do
  mode=${mode#-}
  if [ -f "$SAN_LOGS/$i.line" ]; then
    cat "$SAN_LOGS/$i.line"
    grep -q ': clean ' "$SAN_LOGS/$i.line" && clean=$((clean + 1))
  else
    printf '%-9s %-24s %-32s GPU %s: no result (the run ended without its line%s)\n' "$t" "$prog" \
      "[$filter${mode:+, $mode}]" "$g" "$([ $stopped = 1 ] && echo ': stopped by a signal')"
    [ -s "$SAN_LOGS/$i.log" ] && tail -n 3 "$SAN_LOGS/$i.log" | cut -c1-240 | sed 's/^/    /'
  fi
done < "$SAN_LOGS/jobs"
echo "sanitize-gpu-tests: $n runs on GPU ${gpus// /,} ($jobs at once per GPU$([ $short = 1 ] || echo ', full runs')), $clean clean, $((n - clean)) not$([ $stopped = 1 ] && echo ', stopped by a signal'); $((SECONDS - t0)) s"
[ $clean = $n ]
