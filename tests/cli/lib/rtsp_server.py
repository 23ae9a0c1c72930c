# An RTSP server on the loopback interface for tests/cli/run_live_protocols.sh (this folder is
# not itself a test): GStreamer's RTSP server library (Debian: python3-gi and
# gir1.2-gst-rtsp-server-1.0) serving the H.264 video of an MP4 file, from its start for each
# client, at rtsp://127.0.0.1:PORT/cam. FFmpeg's own program cannot serve RTSP to a client.
# Usage: python3 rtsp_server.py PORT CLIP.mp4  (runs until killed; prints "ready" once listening)
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def main():
    port, clip = sys.argv[1], sys.argv[2]
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(port)
    factory = GstRtspServer.RTSPMediaFactory()
    # qtdemux gives H.264 in its MP4 form, which rtph264pay takes as it is
    location = clip.replace("\\", "\\\\").replace('"', '\\"')
    factory.set_launch(
        f'( filesrc location="{location}" ! qtdemux ! queue ! rtph264pay name=pay0 pt=96 config-interval=1 )')
    factory.set_shared(False)
    server.get_mount_points().add_factory("/cam", factory)
    if server.attach(None) == 0:
        print(f"cannot listen on 127.0.0.1:{port}", file=sys.stderr)
        sys.exit(1)
    print("ready", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
