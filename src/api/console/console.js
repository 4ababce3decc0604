// kiln's operator console: plain JavaScript, no framework, nothing fetched
// from outside kiln. It talks to the management API of the server that
// serves it. The access token is typed once per tab (kept in
// sessionStorage, never in the URL); a page opened with the browser's own
// Basic-auth prompt uses those credentials. Every request says
// X-Requested-With, so a refusal never raises the browser's prompt.
// Every text from the server (names, errors, log lines) is inserted as
// text, never as markup.
"use strict";

const POLL_MS = 1000;
const HISTORY = 300; // samples: 5 minutes at one a second
const SLOW_EVERY = 5; // stream details, dumps and the log: every 5th poll
const STATE_COLORS = {
  ready: "#9aa5b1", connecting: "#e0b020", pushing: "#2e9e4f", recording: "#2e9e4f", live: "#2e9e4f",
  waiting: "#d0383a", running: "#2e9e4f",
  stopping: "#8e7cc3", stopped: "#6b7480", error: "#d0383a", missing: "#ffffff",
};
// The viewers' protocols (pushes and recordings are outputs, not viewers).
const PROTOCOL_COLORS = {
  llhls: "#1f77b4", hls: "#17becf", rtmp: "#ff7f0e", srt: "#2ca02c", webrtc: "#9467bd",
};
/// How long an armed ("ask first") button waits for its second tap.
const ARMED_MS = 5000;

const state = {
  auth: sessionStorage.getItem("kiln-auth") || "",
  tick: 0,
  history: new Map(), // key -> [values], one per poll (null: absent)
  vhosts: new Map(), // vhost -> its section (kept: a form being typed in stays)
  apps: new Map(), // "vh/app" -> the app's section and its parts
  details: new Map(), // "vh/app/stream" -> the stream's last details
  dumps: new Map(), // "vh/app" -> [dumps]
  sessionsOpen: new Set(), // "vh/app/stream" whose sessions are shown
  armed: null, // {key, until}: an "ask first" button waiting for its second tap
  historyLoaded: false, // the server's five minutes were read
  busy: false,
};

// ---- plumbing -------------------------------------------------------------

function $(id) {
  return document.getElementById(id);
}

function setStatus(text, error) {
  const s = $("status");
  s.textContent = text;
  s.className = error ? "error" : "";
}

class AuthError extends Error {}

