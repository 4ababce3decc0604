// Drives kiln's console in the system's headless Chromium (puppeteer-core)
// as an operator would, for tests/console.rs:
//
//   node console_check.mjs BASE_URL TOKEN OUT_DIR UDP_URL
//
// It logs in through the form (a wrong token first), waits for the live
// stream `cam` and its bit-rate graph, starts a push from the form and
// waits for it to reach `pushing` (its state strip too), finds a pull that
// is not live, checks that text
// carrying markup is shown as text and runs nothing, saves screenshots at
// 1280x900 and 360x740, and prints one JSON line of what it saw. Every
// wait is bounded; a failure prints {"error": ...} and exits 1.
import puppeteer from "puppeteer-core";

const [base, token, outDir, udpUrl] = process.argv.slice(2);
const seen = {};
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const wait = { timeout: 20000 };
// The console redraws its tables on each poll: a button found just before
// a redraw is gone (or not yet laid out) when clicked; find it again, as
// an operator clicks again.
async function clickLive(page, selector, options = {}) {
  for (let i = 0; ; i++) {
    try {
      return await page.click(selector, options);
    } catch (e) {
      const redrawn = /detached|not clickable/.test(String(e));
      if (i >= 20 || !redrawn) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
try {
  const page = await browser.newPage();
  const errors = [];
  // Nothing the page asks for is missing (an app's absent features, the icon).
  const missing = [];
  page.on("response", (r) => { if (r.status() === 404) missing.push(r.url()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("dialog", async (d) => {
    errors.push("dialog: " + d.message());
    await d.dismiss();
  });
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(base + "/console/", { waitUntil: "load" });
  await page.waitForSelector("#login:not([hidden])", wait);
  seen.loginHint = await page.$eval("#login-hint", (e) => e.textContent);

  // A wrong token: the page says so (no browser prompt, no hang).
  await page.type("#token", "kiln:wrong");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.getElementById("login-error").textContent.includes("Wrong access token"), wait);
  seen.wrongToken = await page.$eval("#login-error", (e) => e.textContent);

  // The right one, typed once: it is kept for this tab only.
  await page.type("#token", token);
  await page.keyboard.press("Enter");
  await page.waitForSelector("#main:not([hidden])", wait);
  seen.url = page.url();
  seen.storage = await page.evaluate(() => ({
    session: Boolean(sessionStorage.getItem("kiln-auth")),
    local: localStorage.length,
  }));
  await page.waitForSelector('tr[data-stream="cam"]', wait);
  await page.waitForFunction(
    () => Number(document.querySelector('tr[data-stream="cam"] td.bitrate svg')?.dataset.points || 0) >= 3, wait);
  seen.bitratePoints = await page.$eval('tr[data-stream="cam"] td.bitrate svg', (e) => Number(e.dataset.points));
  seen.streamRow = await page.$eval('tr[data-stream="cam"]', (e) => e.textContent);

  // Only what the app enables: it has Push, no FILE.
  seen.appParts = await page.$$eval('section[data-app="app"] h4', (hs) => hs.map((h) => h.textContent));
  // At 1280 px the streams table fits its box: no sideways scroll.
  seen.streamsOverflow = await page.$eval('section[data-app="app"] table.streams',
    (t) => t.scrollWidth - t.parentElement.clientWidth);

  // The live preview plays over WebRTC: a frame is decoded and time runs.
  // Clicked from far down the page, it comes into view with the focus.
  await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
  await clickLive(page, 'tr[data-stream="cam"] button.preview');
  await page.waitForFunction(() => !document.getElementById("preview").hidden, wait);
  await new Promise((r) => setTimeout(r, 300));
  seen.previewInView = await page.evaluate(() => {
    const r = document.getElementById("preview").getBoundingClientRect();
    return { top: Math.round(r.top), bottom: Math.round(r.bottom), height: window.innerHeight,
      focused: document.getElementById("preview").contains(document.activeElement) };
  });
  await page.waitForFunction(() => {
    const v = document.getElementById("preview-video");
    return v.videoWidth > 0 && v.currentTime > 1.5;
  }, wait);
  seen.preview = await page.evaluate(() => {
    const v = document.getElementById("preview-video");
    return { width: v.videoWidth, height: v.videoHeight, currentTime: v.currentTime,
      frames: v.getVideoPlaybackQuality().totalVideoFrames, status: document.getElementById("preview-status").textContent };
  });

  // The stream's sessions: the publisher and the preview's own WebRTC
  // session, which its End button ends.
  await clickLive(page, 'tr[data-stream="cam"] button.sessions-toggle');
  await page.waitForSelector('tr.sessions tr.session[data-session^="webrtc-"]', wait);
  seen.sessions = await page.$$eval("tr.sessions tr.session", (rows) => rows.map((r) => r.dataset.session));
  // Pressed as a slow hand does, held longer than a poll: the list is not
  // redrawn under the press, so the click is not lost.
  await clickLive(page, 'tr.sessions tr.session[data-session^="webrtc-"] button', { delay: 1500 });
  await page.waitForFunction(() => !document.querySelector('tr.sessions tr.session[data-session^="webrtc-"]'), wait);
  seen.sessionsAfterEnd = await page.$$eval("tr.sessions tr.session", (rows) => rows.map((r) => r.dataset.session));
  // The publisher's End is asked first: one tap arms it, nothing ends.
  await clickLive(page, 'tr.sessions tr.session[data-session="publisher"] button');
  await new Promise((r) => setTimeout(r, 1500));
  seen.publisherEndOnce = await page.$eval('tr.sessions tr.session[data-session="publisher"] button', (b) => b.textContent);
  seen.version = await page.$eval("#version", (e) => e.textContent);

  // A push started from the form reaches `pushing`, and its strip shows it.
  const form = 'section[data-app="app"] form.push';
  await page.click('section[data-app="app"] details.push summary');
  await page.type(`${form} input[name=id]`, "from-form");
  await page.type(`${form} input[name=stream]`, "cam");
  await page.select(`${form} select[name=protocol]`, "mpegts");
  await page.type(`${form} input[name=url]`, udpUrl);
  await page.click(`${form} button`);
  await page.waitForSelector('tr[data-push="from-form"] td.state-pushing', wait);
  await page.waitForSelector('tr[data-push="from-form"] svg.strip rect[data-state="pushing"]', wait);
  seen.pushRow = await page.$eval('tr[data-push="from-form"]', (e) => e.textContent);

  // Markup from a peer or caller is text: the push whose URL carries an
  // <img onerror> is listed literally and its handler never runs.
  await page.waitForSelector('tr[data-push="markup"]', wait);
  seen.markupRow = await page.$eval('tr[data-push="markup"] td.url', (e) => e.textContent);
  seen.markupImages = await page.$$eval('tr[data-push="markup"] img', (e) => e.length);
  seen.pwned = await page.evaluate(() => window.pwned === undefined ? null : window.pwned);

  // A pull that is not live is listed too, with its state and error.
  await page.waitForSelector('tr[data-pull="door"]', wait);
  seen.pullRow = await page.$eval('tr[data-pull="door"]', (e) => e.textContent);

  // The log section has the lines kiln warned about (the failing push).
  await page.waitForFunction(() => document.querySelectorAll("#log-lines li.log-warn, #log-lines li.log-error").length > 0, wait);
  seen.logLines = await page.$$eval("#log-lines li", (l) => l.length);
  seen.viewersGraph = await page.$eval("#viewers svg", (e) => Number(e.dataset.points));

  await page.screenshot({ path: `${outDir}/console-1280x900.png`, fullPage: false });
  // The preview closes (its WHEP session is deleted).
  await page.click("#preview-close");
  seen.previewHidden = await page.$eval("#preview", (e) => e.hidden);
  await page.setViewport({ width: 360, height: 740, isMobile: true });
  await new Promise((r) => setTimeout(r, 1500));
  seen.phoneOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  // Each table is cards: none wider than its box, every action in view.
  seen.phoneTables = await page.evaluate(() => [...document.querySelectorAll("table")]
    .map((t) => ({ table: t.className, over: t.scrollWidth - t.parentElement.clientWidth }))
    .filter((x) => x.over > 0));
  seen.phoneButtons = await page.evaluate(() => [...document.querySelectorAll("table button")].map((b) => {
    const r = b.getBoundingClientRect();
    return { text: b.textContent, inView: r.width > 0 && r.left >= 0 && r.right <= window.innerWidth };
  }));
  // Stop on a push is asked first: one tap arms it, a second stops it.
  await clickLive(page, 'tr[data-push="from-form"] button');
  await new Promise((r) => setTimeout(r, 1500));
  seen.stopOnce = await page.$eval('tr[data-push="from-form"]', (e) => ({
    button: e.querySelector("button").textContent, pushing: Boolean(e.querySelector("td.state-pushing")) }));
  await clickLive(page, 'tr[data-push="from-form"] button');
  await page.waitForFunction(() => !document.querySelector('tr[data-push="from-form"] td.state-pushing'), wait);
  // On a phone the streams come first, above the overview graph.
  seen.phoneOrder = await page.evaluate(() => ({
    stream: Math.round(document.querySelector('tr[data-stream="cam"]').getBoundingClientRect().top + window.scrollY),
    overview: Math.round(document.getElementById("overview").getBoundingClientRect().top + window.scrollY),
  }));
  seen.missing = missing;
  await page.screenshot({ path: `${outDir}/console-360x740.png`, fullPage: false });
  seen.errors = errors;
  console.log(JSON.stringify(seen));
} catch (e) {
  console.log(JSON.stringify({ error: String(e), seen }));
  process.exitCode = 1;
} finally {
  await browser.close();
}
