#!/usr/bin/env bash
# Several GPUs in one session (issue 28): the same work on one GPU and on two, in one run, so
# the speed-up is measured on one machine at one time.
#
#   bench/multigpu.sh [KEYER_BINARY [keyer options...]]   (default build/keyer; a CUDA build)
#
# Makes its inputs with `keyer make-sample` (no ffmpeg program needed), both at once: a 1080p30
# clip of 300 frames (x264 veryfast) and a 4K30 clip of 480 frames (x264 ultrafast, as
# session 8's; veryfast would take several times longer to make), both --noise 6 with a
# keyframe every 12 frames; the time they took is printed,
# N streams being N symbolic links to the same file. 480 frames of 4K are 0.8-1.6 s of work
# split over one or two GPUs: with 240 (before) the start and the end of the run (about 0.13 s,
# the same on one GPU and on two) were a quarter of the two-GPU run. Runs, each as
# `keyer INPUTS... --blur` with a null output:
#   - 16 streams of 1080p on cuda:0, then on cuda:0,1 (8 streams per GPU: placement by load);
#   - one 4K file on cuda:0 as one stream (two NVDEC sessions, the default); split over
#     cuda:0's decoder sessions (--split-gpus, 2 chunks in flight); split over cuda:0,1 (2
#     chunks in flight per GPU, then 4);
#   - 2 streams of 4K on cuda:0, then on cuda:0,1 (one per GPU);
# and prints frames/s, latency p50/p99, the pictures the decoders were given (more than the
# frames where a chunk's decoder takes the next chunk's first pictures) and the speed-up from
# each session's own statistics (--stats), with where each stream ran; for the split runs also
# the split's timeline from keyer's log (when the first and last frames came out, when each
# lane read its last frame, how long lanes and writer waited). Needs two CUDA devices and
# python3 (for the JSON). Samples go to a temporary directory (KEYER_BENCH_DIR to keep them).
set -u
set -o pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
K=${1:-$repo/build/keyer}
shift $(($# > 0 ? 1 : 0))
extra=("$@") # given to every run (e.g. --model selfie-landscape --decode-ahead 4)
dir=${KEYER_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
img=$repo/tests/data/grace_hopper.jpg
[ -x "$K" ] || { echo "no keyer binary at $K (build first, or pass its path)"; exit 2; }
gpus=$("$K" devices --no-probe 2>/dev/null | grep -c '^cuda:[0-9]')
if [ "${gpus:-0}" -lt 2 ]; then
    echo "bench/multigpu.sh: needs two CUDA devices, found ${gpus:-0}"
    exit 77
fi

sample() { # NAME WxH FRAMES PRESET (made under a temporary name: no half-written sample stays)
    [ -f "$dir/$1" ] || { "$K" make-sample "$dir/$1.part.mp4" --image "$img" --size "$2" \
        --frames "$3" --fps 30 --noise 6 --preset "$4" 2>/dev/null &&
        mv "$dir/$1.part.mp4" "$dir/$1"; }
}

links() { # FILE COUNT PREFIX: prints the paths of COUNT links to FILE
    local i
    for i in $(seq 1 "$2"); do
        ln -sf "$dir/$1" "$dir/$3$i.mp4"
        printf '%s\n' "$dir/$3$i.mp4"
    done
}

declare -A fps
bench() { # LABEL DEVICE INPUTS... [extra options]
    local label=$1 device=$2 v=-q
    shift 2
    case " $* " in *" --split-gpus "*) v=-v ;; esac # the split's timeline is logged as info
    "$K" "$@" "${extra[@]}" --blur --device "$device" --stats "$dir/stats.json" $v -y \
        >/dev/null 2>"$dir/err.log"
    local rc=$?
    python3 - "$label" "$device" "$rc" "$dir/stats.json" "$dir/fps.txt" <<'PY'
import collections, json, sys
label, device, rc, path, fps_file = sys.argv[1:6]
try:
    d = json.load(open(path))
except Exception as e:
    print('%-22s %-9s exit %s, no statistics (%s)' % (label, device, rc, e)); sys.exit()
where = collections.Counter(s.get('device', '?') for s in d['streams'])
pictures = sum(s.get('decoded_pictures', 0) for s in d['streams'])
print('%-22s %-9s %6d %9.1f %8.1f %8.1f %8d   %s%s' % (
    label, device, d['frames']['written'], d['fps'], d['latency_ms']['p50'],
    d['latency_ms']['p99'], pictures,
    ', '.join('%d on %s' % (n, k) for k, n in sorted(where.items())),
    '' if rc == '0' else '  (exit %s)' % rc))
open(fps_file, 'w').write('%.3f\n' % d['fps'])
PY
    fps[$label/$device]=$(cat "$dir/fps.txt" 2>/dev/null || echo 0)
    grep -o 'split: .*' "$dir/err.log" | sed 's/^/    /'
}

speedup() { # LABEL
    python3 -c "import sys; a, b = float(sys.argv[2]), float(sys.argv[3]); \
print('%-22s speed-up on two GPUs: %s' % (sys.argv[1], '%.2fx' % (b / a) if a > 0 else 'n/a'))" \
        "$1" "${fps[$1/cuda:0]:-0}" "${fps[$1/cuda:0,1]:-0}"
}

t0=$SECONDS
sample b1080.mp4 1920x1080 300 veryfast &
sample b4k480.mp4 3840x2160 480 ultrafast &
wait
for f in b1080.mp4 b4k480.mp4; do
    [ -f "$dir/$f" ] || { echo "make-sample $f failed"; exit 1; }
done
echo "samples: $((SECONDS - t0)) s to make (none when kept in KEYER_BENCH_DIR)"
mapfile -t hd16 < <(links b1080.mp4 16 hd)
mapfile -t k2 < <(links b4k480.mp4 2 k)

echo "keyer: $("$K" --version 2>/dev/null | head -1)"
"$K" devices --no-probe 2>/dev/null | grep '^cuda:'
printf '%-22s %-9s %6s %9s %8s %8s %8s   %s\n' run device frames frames/s p50_ms p99_ms pictures \
    streams
for dev in cuda:0 cuda:0,1; do
    bench "1080p x16 blur null" "$dev" "${hd16[@]}"
done
bench "4K x1 one stream" cuda:0 "$dir/b4k480.mp4"
for dev in cuda:0 cuda:0,1; do
    bench "4K x1 split" "$dev" "$dir/b4k480.mp4" --split-gpus
done
bench "4K x1 split x4 chunks" cuda:0,1 "$dir/b4k480.mp4" --split-gpus --split-chunks 4
for dev in cuda:0 cuda:0,1; do
    bench "4K x2 blur null" "$dev" "${k2[@]}"
done
speedup "1080p x16 blur null"
speedup "4K x1 split" # over two GPUs against over one GPU's decoder sessions (issue 28: 1.8x)
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); \
print('%-22s split over two GPUs vs one stream on one GPU: %s' % ('4K x1', '%.2fx' % (b / a) if a > 0 else 'n/a'))" \
    "${fps[4K x1 one stream/cuda:0]:-0}" "${fps[4K x1 split/cuda:0,1]:-0}"
speedup "4K x2 blur null"
