#!/usr/bin/env bash
# Many camera-like streams with face detection, tracking and box overlays (issue 8's
# "64 concurrent 1080p30 streams" benchmark). A 1080p30 clip without B-frames (as cameras
# send) is made once from grace_hopper.jpg and opened N times; every stream is read in real
# time (--realtime: frame i released at i/30 s, then decoded), detected by the session's
# batched detector, tracked and drawn on, and discarded (no encoder: the H100 has no NVENC).
# Latency is from a frame's release to its drawn frame, decoding included.
# --draw boxes,ids,mesh adds the face mesh (468 landmarks per face) as the session's batched
# face-mesh stage, with tracking by landmarks, its contours drawn on the device; the table
# then has a column for that stage.
#   usage: scripts/bench-cameras.sh [--device cuda|cpu] [--frames N] [--draw LIST] N1 [N2 ...]
set -euo pipefail
bin=${KEYER_BIN:-build/keyer}
device=cuda
frames=300
draw=boxes,ids
counts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --frames) frames=$2; shift 2 ;;
    --draw) draw=$2; shift 2 ;;
    *) counts+=("$1"); shift ;;
  esac
done
[ ${#counts[@]} -gt 0 ] || counts=(16 64)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" make-sample "$dir/cam.mp4" --size 1920x1080 --frames "$frames" --fps 30 --noise 6 \
  --bframes 0 --keyint 30 --no-audio --preset veryfast
mesh=0
case ",$draw," in *,mesh,*|*,all,*) mesh=1 ;; esac
if [ $mesh = 1 ]; then
  printf '| streams | frames/s (needed) | real time | latency p50 / p99 ms (release to drawn, decode included) | read mean / p99 ms | detect batch mean frames, mean / p99 ms | mesh mean / p99 ms (per batch) | write mean / p99 ms | dropped | NVDEC streams | GPU util |\n'
  printf '|---|---:|---|---|---|---|---|---|---:|---:|---:|\n'
else
  printf '| streams | frames/s (needed) | real time | latency p50 / p99 ms (release to drawn, decode included) | read mean / p99 ms | detect batch mean frames, mean / p99 ms | write mean / p99 ms | dropped | NVDEC streams | GPU util |\n'
  printf '|---|---:|---|---|---|---|---|---:|---:|---:|\n'
fi
for n in "${counts[@]}"; do
  ins=()
  for i in $(seq "$n"); do ins+=("$dir/cam.mp4"); done
  "$bin" "${ins[@]}" --detect faces --draw "$draw" --realtime --device "$device" \
    --stats "$dir/s$n.json" -q
  python3 - "$dir/s$n.json" "$n" "$mesh" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); n = int(sys.argv[2]); mesh = sys.argv[3] == '1'
st = {s['name']: s for s in d['stages']}
def ms(s): l = st[s]['latency_ms']; return f"{l['mean']:.1f} / {l['p99']:.1f}"
need = 30.0 * n
drop = sum(s['dropped'] for s in d['streams'])
hw = sum(1 for s in d['streams'] if s['hw_decode'])
util = f"{d.get('gpu', {}).get('utilization_percent', -1):.0f}%"
lat = d['latency_ms']
rt = 'yes' if d['fps'] >= 0.98 * need and lat['p99'] <= 50 else 'no'
mcol = f" {ms('mesh')} |" if mesh else ""
print(f"| {n} | {d['fps']:.1f} ({need:.0f}) | {rt} | {lat['p50']:.1f} / {lat['p99']:.1f} | {ms('read')} | "
      f"{d['batches']['mean_frames']:.1f}, {ms('detect')} |{mcol} {ms('write')} | {drop} | {hw} | {util} |")
PY
done
