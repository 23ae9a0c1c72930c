#!/usr/bin/env bash
# The GStreamer `keyer` element against the `keyer` command, in wall-clock time, on the same
# machine in one run (BENCHMARKS.md, "GStreamer element"):
#  - throughput: per input and path, rounds of three runs in an order rotated each round (so
#    that every kind meets the same load): the command (`keyer IN --device D`, frames
#    discarded), the element (`gst-launch-1.0 filesrc ! decodebin ! [videoconvert !] keyer
#    device=D ! fakesink`; on the GPU path the NVDEC decoder named, `qtdemux ! h265parse !
#    nvh265dec`) and the same pipeline without keyer (GStreamer's decoding: the
#    floor). Each run's wall time and CPU time (the whole process: start-up, model load, decoding
#    included) and frames/s; the steady-state rates (the command's --stats, the element's
#    "stream rate" log line: first frame in to last out); medians over the rounds, and the
#    median of the per-round ratios element/command;
#  - live: videotestsrc is-live=true at 30 fps through `keyer mode=latency` into
#    `fakesink sync=true`, with GStreamer's latency tracer: the latency the element reports
#    in the pipeline's latency query, and the time each buffer spends in it (mean, p50, p95).
# Inputs: tests/data/sample_hevc.mp4 (24 frames of HEVC, 320x240: start-up dominates), a raw
# clip (YUV4MPEG, no decoding on either side) and an H.264 clip made by `keyer make-sample`
# at SIZE with FRAMES frames. Paths: cpu (decoders on the CPU: GStreamer's NVDEC decoders are
# ranked out), and, when keyer is built with CUDA and nvidia-smi lists a GPU, cuda (the command decodes with NVDEC; the
# element gets the decoder's CUDA memory, `video/x-raw(memory:CUDAMemory)`, when GStreamer has
# nvcodec and the plugin CUDA memory; a raw clip is uploaded by keyer on both sides). An input
# with no GStreamer decoder for the path is left out (printed).
# Runs with the system's GStreamer or the GPU machine's bundle (scripts/gst-device-env.sh:
# gst-launch-1.0, gst-inspect-1.0, decodebin, libde265dec, y4mdec, nvcodec, the tracers).
#   scripts/bench-gst.sh [BUILD_DIR]      (default build; needs BUILD_DIR/keyer and
#                                           BUILD_DIR/gst/libgstkeyer.so)
# Environment: ROUNDS (default 5); THREADS (CPU threads of both, keyer --threads N and
# threads=N; default: their defaults, every core); SIZE (default 640x360), FRAMES (default 300)
# of the made clips; PATHS ("cpu cuda", default: cpu, and cuda with a GPU); INPUTS (default
# "sample raw h264"); LIVE_FRAMES (default 150; 0: no live run).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
rounds=${ROUNDS:-5} size=${SIZE:-640x360} frames=${FRAMES:-300}
live_frames=${LIVE_FRAMES:-150} inputs=${INPUTS:-sample raw h264}
export GST_PLUGIN_PATH=$build/gst KEYER_MODELS_DIR=${KEYER_MODELS_DIR:-$repo/models}
keyer=$build/keyer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$repo"

for t in gst-launch-1.0 gst-inspect-1.0; do
    command -v $t >/dev/null || { echo "bench-gst: $t not found (on the GPU machine: the bundle" \
        "of scripts/gst-device-bundle.sh, made from this tree, and scripts/gst-device-env.sh)" >&2
        exit 1; }
done
have() { gst-inspect-1.0 --exists "$1" 2>/dev/null; }
if [ -z "${PATHS:-}" ]; then
    PATHS=cpu
    if ! "$keyer" version | grep -q 'not built' && command -v nvidia-smi >/dev/null &&
        nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        PATHS="cpu cuda"
    fi
fi
cuda_memory=0
if have nvh264dec && gst-inspect-1.0 keyer 2>/dev/null | grep -q 'memory:CUDAMemory'; then
    cuda_memory=1
