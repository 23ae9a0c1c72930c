#!/usr/bin/env bash
# Prepares .device/ (git-ignored) for a run on the GPU machine, which has CUDA, gcc, CMake and
# pkg-config but none of keyer's other dependencies and no package registry:
#  - FFmpeg 5.1 with NVDEC, from ../shared/device/keyer-ffmpeg-device.tgz,
#  - the Debian 12 builds of XNNPACK, pthreadpool, cpuinfo, cmocka, libyaml and protobuf-c from this machine
#    (x86-64, glibc-compatible with the device's Ubuntu 24.04), packed into sysroot.tgz,
#  - the fetched models.
# On the device, start a command with:  source scripts/device-env.sh
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$repo/.device"
mkdir -p "$out"
shared=${KEYER_SHARED_DIR:-"$repo/../shared"}
cp "$shared/device/keyer-ffmpeg-device.tgz" "$out/"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/keyer-sysroot/lib/pkgconfig" "$stage/keyer-sysroot/include"
lib=/usr/lib/x86_64-linux-gnu
cp -a $lib/libXNNPACK.so* $lib/libpthreadpool.so* $lib/libcpuinfo.so* $lib/libcmocka.so* \
      $lib/libyaml-0.so* $lib/libyaml.so $lib/libprotobuf-c.so* "$stage/keyer-sysroot/lib/"
cp /usr/include/xnnpack.h /usr/include/pthreadpool.h /usr/include/cmocka.h /usr/include/yaml.h \
   "$stage/keyer-sysroot/include/"
cp -r /usr/include/protobuf-c "$stage/keyer-sysroot/include/"
for pc in cmocka yaml-0.1 libprotobuf-c; do
  sed "s|^prefix=.*|prefix=/opt/keyer-sysroot|; s|^libdir=.*|libdir=\${prefix}/lib|; s|^includedir=.*|includedir=\${prefix}/include|" \
      $lib/pkgconfig/$pc.pc > "$stage/keyer-sysroot/lib/pkgconfig/$pc.pc"
done
tar czf "$out/sysroot.tgz" -C "$stage" keyer-sysroot
mkdir -p "$out/models"
# KEYER_DEVICE_MODELS: the TFLite models to bundle (default: all shipped ones; pose_landmark_heavy
# alone is 27 MB of the 64 MB a device call may carry).
rm -f "$out/models/"*
for m in ${KEYER_DEVICE_MODELS:-selfie_segmentation selfie_segmentation_landscape face_detection_short_range face_detection_full_range pose_detection pose_landmark_lite pose_landmark_full pose_landmark_heavy face_landmark}; do
  cp "$repo/models/$m.tflite" "$out/models/"
done
[ ! -f "$repo/models/u2netp.onnx" ] || cp "$repo/models/u2netp.onnx" "$out/models/"
du -sh "$out"
