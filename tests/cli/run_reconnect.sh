#!/usr/bin/env bash
# Live network inputs on the loopback interface, with Debian's ffmpeg program as the server:
#  1. RTMP (TCP; ffmpeg listening): the server is killed mid-stream and restarted 1.5 s later;
#     keyer reconnects and goes on; then the server goes for good and, after --reconnect-max,
#     the stream fails (exit 1) with its output finalised. The output decodes to its end,
#     holds frames from both connections, its timestamps increase and jump over the gap, and
#     the summary and --stats report the reconnection and the frames missed. With
#     --reconnect off, the server ending its stream ends the input cleanly (exit 0).
#  2. UDP MPEG-TS (keyer listening): the sender stops for 1.5 s; the read times out
#     (--input-timeout), keyer reopens the socket and goes on; Ctrl-C ends the run (exit 130).
#     The output keeps the AAC audio (ADTS in MPEG-TS).
#  3. HTTP (ffmpeg serving MPEG-TS live): reconnects by default (a stream without a length is
#     live), after the server restarts.
#  4. Inputs that never answer fail cleanly within the timeout, naming the URL: a UDP port
#     nobody sends to, and a refused TCP connection.
# Only 127.0.0.1, free ports picked at run time; every background process is killed on exit;
# the whole test is bounded by a 120 s timeout (about 40 s on an idle machine; each step waits
# for keyer's progress or its reconnection rather than a fixed time, so a loaded one is slower).
if [ -z "${KEYER_RECONNECT_BOUNDED:-}" ]; then
    command -v timeout >/dev/null || { echo "SKIP: timeout (coreutils) is missing"; exit 77; }
    KEYER_RECONNECT_BOUNDED=1 exec timeout -k 5 120 bash "$0" "$@"
fi
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
for p in ffmpeg ffprobe; do
    command -v $p >/dev/null || { echo "SKIP: $p is missing (scripts/setup.sh installs it)"; exit 77; }
done

. "$(dirname "${BASH_SOURCE[0]}")/lib/live.sh"
"$bin" make-sample "$tmp/clip.mp4" --image "$data/grace_hopper.jpg" --size 160x96 --frames 48 \
    --fps 24 --preset ultrafast 2>/dev/null || fail "make-sample"
# passthrough with face detection: the cheapest per-frame work, so a loaded machine keeps up
opts=(--detect faces --draw none --device cpu --preset ultrafast --threads 1 -y --progress)

# ---- 1. RTMP: killed, restarted, then gone for good -------------------------------------------
port=$(free_port) || fail "no free port"
url="rtmp://127.0.0.1:$port/live/cam"
rtmp_server() {
    ffmpeg -nostdin -hide_banner -loglevel error -re -stream_loop -1 -i "$tmp/clip.mp4" -c copy \
        -f flv -listen 1 "$url" 2>>"$tmp/server.log" &
    server=$!
    pids+=($server)
}
rtmp_server
wait_listen "$port"
timeout 40 "$bin" "$url" -o "$tmp/rtmp.mp4" --stats "$tmp/rtmp.json" --reconnect-max 4 \
    "${opts[@]}" 2>"$tmp/rtmp.log" &
keyer=$!
pids+=($keyer)
wait_frames "$tmp/rtmp.log" 24 RTMP
before=$(progress_frames "$tmp/rtmp.log")
kill $server 2>/dev/null; wait $server 2>/dev/null
sleep 1.5
rtmp_server
wait_listen "$port"
wait_resume "$tmp/rtmp.log" RTMP
wait_frames "$tmp/rtmp.log" $(($(progress_frames "$tmp/rtmp.log") + 24)) "RTMP after the reconnection"
kill $server 2>/dev/null; wait $server 2>/dev/null
wait $keyer
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/rtmp.log"; fail "RTMP: exit $rc, expected 1 (the source went for good)"; }
grep -q "$url -> .*FAILED after [0-9]* frames: .*$url: the input broke off .*did not come back within 4 s" \
    "$tmp/rtmp.log" || { cat "$tmp/rtmp.log"; fail "RTMP: the summary does not name the lost source and why"; }
