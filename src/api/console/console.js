// kiln's operator console: plain JavaScript, no framework. It talks to the
// management API of the server that serves it, with the same Basic auth
// (the token is asked for once and kept for this tab only). A token can
// also be given as #token=user:password (for scripts and tests).
"use strict";

const state = { auth: sessionStorage.getItem("kiln-auth") || "" };

function setStatus(text, error) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = error ? "error" : "";
}

async function api(method, path, body) {
  const init = { method, headers: { Authorization: "Basic " + state.auth } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const json = await r.json();
  if (r.status === 401) throw new Error("wrong or missing access token");
  return json;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function bitrate(t) {
  const m = t.video || t.audio || {};
  const b = Number(m.bitrate || 0);
  return b ? (b / 1000).toFixed(0) + " kb/s" : "";
}

function trackText(t) {
  if (t.video) return `${t.name}: ${t.video.codec} ${t.video.width}x${t.video.height} ${bitrate(t)}`;
  if (t.audio) return `${t.name}: ${t.audio.codec} ${t.audio.samplerate} Hz ${bitrate(t)}`;
  return `${t.name}: ${t.type}`;
}

function redacted(url) {
  return url.replace(/(^|[?&])(passphrase)=[^&]*/gi, "$1$2=***");
}

async function renderApp(vh, app) {
  const base = `/v1/vhosts/${encodeURIComponent(vh)}/apps/${encodeURIComponent(app)}`;
  const sec = el("section", { class: "app", "data-app": app }, el("h3", {}, `Application ${app}`));
  const names = (await api("GET", base + "/streams")).response || [];
  const streams = el("table", { class: "streams" },
    el("tr", {}, el("th", {}, "Stream"), el("th", {}, "Source"), el("th", {}, "Tracks")));
  for (const name of names) {
    const s = (await api("GET", `${base}/streams/${encodeURIComponent(name)}`)).response;
    if (!s) continue;
    streams.append(el("tr", { class: "stream", "data-stream": name },
      el("td", {}, name), el("td", {}, s.input.sourceType),
      el("td", {}, s.input.tracks.map(trackText).join("; "))));
  }
  sec.append(names.length ? streams : el("p", { class: "empty" }, "No live streams."));
  const pushes = await api("POST", base + ":pushes");
  if (pushes.statusCode === 200) {
    const table = el("table", { class: "pushes" },
      el("tr", {}, ...["Push", "State", "Stream", "Protocol", "URL", "Sent", "Last error", ""].map((h) => el("th", {}, h))));
    for (const p of pushes.response) {
      table.append(el("tr", { class: "push", "data-push": p.id },
        el("td", {}, p.id),
        el("td", { class: "state-" + p.state }, p.state),
        el("td", {}, p.stream.name),
        el("td", {}, p.protocol),
        el("td", {}, redacted(p.url)),
        el("td", {}, `${(p.totalsentBytes / 1e6).toFixed(1)} MB`),
        el("td", { class: p.lastError ? "error" : "" }, p.lastError || ""),
        el("td", {}, el("button", { onclick: () => act(base + ":stopPush", { id: p.id }) }, "Stop"))));
    }
    sec.append(pushes.response.length ? table : el("p", { class: "empty" }, "No push tasks."));
    const form = el("form", { class: "push" },
      el("input", { name: "id", placeholder: "id", required: "" }),
      el("input", { name: "stream", placeholder: "stream", required: "" }),
      el("select", { name: "protocol" }, ...["rtmp", "srt", "mpegts"].map((p) => el("option", {}, p))),
      el("input", { name: "url", placeholder: "rtmp://host/app", size: "30", required: "" }),
      el("input", { name: "streamKey", placeholder: "stream key (rtmp)" }),
      el("button", {}, "Start push"));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const f = new FormData(form);
      const body = { id: f.get("id"), stream: { name: f.get("stream") }, protocol: f.get("protocol"), url: f.get("url") };
      if (f.get("streamKey")) body.streamKey = f.get("streamKey");
      act(base + ":startPush", body);
    });
    sec.append(form);
  }
  return sec;
}

async function act(path, body) {
  const r = await api("POST", path, body);
  setStatus(r.message, r.statusCode !== 200);
  refresh();
}

let busy = false;
async function refresh() {
  if (!state.auth || busy) return;
  busy = true;
  try {
    const v = (await api("GET", "/v1/version")).response;
    document.getElementById("version").textContent = `${v.name} ${v.version}`;
    const hosts = el("div", { id: "hosts-list" });
    for (const vh of (await api("GET", "/v1/vhosts")).response) {
      const sec = el("section", { class: "vhost", "data-vhost": vh }, el("h2", {}, `Virtual host ${vh}`));
      const apps = (await api("GET", `/v1/vhosts/${encodeURIComponent(vh)}/apps`)).response || [];
      for (const app of apps) sec.append(await renderApp(vh, app));
      if (!apps.length) sec.append(el("p", { class: "empty" }, "No applications."));
      hosts.append(sec);
    }
    document.getElementById("hosts").replaceChildren(hosts);
    if (!document.getElementById("status").classList.contains("error")) setStatus("connected");
  } catch (e) {
    setStatus(e.message, true);
  } finally {
    busy = false;
  }
}

document.getElementById("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.auth = btoa(document.getElementById("token").value);
  sessionStorage.setItem("kiln-auth", state.auth);
  setStatus("");
  refresh();
});

const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromHash) state.auth = btoa(fromHash);
refresh();
setInterval(refresh, 2000);