fi
threads_cli=() threads_el=""
if [ -n "${THREADS:-}" ]; then threads_cli=(--threads "$THREADS"); threads_el="threads=$THREADS"; fi
echo "bench-gst: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), paths: $PATHS," \
     "threads: ${THREADS:-default}, rounds: $rounds, $(gst-launch-1.0 --version | sed -n 1p)," \
     "element CUDA memory: $([ $cuda_memory = 1 ] && echo yes || echo no)"

# the inputs
declare -A file
file[sample]=$repo/tests/data/sample_hevc.mp4
for i in $inputs; do
    case $i in
    raw) file[raw]=$tmp/clip.y4m
         "$keyer" make-sample "${file[raw]}" --size "$size" --frames "$frames" --no-audio \
             --codec wrapped_avframe >/dev/null ;;
    h264) file[h264]=$tmp/clip.mp4
          "$keyer" make-sample "${file[h264]}" --size "$size" --frames "$frames" --no-audio \
              --bframes 0 >/dev/null ;;
    esac
done

# "WALL,CPU" of a command (seconds; CPU: user + system of every thread), its output
# discarded; fails the script on a failure (message shown)
seconds() {
    local TIMEFORMAT='%R %U %S' t
    t=$({ time timeout 300 "$@" >"$tmp/out" 2>"$tmp/err"; } 2>&1) ||
        { echo "bench-gst: failed: $*" >&2; tail -n 20 "$tmp/err" >&2; exit 1; }
    echo "$t" | awk '{printf "%s,%.3f\n", $1, $2 + $3}'
}
median() { sort -g | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : "nan"}'; }

# The GStreamer decoding chain of input $1 on path $2 ("" when GStreamer cannot decode it
# there), and the ranks that keep decodebin on that path's decoders
gst_chain() {
    local in=$1 path=$2
    case $in in
    raw) echo "y4mdec" ;;
    sample | h264)
        local cpu_dec gpu_dec
        if [ "$in" = sample ]; then cpu_dec="avdec_h265 libde265dec" gpu_dec=nvh265dec
        else cpu_dec="avdec_h264 openh264dec" gpu_dec=nvh264dec; fi
        if [ "$path" = cuda ]; then
            # the decoder named (decodebin decides its memory before keyer is linked)
            local parse=h264parse
            [ "$in" = sample ] && parse=h265parse
            if have "$gpu_dec"; then echo "qtdemux ! $parse ! $gpu_dec"; fi
        else
            for d in $cpu_dec; do
                if have "$d"; then echo decodebin; return; fi
            done
        fi ;;
    esac
}
ranks() {
    if [ "$1" = cuda ]; then echo "avdec_h265:0,libde265dec:0,avdec_h264:0,openh264dec:0,nvh265dec:512,nvh264dec:512"
    else echo "nvh265dec:0,nvh264dec:0,nvh265sldec:0,nvh264sldec:0"; fi
}