async function api(method, path, body) {
  const headers = { "X-Requested-With": "kiln-console" };
  if (state.auth) headers.Authorization = "Basic " + state.auth;
  const init = { method, headers, credentials: "same-origin" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (r.status === 401) throw new AuthError("wrong access token: the server refused it (401)");
  return r.json();
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

const enc = encodeURIComponent;

function appBase(vh, app) {
  return `/v1/vhosts/${enc(vh)}/apps/${enc(app)}`;
}

function redacted(url) {
  return String(url).replace(/(^|[?&])(passphrase)=[^&]*/gi, "$1$2=***");
}

function bytes(n) {
  n = Number(n || 0);
  if (n >= 1e9) return (n / 1e9).toFixed(2) + " GB";
  if (n >= 1e6) return (n / 1e6).toFixed(1) + " MB";
  if (n >= 1e3) return (n / 1e3).toFixed(0) + " kB";
  return n + " B";
}

function bps(n) {
  n = Number(n || 0);
  return n >= 1e6 ? (n / 1e6).toFixed(2) + " Mb/s" : (n / 1e3).toFixed(0) + " kb/s";
}

function clock(iso) {
  // "2026-11-26T03:17:10.923+00:00" -> "03:17:10"
  const m = /T(\d\d:\d\d:\d\d)/.exec(iso || "");
  return m ? m[1] : "";
}

// ---- history and graphs ----------------------------------------------------

/// Appends this poll's value of `key` (every series gets one sample per
/// poll, so all graphs share one time axis).
function sample(key, value) {
  let h = state.history.get(key);
  if (!h) {
    h = [];
    state.history.set(key, h);
  }
  h.push(value);
  if (h.length > HISTORY) h.splice(0, h.length - HISTORY);
  h.seen = state.tick;
  return h;
}

/// The server's last five minutes (GET /v1/stats/history), once, so the
/// graphs are full when the page opens: each of its samples stands for
/// its interval's polls. A series this page already has is left as it is.
async function loadHistory() {
  if (state.historyLoaded) return;
  state.historyLoaded = true;
  const h = (await api("GET", "/v1/stats/history")).response;
  if (!h) return;
  const per = Math.max(1, Math.round(h.intervalMs / POLL_MS));
  for (const [key, values] of Object.entries(h.series || {})) {
    if (state.history.has(key)) continue;
    const expanded = values.flatMap((v) => Array(per).fill(v));
    const series = expanded.slice(-HISTORY);
    series.seen = state.tick;
    state.history.set(key, series);
  }
}

/// Series not sampled for a minute go (a deleted stream or task).
function forgetStale() {
  for (const [k, h] of state.history) if (state.tick - h.seen > 60) state.history.delete(k);
}

/// A line graph of one or more series: [{values, color, label}].
function lineGraph(series, opts) {
  const w = opts.width || 300, h = opts.height || 48;
  const max = Math.max(opts.min || 1, ...series.flatMap((s) => s.values.filter((v) => v !== null)));
  const g = svg("svg", {
    viewBox: `0 0 ${w} ${h}`, width: w, height: h, class: "graph", role: "img",
    "aria-label": opts.label, "data-points": series.reduce((n, s) => n + s.values.filter((v) => v !== null).length, 0),
  });
  g.append(svg("title", {}, opts.label));
  g.append(svg("line", { x1: 0, y1: h - 0.5, x2: w, y2: h - 0.5, class: "axis" }));
  for (const s of series) {
    const step = w / (HISTORY - 1);
    const offset = HISTORY - s.values.length;
    let d = "";
    s.values.forEach((v, i) => {
      if (v === null) return;
      const x = ((offset + i) * step).toFixed(1);
      const y = (h - 2 - (v / max) * (h - 6)).toFixed(1);
      d += (d && s.values[i - 1] !== null && i > 0 ? " L" : " M") + x + " " + y;
    });
    if (d) g.append(svg("path", { d: d.trim(), stroke: s.color, fill: "none", "stroke-width": 1.5 }));
  }
  g.append(svg("text", { x: 2, y: 10, class: "max" }, opts.format(max)));
  return g;
}

/// A strip coloured by state, one cell per poll.
function stateStrip(values, label) {
  const w = 300, h = 12, step = w / HISTORY;
  const g = svg("svg", { viewBox: `0 0 ${w} ${h}`, width: w, height: h, class: "strip", role: "img", "aria-label": label });
  g.append(svg("title", {}, label));
  const offset = HISTORY - values.length;
  let start = 0;
  for (let i = 1; i <= values.length; i++) {
    if (i < values.length && values[i] === values[start]) continue;
    const v = values[start] || "missing";
    g.append(svg("rect", {
      x: ((offset + start) * step).toFixed(1), y: 0, width: ((i - start) * step).toFixed(1), height: h,
      fill: STATE_COLORS[v] || "#444", "data-state": v,
    }));
    start = i;
  }
  return g;
}

// ---- login -----------------------------------------------------------------

function showLogin(message) {
  $("main").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  setStatus(message ? "not connected" : "");
  $("token").focus();
}

function showMain() {
  $("login").hidden = true;
  $("main").hidden = false;
  $("logout").hidden = false;
}

$("login-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const token = $("token").value;
  state.auth = btoa(unescape(encodeURIComponent(token)));
  try {
    await api("GET", "/v1/version");
  } catch (e) {
    state.auth = "";
    $("token").value = "";
    showLogin(e instanceof AuthError ? "Wrong access token: the server refused it." : "Cannot reach the server: " + e.message);
    return;
  }
  sessionStorage.setItem("kiln-auth", state.auth);
  $("token").value = "";
  showMain();
  poll();
});

$("logout").addEventListener("click", () => {
  state.auth = "";
  sessionStorage.removeItem("kiln-auth");
  state.apps.clear();
  state.vhosts.clear();
  $("hosts").replaceChildren();
  showLogin("");
});

// ---- one application -------------------------------------------------------

/// Posts an action and shows the API's answer beside the form it came from
/// (the API's own validation is the form's).
async function act(method, path, body, where) {
  let r;
  try {
    r = await api(method, path, body);
  } catch (e) {
    r = { statusCode: 0, message: e.message };
  }
  const ok = r.statusCode === 200;
  if (where) {
    where.textContent = ok ? "OK" : r.message;
    where.className = "answer " + (ok ? "ok" : "error");
  }
  setStatus(r.message, !ok);
  poll();
  return ok;
}

function form(cls, fields, button, submit) {
  const answer = el("span", { class: "answer", role: "status" });
  const f = el("form", { class: "task-form " + cls, "aria-label": button },
    ...fields.map(([name, label, attrs]) =>
      el("label", {}, label, attrs && attrs.options
        ? el("select", { name }, ...attrs.options.map((o) => el("option", {}, o)))
        : el("input", Object.assign({ name }, attrs || {})))),
    el("button", {}, button), answer);
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (await submit(new FormData(f), answer)) f.reset();
  });
  // Folded: a page of empty forms would push the streams off a phone's screen.
  return el("details", { class: "task-form " + cls }, el("summary", {}, button + "..."), f);
}

