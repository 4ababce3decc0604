// Glass-to-glass delay in one headless Chromium (the issue-32 bench, run
// by benches/compare.sh): a canvas paints the page's clock as a row of
// black and white blocks; it is published to kiln over WHIP (H.264) and
// played back in the same page over WHEP and over LL-HLS (hls.js); for
// each frame a <video> is about to show (requestVideoFrameCallback), the
// blocks are read back and the delay is the clock now minus the clock
// painted. Both players watch the same publish at once.
//
//   node glass_to_glass.mjs BASE_URL SECONDS WARM HLS_JS [whep|ome]
//   (BASE_URL: http://host:port/app/stream, kiln's signalling/LL-HLS port)
//
// The WebRTC player speaks WHEP (the default) or OME's WebSocket
// signalling (`ome`: request_offer, offer, answer, as OvenPlayer does),
// which kiln and OvenMediaEngine both serve, so one page measures either.
// It takes the server's UDP host candidates (no TURN relay, even where
// the config forces TCP relay for players that ask for it).
//
// Prints one JSON line: per player the delays' p50/p90/p99 (ms) and the
// count read, after WARM seconds. Every wait is bounded.
import puppeteer from "puppeteer-core";

const [base, secondsArg, warmArg, hlsJs, signallingArg] = process.argv.slice(2);
const signalling = signallingArg || "whep";
const seconds = Number(secondsArg || 30);
const warm = Number(warmArg || 8);
const origin = new URL(base).origin.replace("127.0.0.1", "localhost");
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--autoplay-policy=no-user-gesture-required",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
    "--allow-loopback-in-peer-connection", "--disable-features=WebRtcHideLocalIpsWithMdns"],
});
try {
  const page = await browser.newPage();
  await page.goto(origin + "/", { waitUntil: "load" }).catch(() => {});
  await page.addScriptTag({ path: hlsJs });
  const result = await page.evaluate(async (base, seconds, warm, signalling) => {
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    const W = 640, H = 360, BITS = 30, BW = Math.floor(W / BITS), BH = 40;
    // 24 bits of clock (ms) and a 6-bit check, so a misread is dropped.
    const check = (t) => (t * 7 + 3) % 64;
    const canvas = document.createElement("canvas");
    canvas.width = W; canvas.height = H;
    const g = canvas.getContext("2d");
    const paint = () => {
      const t = Math.round(performance.now()) % (1 << 24);
      const word = t * 64 + check(t);
      g.fillStyle = "#808080"; g.fillRect(0, 0, W, H);
      for (let i = 0; i < BITS; i++) {
        const bit = Math.floor(word / 2 ** (BITS - 1 - i)) % 2;
        g.fillStyle = bit ? "#ffffff" : "#000000";
        g.fillRect(i * BW, 0, BW, BH);
      }
    };
    paint();
    const painter = setInterval(paint, 5);
    const read = (ctx) => {
      const px = ctx.getImageData(0, 0, W, BH).data;
      let word = 0;
      for (let i = 0; i < BITS; i++) {
        let sum = 0, n = 0;
        for (let y = BH / 2 - 6; y < BH / 2 + 6; y++) {
          for (let x = i * BW + BW / 2 - 4; x < i * BW + BW / 2 + 4; x++) {
            sum += px[(y * W + Math.floor(x)) * 4 + 1]; n++;
          }
        }
        word = word * 2 + (sum / n > 128 ? 1 : 0);
      }
      const t = Math.floor(word / 64);
      return check(t) === word % 64 ? t : null;
    };
    const watch = (video, into, started) => {
      const c = document.createElement("canvas");
      c.width = W; c.height = H;
      const ctx = c.getContext("2d", { willReadFrequently: true });
      const onFrame = (now) => {
        ctx.drawImage(video, 0, 0, W, H);
        const t = read(ctx);
        const clock = Math.round(now) % (1 << 24);
        if (t !== null && performance.now() - started > warm * 1000) {
          const d = (clock - t + (1 << 24)) % (1 << 24);
          if (d < 30000) into.push(d); else into.bad++;
        } else if (t === null) {
          into.bad++;
        }
        video.requestVideoFrameCallback(onFrame);
      };
      video.requestVideoFrameCallback(onFrame);
    };
    const out = { webrtc: [], llhls: [] };
    out.webrtc.bad = 0; out.llhls.bad = 0;
    // Publish over WHIP.
    const stream = canvas.captureStream(30);
    const pub = new RTCPeerConnection();
    const tr = pub.addTransceiver(stream.getVideoTracks()[0], { direction: "sendonly" });
    const caps = RTCRtpSender.getCapabilities("video").codecs;
    tr.setCodecPreferences([...caps.filter((c) => c.mimeType === "video/H264"), ...caps.filter((c) => c.mimeType !== "video/H264")]);
    const offer = await pub.createOffer();
    await pub.setLocalDescription(offer);
    const r = await fetch(base + "?direction=whip", { method: "POST", headers: { "Content-Type": "application/sdp" }, body: offer.sdp });
    if (r.status !== 201) return { error: "WHIP " + r.status + ": " + (await r.text()) };
    await pub.setRemoteDescription({ type: "answer", sdp: await r.text() });
    await sleep(1500);
    const started = performance.now();
    // Play over WebRTC: WHEP, or OME's signalling.
    const v1 = document.createElement("video");
    v1.muted = true; v1.autoplay = true; v1.playsInline = true;
    document.body.appendChild(v1);
    const sub = new RTCPeerConnection();
    sub.ontrack = (ev) => {
      if (ev.track.kind === "video") { v1.srcObject = new MediaStream([ev.track]); v1.play().catch(() => {}); }
    };
    let ws = null;
    if (signalling === "ome") {
      ws = new WebSocket(base.replace(/^http/, "ws"));
      const err = await new Promise((resolve) => {
        const timer = setTimeout(() => resolve("no offer in 10 s"), 10000);
        ws.onopen = () => ws.send(JSON.stringify({ command: "request_offer" }));
        ws.onerror = () => { clearTimeout(timer); resolve("WebSocket error"); };
        ws.onmessage = async (m) => {
          const msg = JSON.parse(m.data);
          if (msg.error) { clearTimeout(timer); resolve("signalling: " + msg.code + " " + msg.error); return; }
          if (msg.command !== "offer") return;
          try {
            await sub.setRemoteDescription(msg.sdp);
            for (const c of msg.candidates || []) await sub.addIceCandidate({ candidate: c.candidate, sdpMLineIndex: c.sdpMLineIndex ?? 0, sdpMid: c.sdpMid }).catch(() => {});
            const answer = await sub.createAnswer();
            await sub.setLocalDescription(answer);
            ws.send(JSON.stringify({ command: "answer", id: msg.id, peer_id: msg.peer_id ?? 0, sdp: { type: "answer", sdp: answer.sdp } }));
            clearTimeout(timer); resolve(null);
          } catch (e) { clearTimeout(timer); resolve("answer: " + e); }
        };
      });
      if (err) return { error: "OME signalling: " + err };
    } else {
      sub.addTransceiver("video", { direction: "recvonly" });
      const o2 = await sub.createOffer();
      await sub.setLocalDescription(o2);
      const r2 = await fetch(base + "?direction=whep", { method: "POST", headers: { "Content-Type": "application/sdp" }, body: o2.sdp });
      if (r2.status !== 201) return { error: "WHEP " + r2.status + ": " + (await r2.text()) };
      await sub.setRemoteDescription({ type: "answer", sdp: await r2.text() });
    }
    watch(v1, out.webrtc, started);
    // Play over LL-HLS.
    const v2 = document.createElement("video");
    v2.muted = true; v2.autoplay = true; v2.playsInline = true;
    document.body.appendChild(v2);
    const hls = new Hls({ lowLatencyMode: true, backBufferLength: 4 });
    hls.loadSource(base + "/llhls.m3u8");
    hls.attachMedia(v2);
    hls.on(Hls.Events.MANIFEST_PARSED, () => v2.play().catch(() => {}));
    watch(v2, out.llhls, started);
    await sleep(seconds * 1000);
    clearInterval(painter);
    const stats = (list) => {
      const s = [...list].sort((a, b) => a - b);
      const p = (q) => s.length ? s[Math.min(s.length - 1, Math.round((s.length - 1) * q))] : null;
      return { n: s.length, unread: list.bad, p50: p(0.5), p90: p(0.9), p99: p(0.99) };
    };
    const res = { webrtc: stats(out.webrtc), llhls: stats(out.llhls), hlsLatency: hls.latency, hlsTargetLatency: hls.targetLatency };
    hls.destroy(); sub.close(); pub.close();
    if (ws) ws.close();
    return res;
  }, base, seconds, warm, signalling);
  console.log(JSON.stringify(result));
  if (result.error) process.exitCode = 1;
} catch (e) {
  console.log(JSON.stringify({ error: String(e && e.stack || e) }));
  process.exitCode = 1;
} finally {
  await browser.close();
}
