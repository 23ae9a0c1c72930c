#!/usr/bin/env bash
# Many streams and one long file on one GPU (issue 28): sweeps the decoder and pipeline knobs
# in one call and prints, per run, frames/s, latency p50/p99, the bottleneck and the stage
# table (mean ms per frame and utilisation of each stage), from the session's own statistics.
#
#   bench/stream-knobs.sh [streams|split|all|quick] [KEYER_BINARY]  (default: all, build/keyer)
#
# KEYER_KNOB_COUNTS    stream counts of the sweep (default "8 32")
# KEYER_KNOB_DEVICE    the GPU (default cuda:0)
# KEYER_BENCH_DIR      keeps the samples there (default: a temporary directory)
#
# streams: 1080p30 blur to null (a 300-frame x264 veryfast clip, noise 6; N streams are N
#   links to it), at each count with: the defaults; decode_shared_stream (every NVDEC copy on
#   the device's one legacy stream, keyer's behaviour before this knob); decode_surfaces 8;
#   decode_segments 2 (two NVDEC sessions per stream); refine_workers 4; queue_depth 64.
# split: one 4K30 file (240 frames, keyframe every 12) blur to null: as one stream; with
#   decode_segments 4; split over the GPU's decoder sessions (--split-gpus) with 2, 4 and 6
#   chunks in flight.
# quick: at each count the defaults and decode_shared_stream only; the 4K file as one stream,
#   with decode_segments 4, and split with 2 and 4 chunks in flight (about a minute and a half).
# About 2 to 4 minutes on an H100 (sample encoding included).
set -u
set -o pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
what=${1:-all}
K=${2:-$repo/build/keyer}
dev=${KEYER_KNOB_DEVICE:-cuda:0}
counts=${KEYER_KNOB_COUNTS:-8 32}
dir=${KEYER_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
img=$repo/tests/data/grace_hopper.jpg
[ -x "$K" ] || { echo "no keyer binary at $K (build first, or pass its path)"; exit 2; }
case $what in streams|split|all|quick) ;; *) echo "usage: $0 [streams|split|all|quick] [KEYER]"; exit 2;; esac
quick=0
[ "$what" = quick ] && quick=1

sample() { # NAME WxH FRAMES
    [ -f "$dir/$1" ] || "$K" make-sample "$dir/$1" --image "$img" --size "$2" --frames "$3" \
        --fps 30 --noise 6 --preset veryfast --no-audio 2>/dev/null ||
        { echo "make-sample $1 failed"; exit 1; }
}

bench() { # LABEL KEYER-ARGS...
    local label=$1
    shift
    rm -f "$dir/stats.json"
    "$K" "$@" --blur --device "$dev" --stats "$dir/stats.json" -q -y 2>"$dir/err.log"
    local rc=$?
    python3 - "$label" "$rc" "$dir/stats.json" <<'PY'
import json, sys
label, rc, path = sys.argv[1:4]
try:
    d = json.load(open(path))
except Exception as e:
    print('%-34s exit %s, no statistics (%s)' % (label, rc, e)); sys.exit()
st = ' '.join('%s=%.2f/%.0f%%' % (s['name'], s['latency_ms']['mean'], 100 * s['utilization'])
              for s in d['stages'])
print('%-34s %8.1f fps %6d fr  p50 %6.1f p99 %6.1f ms  %-9s%s | %s' % (
    label, d['fps'], d['frames']['written'], d['latency_ms']['p50'], d['latency_ms']['p99'],
    d['bottleneck'] or '-', '' if rc == '0' else ' (exit %s)' % rc, st))
PY
    grep -v '^\[' "$dir/err.log" | head -2
}

echo "keyer: $("$K" --version 2>/dev/null | head -1)"
"$K" devices --no-probe 2>/dev/null | grep '^cuda:' | head -2
echo "columns: run, frames/s, frames, latency p50/p99, bottleneck | stage=mean ms per frame/utilisation"
if [ "$what" != split ]; then
    sample b1080.mp4 1920x1080 300
    "$K" "$dir/b1080.mp4" --blur --device "$dev" -q -y >/dev/null 2>&1 # warm-up, not reported
    for n in $counts; do
        ins=()
        for i in $(seq 1 "$n"); do
            ln -sf "$dir/b1080.mp4" "$dir/s$i.mp4"
            ins+=("$dir/s$i.mp4")
        done
        bench "1080p x$n defaults" "${ins[@]}"
        bench "1080p x$n decode_shared_stream" "${ins[@]}" --decode-shared-stream
        [ "$quick" = 1 ] && continue
        bench "1080p x$n decode_surfaces 8" "${ins[@]}" --decode-surfaces 8
        bench "1080p x$n decode_segments 2" "${ins[@]}" --decode-segments 2
        bench "1080p x$n refine_workers 4" "${ins[@]}" --refine-workers 4
        bench "1080p x$n queue_depth 64" "${ins[@]}" --queue-depth 64
    done
fi
if [ "$what" != streams ]; then
    sample b4k.mp4 3840x2160 240
    "$K" "$dir/b4k.mp4" --blur --device "$dev" -q -y >/dev/null 2>&1 # warm-up, not reported
    bench "4K x1 one stream" "$dir/b4k.mp4"
    bench "4K x1 decode_segments 4" "$dir/b4k.mp4" --decode-segments 4
    for c in 2 4 $([ "$quick" = 1 ] || echo 6); do
        bench "4K x1 split, $c chunks in flight" "$dir/b4k.mp4" --split-gpus --split-chunks "$c"
    done
fi
[ -n "${KEYER_BENCH_DIR:-}" ] || rm -rf "$dir"