/// What an application enables (its GET): only those parts are shown and
/// asked for.
function enabled(spec) {
  const pub = (spec && spec.publishers) || {};
  return { push: "push" in pub, file: "file" in pub, dumps: "llhls" in pub };
}

function appSection(vh, app, spec) {
  const key = `${vh}/${app}`;
  let a = state.apps.get(key);
  if (a) return a;
  const base = appBase(vh, app);
  a = {
    has: enabled(spec),
    streams: el("div", { class: "scroll" }),
    pushes: el("div", { class: "scroll" }),
    records: el("div", { class: "scroll" }),
    dumps: el("div", { class: "scroll" }),
    pulls: el("div", { class: "scroll" }),
  };
  const pushForm = form("push", [
    ["id", "Id", { required: true, size: 10 }],
    ["stream", "Stream", { required: true, size: 10 }],
    ["protocol", "Protocol", { options: ["rtmp", "srt", "mpegts"] }],
    ["url", "URL", { required: true, size: 28, placeholder: "rtmp://host/app" }],
    ["streamKey", "Stream key", { size: 10 }],
  ], "Start push", (f, answer) => {
    const body = { id: f.get("id"), stream: { name: f.get("stream") }, protocol: f.get("protocol"), url: f.get("url") };
    if (f.get("streamKey")) body.streamKey = f.get("streamKey");
    return act("POST", base + ":startPush", body, answer);
  });
  const recordForm = form("record", [
    ["id", "Id", { required: true, size: 10 }],
    ["stream", "Stream", { required: true, size: 10 }],
    ["filePath", "File path", { size: 24, placeholder: "(the app's default)" }],
    ["interval", "Split every (ms)", { type: "number", min: 1, size: 8 }],
  ], "Start recording", (f, answer) => {
    const body = { id: f.get("id"), stream: { name: f.get("stream") } };
    if (f.get("filePath")) body.filePath = f.get("filePath");
    if (f.get("interval")) body.interval = Number(f.get("interval"));
    return act("POST", base + ":startRecord", body, answer);
  });
  const dumpForm = form("dump", [
    ["stream", "Stream", { required: true, size: 10 }],
    ["id", "Id", { required: true, size: 10 }],
    ["outputPath", "Output path", { required: true, size: 24 }],
  ], "Start HLS dump", (f, answer) => {
    return act("POST", `${base}/streams/${enc(f.get("stream"))}:startHlsDump`,
      { id: f.get("id"), outputPath: f.get("outputPath"), playlist: ["llhls.m3u8"] }, answer);
  });
  const pullForm = form("pull", [
    ["name", "Stream", { required: true, size: 10 }],
    ["url", "URL", { required: true, size: 28, placeholder: "rtsp://camera/stream" }],
    ["persistent", "Persistent", { type: "checkbox" }],
  ], "Pull", (f, answer) => {
    return act("POST", `${base}/streams`, {
      name: f.get("name"), urls: [f.get("url")], properties: { persistent: f.get("persistent") === "on" },
    }, answer);
  });
  a.section = el("section", { class: "app", "data-app": app },
    el("h3", {}, `Application ${app}`),
    el("h4", {}, "Live streams"), a.streams);
  if (a.has.push) a.section.append(el("h4", {}, "Push tasks"), a.pushes, pushForm);
  if (a.has.file) a.section.append(el("h4", {}, "Recordings"), a.records, recordForm);
  if (a.has.dumps) a.section.append(el("h4", {}, "HLS dumps"), a.dumps, dumpForm);
  a.section.append(el("h4", {}, "Pulls"), a.pulls, pullForm);
  state.apps.set(key, a);
  return a;
}

