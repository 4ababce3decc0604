// Publishes to kiln over WebRTC from the system's headless Chromium (or
// Firefox: BROWSER=firefox, see browser.mjs) with a fake camera and
// microphone, for tests/webrtc.rs and tests/firefox.rs:
//
//   node webrtc_publish.mjs whip URL SECONDS [WHEP_URL]   (WHIP: POST the offer to URL)
//   node webrtc_publish.mjs ome  URL SECONDS [WHEP_URL]   (OME's WebSocket, direction=send)
//   node webrtc_publish.mjs livekit URL SECONDS [WHEP_URL] OVENLIVEKIT_JS (OvenLiveKit)
//
// The fake camera is 640x360 at 30 fps; H.264 is preferred (VIDEO_CODEC=VP8
// offers VP8 alone, as a publisher without H.264 would). SIMULCAST=1 (WHIP):
// a 1280x720 camera sent as three simulcast layers (RIDs h, m, l: full,
// half and quarter size), each layer's stats in `layers`. After SECONDS
// the video track is stopped (so the count of frames the browser sent is
// final), the page waits 3 s and hangs up. With WHEP_URL, a second page
// plays the stream over WHEP during the last half of the publish and
// reports what it decoded. Prints one JSON line: the outbound video and
// audio stats (frames encoded and sent, packets, codec), the signalling
// seen, the viewer's stats. Every wait is bounded; a failure prints
// {"error": ...} and exits 1.
import { launchBrowser } from "./browser.mjs";

