#!/usr/bin/env bash
# The encoder keyer chooses for H.264/HEVC outputs, through the command line: NVENC where the
# GPU opens an encoder session, x264/x265 otherwise, one info line (-v) naming the choice, the
# same encoder in the summary and in --stats, and the output in the codec asked for. On a
# machine without an NVIDIA driver (no /dev/nvidiactl) the probe must fail and the line must
# give its reason: this is the fallback run for real. --codec libx264 opts out (no probe line);
# --codec h264_nvenc insists and falls back with a warning where NVENC does not open.
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
command -v ffprobe >/dev/null || { echo "SKIP: ffprobe is missing (scripts/setup.sh installs it)"; exit 77; }

"$bin" make-sample "$tmp/in.mp4" --image "$data/grace_hopper.jpg" --size 320x180 --frames 12 \
    --fps 24 --preset ultrafast 2>/dev/null || fail "make-sample"
opts=(--mask --device cpu --preset ultrafast --threads 1 -y -v)
# libx265 3.5 leaks its frame filters when an encoder closes (inside the library, not keyer):
# keep LeakSanitizer (sanitizer builds only) from reporting it
echo "leak:libx265.so" >"$tmp/lsan.supp"
export LSAN_OPTIONS="suppressions=$tmp/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
codec_of() { ffprobe -v error -select_streams v -show_entries stream=codec_name -of csv=p=0 "$1"; }

# $1: output name, $2: codec option ("" for none), $3: NVENC encoder, $4: software encoder,
# $5: the stream's codec name
check_choice() {
    local out=$tmp/$1 line enc
    "$bin" "$tmp/in.mp4" -o "$out" ${2:+--codec "$2"} --stats "$tmp/$1.json" "${opts[@]}" \
        2>"$tmp/$1.log" || { cat "$tmp/$1.log"; fail "$1: the run failed"; }
    [ "$(grep -c ": encoder: " "$tmp/$1.log")" = 1 ] ||
        { cat "$tmp/$1.log"; fail "$1: not exactly one line naming the encoder"; }
    line=$(grep ": encoder: " "$tmp/$1.log")
    if grep -q "^keyer: info: $out: encoder: $3 on cuda:0$" <<<"$line"; then
        enc=$3
        [ -e /dev/nvidiactl ] || fail "$1: NVENC chosen on a machine without an NVIDIA driver"
    elif grep -q "^keyer: info: $out: encoder: $4 (NVENC unavailable: ..*)$" <<<"$line"; then
        enc=$4
    else
        fail "$1: unexpected choice line: $line"
    fi
    echo "$1: $line"
    grep -q "$out: 12 frames, 320x180, CPU decode, $enc" "$tmp/$1.log" ||
        { cat "$tmp/$1.log"; fail "$1: the summary does not name $enc"; }
    grep -q "\"encoder\": \"$enc\"" "$tmp/$1.json" || fail "$1: --stats does not name $enc"
    [ "$(codec_of "$out")" = "$5" ] || fail "$1: the output's codec is $(codec_of "$out"), not $5"
}
check_choice default.mp4 "" h264_nvenc libx264 h264
check_choice hevc.mkv hevc hevc_nvenc libx265 hevc
check_choice h264.mov h264 h264_nvenc libx264 h264

# a named software encoder: no probe, no choice line
"$bin" "$tmp/in.mp4" -o "$tmp/x264.mp4" --codec libx264 "${opts[@]}" 2>"$tmp/x264.log" ||
    { cat "$tmp/x264.log"; fail "libx264: the run failed"; }
! grep -q ": encoder: " "$tmp/x264.log" || fail "libx264 named: a choice was logged"
[ "$(codec_of "$tmp/x264.mp4")" = h264 ] || fail "libx264: not H.264"

# a named NVENC encoder: used where it opens, else x264 with one warning
"$bin" "$tmp/in.mp4" -o "$tmp/nv.mp4" --codec h264_nvenc "${opts[@]}" 2>"$tmp/nv.log" ||
    { cat "$tmp/nv.log"; fail "h264_nvenc: the run failed"; }
if grep -q "CPU decode, libx264" "$tmp/nv.log"; then
    [ "$(grep -c "warning: h264_nvenc is unavailable (..*); encoding with libx264 instead" "$tmp/nv.log")" = 1 ] ||
        { cat "$tmp/nv.log"; fail "h264_nvenc: the fallback is not one warning with the reason"; }
else
    [ -e /dev/nvidiactl ] || fail "h264_nvenc: used on a machine without an NVIDIA driver"
fi
[ "$(codec_of "$tmp/nv.mp4")" = h264 ] || fail "h264_nvenc: not H.264"
echo "PASS"