missed=$(sed -n 's/^ *1 reconnection: \([0-9]*\) frames\{0,1\} missed in .* s disconnected$/\1/p' "$tmp/rtmp.log")
[ -n "$missed" ] && [ "$missed" -gt 0 ] ||
    { cat "$tmp/rtmp.log"; fail "RTMP: the summary does not report 1 reconnection with missed frames"; }
grep -q '"reconnects": 1, "missed_frames": [1-9][0-9]*, "disconnected_seconds": [1-9]' "$tmp/rtmp.json" ||
    { cat "$tmp/rtmp.json"; fail "RTMP: --stats lacks reconnects 1, missed_frames > 0, seconds >= 1"; }
written=$(sed -n "s|^  $url -> .*: FAILED after \([0-9]*\) frames.*|\1|p" "$tmp/rtmp.log")
gap=$(sed -n 's/.*"disconnected_seconds": \([0-9.]*\).*/\1/p' "$tmp/rtmp.json")
probed=$(decoded_frames "$tmp/rtmp.mp4") || fail "RTMP: the output does not decode cleanly"
[ "$probed" = "$written" ] || fail "RTMP: the output holds $probed frames, the summary says $written"
[ "$written" -gt "$before" ] || fail "RTMP: $written frames written, $before before the kill"
# timestamps increase; the reconnection is a jump of about the gap's length, with frames of
# the first connection before it and of the second after it
frame_times "$tmp/rtmp.mp4" | awk -v gap="$gap" '
    NR > 1 && $1 <= prev { print "pts " $1 " after " prev; bad = 1 }
    NR > 1 && $1 - prev >= gap - 0.15 && !jump { jump = NR; before = NR - 1 }
    { prev = $1 }
    END {
        if (bad) exit 1
        if (!jump) { print "no jump of " gap " s in the timestamps"; exit 1 }
        if (before < 10 || NR - before < 10) { print before " frames before the gap, " NR - before " after"; exit 1 }
    }' || fail "RTMP: the output's timestamps do not show the gap as expected"

# without reconnection, the server ending its stream ends the input cleanly (exit 0)
ffmpeg -nostdin -hide_banner -loglevel error -re -i "$tmp/clip.mp4" -c copy -f flv -listen 1 \
    "$url" 2>>"$tmp/server.log" &
server=$!
pids+=($server)
wait_listen "$port"
timeout 40 "$bin" "$url" -o "$tmp/off.mp4" --stats "$tmp/off.json" --reconnect off "${opts[@]}" \
    2>"$tmp/off.log"
rc=$?
[ $rc -eq 0 ] || { cat "$tmp/off.log"; fail "RTMP, --reconnect off: exit $rc when the stream ended, expected 0"; }
grep -q '"reconnects": 0, "missed_frames": 0' "$tmp/off.json" || fail "RTMP, --reconnect off: reconnected"
decoded_frames "$tmp/off.mp4" >/dev/null || fail "RTMP, --reconnect off: the output does not decode cleanly"

# ---- 2. UDP MPEG-TS: the sender stops and comes back; Ctrl-C ends the run --------------------
port=$(free_port) || fail "no free port"
uurl="udp://127.0.0.1:$port"
udp_sender() {
    ffmpeg -nostdin -hide_banner -loglevel error -re -stream_loop -1 -i "$tmp/clip.mp4" -c copy \
        -f mpegts "$uurl?pkt_size=1316" 2>>"$tmp/sender.log" &
    server=$!
    pids+=($server)
}
"$bin" "$uurl" -o "$tmp/udp.mp4" --stats "$tmp/udp.json" --input-timeout 1 \
    --reconnect-max 10 "${opts[@]}" 2>"$tmp/udp.log" &
keyer=$!
pids+=($keyer)
sleep 0.5
udp_sender
wait_frames "$tmp/udp.log" 24 UDP
kill $server 2>/dev/null; wait $server 2>/dev/null
sleep 1.5
udp_sender
wait_resume "$tmp/udp.log" UDP
wait_frames "$tmp/udp.log" $(($(progress_frames "$tmp/udp.log") + 24)) "UDP after the reconnection"
kill -INT $keyer
wait $keyer
rc=$?
kill $server 2>/dev/null; wait $server 2>/dev/null
[ $rc -eq 130 ] || { cat "$tmp/udp.log"; fail "UDP: exit $rc, expected 130 (interrupted)"; }
grep -q '"reconnects": [1-9][0-9]*, "missed_frames": [1-9][0-9]*' "$tmp/udp.json" ||
    { cat "$tmp/udp.log" "$tmp/udp.json"; fail "UDP: --stats lacks reconnects >= 1 and missed_frames > 0"; }
