#!/usr/bin/env bash
# The GStreamer element against the keyer command on the same machine (BENCHMARKS.md,
# "GStreamer element"): throughput on tests/data/sample_hevc.mp4 (24 frames: start-up
# dominates) and on longer clips made by `keyer make-sample` at the sample's size (480 frames)
# and at 640x360 (300 frames), where the steady state dominates (all decoded on the CPU,
# keyed on the CPU, frames discarded), and the latency the element adds in a live pipeline
# (GStreamer's latency tracer, per element). Each run's wall time and CPU time (user + system,
# all threads) are taken, the steady-state rates (the command's --stats; the element logs its
# own at INFO level), and the CPU time of the same GStreamer pipeline without keyer
# (GStreamer's own start-up and decoding); medians are printed.
#   gst/bench.sh [BUILD_DIR]      (default build; needs build/keyer and build/gst/libgstkeyer.so)
# Environment: RUNS (default 5) runs per measurement; the median is printed.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build}
runs=${RUNS:-5}
export GST_PLUGIN_PATH=$build/gst KEYER_MODELS_DIR=$repo/models
cd "$repo" # make-sample reads tests/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median of column $1 of the lines read
median() { awk -v c="$1" '{print $c}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# "WALL CPU": the wall time and the CPU time (user + system, all threads) of the command, in
# seconds; the CPU time is what a loaded shared machine disturbs least
seconds() {
    local TIMEFORMAT='%R %U %S' t
    t=$({ time "$@" >/dev/null 2>"$tmp/err"; } 2>&1) || { cat "$tmp/err" >&2; exit 1; }
    echo "$t" | awk '{printf "%s %.3f\n", $1, $2 + $3}'
}

small=$tmp/clip320.mp4 clip=$tmp/clip640.mp4
"$build/keyer" make-sample "$small" --size 320x240 --frames 480 --no-audio --bframes 0 >/dev/null
"$build/keyer" make-sample "$clip" --size 640x360 --frames 300 --no-audio --bframes 0 >/dev/null

# Runs alternate (command, element, GStreamer alone, again), so that each pair meets the same
# load; the ratios are taken per pair, then their median.
for input in "$repo/tests/data/sample_hevc.mp4" "$small" "$clip"; do
    frames=$("$build/keyer" probe "$input" | sed -n 's/^frames=//p')
    : > "$tmp/runs"
    for ((i = 0; i < runs; i++)); do
        c=$(seconds "$build/keyer" "$input" --stats "$tmp/s.json" --device cpu -q --no-progress)
        cfps=$(sed -n 's/.*"fps": *\([0-9.]*\).*/\1/p' "$tmp/s.json" | head -n1)
        rm -f "$tmp/log"
        e=$(GST_DEBUG="keyer:4" GST_DEBUG_FILE="$tmp/log" GST_DEBUG_NO_COLOR=1 \
            seconds gst-launch-1.0 -q filesrc location="$input" ! decodebin ! videoconvert ! \
            keyer device=cpu ! fakesink)
        efps=$(sed -n 's/.*stream rate: .* \([0-9.]*\) frames\/s.*/\1/p' "$tmp/log" | tail -n1)
        g=$(seconds gst-launch-1.0 -q filesrc location="$input" ! decodebin ! videoconvert ! \
            fakesink)
        echo "$c $e $g $cfps $efps" | awk '{print $1, $2, $3, $4, $6, $7, $8, $3/$1, $4/$2, $8/$7}'
    done > "$tmp/runs"
    # columns: cli wall, cli cpu, element wall, element cpu, bare cpu, cli fps, element fps,
    # element/cli wall, element/cli cpu, element/cli steady-state rate
    m() { median "$1" < "$tmp/runs"; }
    printf '%-16s %4d frames  wall: cli %6.3f s  element %6.3f s  (element/cli %.2f)\n' \
        "$(basename "$input")" "$frames" "$(m 1)" "$(m 3)" "$(m 8)"
    printf '%-16s              CPU:  cli %6.3f s  element %6.3f s  (element/cli %.2f; GStreamer without keyer %.3f s)\n' \
        "" "$(m 2)" "$(m 4)" "$(m 9)" "$(m 5)"
    printf '%-16s              steady state: cli %6.1f fps  element %6.1f fps  (element/cli %.2f)\n' \
        "" "$(m 6)" "$(m 7)" "$(m 10)"
done

# live: 30 fps camera-like source, latency mode; the tracer logs each buffer's time inside keyer
for size in 320x240 640x360; do
    w=${size%x*} h=${size#*x}
    GST_TRACERS="latency(flags=element)" GST_DEBUG="GST_TRACER:7" GST_DEBUG_NO_COLOR=1 \
        gst-launch-1.0 -q videotestsrc is-live=true num-buffers=150 pattern=ball ! \
        video/x-raw,format=NV12,width=$w,height=$h,framerate=30/1 ! \
        keyer name=k device=cpu mode=latency ! fakesink sync=true 2> "$tmp/trace.log" >/dev/null
    grep 'element-latency' "$tmp/trace.log" | grep 'element=(string)k' |
        sed -n 's/.*time=(guint64)\([0-9]*\).*/\1/p' | tail -n 120 | sort -n |
        awk -v s="$size" '{a[NR]=$1; t+=$1} END {if (NR) printf "live %-8s keyer adds: mean %.1f ms, p50 %.1f ms, p95 %.1f ms (%d frames)\n", s, t/NR/1e6, a[int(NR*0.5)]/1e6, a[int(NR*0.95)]/1e6, NR; else print "live " s ": no tracer output"}'
done
