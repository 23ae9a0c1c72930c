#!/usr/bin/env bash
# The pipeline benchmarks of BENCHMARKS.md ("## Pipeline"): makes the sample inputs with
# `keyer make-sample`, runs the main job over a matrix of inputs, stream counts, outputs and
# devices, and prints one line per run from the session's own statistics (--stats): frames/s,
# end-to-end latency p50/p99, and per stage the mean/p99 latency in ms.
#
#   scripts/bench-pipeline.sh [cpu|gpu] [KEYER_BINARY]
#
# cpu (default): the 720p/1080p/4x360p runs of the 2-core table; gpu: the 1080p/4K, 1..32
# stream runs on CUDA and the CPU comparison of the GPU-machine table. Needs python3 for the
# JSON. Samples and outputs go to a temporary directory (KEYER_BENCH_DIR to keep them).
set -u
set -o pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
what=${1:-cpu}
K=${2:-$repo/build/keyer}
dir=${KEYER_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
img=$repo/tests/data/grace_hopper.jpg
[ -x "$K" ] || { echo "no keyer binary at $K (build first, or pass its path)"; exit 2; }

sample() { # NAME WxH FRAMES [extra make-sample options]
    [ -f "$dir/$1" ] || "$K" make-sample "$dir/$1" --image "$img" --size "$2" --frames "$3" \
        --fps 30 --noise 6 "${@:4}" 2>/dev/null || { echo "make-sample $1 failed"; exit 1; }
}

bench() { # LABEL KEYER-ARGS...
    local label=$1
    shift
    "$K" "$@" --stats "$dir/stats.json" -q -y 2>"$dir/err.log"
    local rc=$?
    python3 - "$label" "$rc" "$dir/stats.json" <<'PY'
import json, sys
label, rc, path = sys.argv[1:4]
try:
    d = json.load(open(path))
except Exception as e:
    print('%-40s exit %s, no statistics (%s)' % (label, rc, e)); sys.exit()
stages = ' '.join('%s=%.2f/%.2f' % (s['name'], s['latency_ms']['mean'], s['latency_ms']['p99'])
                  for s in d['stages'])
gpu = d['gpu']
print('%-40s %7.1f fps  %5d frames  %s  batch %d  latency p50 %.1f p99 %.1f ms  bottleneck %s'
      '  gpu %.0f%% %d MB | %s' % (label, d['fps'], d['frames']['written'], d['device'], d['batch'],
      d['latency_ms']['p50'], d['latency_ms']['p99'], d['bottleneck'],
      gpu['utilization_percent'], gpu['memory_used_bytes'] // 1048576, stages))
PY
    grep -v '^\[' "$dir/err.log" | head -3
    rm -f "$dir/stats.json"
}

if [ "$what" = cpu ]; then
    sample b720.mp4 1280x720 300
    sample b1080.mp4 1920x1080 150 --preset veryfast
    for i in 1 2 3 4; do sample m$i.mp4 640x360 150 --preset veryfast; done
    for r in 1 2 3; do
        bench "720p -> blur -> x264 veryfast" "$dir/b720.mp4" -o "$dir/o.mp4" --blur --preset veryfast --device cpu
        bench "720p -> blur -> x264 medium" "$dir/b720.mp4" -o "$dir/o.mp4" --blur --device cpu
        bench "720p -> blur -> null" "$dir/b720.mp4" --blur --device cpu
        bench "720p -> blur -> null, latency mode" "$dir/b720.mp4" --blur --device cpu --mode latency
        bench "720p -> blur -> null, latency realtime" "$dir/b720.mp4" --blur --device cpu --mode latency --realtime
        bench "1080p -> blur -> x264 veryfast" "$dir/b1080.mp4" -o "$dir/o.mp4" --blur --preset veryfast --device cpu
        bench "1080p -> blur -> null" "$dir/b1080.mp4" --blur --device cpu
        bench "4 x 360p -> blur -> x264 veryfast" "$dir"/m1.mp4 "$dir"/m2.mp4 "$dir"/m3.mp4 "$dir"/m4.mp4 \
            -o "$dir/out/" --blur --preset veryfast --device cpu
    done
else
    sample a1080.mp4 1920x1080 300 --preset veryfast
    sample a4k.mp4 3840x2160 150 --preset veryfast
    s8=() s32=() k8=()
    for i in $(seq 1 32); do
        ln -sf "$dir/a1080.mp4" "$dir/s$i.mp4"
        s32+=("$dir/s$i.mp4")
        [ "$i" -le 8 ] && s8+=("$dir/s$i.mp4")
        [ "$i" -le 8 ] && ln -sf "$dir/a4k.mp4" "$dir/k$i.mp4" && k8+=("$dir/k$i.mp4")
    done
    bench "1080p -> blur -> null, 1 stream" "$dir/a1080.mp4" --device cuda --blur
    bench "1080p -> blur -> null, 8 streams" "${s8[@]}" --device cuda --blur
    bench "1080p -> blur -> null, 32 streams" "${s32[@]}" --device cuda --blur
    bench "1080p latency realtime, null" "$dir/a1080.mp4" --device cuda --blur --mode latency --realtime
    bench "1080p -> blur -> x264 veryfast, 1 stream" "$dir/a1080.mp4" -o "$dir/o1.mp4" --device cuda --blur --preset veryfast
    bench "1080p -> blur -> x264 veryfast, 8 streams" "${s8[@]}" -o "$dir/o8/" --device cuda --blur --preset veryfast
    bench "1080p -> blur -> null, cpu" "$dir/a1080.mp4" --device cpu --blur
    bench "1080p -> blur -> x264 veryfast, cpu" "$dir/a1080.mp4" -o "$dir/oc.mp4" --device cpu --blur --preset veryfast
    bench "4K -> blur -> null, 1 stream" "$dir/a4k.mp4" --device cuda --blur
    bench "4K -> blur -> null, 8 streams" "${k8[@]}" --device cuda --blur
    bench "4K -> blur -> x264 veryfast, 1 stream" "$dir/a4k.mp4" -o "$dir/o4.mp4" --device cuda --blur --preset veryfast
fi
[ -n "${KEYER_BENCH_DIR:-}" ] || rm -rf "$dir"