grep -q "$uurl -> .*: [0-9]* frames" "$tmp/udp.log" || { cat "$tmp/udp.log"; fail "UDP: no summary line"; }
decoded_frames "$tmp/udp.mp4" >/dev/null || fail "UDP: the output does not decode cleanly"
# MPEG-TS carries AAC in ADTS frames: copied into the MP4 through aac_adtstoasc
[ "$(ffprobe -v error -select_streams a -show_entries stream=codec_name -of csv=p=0 "$tmp/udp.mp4")" = aac ] ||
    fail "UDP: the output has no AAC audio"
frame_times "$tmp/udp.mp4" | awk 'NR > 1 && $1 <= prev { bad = 1 } { prev = $1 } END { exit bad || NR < 20 }' ||
    fail "UDP: the output's timestamps do not increase, or it holds fewer than 20 frames"

# ---- 3. HTTP (ffmpeg serving MPEG-TS): a live HTTP stream (no length) reconnects by default -----
port=$(free_port) || fail "no free port"
hurl="http://127.0.0.1:$port/live.ts"
http_server() {
    ffmpeg -nostdin -hide_banner -loglevel error -re -stream_loop -1 -i "$tmp/clip.mp4" -c copy \
        -f mpegts -listen 1 "$hurl" 2>>"$tmp/server.log" &
    server=$!
    pids+=($server)
}
http_server
wait_listen "$port"
"$bin" "$hurl" -o "$tmp/http.mp4" --stats "$tmp/http.json" "${opts[@]}" \
    2>"$tmp/http.log" &
keyer=$!
pids+=($keyer)
wait_frames "$tmp/http.log" 24 HTTP
kill $server 2>/dev/null; wait $server 2>/dev/null
sleep 1
http_server
wait_listen "$port"
wait_resume "$tmp/http.log" HTTP
wait_frames "$tmp/http.log" $(($(progress_frames "$tmp/http.log") + 24)) "HTTP after the reconnection"
kill -INT $keyer
wait $keyer
rc=$?
kill $server 2>/dev/null; wait $server 2>/dev/null
[ $rc -eq 130 ] || { cat "$tmp/http.log"; fail "HTTP: exit $rc, expected 130 (interrupted)"; }
grep -q '"reconnects": 1, "missed_frames": [1-9][0-9]*' "$tmp/http.json" ||
    { cat "$tmp/http.log" "$tmp/http.json"; fail "HTTP: --stats lacks reconnects 1 and missed_frames > 0"; }
decoded_frames "$tmp/http.mp4" >/dev/null || fail "HTTP: the output does not decode cleanly"

# ---- 4. Inputs that never answer --------------------------------------------------------------
port=$(free_port) || fail "no free port"
start=$(date +%s)
timeout 30 "$bin" "udp://127.0.0.1:$port" -o "$tmp/silent.mp4" --input-timeout 1 "${opts[@]}" \
    2>"$tmp/silent.log"
rc=$?
took=$(($(date +%s) - start))
[ $rc -eq 1 ] || { cat "$tmp/silent.log"; fail "silent UDP: exit $rc, expected 1"; }
grep -q "udp://127.0.0.1:$port: .*within 1.0 s (input timeout)" "$tmp/silent.log" ||
    { cat "$tmp/silent.log"; fail "silent UDP: the error does not name the URL and the timeout"; }
[ $took -le 10 ] || fail "silent UDP: took $took s with --input-timeout 1"
[ ! -e "$tmp/silent.mp4" ] || fail "silent UDP: an output was left behind"

port=$(free_port) || fail "no free port"
timeout 30 "$bin" "rtmp://127.0.0.1:$port/live/none" -o "$tmp/refused.mp4" "${opts[@]}" \
    2>"$tmp/refused.log"
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/refused.log"; fail "refused RTMP: exit $rc, expected 1"; }
grep -q "rtmp://127.0.0.1:$port/live/none: cannot open" "$tmp/refused.log" ||
    { cat "$tmp/refused.log"; fail "refused RTMP: the error does not name the URL"; }
echo "PASS"