function trackText(t) {
  const rate = (m) => (m && m.bitrate ? " " + bps(m.bitrate) : "");
  const bframes = (v) => (v.hasBframes ? " · B-frames: WebRTC viewers get a lower frame rate" : "");
  if (t.video) return `${t.name}: ${t.video.codec} ${t.video.width}x${t.video.height}${rate(t.video)}${bframes(t.video)}`;
  const label = (a) => {
    const parts = [a.label, a.language].filter(Boolean);
    return parts.length ? ` (${parts.join(", ")})` : "";
  };
  if (t.audio) return `${t.name}: ${t.audio.codec} ${t.audio.samplerate} Hz${rate(t.audio)}${label(t.audio)}`;
  return `${t.name}: ${t.type}`;
}

function errorCell(item) {
  if (!item.lastError) return el("td", {});
  const when = item.lastErrorTime ? ` (at ${clock(item.lastErrorTime)})` : "";
  return el("td", { class: "error" }, item.lastError + when);
}

/// The element a pointer is pressed on, until just after its release: a
/// box holding it is not redrawn in between, or the button pressed would
/// be gone by the release and the click lost (a slow hand, a busy machine).
let pressed = null;
document.addEventListener("pointerdown", (e) => { pressed = e.target; }, true);
for (const type of ["pointerup", "pointercancel"]) {
  document.addEventListener(type, () => setTimeout(() => { pressed = null; }, 0), true);
}

/// Replaces what a box shows, unless the operator is typing in it (a
/// form field has the focus) or pressing something in it (see `pressed`);
/// it is brought up to date at the next poll. A focused button with a
/// `data-focus-key` is found again in the new content and keeps the focus.
function show(box, content) {
  if (pressed && box.contains(pressed)) return;
  const active = document.activeElement;
  if (!box.contains(active)) {
    box.replaceChildren(content);
    return;
  }
  if (["INPUT", "SELECT", "TEXTAREA"].includes(active.tagName)) return;
  const key = active.dataset && active.dataset.focusKey;
  box.replaceChildren(content);
  const again = key && box.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
  if (again) again.focus();
}

/// A table; below 700 px each row shows as a card, every cell under its
/// column's name (`data-label`).
function table(cls, heads, rows, empty) {
  if (!rows.length) return el("p", { class: "empty" }, empty);
  for (const row of rows) {
    [...row.children].forEach((td, i) => { if (heads[i] && td.colSpan === 1) td.dataset.label = heads[i]; });
  }
  return el("table", { class: cls + " cards" }, el("tr", {}, ...heads.map((h) => el("th", { scope: "col" }, h))), ...rows);
}

/// A button whose action is asked first: the first tap arms it (`what`,
/// then "tap again"), a second within ARMED_MS does it. `key` keeps it
/// armed across the page's redraws.
function askFirst(key, label, what, action) {
  const armed = () => state.armed && state.armed.key === key && Date.now() < state.armed.until;
  return el("button", { type: "button", class: armed() ? "armed" : null, "data-ask": key, onclick: async (ev) => {
    if (armed()) {
      state.armed = null;
      await action();
      return;
    }
    state.armed = { key, until: Date.now() + ARMED_MS };
    ev.currentTarget.classList.add("armed");
    ev.currentTarget.textContent = `${what}? Tap again`;
    setStatus(`${what}: tap again within ${ARMED_MS / 1000} s to confirm`);
  } }, armed() ? `${what}? Tap again` : label);
}

