# Sourced by the tests of live network inputs (tests/cli/run_reconnect.sh,
# run_live_protocols.sh; this folder is not itself a test), after common.sh: background
# processes killed on exit, free loopback ports, waiting for a listening socket and for keyer's
# progress and reconnection, and reading an output back with ffprobe. Server logs go to
# $tmp/server.log.
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' TERM INT

# A port no socket on this machine uses (TCP or UDP, IPv4 or IPv6).
free_port() {
    local p
    for _ in $(seq 100); do
        p=$((20000 + RANDOM % 40000))
        grep -qi "$(printf ':%04X ' $p)" /proc/net/tcp /proc/net/tcp6 /proc/net/udp \
            /proc/net/udp6 2>/dev/null || { echo $p; return 0; }
    done
    return 1
}
# An even port P with P and P + 1 both free (an RTP port and its RTCP port).
free_port_pair() {
    local p
    for _ in $(seq 100); do
        p=$(((20000 + RANDOM % 40000) & ~1))
        grep -qi -e "$(printf ':%04X ' $p)" -e "$(printf ':%04X ' $((p + 1)))" /proc/net/tcp \
            /proc/net/tcp6 /proc/net/udp /proc/net/udp6 2>/dev/null || { echo $p; return 0; }
    done
    return 1
}
# Waits up to 10 s for a UDP socket bound to 127.0.0.1:$1 (an SRT listener).
wait_udp_bound() {
    local hex
    hex=$(printf '%04X' "$1")
    for _ in $(seq 100); do
        awk -v p="0100007F:$hex" '$2 == p { found = 1 } END { exit !found }' /proc/net/udp &&
            return 0
        sleep 0.1
    done
    cat "$tmp/server.log"
    fail "the server did not bind UDP port $1"
}
# Waits up to 10 s for a TCP socket listening on 127.0.0.1:$1 (without connecting to it), or
# already connected there (keyer's reconnection may be quicker than this loop).
wait_listen() {
    local hex
    hex=$(printf '%04X' "$1")
    for _ in $(seq 100); do
        awk -v p=":$hex" '$2 ~ p"$" && ($4 == "0A" || $4 == "01") { found = 1 } END { exit !found }' \
            /proc/net/tcp && return 0
        sleep 0.1
    done
    cat "$tmp/server.log"
    fail "the server did not listen on port $1"
}
# Decodes every video frame of $1 and prints their number; fails on any decoding error.
decoded_frames() {
    local n
    n=$(ffprobe -v error -count_frames -select_streams v -show_entries stream=nb_read_frames \
        -of csv=p=0 "$1" 2>"$tmp/probe.err") && [ ! -s "$tmp/probe.err" ] && echo "$n" ||
        { cat "$tmp/probe.err"; return 1; }
}
# Frames keyer has written so far, from its progress line (--progress) in log $1; 0 before it.
progress_frames() {
    local n
    n=$(tr '\r' '\n' < "$1" | sed -n 's/^\([0-9][0-9]*\) frames .*/\1/p; s/.* \([0-9][0-9]*\)\/[0-9]* frames .*/\1/p' | tail -n 1)
    echo "${n:-0}"
}
# Waits up to 20 s until log $1 shows at least $2 frames written ($3 names the case).
wait_frames() {
    for _ in $(seq 200); do
        [ "$(progress_frames "$1")" -ge "$2" ] && return 0
        sleep 0.1
    done
    cat "$1"
    fail "$3: fewer than $2 frames written after 20 s"
}
# Waits up to 20 s until log $1 shows that frames resumed after a reconnection.
wait_resume() {
    for _ in $(seq 200); do
        grep -q "frames resume after a gap" "$1" && return 0
        sleep 0.1
    done
    cat "$1"
    fail "$2: no reconnection within 20 s"
}
# Pts of the output's video frames, one per line.
frame_times() {
    ffprobe -v error -select_streams v -show_entries frame=pts_time -of csv=p=0 "$1" |
        cut -d, -f1 | grep .
}

