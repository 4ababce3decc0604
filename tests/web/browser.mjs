// The browser a test page runs in: the system's headless Chromium
// (CHROMIUM, the default) or, with BROWSER=firefox, Debian's firefox-esr
// (FIREFOX) driven over WebDriver BiDi — both by puppeteer-core (pinned).
// Each is told what a test's page needs: autoplay, fake camera and
// microphone without a prompt, host candidates as addresses (no mDNS
// names), getUserMedia on `origin` (a test's network-namespace address is
// not a secure context).
import puppeteer from "puppeteer-core";

export const isFirefox = process.env.BROWSER === "firefox";

export function launchBrowser({ origin } = {}) {
  if (isFirefox) {
    return puppeteer.launch({
      browser: "firefox",
      executablePath: process.env.FIREFOX || "firefox-esr",
      headless: true,
      extraPrefsFirefox: {
        "media.autoplay.default": 0,
        "media.autoplay.blocking_policy": 0,
        "media.navigator.streams.fake": true,
        "media.navigator.permission.disabled": true,
        "media.devices.insecure.enabled": true,
        "media.getusermedia.insecure.enabled": true,
        "media.peerconnection.ice.obfuscate_host_addresses": false,
      },
    });
  }
  const args = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--autoplay-policy=no-user-gesture-required",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
    // Loopback candidates are kiln's in most tests: let Chromium use them.
    "--allow-loopback-in-peer-connection", "--disable-features=WebRtcHideLocalIpsWithMdns"];
  if (origin) args.push("--unsafely-treat-insecure-origin-as-secure=" + origin);
  return puppeteer.launch({ executablePath: process.env.CHROMIUM || "chromium", headless: true, args });
}