const [mode, url, secondsArg, whepUrl, liveKitJs] = process.argv.slice(2);
const videoCodec = process.env.VIDEO_CODEC || "H264";
// RELAY=turn:host:port?transport=tcp: the page may only use that relay
// (iceTransportPolicy "relay"), as a publisher without UDP would.
const relay = process.env.RELAY || "";
const seconds = Number(secondsArg || 20);
const simulcast = process.env.SIMULCAST === "1";
// The page's origin: another than the signalling URL's (localhost against
// 127.0.0.1), so WHIP's CORS is exercised. getUserMedia needs a secure
// context: an address other than loopback (a test's network namespace)
// is declared one.
const origin = new URL(url.replace(/^ws/, "http")).origin.replace("127.0.0.1", "localhost");
const browser = await launchBrowser({ origin });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
  await page.goto(origin + "/", { waitUntil: "load" }).catch(() => {});
  if (mode === "livekit") await page.addScriptTag({ path: liveKitJs });
  const publishing = page.evaluate(async (mode, url, seconds, videoCodec, relay, simulcast) => {
    const rtcConfig = relay
      ? { iceServers: [{ urls: relay, username: "ome", credential: "airen" }], iceTransportPolicy: "relay" }
      : {};
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    const out = { mode, messages: [] };
    const stream = await navigator.mediaDevices.getUserMedia({
      video: simulcast ? { width: 1280, height: 720, frameRate: 30 } : { width: 640, height: 360, frameRate: 30 },
      audio: true,
    });
    let pc;
    const preferH264 = (t) => {
      const caps = RTCRtpSender.getCapabilities("video").codecs;
      const mime = "video/" + videoCodec;
      const want = caps.filter((c) => c.mimeType === mime);
      // H.264 first (the rest after it); VP8 alone (with its RTX).
      const rest = videoCodec === "VP8" ? caps.filter((c) => c.mimeType === "video/rtx") : caps.filter((c) => c.mimeType !== mime);
      if (want.length && t.setCodecPreferences) t.setCodecPreferences([...want, ...rest]);
    };
    if (mode === "whip") {
      pc = new RTCPeerConnection(rtcConfig);
      for (const track of stream.getTracks()) {
        const init = { direction: "sendonly", streams: [stream] };
        if (simulcast && track.kind === "video") {
          init.sendEncodings = [
            { rid: "h" },
            { rid: "m", scaleResolutionDownBy: 2 },
            { rid: "l", scaleResolutionDownBy: 4 },
          ];
        }
        const t = pc.addTransceiver(track, init);
        if (track.kind === "video") preferH264(t);
      }
      const offer = await pc.createOffer();
      await pc.setLocalDescription(offer);
      const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/sdp" }, body: offer.sdp });
      out.status = r.status;
      out.location = r.headers.get("Location");
      const answer = await r.text();
      if (r.status !== 201) {
        out.body = answer;
        return out;
      }
      await pc.setRemoteDescription({ type: "answer", sdp: answer });
    } else if (mode === "ome") {
      const ws = new WebSocket(url);
      const done = new Promise((resolve, reject) => {
        ws.onerror = () => reject(new Error("websocket error"));
        ws.onclose = () => out.messages.push("closed");
        ws.onmessage = async (ev) => {
          const m = JSON.parse(ev.data);
          out.messages.push(m.command || ("error " + m.code + " " + m.error));
          if (m.error) return reject(new Error("server error " + m.code + ": " + m.error));
          if (m.command !== "offer") return;
          pc = new RTCPeerConnection();
          await pc.setRemoteDescription(m.sdp);
          // As OvenLiveKit: the tracks go on the offered (recvonly)
          // transceivers, sendonly.
          for (const t of pc.getTransceivers()) {
            const track = stream.getTracks().find((k) => k.kind === t.receiver.track.kind);
            if (!track) continue;
            t.direction = "sendonly";
            await t.sender.replaceTrack(track);
            t.sender.setStreams && t.sender.setStreams(stream);
          }
          for (const c of m.candidates || []) await pc.addIceCandidate(c);
          const answer = await pc.createAnswer();
          await pc.setLocalDescription(answer);
          ws.send(JSON.stringify({ command: "answer", id: m.id, peer_id: 0, sdp: { type: "answer", sdp: answer.sdp } }));
          resolve();
        };
      });
      ws.onopen = () => ws.send(JSON.stringify({ command: "request_offer" }));
      await Promise.race([done, sleep(10000).then(() => { throw new Error("no offer in 10 s"); })]);
      out.ws = ws;
    } else {
      // OvenLiveKit (npm, pinned): its own getUserMedia, its signalling.
      const kit = OvenLiveKit.create({ callbacks: {
        error: (e) => out.messages.push("error " + (e && (e.message || e))),
        connectionClosed: (t) => out.messages.push("closed " + t),
      } });
      await kit.getUserMedia({ video: { width: 640, height: 360, frameRate: 30 }, audio: true });
      kit.startStreaming(url, { preferredVideoFormat: "H264" });
      const until = Date.now() + 10000;
      while (!kit.peerConnection && Date.now() < until) await sleep(50);
      pc = kit.peerConnection;
      if (!pc) throw new Error("OvenLiveKit made no peer connection in 10 s");
      out.kit = kit;
    }
    const start = Date.now();
    out.connectedAfterMs = null;
    while (Date.now() - start < seconds * 1000) {
      if (out.connectedAfterMs === null && pc.connectionState === "connected") out.connectedAfterMs = Date.now() - start;
      await sleep(250);
    }
    out.connectionState = pc.connectionState;
    // The pair in use: its local candidate type ("relay" through kiln's TCP relay).
    const pairs = await pc.getStats();
    pairs.forEach((s) => {
      if (s.type === "transport" && s.selectedCandidatePairId) {
        const pair = pairs.get(s.selectedCandidatePairId);
        const local = pair && pairs.get(pair.localCandidateId);
        out.localCandidateType = local ? local.candidateType : null;
        out.relayProtocol = local ? local.relayProtocol : null;
        // kiln's address as this browser reached it (behind a NAT: the public one).
        const remote = pair && pairs.get(pair.remoteCandidateId);
        out.remoteCandidate = remote ? `${remote.address}:${remote.port}` : null;
        // The browser's own estimate of what it may send (its BWE).
        out.availableOutgoingBitrate = pair ? pair.availableOutgoingBitrate || null : null;
      }
    });
    // The video stops: what the browser sent is final.
    for (const s of pc.getSenders()) if (s.track && s.track.kind === "video") s.track.stop();
    await sleep(1500);
    const stats = await pc.getStats();
    const codecs = {};
    stats.forEach((s) => { if (s.type === "codec") codecs[s.id] = s.mimeType; });
    stats.forEach((s) => {
      if (s.type !== "outbound-rtp") return;
      const o = { packetsSent: s.packetsSent, bytesSent: s.bytesSent, codec: codecs[s.codecId] || null,
        retransmittedPacketsSent: s.retransmittedPacketsSent || 0, nackCount: s.nackCount || 0,
        pliCount: s.pliCount || 0 };
      if (s.kind === "video") {
        Object.assign(o, { framesEncoded: s.framesEncoded, framesSent: s.framesSent, keyFramesEncoded: s.keyFramesEncoded,
          frameWidth: s.frameWidth, frameHeight: s.frameHeight, rid: s.rid || null,
          firCount: s.firCount || 0, targetBitrate: s.targetBitrate || null,
          qualityLimitationReason: s.qualityLimitationReason || null,
          qualityLimitationDurations: s.qualityLimitationDurations || null,
          encoderImplementation: s.encoderImplementation || null });
        // Simulcast: every layer's; `video` is the largest.
        if (s.rid) (out.layers = out.layers || []).push(o);
        if (!out.video || (o.frameWidth || 0) > (out.video.frameWidth || 0)) out.video = o;
      } else {
        out.audio = o;
      }
    });
    await sleep(1500);
    if (out.ws) { out.ws.close(); delete out.ws; }
    if (out.kit) { out.kit.remove(); delete out.kit; }
    if (mode === "whip" && out.location) {
      const r = await fetch(new URL(out.location, url), { method: "DELETE" });
      out.deleteStatus = r.status;
    }
    pc.close();
    return out;
  }, mode, url, seconds, videoCodec, relay, simulcast);

  let viewer = null;
  if (whepUrl) {
    // The second browser page joins half way and plays until the video stops.
    await sleep((seconds / 2) * 1000);
    const vpage = await browser.newPage();
    await vpage.goto(origin + "/", { waitUntil: "load" }).catch(() => {});
    viewer = await vpage.evaluate(async (url, seconds) => {
      const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
      const pc = new RTCPeerConnection();
      const media = new MediaStream();
      const video = document.createElement("video");
      video.autoplay = true; video.muted = true; video.srcObject = media;
      document.body.appendChild(video);
      pc.ontrack = (ev) => { media.addTrack(ev.track); video.play().catch(() => {}); };
      pc.addTransceiver("video", { direction: "recvonly" });
      pc.addTransceiver("audio", { direction: "recvonly" });
      const offer = await pc.createOffer();
      await pc.setLocalDescription(offer);
      const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/sdp" }, body: offer.sdp });
      const out = { status: r.status };
      const answer = await r.text();
      if (r.status !== 201) { out.body = answer; return out; }
      await pc.setRemoteDescription({ type: "answer", sdp: answer });
      await sleep(Math.max(2, seconds / 2 - 2) * 1000);
      out.connectionState = pc.connectionState;
      out.videoWidth = video.videoWidth;
      out.currentTime = video.currentTime;
      const st = await pc.getStats();
      const codecs = {};
      st.forEach((s) => { if (s.type === "codec") codecs[s.id] = s.mimeType; });
      st.forEach((s) => {
        if (s.type === "inbound-rtp" && s.kind === "video") {
          Object.assign(out, { framesDecoded: s.framesDecoded, packetsLost: s.packetsLost, freezeCount: s.freezeCount || 0,
            codec: codecs[s.codecId] || null });
        }
        if (s.type === "inbound-rtp" && s.kind === "audio") out.audioPackets = s.packetsReceived;
      });
      pc.close();
      return out;
    }, whepUrl, seconds);
  }
  const result = await publishing;
  result.viewer = viewer;
  result.errors = errors;
  console.log(JSON.stringify(result));
} catch (e) {
  console.log(JSON.stringify({ error: String(e && e.stack || e) }));
  process.exitCode = 1;
} finally {
  await browser.close();
}
