// Opens tests/web/llhls.html (hls.js) in the browser of browser.mjs
// (Chromium, or Firefox with BROWSER=firefox) and prints the page's result:
//
//   node hlsjs_page.mjs PAGE_URL SECONDS
//
// PAGE_URL is the page with its query (src=..., seconds=...); the page
// logs "KILN-RESULT {json}" when done, printed here as one JSON line.
// Bounded: SECONDS + 60 s at most, then {"error": ...} and exit 1.
import { launchBrowser } from "./browser.mjs";

const [pageUrl, secondsArg] = process.argv.slice(2);
const seconds = Number(secondsArg || 20);
const browser = await launchBrowser();
const timer = setTimeout(() => {
  console.log(JSON.stringify({ error: "no result in time" }));
  process.exit(1);
}, (seconds + 60) * 1000);
try {
  const page = await browser.newPage();
  const result = new Promise((resolve) => {
    page.on("console", (m) => {
      const t = m.text();
      if (t.startsWith("KILN-RESULT ")) resolve(t.slice("KILN-RESULT ".length));
    });
  });
  await page.goto(pageUrl, { waitUntil: "load" });
  console.log(await result);
} catch (e) {
  console.log(JSON.stringify({ error: String(e) }));
  process.exitCode = 1;
} finally {
  clearTimeout(timer);
  await browser.close();
}