for path in $PATHS; do
    for in in $inputs; do
        f=${file[$in]}
        chain=$(gst_chain "$in" "$path")
        if [ -z "$chain" ]; then
            echo "$in on $path: left out (no GStreamer decoder for it here)"
            continue
        fi
        n=$("$keyer" probe "$f" | sed -n 's/^frames=//p')
        # the element's memory: the decoder's CUDA memory on the GPU path when both can,
        # else system memory (videoconvert: the formats keyer takes)
        if [ "$path" = cuda ] && [ "$in" != raw ] && [ $cuda_memory = 1 ]; then
            conv="video/x-raw(memory:CUDAMemory)" memory=cuda
        else
            conv="videoconvert" memory=system
        fi
        export GST_PLUGIN_FEATURE_RANK=$(ranks "$path")
        : > "$tmp/rounds"
        for ((r = 0; r < rounds; r++)); do
            declare -A wall=()
            for k in 0 1 2; do
                case $(((k + r) % 3)) in
                0) wall[cli]=$(seconds "$keyer" "$f" --device "$path" "${threads_cli[@]}" \
                       --stats "$tmp/s.json" -q --no-progress)
                   cfps=$(sed -n 's/^  "fps": *\([0-9.]*\).*/\1/p' "$tmp/s.json" | head -n1) ;;
                1) rm -f "$tmp/log"
                   wall[el]=$(GST_DEBUG="keyer:4" GST_DEBUG_FILE="$tmp/log" GST_DEBUG_NO_COLOR=1 \
                       seconds gst-launch-1.0 -q filesrc location="$f" ! $chain ! $conv ! \
                       keyer device="$path" $threads_el ! fakesink)
                   efps=$(sed -n 's/.*stream rate: .* \([0-9.]*\) frames\/s.*/\1/p' "$tmp/log" |
                          tail -n1) ;;
                2) wall[floor]=$(seconds gst-launch-1.0 -q filesrc location="$f" ! $chain ! \
                       $conv ! fakesink) ;;
                esac
            done
            # columns: wall cli, element, floor; steady-state fps cli, element; ratios
            # element/cli of wall time and steady-state rate; CPU cli, element, floor; ratio
            echo "${wall[cli]} ${wall[el]} ${wall[floor]} ${cfps:-nan} ${efps:-nan}" | tr ',' ' ' |
                awk '{printf "%s %s %s %s %s %.4f %.4f %s %s %s %.4f\n", $1, $3, $5, $7, $8,
                      $3 / $1, $8 / $7, $2, $4, $6, $4 / $2}'
        done > "$tmp/rounds"
        unset GST_PLUGIN_FEATURE_RANK
        m() { awk -v c="$1" '{print $c}' "$tmp/rounds" | median; }
        printf '%-6s %-4s %4d frames, %-6s memory: wall cli %.3f s (%.1f fps), element %.3f s (%.1f fps), decode floor %.3f s; element/cli wall %.3f\n' \
            "$in" "$path" "$n" "$memory" "$(m 1)" "$(awk -v n="$n" -v w="$(m 1)" 'BEGIN {print n / w}')" \
            "$(m 2)" "$(awk -v n="$n" -v w="$(m 2)" 'BEGIN {print n / w}')" "$(m 3)" "$(m 6)"
        printf '%-6s %-4s   steady state: cli %.1f fps, element %.1f fps; element/cli %.3f\n' \
            "$in" "$path" "$(m 4)" "$(m 5)" "$(m 7)"
        printf '%-6s %-4s   CPU time: cli %.3f s, element %.3f s, decode floor %.3f s; element/cli %.3f\n' \
            "$in" "$path" "$(m 8)" "$(m 9)" "$(m 10)" "$(m 11)"
    done
done

# live: the latency the element answers the latency query with (the tracer's
# element-reported-latency) and each buffer's time inside it (element-latency)
[ "$live_frames" -gt 0 ] || exit 0
for path in $PATHS; do
    GST_TRACERS="latency(flags=element+reported)" GST_DEBUG="GST_TRACER:7" GST_DEBUG_NO_COLOR=1 \
        timeout 120 gst-launch-1.0 -q videotestsrc is-live=true num-buffers="$live_frames" \
        pattern=ball ! "video/x-raw,format=NV12,width=${size%x*},height=${size#*x},framerate=30/1" ! \
        keyer name=k device="$path" mode=latency $threads_el ! fakesink sync=true \
        2> "$tmp/trace.log" >/dev/null || { tail -n 20 "$tmp/trace.log" >&2; exit 1; }
    reported=$(grep 'element-reported-latency' "$tmp/trace.log" | grep 'element=(string)k' |
               sed -n 's/.*min=(guint64)\([0-9]*\).*/\1/p' | tail -n1)
    grep 'element-latency' "$tmp/trace.log" | grep 'element=(string)k' |
        sed -n 's/.*time=(guint64)\([0-9]*\).*/\1/p' | tail -n $((live_frames * 4 / 5)) | sort -n |
        awk -v s="$size" -v p="$path" -v q="${reported:-}" '
            {a[NR]=$1; t+=$1}
            END {if (!NR) {print "live " s " " p ": no tracer output"; exit}
                 printf "live   %-4s %s NV12 30 fps: latency query %s ms; in keyer mean %.1f ms, p50 %.1f ms, p95 %.1f ms (%d frames)\n",
                        p, s, q == "" ? "none" : sprintf("%.1f", q / 1e6), t/NR/1e6,
                        a[int(NR*0.5)]/1e6, a[int(NR*0.95)]/1e6, NR}'
done
