#!/usr/bin/env bash
# The live network inputs run_reconnect.sh does not cover, on the loopback interface, each with
# its server killed mid-stream and started again: keyer reconnects, counts the frames it missed
# and goes on; the output decodes to its end with increasing timestamps.
#  1. RTP (H.264, RFC 6184) described by an SDP file: Debian's ffmpeg sends, keyer receives.
#     The sender stops for 3 s; the read times out (--input-timeout), keyer opens the SDP
#     again and goes on; Ctrl-C ends the run (exit 130).
#  2. SRT (MPEG-TS): ffmpeg listens, keyer calls. The listener is killed and restarted; keyer
#     reconnects; then it goes for good and, after --reconnect-max, the stream fails (exit 1)
#     with its output finalised and the summary naming the URL and the reason. Skipped (said
#     so) when the system's libavformat has no SRT.
#  3. HLS: ffmpeg writes a live playlist (1 s segments) that Python's http.server serves;
#     keyer reads the playlist over HTTP. The HTTP server is killed for 2.5 s and restarted
#     while ffmpeg goes on writing segments: the playlist reload fails, keyer reconnects and
#     reads on. Ctrl-C ends the run.
#  4. RTSP: FFmpeg cannot serve RTSP to a client (its RTSP "listen" mode only receives a
#     publisher), so the server is GStreamer's RTSP server library, driven by lib/rtsp_server.py
#     (Debian: python3-gi, gir1.2-gst-rtsp-server-1.0), serving the H.264 of a 30 s clip over
#     RTP/UDP. It is killed and restarted; keyer reconnects (a new session from the clip's
#     start); Ctrl-C ends the run. Skipped (said so) without those packages.
# Only 127.0.0.1, free ports picked at run time; every background process is killed on exit;
# the whole test is bounded by a 170 s timeout (about 60 s on an idle machine; each step waits
# for keyer's progress or its reconnection rather than a fixed time).
if [ -z "${KEYER_LIVE_BOUNDED:-}" ]; then
    command -v timeout >/dev/null || { echo "SKIP: timeout (coreutils) is missing"; exit 77; }
    KEYER_LIVE_BOUNDED=1 exec timeout -k 5 170 bash "$0" "$@"
fi
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
for p in ffmpeg ffprobe; do
    command -v $p >/dev/null || { echo "SKIP: $p is missing (scripts/setup.sh installs it)"; exit 77; }
done
. "$(dirname "${BASH_SOURCE[0]}")/lib/live.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Debian's python3 (with its python3-gi); another python3 earlier on PATH may lack it
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || { echo "SKIP: python3 is missing"; exit 77; }

"$bin" make-sample "$tmp/clip.mp4" --image "$data/grace_hopper.jpg" --size 160x96 --frames 48 \
    --fps 24 --preset ultrafast 2>/dev/null || fail "make-sample"
# passthrough with face detection: the cheapest per-frame work, so a loaded machine keeps up
opts=(--detect faces --draw none --device cpu --preset ultrafast --threads 1 -y --progress)

# The checks every case makes once keyer has ended with exit status $3 (expected $4): case
# name $1, base name $2 of the log, stats and output under $tmp; at least one reconnection with
# frames missed, an output that decodes cleanly, timestamps that increase, at least 20 frames.
check_run() {
    local name=$1 base=$2 rc=$3 want=$4
    [ "$rc" -eq "$want" ] || { cat "$tmp/$base.log"; fail "$name: exit $rc, expected $want"; }
    grep -q '"reconnects": [1-9][0-9]*, "missed_frames": [1-9][0-9]*' "$tmp/$base.json" ||
        { cat "$tmp/$base.log" "$tmp/$base.json"; fail "$name: --stats lacks reconnects >= 1 and missed_frames > 0"; }
    grep -q 'reconnection.*: [1-9][0-9]* frames\{0,1\} missed in .* s disconnected$' "$tmp/$base.log" ||
        { cat "$tmp/$base.log"; fail "$name: the summary does not report the reconnection"; }
    decoded_frames "$tmp/$base.mp4" >/dev/null || fail "$name: the output does not decode cleanly"
    frame_times "$tmp/$base.mp4" | awk 'NR > 1 && $1 <= prev { bad = 1 } { prev = $1 } END { exit bad || NR < 20 }' ||
        fail "$name: the output's timestamps do not increase, or it holds fewer than 20 frames"
}

