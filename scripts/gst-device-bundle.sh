#!/usr/bin/env bash
# Packs Debian 12's GStreamer 1.22 for the GPU machine, which has no GStreamer and no package
# registry, into .device/gst.tgz (git-ignored, next to scripts/device-bundle.sh's files):
#  - GLib, GStreamer core (with gst-plugin-scanner and coreelements), gst-plugins-base's
#    libraries (video, gl, pbutils, ...), libgstcuda, libgstcodecs and libgstcodecparsers from
#    gst-plugins-bad, and the libraries they load (orc, unwind, dw, GL/EGL dispatch, X11,
#    wayland, drm, gbm, gudev, udev; gio's libmount and libselinux, zlib, liblzma and libstdc++
#    are taken from the GPU machine, Ubuntu 24.04, which has them);
#  - the plugins the GPU tests use: nvcodec (cudaupload, cudadownload, nvh264dec, nvh265dec,
#    nvh264enc), videoparsersbad (h264parse, h265parse), isomp4 (qtdemux), videoconvertscale,
#    videotestsrc, app;
#  - for scripts/bench-gst.sh: gst-launch-1.0 and gst-inspect-1.0 (bin/), playback (decodebin),
#    de265 (libde265dec, HEVC on the CPU, with libde265), y4mdec (raw clips), coretracers (the
#    latency tracer);
#  - the headers and pkg-config files to build the plugin against them (GLib, GStreamer,
#    gst-plugins-base, gst/cuda, and GL/gl.h for gst/cuda's cudaGL.h).
# Everything is taken from the .deb files (apt-get download + dpkg -x), not from this machine's
# installation, so the machine running this needs only apt. The tarball unpacks into
# keyer-gst/ (lib/, lib/gstreamer-1.0/, libexec/, include/, lib/pkgconfig/ with
# prefix=/opt/keyer-gst); scripts/gst-device-env.sh unpacks it on the GPU machine.
#   scripts/gst-device-bundle.sh [OUT_DIR]     (default .device)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$repo/.device}
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
debs="libglib2.0-0 libglib2.0-dev libgstreamer1.0-0 libgstreamer1.0-dev
      libgstreamer-plugins-base1.0-0 libgstreamer-gl1.0-0 libgstreamer-plugins-base1.0-dev
      libgstreamer-plugins-bad1.0-0 libgstreamer-plugins-bad1.0-dev
      gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
      liborc-0.4-0 libunwind8 libdw1 libelf1 libgl1 libglvnd0 libglx0 libegl1 libgl-dev
      libwayland-client0 libwayland-cursor0 libwayland-egl1 libwayland-server0
      libx11-6 libx11-xcb1 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0
      libgudev-1.0-0 libudev1 libdrm2 libgbm1 libexpat1 libffi8 libpcre2-8-0
      gstreamer1.0-tools libde265-0"
(cd "$stage" && apt-get download $debs >/dev/null 2>"$stage/apt.log") ||
    { cat "$stage/apt.log" >&2; exit 1; }
