#!/usr/bin/env python3
"""An IP-camera-like RTSP server for the pull tests: GStreamer's
gst-rtsp-server (not kiln code) serving a live test picture and tone at
rtsp://127.0.0.1:PORT/cam. Usage:

    rtsp_camera.py PORT h264|h265 [USER PASSWORD]
    rtsp_camera.py PORT file:PATH.flv      (H.264 + AAC from a file, as is:
                                            the benches' source; no encoding)

With USER and PASSWORD the server asks for Digest authorization. Prints
"ready" once it listens; runs until killed."""

import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
gi.require_version("GstRtsp", "1.0")
from gi.repository import GLib, Gst, GstRtsp, GstRtspServer  # noqa: E402

Gst.init(None)
port, codec = sys.argv[1], sys.argv[2]
if codec.startswith("file:"):
    launch = (
        "( filesrc location=" + codec[5:] + " ! flvdemux name=d "
        "d.video ! queue ! h264parse ! rtph264pay name=pay0 pt=96 config-interval=-1 "
        "d.audio ! queue ! aacparse ! rtpmp4gpay name=pay1 pt=97 )"
    )
else:
    video = {
        "h264": "x264enc tune=zerolatency speed-preset=ultrafast key-int-max=25 bitrate=1000 "
        "! video/x-h264,profile=baseline ! rtph264pay name=pay0 pt=96 config-interval=-1",
        "h265": "x265enc tune=zerolatency speed-preset=ultrafast key-int-max=25 bitrate=1000 "
        "! rtph265pay name=pay0 pt=96 config-interval=-1",
    }[codec]
    launch = (
        "( videotestsrc is-live=true pattern=ball "
        "! video/x-raw,width=640,height=360,framerate=25/1 ! " + video + " "
        "audiotestsrc is-live=true wave=sine ! audio/x-raw,rate=48000,channels=2 "
        "! voaacenc bitrate=96000 ! rtpmp4gpay name=pay1 pt=97 )"
    )
server = GstRtspServer.RTSPServer()
server.set_address("127.0.0.1")
server.set_service(port)
factory = GstRtspServer.RTSPMediaFactory()
factory.set_launch(launch)
factory.set_shared(True)
if len(sys.argv) > 4:
    auth = GstRtspServer.RTSPAuth()
    auth.set_supported_methods(GstRtsp.RTSPAuthMethod.DIGEST)
    token = GstRtspServer.RTSPToken()
    token.set_string("media.factory.role", "viewer")
    auth.add_digest(sys.argv[3], sys.argv[4], token)
    server.set_auth(auth)
    permissions = GstRtspServer.RTSPPermissions()
    permissions.add_role("viewer")
    permissions.add_permission_for_role("viewer", "media.factory.access", True)
    permissions.add_permission_for_role("viewer", "media.factory.construct", True)
    factory.set_permissions(permissions)
server.get_mount_points().add_factory("/cam", factory)
if server.attach(None) == 0:
    sys.exit("cannot listen on port " + port)
print("ready", flush=True)
GLib.MainLoop().run()