async function renderApp(vh, app, slow) {
  const base = appBase(vh, app);
  const key = `${vh}/${app}`;
  if (!state.apps.has(key)) {
    // A changed app (PATCH) is seen again when its section is made anew.
    appSection(vh, app, (await api("GET", base)).response);
  }
  const a = state.apps.get(key);
  const names = (await api("GET", base + "/streams")).response || [];
  const rows = [];
  for (const name of names) {
    const k = `${vh}/${app}/${name}`;
    if (slow || !state.details.has(k)) {
      const d = (await api("GET", `${base}/streams/${enc(name)}`)).response;
      if (d) state.details.set(k, d);
    }
    const s = state.details.get(k);
    if (!s) continue;
    const st = (await api("GET", `/v1/stats/current/vhosts/${enc(vh)}/apps/${enc(app)}/streams/${enc(name)}`)).response || {};
    const video = (s.input.tracks || []).find((t) => t.video);
    const inRate = sample("in:" + k, Number(st.lastThroughputIn || 0));
    const fps = sample("fps:" + k, video ? Number(video.video.framerate || 0) : null);
    const open = state.sessionsOpen.has(k);
    rows.push(el("tr", { class: "stream", "data-stream": name },
      el("td", {}, name, " ", el("button", { type: "button", class: "preview", onclick: () => preview(vh, app, name) }, "Preview"),
        " ", el("button", { type: "button", class: "sessions-toggle", "aria-expanded": String(open), "data-focus-key": "sessions:" + k,
          onclick: () => { open ? state.sessionsOpen.delete(k) : state.sessionsOpen.add(k); poll(); } }, "Sessions")),
      el("td", {}, s.input.sourceType),
      el("td", { class: "tracks" }, (s.input.tracks || []).filter((t) => t.type !== "Data").map(trackText).join("; ")),
      el("td", { class: "bitrate" }, lineGraph([{ values: inRate, color: "#1f77b4" }],
        { label: `input bit rate of ${name}, last 5 minutes`, format: bps, min: 1000 }), " ", bps(inRate[inRate.length - 1])),
      el("td", { class: "fps" }, lineGraph([{ values: fps, color: "#2ca02c" }],
        { label: `frame rate of ${name}, last 5 minutes`, format: (v) => v.toFixed(0) + " fps", min: 1, width: 120 }),
        " ", video ? `${Number(video.video.framerate || 0).toFixed(1)} fps` : "")));
    if (open) rows.push(await sessionsRow(base, name));
  }
  show(a.streams, table("streams", ["Stream", "Source", "Tracks", "Input bit rate (5 min)", "Frame rate"], rows, "No live streams."));

  if (a.has.push) await renderPushes(a, vh, app);
  if (a.has.file) await renderRecords(a, vh, app);
  if (a.has.dumps) await renderDumps(a, vh, app, names, slow);
  await renderPulls(a, vh, app);
  return a.section;
}

/// A stream's sessions (publisher and viewers), each with an End button.
async function sessionsRow(base, name) {
  const path = `${base}/streams/${enc(name)}/sessions`;
  const list = (await api("GET", path)).response || [];
  const rows = list.map((x) => el("tr", { class: "session", "data-session": x.id },
    el("td", {}, x.role), el("td", {}, x.protocol), el("td", {}, x.remoteAddress || ""),
    el("td", {}, (x.since || "").replace("T", " ").slice(0, 19)), el("td", {}, bytesText(x.bytes)),
    el("td", {}, x.role === "publisher"
      // Ending the publisher ends the broadcast: asked first.
      ? askFirst(`end:${path}/${x.id}`, "End", "End the broadcast", () => act("DELETE", `${path}/${enc(x.id)}`))
      : el("button", { type: "button", onclick: async () => {
        if (await act("DELETE", `${path}/${enc(x.id)}`)) forgetPreviewSession(x.id);
      } }, "End"))));
  return el("tr", { class: "sessions" }, el("td", { colspan: "5" },
    table("sessions", ["Role", "Protocol", "Address", "Since", "Bytes", ""], rows, "No sessions.")));
}

