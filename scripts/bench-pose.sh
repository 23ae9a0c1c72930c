#!/usr/bin/env bash
# Many camera-like streams with body pose landmarks and the skeleton drawn (issue 31's "16
# streams with pose landmarks + skeleton in real time"). A 1080p30 clip without B-frames (as
# cameras send) is made once from grace_hopper.jpg and opened N times; every stream is read in
# real time (--realtime: frame i released at i/30 s, then decoded), the full-range face
# detector (the pose trackers' seeding) and the pose landmark model run as the session's
# batched model stages (crops made on the device, landmarks refined from the heatmaps there),
# the skeleton is drawn on the device and the frames are discarded (no encoder: the H100 has
# no NVENC). Latency is from a frame's release to its drawn frame, decoding included.
# --trace also records a trace of the stages and prints where the latency goes frame by frame
# (scripts/trace-latency.py: the start against the steady state, the slowest frames and
# batches). Arguments after -- go to keyer (other session options, for comparisons).
# KEYER_BIN: the keyer to run (default build/keyer).
#   usage: scripts/bench-pose.sh [--device cuda|cpu] [--frames N] [--model lite|full|heavy]
#                                [--trace] N1 [N2 ...] [-- KEYER_OPTIONS...]
set -euo pipefail
bin=${KEYER_BIN:-build/keyer}
here=$(cd "$(dirname "$0")" && pwd)
device=cuda
frames=300
model=lite
trace=0
counts=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --frames) frames=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --trace) trace=1; shift ;;
    --) shift; extra=("$@"); break ;;
    *) counts+=("$1"); shift ;;
  esac
done
[ ${#counts[@]} -gt 0 ] || counts=(16)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" make-sample "$dir/cam.mp4" --size 1920x1080 --frames "$frames" --fps 30 --noise 6 \
  --bframes 0 --keyint 30 --no-audio --preset veryfast
printf '| streams | model | frames/s (needed) | real time | latency p50 / p99 ms (release to drawn, decode included) | read mean / p99 ms | detect batch mean frames, mean / p99 ms | pose mean / p99 ms (per batch) | pose per batch: frames, rounds, passes, runs, host waits | pose crops per run (+ padding); runs of batch 1/2/4/8/16 | pose round mean ms, host waiting | write mean / p99 ms | frames with a pose | dropped | NVDEC streams | GPU util |\n'
printf '|---|---|---:|---|---|---|---|---|---|---|---|---|---:|---:|---:|---:|\n'
for n in "${counts[@]}"; do
  ins=()
  for i in $(seq "$n"); do ins+=("$dir/cam.mp4"); done
  topt=()
  [ "$trace" = 0 ] || topt=(--trace "$dir/t$n.json")
  "$bin" "${ins[@]}" --detect "pose:$model" --draw skeleton --realtime --device "$device" \
    --export "$dir/p$n.jsonl" --stats "$dir/s$n.json" -q ${topt[@]+"${topt[@]}"} ${extra[@]+"${extra[@]}"}
  python3 - "$dir/s$n.json" "$n" "$model" "$dir/p$n.jsonl" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[2]); model = sys.argv[3]
st = {s['name']: s for s in d['stages']}
def ms(s): l = st[s]['latency_ms']; return f"{l['mean']:.1f} / {l['p99']:.1f}"
need = 30.0 * n
drop = sum(s['dropped'] for s in d['streams'])
hw = sum(1 for s in d['streams'] if s['hw_decode'])
util = f"{d.get('gpu', {}).get('utilization_percent', -1):.0f}%"
lat = d['latency_ms']
rt = 'yes' if d['fps'] >= 0.98 * need and lat['p99'] <= 50 else 'no'
lines = open(sys.argv[4]).read().splitlines()
posed = sum(1 for l in lines if '"pose":{' in l)
pose = ms('pose') if 'pose' in st else 'n/a (per-stream trackers)'
# the pose stage's rounds (stats "landmark_rounds"): where its time goes
lr = d.get('landmark_rounds', {})
b = max(lr.get('batches', 0), 1); runs = max(lr.get('runs', 0), 1)
frames_b = st['pose']['frames'] / b if 'pose' in st else 0
per_batch = (f"{frames_b:.1f}, {lr.get('rounds', 0) / b:.2f}, {lr.get('passes', 0) / b:.2f}, "
             f"{lr.get('runs', 0) / b:.2f}, {lr.get('syncs', 0) / b:.2f}")
rb = lr.get('runs_by_batch', [])
per_run = (f"{lr.get('crops', 0) / runs:.1f} (+ {lr.get('padded', 0) / runs:.1f}); "
           + "/".join(str(x) for x in rb[:5]))
rs = lr.get('round_seconds', 0)
per_round = (f"{1000 * rs / max(lr.get('rounds', 0), 1):.2f}, "
             f"{100 * lr.get('wait_seconds', 0) / rs if rs > 0 else 0:.0f}%")
print(f"| {n} | {model} | {d['fps']:.1f} ({need:.0f}) | {rt} | {lat['p50']:.1f} / {lat['p99']:.1f} | {ms('read')} | "
      f"{d['batches']['mean_frames']:.1f}, {ms('detect') if 'detect' in st else 'n/a'} | {pose} | "
      f"{per_batch} | {per_run} | {per_round} | {ms('write')} | "
      f"{posed} of {len(lines)} | {drop} | {hw} | {util} |")
if lr.get('schedule'):
    print(f"<!-- pose landmark model on CUDA: {lr['schedule']} -->")
PY
  [ "$trace" = 0 ] || python3 "$here/trace-latency.py" "$dir/t$n.json"
done
