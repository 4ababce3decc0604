#!/usr/bin/python3
"""A non-browser WHEP viewer on aiortc (Python's WebRTC stack: its own ICE,
DTLS, SRTP; H.264 and Opus decoded by PyAV), for tests/webrtc.rs.

    whep_aiortc.py URL SECONDS

Offers recvonly video and audio, POSTs the offer to URL, applies the
answer, and decodes what arrives for SECONDS. Prints one JSON line:
{"status", "video_frames", "audio_samples", "width", "height", "codecs",
"error"}. (GStreamer's webrtcbin cannot be this client: its DTLS
certificate is RSA, and str0m's DTLS takes ECDSA client certificates only.)
"""
import asyncio
import json
import sys
import urllib.request

from aiortc import RTCPeerConnection, RTCSessionDescription

url, seconds = sys.argv[1], float(sys.argv[2])
out = {"status": None, "video_frames": 0, "audio_samples": 0, "width": 0, "height": 0,
       "codecs": [], "error": None}


async def consume(track):
    while True:
        try:
            frame = await track.recv()
        except Exception:  # noqa: BLE001 - the track ended
            return
        if track.kind == "video":
            out["video_frames"] += 1
            out["width"], out["height"] = frame.width, frame.height
        else:
            out["audio_samples"] += frame.samples


async def main():
    pc = RTCPeerConnection()
    tasks = []
    pc.on("track", lambda track: tasks.append(asyncio.ensure_future(consume(track))))
    pc.addTransceiver("video", direction="recvonly")
    pc.addTransceiver("audio", direction="recvonly")
    await pc.setLocalDescription(await pc.createOffer())

    def post():
        req = urllib.request.Request(url, data=pc.localDescription.sdp.encode(), method="POST",
                                     headers={"Content-Type": "application/sdp"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()

    try:
        out["status"], answer = await asyncio.get_event_loop().run_in_executor(None, post)
    except Exception as e:  # noqa: BLE001 - reported as the result
        out["error"] = f"POST: {e}"
        return
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
    await asyncio.sleep(seconds)
    for t in pc.getTransceivers():
        codecs = t.receiver._RTCRtpReceiver__codecs if hasattr(t.receiver, "_RTCRtpReceiver__codecs") else {}
        out["codecs"] += sorted({c.mimeType for c in codecs.values()}) if isinstance(codecs, dict) else []
    await pc.close()
    for t in tasks:
        t.cancel()


asyncio.run(main())
print(json.dumps(out))
