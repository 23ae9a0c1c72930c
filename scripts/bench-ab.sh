#!/usr/bin/env bash
# Side-by-side speed check of two keyer builds (a refactor must not be slower): runs the same
# benchmarks with each binary in turn, ROUNDS times, alternating, and prints one line per run.
#
#   scripts/bench-ab.sh gpu|cpu OLD_KEYER NEW_KEYER [ROUNDS]
#
# gpu: the main job on CUDA, 1080p blur to null with 1 and 8 streams (frames/s from --stats),
#      and `keyer bench nn --backend cuda` for selfie and face-short at batches 1, 8 and 256.
# cpu: `keyer bench nn --backend cpu --threads 2` for selfie and selfie-landscape.
# Read the spread between rounds of the same binary as the run-to-run noise.
set -u
set -o pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
what=${1:?gpu or cpu}
old=${2:?old keyer binary}
new=${3:?new keyer binary}
rounds=${4:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

nn() { # LABEL KEYER ARGS... -> mean ms per inference and frames/s
    local label=$1 k=$2
    shift 2
    "$k" bench nn --json "$@" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("%-44s %s" % (sys.argv[1], " ".join("%s=%s" % (k, d[k]) for k in d
      if k in ("mean_ms", "median_ms", "min_ms", "frames_per_second", "fps", "p50_ms"))))' "$label" \
        || echo "$label: failed"
}

job() { # LABEL KEYER ARGS... -> frames/s of the main job
    local label=$1 k=$2
    shift 2
    "$k" "$@" --stats "$dir/stats.json" -q -y 2>"$dir/err.log" || { echo "$label: exit $?"; head -3 "$dir/err.log"; return; }
    python3 -c '
import json, sys
d = json.load(open(sys.argv[2]))
print("%-44s %8.1f fps  latency p50 %.1f ms  bottleneck %s" % (sys.argv[1], d["fps"],
      d["latency_ms"]["p50"], d["bottleneck"]))' "$label" "$dir/stats.json"
}

if [ "$what" = gpu ]; then
    "$new" make-sample "$dir/a1080.mp4" --image "$repo/tests/data/grace_hopper.jpg" \
        --size 1920x1080 --frames 300 --fps 30 --noise 6 --preset veryfast 2>/dev/null || exit 1
    s8=()
    for i in 1 2 3 4 5 6 7 8; do ln -sf "$dir/a1080.mp4" "$dir/s$i.mp4"; s8+=("$dir/s$i.mp4"); done
    for r in $(seq 1 "$rounds"); do
        for side in old new; do
            k=$old; [ "$side" = new ] && k=$new
            job "r$r $side 1080p blur null 1 stream" "$k" "$dir/a1080.mp4" --device cuda --blur
            job "r$r $side 1080p blur null 8 streams" "$k" "${s8[@]}" --device cuda --blur
            for m in selfie face-short; do
                for b in 1 8 256; do
                    nn "r$r $side nn $m cuda batch $b" "$k" --model "$m" --backend cuda --batch "$b" \
                        --iterations 200 --warmup 20
                done
            done
        done
    done
else
    for r in $(seq 1 "$rounds"); do
        for side in old new; do
            k=$old; [ "$side" = new ] && k=$new
            for m in selfie selfie-landscape; do
                nn "r$r $side nn $m cpu threads 2" "$k" --model "$m" --backend cpu --threads 2 \
                    --iterations 300 --warmup 30
            done
        done
    done
fi