# ---- 1. RTP described by an SDP file ----------------------------------------------------------
port=$(free_port_pair) || fail "no free port"
rtp_sender() {
    ffmpeg -nostdin -hide_banner -loglevel error -re -stream_loop -1 -i "$tmp/clip.mp4" -an \
        -c copy -f rtp -sdp_file "$tmp/cam.sdp" "rtp://127.0.0.1:$port" 2>>"$tmp/sender.log" &
    server=$!
    pids+=($server)
}
rtp_sender
for _ in $(seq 100); do [ -s "$tmp/cam.sdp" ] && break; sleep 0.1; done
grep -q "m=video $port RTP/AVP 96" "$tmp/cam.sdp" || { cat "$tmp/sender.log"; fail "RTP: no SDP file"; }
"$bin" "$tmp/cam.sdp" -o "$tmp/rtp.mp4" --stats "$tmp/rtp.json" --input-timeout 1 \
    --reconnect-max 10 "${opts[@]}" 2>"$tmp/rtp.log" &
keyer=$!
pids+=($keyer)
wait_frames "$tmp/rtp.log" 24 RTP
kill $server 2>/dev/null; wait $server 2>/dev/null
# longer than the input timeout by more than a loaded machine's backlog of received packets
sleep 3
rtp_sender
wait_resume "$tmp/rtp.log" RTP
wait_frames "$tmp/rtp.log" $(($(progress_frames "$tmp/rtp.log") + 24)) "RTP after the reconnection"
kill -INT $keyer
wait $keyer
rc=$?
kill $server 2>/dev/null; wait $server 2>/dev/null
check_run RTP rtp $rc 130
grep -q "$tmp/cam.sdp: input lost (no data for 1.0 s (input timeout))" "$tmp/rtp.log" ||
    { cat "$tmp/rtp.log"; fail "RTP: the break is not logged with its reason"; }
echo "RTP: ok ($(decoded_frames "$tmp/rtp.mp4") frames)"

# ---- 2. SRT -----------------------------------------------------------------------------------
if ffmpeg -hide_banner -protocols 2>/dev/null | sed -n '/^Input:/,/^Output:/p' | grep -qx ' *srt'; then
    port=$(free_port) || fail "no free port"
    url="srt://127.0.0.1:$port"
    srt_server() {
        ffmpeg -nostdin -hide_banner -loglevel error -re -stream_loop -1 -i "$tmp/clip.mp4" \
            -c copy -f mpegts "$url?mode=listener" 2>>"$tmp/server.log" &
        server=$!
        pids+=($server)
    }
    srt_server
    wait_udp_bound "$port"
    timeout 60 "$bin" "$url" -o "$tmp/srt.mp4" --stats "$tmp/srt.json" --input-timeout 1 \
        --reconnect-max 4 "${opts[@]}" 2>"$tmp/srt.log" &
    keyer=$!
    pids+=($keyer)
    wait_frames "$tmp/srt.log" 24 SRT
    kill $server 2>/dev/null; wait $server 2>/dev/null
    sleep 1.5
    srt_server
    wait_udp_bound "$port"
    wait_resume "$tmp/srt.log" SRT
    wait_frames "$tmp/srt.log" $(($(progress_frames "$tmp/srt.log") + 24)) "SRT after the reconnection"
    kill $server 2>/dev/null; wait $server 2>/dev/null
    wait $keyer
    rc=$?
    check_run SRT srt $rc 1
    grep -q "$url -> .*FAILED after [0-9]* frames: .*$url: the input broke off .*did not come back within 4 s" \
        "$tmp/srt.log" || { cat "$tmp/srt.log"; fail "SRT: the summary does not name the lost source and why"; }
    written=$(sed -n "s|^  $url -> .*: FAILED after \([0-9]*\) frames.*|\1|p" "$tmp/srt.log")
    probed=$(decoded_frames "$tmp/srt.mp4")
    [ "$probed" = "$written" ] || fail "SRT: the output holds $probed frames, the summary says $written"
    echo "SRT: ok ($probed frames)"
else
    echo "SRT: skipped: this libavformat has no srt protocol (ffmpeg -protocols)"
