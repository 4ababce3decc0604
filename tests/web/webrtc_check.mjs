// Plays a kiln stream over WebRTC in the system's headless Chromium (or
// Firefox: BROWSER=firefox, see browser.mjs), with the browser's own
// RTCPeerConnection, for tests/webrtc.rs and tests/firefox.rs:
//
//   node webrtc_check.mjs whep  URL SECONDS   (WHEP: POST the offer to URL)
//   node webrtc_check.mjs ome   URL SECONDS   (OME's WebSocket signalling at URL)
//   node webrtc_check.mjs ovenplayer URL SECONDS PLAYER_JS (OvenPlayer, webrtc source)
//
// After SECONDS of playing it prints one JSON line: what getStats says of
// the inbound video (frames received, decoded, dropped, freezes, codec)
// and audio (samples received, codec), plus the WHEP answer's status and
// the signalling messages seen. Every wait is bounded; a failure prints
// {"error": ...} and exits 1.
//
// `states` lists the connection's and its DTLS transport's state changes.
//
// RENDITION=NAME (ome): half way, `change_rendition` to that rendition;
// the renditions of the `playlist` notification and each
// `rendition_changed` are reported. QUALITY=I (ovenplayer): half way,
// setCurrentQuality(I); the quality levels are reported. SAMPLE=1 (whep,
// ome): once a second, [seconds, video width, frames decoded] in
// `samples`.
import { launchBrowser } from "./browser.mjs";

