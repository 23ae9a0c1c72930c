#!/usr/bin/env bash
# Many camera-like streams with face detection, tracking and box overlays (issue 8's
# "64 concurrent 1080p30 streams" benchmark). A 1080p30 clip without B-frames (as cameras
# send) is made once from grace_hopper.jpg and opened N times; every stream is read in real
# time (--realtime: frame i released at i/30 s, then decoded), detected by the session's
# batched detector, tracked and drawn on, and discarded (no encoder: the H100 has no NVENC).
# Latency is from a frame's release to its drawn frame, decoding included.
#   usage: scripts/bench-cameras.sh [--device cuda|cpu] [--frames N] N1 [N2 ...]
set -euo pipefail
bin=${KEYER_BIN:-build/keyer}
device=cuda
frames=300
counts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --frames) frames=$2; shift 2 ;;
    *) counts+=("$1"); shift ;;
  esac
done
[ ${#counts[@]} -gt 0 ] || counts=(16 64)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" make-sample "$dir/cam.mp4" --size 1920x1080 --frames "$frames" --fps 30 --noise 6 \
  --bframes 0 --keyint 30 --no-audio --preset veryfast
printf '| streams | frames/s (needed) | real time | latency p50 / p99 ms (release to drawn, decode included) | read mean / p99 ms | detect batch mean frames, mean / p99 ms | write mean / p99 ms | dropped | NVDEC streams | GPU util |\n'
printf '|---|---:|---|---|---|---|---|---:|---:|---:|\n'
for n in "${counts[@]}"; do
  ins=()
  for i in $(seq "$n"); do ins+=("$dir/cam.mp4"); done
  "$bin" "${ins[@]}" --detect faces --draw boxes,ids --realtime --device "$device" \
    --stats "$dir/s$n.json" -q
  python3 - "$dir/s$n.json" "$n" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[2])
st = {s['name']: s for s in d['stages']}
def ms(s): l = st[s]['latency_ms']; return f"{l['mean']:.1f} / {l['p99']:.1f}"
need = 30.0 * n
drop = sum(s['dropped'] for s in d['streams'])
hw = sum(1 for s in d['streams'] if s['hw_decode'])
util = f"{d.get('gpu', {}).get('utilization_percent', -1):.0f}%"
lat = d['latency_ms']
rt = 'yes' if d['fps'] >= 0.98 * need and lat['p99'] <= 50 else 'no'
print(f"| {n} | {d['fps']:.1f} ({need:.0f}) | {rt} | {lat['p50']:.1f} / {lat['p99']:.1f} | {ms('read')} | "
      f"{d['batches']['mean_frames']:.1f}, {ms('detect')} | {ms('write')} | {drop} | {hw} | {util} |")
PY
done