fi

# ---- 3. HLS over HTTP -------------------------------------------------------------------------
port=$(free_port) || fail "no free port"
mkdir -p "$tmp/hls"
ffmpeg -nostdin -hide_banner -loglevel error -re -stream_loop -1 -i "$tmp/clip.mp4" -c copy \
    -f hls -hls_time 1 -hls_list_size 4 -hls_flags delete_segments+omit_endlist \
    "$tmp/hls/live.m3u8" 2>>"$tmp/server.log" &
segmenter=$!
pids+=($segmenter)
http_server() {
    "$py" -m http.server --bind 127.0.0.1 --directory "$tmp/hls" "$port" \
        >>"$tmp/http.log" 2>&1 &
    server=$!
    pids+=($server)
}
http_server
wait_listen "$port"
for _ in $(seq 100); do [ -s "$tmp/hls/live.m3u8" ] && break; sleep 0.1; done
hurl="http://127.0.0.1:$port/live.m3u8"
"$bin" "$hurl" -o "$tmp/hls.mp4" --stats "$tmp/hls.json" --input-timeout 2 "${opts[@]}" \
    2>"$tmp/hls.log" &
keyer=$!
pids+=($keyer)
wait_frames "$tmp/hls.log" 24 HLS
kill $server 2>/dev/null; wait $server 2>/dev/null
# keyer reads the segments faster than real time, so it soon waits at the live edge and reloads
# the playlist every target duration (1 s): 2.5 s away is sure to fail a reload
sleep 2.5
http_server
wait_listen "$port"
wait_resume "$tmp/hls.log" HLS
wait_frames "$tmp/hls.log" $(($(progress_frames "$tmp/hls.log") + 24)) "HLS after the reconnection"
kill -INT $keyer
wait $keyer
rc=$?
kill $server $segmenter 2>/dev/null; wait $server $segmenter 2>/dev/null
check_run HLS hls $rc 130
echo "HLS: ok ($(decoded_frames "$tmp/hls.mp4") frames)"

# ---- 4. RTSP (GStreamer's RTSP server) --------------------------------------------------------
if "$py" -c 'import gi; gi.require_version("GstRtspServer", "1.0"); from gi.repository import GstRtspServer' 2>/dev/null &&
    command -v gst-inspect-1.0 >/dev/null && gst-inspect-1.0 qtdemux >/dev/null 2>&1 &&
    gst-inspect-1.0 rtph264pay >/dev/null 2>&1; then
    "$bin" make-sample "$tmp/long.mp4" --image "$data/grace_hopper.jpg" --size 160x96 \
        --frames 720 --fps 24 --preset ultrafast --no-audio 2>/dev/null || fail "make-sample (30 s)"
    port=$(free_port) || fail "no free port"
    rurl="rtsp://127.0.0.1:$port/cam"
    rtsp_server() {
        "$py" "$here/lib/rtsp_server.py" "$port" "$tmp/long.mp4" >>"$tmp/server.log" 2>&1 &
        server=$!
        pids+=($server)
    }
    rtsp_server
    wait_listen "$port"
    "$bin" "$rurl" -o "$tmp/rtsp.mp4" --stats "$tmp/rtsp.json" --input-timeout 1 \
        --reconnect-max 15 "${opts[@]}" 2>"$tmp/rtsp.log" &
    keyer=$!
    pids+=($keyer)
    wait_frames "$tmp/rtsp.log" 24 RTSP
    kill $server 2>/dev/null; wait $server 2>/dev/null
    sleep 1.5
    rtsp_server
    wait_listen "$port"
    wait_resume "$tmp/rtsp.log" RTSP
    wait_frames "$tmp/rtsp.log" $(($(progress_frames "$tmp/rtsp.log") + 24)) "RTSP after the reconnection"
    kill -INT $keyer
    wait $keyer
    rc=$?
    kill $server 2>/dev/null; wait $server 2>/dev/null
    check_run RTSP rtsp $rc 130
    echo "RTSP: ok ($(decoded_frames "$tmp/rtsp.mp4") frames)"
else
    echo "RTSP: skipped: GStreamer's RTSP server for Python is missing (python3-gi, gir1.2-gst-rtsp-server-1.0, gstreamer1.0-plugins-good)"
fi
echo "PASS"