for d in "$stage"/*.deb; do dpkg -x "$d" "$stage/root"; done
src=$stage/root/usr/lib/x86_64-linux-gnu
dst=$stage/keyer-gst
mkdir -p "$dst/lib/gstreamer-1.0" "$dst/lib/pkgconfig" "$dst/libexec" "$dst/include" "$dst/bin"

# libraries (the versioned files and their links; development links for the ones built against)
for l in libglib-2.0 libgobject-2.0 libgmodule-2.0 libgio-2.0 libgstreamer-1.0 libgstbase-1.0 \
         libgstcheck-1.0 libgstcontroller-1.0 libgstvideo-1.0 libgstgl-1.0 \
         libgstallocators-1.0 libgstpbutils-1.0 libgstaudio-1.0 libgsttag-1.0 libgstriff-1.0 \
         libgstrtp-1.0 libgstapp-1.0 libgstcuda-1.0 libgstcodecs-1.0 libgstcodecparsers-1.0 \
         liborc-0.4 libunwind libdw libelf libGL libGLdispatch libGLX libEGL \
         libwayland-client libwayland-cursor libwayland-egl libwayland-server libX11 \
         libX11-xcb libxcb libXau libXdmcp libbsd libmd libgudev-1.0 libudev libdrm libgbm libexpat \
         libffi libpcre2-8 libde265; do
    # libNAME.so* and, for libraries whose links point at libNAME-VERSION.so (elfutils' libdw
    # and libelf), that file too
    found=$(ls "$src/$l.so"* "$stage/root/lib/x86_64-linux-gnu/$l.so"* "$src/$l"-[0-9]*.so \
               2>/dev/null || true)
    [ -n "$found" ] || { echo "gst-device-bundle: $l not found in the packages" >&2; exit 1; }
    cp -a $found "$dst/lib/"
done
# GStreamer's own development links point at the versioned files copied above
for pl in coreelements coretracers; do
    cp "$src/gstreamer-1.0/libgst$pl.so" "$dst/lib/gstreamer-1.0/"
done
for pl in videoconvertscale videotestsrc app typefindfunctions isomp4 nvcodec videoparsersbad \
          playback de265 y4mdec; do
    cp "$src/gstreamer-1.0/libgst$pl.so" "$dst/lib/gstreamer-1.0/"
done
cp "$src/gstreamer1.0/gstreamer-1.0/gst-plugin-scanner" "$dst/libexec/"
cp "$stage/root/usr/bin/gst-launch-1.0" "$stage/root/usr/bin/gst-inspect-1.0" "$dst/bin/"
# no link may dangle (a missing target fails only when the GPU machine links or loads it)
for f in "$dst"/lib/*.so*; do
    [ -e "$f" ] || { echo "gst-device-bundle: $f points at a file not packed" >&2; exit 1; }
done
# every library a packed program, library or plugin needs is packed, or is one of the base
# system's (the GPU machine, Ubuntu 24.04, has these without GStreamer; libcuda and NVDEC's
# libnvcuvid are loaded by nvcodec at run time, not linked)
base="libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libstdc++.so.6 libgcc_s.so.1
      libz.so.1 liblzma.so.5 libzstd.so.1 libbz2.so.1.0 libmount.so.1 libselinux.so.1
      libblkid.so.1 libresolv.so.2 ld-linux-x86-64.so.2"
missing=
for f in "$dst"/lib/*.so.* "$dst"/lib/gstreamer-1.0/*.so "$dst"/bin/* "$dst"/libexec/*; do
    [ -L "$f" ] && continue
    for n in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        [ -e "$dst/lib/$n" ] && continue
        case " $(echo $base) " in *" $n "*) continue ;; esac
        missing="$missing $(basename "$f"):$n"
    done
done
[ -z "$missing" ] || { echo "gst-device-bundle: not packed:$missing" >&2; exit 1; }

# headers: GLib, GStreamer core and base (all), gst/cuda, GL for cudaGL.h
inc=$stage/root/usr/include
cp -r "$inc/glib-2.0" "$dst/include/"
mkdir -p "$dst/lib/glib-2.0"
cp -r "$src/glib-2.0/include" "$dst/lib/glib-2.0/"
cp -r "$inc/gstreamer-1.0" "$dst/include/"
# of gst-plugins-bad's headers only gst/cuda
for d in "$dst/include/gstreamer-1.0/gst/"*/; do
    n=$(basename "$d")
    if [ -z "$(ls "$inc/gstreamer-1.0/gst/$n" 2>/dev/null)" ]; then continue; fi
    case $n in
    cuda | allocators | app | audio | base | check | controller | fft | gl | net | pbutils | \
    riff | rtp | rtsp | sdp | tag | video) ;;
    *) rm -rf "$d" ;;
    esac
done
cp -r "$inc/GL" "$inc/KHR" "$dst/include/"

# pkg-config files, relocated to /opt/keyer-gst; the private requirements (for static
# linking only) are dropped, so that the GPU machine needs none of their .pc files
for pc in glib-2.0 gobject-2.0 gmodule-2.0 gmodule-no-export-2.0 gstreamer-1.0 \
          gstreamer-base-1.0 gstreamer-check-1.0 gstreamer-controller-1.0 gstreamer-video-1.0 \
          gstreamer-cuda-1.0; do
    sed -e 's|^prefix=.*|prefix=/opt/keyer-gst|' \
        -e 's|^libdir=.*|libdir=${prefix}/lib|' \
        -e 's|^includedir=.*|includedir=${prefix}/include|' \
        -e '/^Requires.private:/d' -e 's|, *gstreamer-gl-prototypes-1.0[^,]*||' \
        "$src/pkgconfig/$pc.pc" > "$dst/lib/pkgconfig/$pc.pc"
done
# development links (libfoo.so -> libfoo.so.N) for what the plugin and its tests link
for l in libglib-2.0 libgobject-2.0 libgmodule-2.0 libgio-2.0 libgstreamer-1.0 libgstbase-1.0 \
         libgstcheck-1.0 libgstcontroller-1.0 libgstvideo-1.0 libgstcuda-1.0; do
    [ -e "$dst/lib/$l.so" ] || ln -s "$(basename "$(ls "$dst/lib/$l.so."[0-9]* | head -n1)")" \
        "$dst/lib/$l.so"
done
tar czf "$out/gst.tgz" -C "$stage" keyer-gst
du -h "$out/gst.tgz"
