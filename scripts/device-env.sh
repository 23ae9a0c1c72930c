# Sourced at the start of a command on the GPU machine (see scripts/device-bundle.sh).
tar xzf .device/keyer-ffmpeg-device.tgz -C /opt
tar xzf .device/sysroot.tgz -C /opt
export PKG_CONFIG_PATH=/opt/keyer-ffmpeg/lib/pkgconfig:/opt/keyer-sysroot/lib/pkgconfig
export LD_LIBRARY_PATH=/opt/keyer-ffmpeg/lib:/opt/keyer-sysroot/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CMAKE_PREFIX_PATH=/opt/keyer-sysroot
export CMAKE_INCLUDE_PATH=/opt/keyer-sysroot/include CMAKE_LIBRARY_PATH=/opt/keyer-sysroot/lib
cp -n .device/models/* models/ 2>/dev/null || true
export PATH=/usr/local/cuda/bin:$PATH
# Builds on the GPU machine compile for its own architecture only (sm_90a: H100, H200; the
# architecture-specific target, with the wgmma kernels; plain 90 has only mma.sync), about a
# seventh of the default list's compile time. For the default list (sm_75 to sm_120 + PTX),
# configure a fresh build directory with `env -u CUDAARCHS cmake ...`; for another list set
# CUDAARCHS (or -DCMAKE_CUDA_ARCHITECTURES) before the first configure.
export CUDAARCHS=${CUDAARCHS:-90a}