const [mode, url, secondsArg, playerJs] = process.argv.slice(2);
// RELAY=turn:host:port?transport=tcp: the page may only use that relay
// (iceTransportPolicy "relay"), as a viewer without UDP would.
const relay = process.env.RELAY || "";
const seconds = Number(secondsArg || 20);
const rendition = process.env.RENDITION || "";
const quality = process.env.QUALITY === undefined ? -1 : Number(process.env.QUALITY);
const sample = process.env.SAMPLE === "1";
const browser = await launchBrowser();
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
  // The page comes from another origin than the signalling URL (localhost
  // against 127.0.0.1): WHEP's CORS is exercised as a player page's would be.
  const origin = new URL(url.replace(/^ws/, "http")).origin.replace("127.0.0.1", "localhost");
  await page.goto(origin + "/", { waitUntil: "load" }).catch(() => {});
  if (mode === "ovenplayer") {
    await page.setContent('<div style="width:640px;height:360px"><div id="player"></div></div>');
    await page.addScriptTag({ path: playerJs });
  }
  const result = await page.evaluate(async (mode, url, seconds, relay, rendition, quality, sample) => {
    const rtcConfig = relay
      ? { iceServers: [{ urls: relay, username: "ome", credential: "airen" }], iceTransportPolicy: "relay" }
      : {};
    const out = { mode, messages: [] };
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    // What a player page does with the tracks: play them (audio samples
    // are only counted when the audio is played out).
    const media = new MediaStream();
    const video = document.createElement("video");
    video.autoplay = true;
    video.playsInline = true;
    video.srcObject = media;
    document.body.appendChild(video);
    const attach = (p) => { p.ontrack = (ev) => { media.addTrack(ev.track); video.play().catch(() => {}); }; };
    let pc;
    if (mode === "whep") {
      pc = new RTCPeerConnection(rtcConfig);
      attach(pc);
      pc.addTransceiver("video", { direction: "recvonly" });
      pc.addTransceiver("audio", { direction: "recvonly" });
      const offer = await pc.createOffer();
      await pc.setLocalDescription(offer);
      // The video codecs this browser offered (Firefox offers H.264 only
      // with Cisco's OpenH264 plugin).
      out.offeredVideo = [...new Set(offer.sdp.split(/\r?\n/).filter((l) => l.startsWith("a=rtpmap:"))
        .map((l) => l.split(" ")[1].split("/")[0]).filter((c) => ["H264", "VP8", "VP9", "AV1", "H265"].includes(c)))];
      const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/sdp" }, body: offer.sdp });
      out.status = r.status;
      out.location = r.headers.get("Location");
      out.link = r.headers.get("Link");
      const answer = await r.text();
      if (r.status !== 201) {
        out.body = answer;
        return out;
      }
      await pc.setRemoteDescription({ type: "answer", sdp: answer });
    } else if (mode === "ome") {
      const ws = new WebSocket(url);
      let id;
      const done = new Promise((resolve, reject) => {
        ws.onerror = () => reject(new Error("websocket error"));
        ws.onclose = () => out.messages.push("closed");
        ws.onmessage = async (ev) => {
          const m = JSON.parse(ev.data);
          out.messages.push(m.command || ("error " + m.code + " " + m.error));
          if (m.command === "notification" && m.type === "playlist") {
            out.renditions = m.message.renditions.map((r) => [r.name, r.video_track ? r.video_track.video.width : 0]);
          }
          if (m.command === "notification" && m.type === "rendition_changed") {
            (out.renditionChanged = out.renditionChanged || []).push(m.message.rendition_name);
          }
          if (m.error) return reject(new Error("server error " + m.code + ": " + m.error));
          if (m.command === "offer") {
            id = m.id;
            // As OvenPlayer: the offer's ICE servers, relay only.
            const servers = m.iceServers || m.ice_servers;
            out.iceServers = servers || null;
            pc = new RTCPeerConnection(servers
              ? { iceServers: servers.map((s) => ({ urls: s.urls, username: s.username || s.user_name, credential: s.credential })), iceTransportPolicy: "relay" }
              : rtcConfig);
            attach(pc);
            await pc.setRemoteDescription(m.sdp);
            for (const c of m.candidates || []) await pc.addIceCandidate(c);
            const answer = await pc.createAnswer();
            await pc.setLocalDescription(answer);
            ws.send(JSON.stringify({ command: "answer", id, peer_id: 0, sdp: { type: "answer", sdp: answer.sdp } }));
            resolve();
          }
        };
      });
      ws.onopen = () => ws.send(JSON.stringify({ command: "request_offer" }));
      await Promise.race([done, sleep(10000).then(() => { throw new Error("no offer in 10 s"); })]);
      out.ws = ws;
    } else {
      const player = OvenPlayer.create("player", {
        autoStart: true, mute: true,
        sources: [{ type: "webrtc", file: url }],
      });
      out.events = [];
      player.on("stateChanged", (s) => out.events.push("state:" + s.newstate));
      player.on("error", (e) => out.events.push("error:" + (e && e.message)));
      if (quality >= 0) {
        await sleep((seconds / 2) * 1000);
        out.qualityLevels = player.getQualityLevels().map((q) => [q.label, q.width, q.height]);
        player.setCurrentQuality(quality);
        await sleep((seconds / 2) * 1000);
        const cur = player.getCurrentQuality();
        out.currentQuality = typeof cur === "object" && cur ? cur.index : cur;
      } else {
        await sleep(seconds * 1000);
      }
      // OvenPlayer makes its own <video>: the one that played.
      const videos = [...document.querySelectorAll("video")];
      const v = videos.sort((a, b) => b.currentTime - a.currentTime)[0];
      out.currentTime = v ? v.currentTime : -1;
      out.videoWidth = v ? v.videoWidth : 0;
      out.totalVideoFrames = v && v.getVideoPlaybackQuality ? v.getVideoPlaybackQuality().totalVideoFrames : 0;
      const so = v && v.srcObject;
      out.tracks = so ? so.getTracks().map((t) => t.kind + ":" + t.readyState + ":" + t.muted) : [];
      out.state = player.getState();
      delete out.messages;
      return out;
    }
    const start = Date.now();
    // The connection's and its DTLS transport's states as they change
    // ([ms, "pc:connected"], [ms, "dtls:closed"]): how a session ended.
    out.states = [];
    const note = (what) => out.states.push([Date.now() - start, what]);
    pc.addEventListener("connectionstatechange", () => note("pc:" + pc.connectionState));
    const dtls = pc.getReceivers().map((r) => r.transport).find((t) => t);
    if (dtls) dtls.addEventListener("statechange", () => note("dtls:" + dtls.state));
    out.connectedAfterMs = null;
    let asked = false;
    if (sample) out.samples = [];
    while (Date.now() - start < seconds * 1000) {
      const t = Math.floor((Date.now() - start) / 1000);
      if (sample && out.samples.length <= t) {
        const q = video.getVideoPlaybackQuality ? video.getVideoPlaybackQuality().totalVideoFrames : 0;
        out.samples.push([t, video.videoWidth, q]);
      }
      if (out.connectedAfterMs === null && pc.connectionState === "connected") out.connectedAfterMs = Date.now() - start;
      if (rendition && out.ws && !asked && Date.now() - start >= seconds * 500) {
        asked = true;
        out.widthBefore = video.videoWidth;
        out.ws.send(JSON.stringify({ command: "change_rendition", id: 0, rendition_name: rendition, auto: false }));
      }
      await sleep(250);
    }
    out.connectionState = pc.connectionState;
    // The pair in use: its local candidate type ("relay" through kiln's TCP relay).
    const st = await pc.getStats();
    st.forEach((s) => {
      if (s.type === "transport" && s.selectedCandidatePairId) {
        const pair = st.get(s.selectedCandidatePairId);
        const local = pair && st.get(pair.localCandidateId);
        out.localCandidateType = local ? local.candidateType : null;
        out.relayProtocol = local ? local.relayProtocol : null;
        // kiln's address as this browser reached it (behind a NAT: the public one).
        const remote = pair && st.get(pair.remoteCandidateId);
        out.remoteCandidate = remote ? `${remote.address}:${remote.port}` : null;
      }
    });
    out.currentTime = video.currentTime;
    out.videoWidth = video.videoWidth;
    const stats = await pc.getStats();
    const codecs = {};
    stats.forEach((s) => { if (s.type === "codec") codecs[s.id] = s.mimeType; });
    stats.forEach((s) => {
      if (s.type !== "inbound-rtp") return;
      if (s.kind === "video") {
        out.video = { codec: codecs[s.codecId], framesReceived: s.framesReceived, framesDecoded: s.framesDecoded,
          framesDropped: s.framesDropped, freezeCount: s.freezeCount, totalFreezesDuration: s.totalFreezesDuration,
          packetsLost: s.packetsLost, nackCount: s.nackCount, pliCount: s.pliCount,
          retransmittedPacketsReceived: s.retransmittedPacketsReceived,
          frameWidth: s.frameWidth, frameHeight: s.frameHeight, jitterBufferDelay: s.jitterBufferDelay,
          jitterBufferEmittedCount: s.jitterBufferEmittedCount };
      } else if (s.kind === "audio") {
        out.audio = { codec: codecs[s.codecId], totalSamplesReceived: s.totalSamplesReceived,
          packetsReceived: s.packetsReceived, concealedSamples: s.concealedSamples, audioLevel: s.audioLevel };
      }
    });
    if (mode === "whep" && out.location) {
      const r = await fetch(new URL(out.location, url), { method: "DELETE" });
      out.deleteStatus = r.status;
    }
    if (out.ws) {
      out.ws.send(JSON.stringify({ command: "stop", id: 0 }));
      out.ws.close();
      delete out.ws;
    }
    pc.close();
    return out;
  }, mode, url, seconds, relay, rendition, quality, sample);
  result.pageErrors = errors;
  console.log(JSON.stringify(result));
} catch (e) {
  console.log(JSON.stringify({ error: String(e) }));
  process.exitCode = 1;
} finally {
  await browser.close();
}
