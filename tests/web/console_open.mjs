// Opens kiln's console in the system's headless Chromium, logs in through
// the form and keeps it open, for benches/compare.sh (console): what an
// open page costs kiln.
//
//   node console_open.mjs BASE_URL TOKEN SECONDS
//
// Prints one JSON line: the API requests the page made and how long it was
// open after logging in.
import puppeteer from "puppeteer-core";

const [base, token, seconds] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(base + "/console/", { waitUntil: "load" });
  await page.waitForSelector("#login:not([hidden])", { timeout: 20000 });
  await page.type("#token", token);
  await page.keyboard.press("Enter");
  await page.waitForSelector("#main:not([hidden])", { timeout: 20000 });
  let requests = 0;
  page.on("request", (r) => {
    if (new URL(r.url()).pathname.startsWith("/v1/")) requests++;
  });
  const t0 = Date.now();
  await new Promise((r) => setTimeout(r, Number(seconds) * 1000));
  const streams = await page.$$eval("tr.stream", (l) => l.length);
  console.log(JSON.stringify({ requests, seconds: (Date.now() - t0) / 1000, streams }));
} finally {
  await browser.close();
}