function bytesText(n) {
  const units = ["B", "kB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

async function renderPushes(a, vh, app) {
  const base = appBase(vh, app);
  const pushes = await api("POST", base + ":pushes", {});
  const pushRows = (pushes.response || []).map((p) => {
    const strip = sample(`push:${vh}/${app}/${p.id}`, p.state);
    return el("tr", { class: "push", "data-push": p.id },
      el("td", {}, p.id),
      el("td", { class: "state-" + p.state }, p.state),
      el("td", {}, stateStrip(strip, `states of push ${p.id}, last 5 minutes`)),
      el("td", {}, p.stream.name),
      el("td", {}, p.protocol),
      el("td", { class: "url" }, redacted(p.url)),
      el("td", {}, bytes(p.totalsentBytes)),
      errorCell(p),
      el("td", {}, askFirst(`push:${base}/${p.id}`, "Stop", `Stop push ${p.id}`,
        () => act("POST", base + ":stopPush", { id: p.id }))));
  });
  show(a.pushes, table("pushes",
    ["Push", "State", "State (5 min)", "Stream", "Protocol", "URL", "Sent", "Last error", ""], pushRows, "No push tasks."));
}

async function renderRecords(a, vh, app) {
  const base = appBase(vh, app);
  const records = await api("POST", base + ":records", {});
  const recordRows = (records.response || []).map((r) => {
    const strip = sample(`record:${vh}/${app}/${r.id}`, r.state);
    return el("tr", { class: "record", "data-record": r.id },
      el("td", {}, r.id),
      el("td", { class: "state-" + r.state }, r.state),
      el("td", {}, stateStrip(strip, `states of record ${r.id}, last 5 minutes`)),
      el("td", {}, r.stream.name),
      el("td", { class: "url" }, r.outputFilePath || r.filePath),
      el("td", {}, bytes(r.totalRecordBytes)),
      errorCell(r),
      el("td", {}, askFirst(`record:${base}/${r.id}`, "Stop", `Stop record ${r.id}`,
        () => act("POST", base + ":stopRecord", { id: r.id }))));
  });
  show(a.records, table("records",
    ["Record", "State", "State (5 min)", "Stream", "File", "Written", "Last error", ""], recordRows,
    records.statusCode === 200 ? "No recordings." : records.message));
}

async function renderDumps(a, vh, app, names, slow) {
  const base = appBase(vh, app);
  if (slow || !state.dumps.has(`${vh}/${app}`)) {
    const dumps = [];
    for (const name of names) {
      const d = await api("POST", `${base}/streams/${enc(name)}:hlsDumps`, {});
      for (const x of d.response || []) dumps.push(Object.assign({ stream: name }, x));
    }
    state.dumps.set(`${vh}/${app}`, dumps);
  }
  const dumpRows = state.dumps.get(`${vh}/${app}`).map((d) => el("tr", { class: "dump", "data-dump": d.id },
    el("td", {}, d.id), el("td", {}, d.stream), el("td", { class: "state-" + d.status }, d.status),
    el("td", { class: "url" }, d.outputPath), el("td", {}, bytes(d.bytes)), errorCell(d),
    // Only a running dump can be stopped.
    el("td", {}, d.status === "Running"
      ? askFirst(`dump:${base}/${d.id}`, "Stop", `Stop dump ${d.id}`,
        () => act("POST", `${base}/streams/${enc(d.stream)}:stopHlsDump`, { id: d.id }))
      : null)));
  show(a.dumps, table("dumps", ["Dump", "Stream", "Status", "Output", "Written", "Last error", ""], dumpRows, "No HLS dumps."));
}

async function renderPulls(a, vh, app) {
  const base = appBase(vh, app);
  const pulls = await api("POST", base + ":pulls", {});
  const pullRows = (pulls.response || []).map((p) => {
    const strip = sample(`pull:${vh}/${app}/${p.name}`, p.state);
    return el("tr", { class: "pulled", "data-pull": p.name },
      el("td", {}, p.name),
      el("td", { class: "state-" + p.state }, p.state),
      el("td", {}, stateStrip(strip, `states of pull ${p.name}, last 5 minutes`)),
      el("td", { class: "url" }, p.url),
      el("td", {}, p.persistent ? "persistent" : p.onDemand ? "on demand" : ""),
      errorCell(p),
      el("td", {}, askFirst(`pull:${base}/${p.name}`, "Delete", `Delete pull ${p.name}`,
        () => act("DELETE", `${base}/streams/${enc(p.name)}`))));
  });
  show(a.pulls, table("pulls", ["Pull", "State", "State (5 min)", "URL", "Kind", "Last error", ""], pullRows, "No pulls."));
}

// ---- the whole page --------------------------------------------------------

async function renderViewers() {
  const st = (await api("GET", "/v1/stats/current")).response || {};
  const c = st.connections || {};
  const series = Object.keys(PROTOCOL_COLORS).map((p) => ({
    // HLS (MPEG-TS) viewers are OME's `hlsv3`.
    values: sample("viewers:" + p, Number(c[p === "hls" ? "hlsv3" : p] || 0)), color: PROTOCOL_COLORS[p], label: p,
  }));
  const swatch = (color) => {
    // (a style attribute would be refused by the page's CSP; the property is not)
    const e = el("span", { class: "swatch" });
    e.style.background = color;
    return e;
  };
  const legend = el("ul", { class: "legend" }, ...series.map((s) =>
    el("li", {}, swatch(s.color), `${s.label} ${s.values[s.values.length - 1]}`)));
  $("viewers").replaceChildren(lineGraph(series, {
    label: "viewers by protocol, last 5 minutes", format: (v) => v.toFixed(0), min: 1, width: 600, height: 90,
  }), legend);
}

async function renderLog() {
  const lines = ((await api("GET", "/v1/logs")).response || []).slice().reverse();
  $("log-lines").replaceChildren(...lines.map((l) =>
    el("li", { class: "log-" + l.level.toLowerCase() }, el("time", {}, clock(l.time)), ` ${l.level} `, l.message)));
  if (!lines.length) $("log-lines").replaceChildren(el("li", { class: "empty" }, "Nothing since kiln started."));
}

async function poll() {
  if (state.busy) return;
  state.busy = true;
  const slow = state.tick % SLOW_EVERY === 0;
  state.tick++;
  try {
    const v = (await api("GET", "/v1/version")).response;
    // kiln's own version; the OME API release it speaks, named as such.
    $("version").textContent = `${v.name} ${v.kilnVersion} · OME API ${v.version}`;
    await loadHistory();
    await renderViewers();
    // Sections are kept and updated in place, never rebuilt.
    const hostsSeen = new Set();
    for (const vh of (await api("GET", "/v1/vhosts")).response || []) {
      hostsSeen.add(vh);
      let sec = state.vhosts.get(vh);
      if (!sec) {
        sec = el("section", { class: "vhost", "data-vhost": vh }, el("h2", {}, `Virtual host ${vh}`));
        sec.apps = el("div", {});
        sec.append(sec.apps);
        state.vhosts.set(vh, sec);
        $("hosts").append(sec);
      }
      const apps = (await api("GET", `/v1/vhosts/${enc(vh)}/apps`)).response || [];
      const appsSeen = new Set();
      for (const app of apps) {
        const a = await renderApp(vh, app, slow);
        appsSeen.add(a);
        if (a.parentNode !== sec.apps) sec.apps.append(a);
      }
      for (const child of [...sec.apps.children]) if (!appsSeen.has(child)) child.remove();
      if (!apps.length) sec.apps.replaceChildren(el("p", { class: "empty" }, "No applications."));
    }
    for (const [vh, sec] of state.vhosts) {
      if (hostsSeen.has(vh)) continue;
      sec.remove();
      state.vhosts.delete(vh);
      for (const k of state.apps.keys()) if (k.startsWith(vh + "/")) state.apps.delete(k);
    }
    if (slow) await renderLog();
    forgetStale();
    if (!$("status").classList.contains("error")) setStatus("connected");
  } catch (e) {
    if (e instanceof AuthError) {
      state.auth = "";
      sessionStorage.removeItem("kiln-auth");
      showLogin("Wrong access token: the server refused it.");
    } else {
      setStatus("cannot reach the server: " + e.message, true);
    }
  } finally {
    state.busy = false;
  }
}

/// At start: the token this tab was given, or the browser's own
/// credentials (a page opened through its Basic-auth prompt), or the form.
async function start() {
  const hadToken = Boolean(state.auth);
  try {
    await api("GET", "/v1/version");
  } catch (e) {
    sessionStorage.removeItem("kiln-auth");
    state.auth = "";
    if (!(e instanceof AuthError)) showLogin("Cannot reach the server: " + e.message);
    else showLogin(hadToken ? "Wrong access token: the server refused it." : "");
    return;
  }
  showMain();
  poll();
}

start();
setInterval(() => {
  if (!$("main").hidden) poll();
}, POLL_MS);

// --- live preview: WebRTC (WHEP, the browser's own RTCPeerConnection),
// else the browser's native HLS where it has one ------------------------------

const previewState = { pc: null, location: null, base: null };

/// The preview's own WebRTC session was ended from the sessions list:
/// closing the preview has nothing left to delete.
function forgetPreviewSession(id) {
  const key = id.startsWith("webrtc-") ? id.slice("webrtc-".length) : null;
  if (key && previewState.location && previewState.location.includes(`/${key}?`)) {
    previewState.location = null;
  }
}

async function closePreview() {
  const p = previewState;
  if (p.pc) p.pc.close();
  if (p.location) fetch(new URL(p.location, p.base), { method: "DELETE" }).catch(() => {});
  Object.assign(p, { pc: null, location: null, base: null });
  const v = $("preview-video");
  v.srcObject = null;
  v.removeAttribute("src");
  $("preview").hidden = true;
}

async function preview(vh, app, name) {
  await closePreview();
  $("preview").hidden = false;
  $("preview-name").textContent = `${vh}/${app}/${name}`;
  // The player is at the top of the page: bring it into view, focus on it.
  $("preview").scrollIntoView({ block: "start" });
  $("preview").focus({ preventScroll: true });
  const status = $("preview-status");
  const video = $("preview-video");
  const info = (await api("GET", "/v1/webrtc")).response || {};
  const tls = location.protocol === "https:";
  const port = (tls ? info.signallingTlsPort : info.signallingPort) || info.signallingPort;
  const viewer = `${tls && info.signallingTlsPort ? "https" : "http"}://${location.hostname}:${port}`;
  const path = `/${enc(app)}/${enc(name)}`;
  const fallback = (why) => {
    const hls = `${viewer}${path}/llhls.m3u8`;
    if (port && video.canPlayType("application/vnd.apple.mpegurl")) {
      status.textContent = `WebRTC failed (${why}); playing LL-HLS with this browser's own HLS.`;
      video.src = hls;
    } else {
      status.textContent = `WebRTC failed (${why}); this browser has no HLS of its own: open ${hls} in a player.`;
    }
  };
  if (!info.enabled || !port) return fallback("WebRTC is not configured on this server");
  status.textContent = "Connecting over WebRTC (WHEP)...";
  try {
    const pc = new RTCPeerConnection();
    previewState.pc = pc;
    const stream = new MediaStream();
    pc.ontrack = (e) => { stream.addTrack(e.track); video.srcObject = stream; };
    pc.addTransceiver("video", { direction: "recvonly" });
    pc.addTransceiver("audio", { direction: "recvonly" });
    await pc.setLocalDescription(await pc.createOffer());
    const r = await fetch(`${viewer}${path}?direction=whep`,
      { method: "POST", headers: { "Content-Type": "application/sdp" }, body: pc.localDescription.sdp });
    const text = await r.text();
    if (r.status !== 201) return fallback(`${r.status}: ${text}`);
    previewState.location = r.headers.get("Location");
    previewState.base = viewer;
    await pc.setRemoteDescription({ type: "answer", sdp: text });
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === "connected") status.textContent = "Playing over WebRTC.";
      if (pc.connectionState === "failed") fallback("no ICE connection");
    };
  } catch (e) {
    fallback(String(e));
  }
}

$("preview-close").addEventListener("click", closePreview);
