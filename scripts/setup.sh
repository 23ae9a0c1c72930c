#!/usr/bin/env bash
# One-time set-up of a Debian 12 machine for keyer: installs the missing system packages with
# apt-get, then fetches the pinned, checksummed models (scripts/fetch-models.sh).
# Safe to run again: it installs and fetches only what is missing.
# Needs root or sudo only when packages are missing.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
    build-essential cmake pkg-config            # toolchain
    libavformat-dev libavcodec-dev libavutil-dev libswscale-dev libswresample-dev  # video I/O
    libxnnpack-dev libpthreadpool-dev           # fast CPU neural-net backend
    libcmocka-dev                               # unit tests
    libyaml-dev                                 # configuration files
    libprotobuf-c-dev                           # ONNX models (src/nn/onnx/)
    python3-onnx                                # tests: generator of the ONNX operator graphs
    clang libclang-rt-14-dev                    # libFuzzer targets for the parsers
    python3-dev python3-setuptools python3-numpy python3-pytest python3-venv python3-pip  # python/
    libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev  # the GStreamer plugin (gst/)
    gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-libav  # its tests
    slurm-wlm munge                             # tests/cli/batch_slurm.sh: a one-node Slurm cluster
    ffmpeg                                      # tests only: the RTMP/UDP/SRT/RTP/HLS servers of tests/cli/run_reconnect.sh, run_live_protocols.sh
    python3-gi gir1.2-gst-rtsp-server-1.0       # tests only: the RTSP server of tests/cli/run_live_protocols.sh
    opencv-doc                                  # tests and bench_people: vtest.avi, people walking far from the camera
)
# `npm pack` fetches the MediaPipe models. Some machines have a Node.js build that bundles npm
# (and conflicts with Debian's npm package): install Debian's only when the commands are absent.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

"$repo/scripts/fetch-models.sh"
echo "setup: done"
