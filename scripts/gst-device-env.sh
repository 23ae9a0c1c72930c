# Sourced on the GPU machine after scripts/device-env.sh: unpacks .device/gst.tgz (made by
# scripts/gst-device-bundle.sh) into /opt/keyer-gst and points pkg-config, CMake, the dynamic
# loader and GStreamer at it (plugins from there only, the registry in /tmp).
tar xzf .device/gst.tgz -C /opt
export PKG_CONFIG_PATH=/opt/keyer-gst/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export LD_LIBRARY_PATH=/opt/keyer-gst/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CMAKE_PREFIX_PATH=/opt/keyer-gst${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
export CMAKE_INCLUDE_PATH=/opt/keyer-gst/include${CMAKE_INCLUDE_PATH:+:$CMAKE_INCLUDE_PATH}
export PATH=/opt/keyer-gst/bin:$PATH
export GST_PLUGIN_SYSTEM_PATH=/opt/keyer-gst/lib/gstreamer-1.0
export GST_PLUGIN_SCANNER=/opt/keyer-gst/libexec/gst-plugin-scanner
export GST_REGISTRY=/tmp/keyer-gst-registry.bin
