//! Browser pages of `tests/web` run by node (puppeteer-core driving
//! headless Chromium), shared by the WebRTC tests: where Chromium and the
//! pinned modules are, and running a page (in a network namespace if
//! asked) to read what it saw.

use crate::common::have_tool;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn chromium_and_node() -> Option<(String, PathBuf)> {
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web");
    if !have_tool("node") || !have_tool("chromium") || !have_tool("ffmpeg") {
        return None;
    }
    for module in ["puppeteer-core", "ovenplayer", "ovenlivekit"] {
        if !web.join("node_modules").join(module).exists() {
            if std::env::var("KILN_REQUIRE_INTEROP").as_deref() == Ok("1") {
                panic!("{module} is required (KILN_REQUIRE_INTEROP=1): npm ci --prefix tests/web");
            }
            eprintln!("SKIP: {module} is not installed (npm ci --prefix tests/web)");
            return None;
        }
    }
    let out = Command::new("sh")
        .args(["-c", "command -v chromium"])
        .output()
        .unwrap();
    Some((String::from_utf8_lossy(&out.stdout).trim().to_string(), web))
}

/// Runs one of `tests/web`'s browser scripts with `args`, in network
/// namespace `netns` if given, with `env` set (RELAY, VIDEO_CODEC); its
/// output is read with [`seen`].
pub fn node_page(
    script: &str,
    netns: Option<&str>,
    env: &[(&str, &str)],
    chromium: &str,
    web: &Path,
    args: &[&str],
) -> std::process::Child {
    let mut c = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "node"]);
            c
        }
        None => Command::new("node"),
    };
    c.env("CHROMIUM", chromium)
        .envs(env.iter().copied())
        .arg(web.join(script))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("node starts")
}

pub fn seen(child: std::process::Child) -> Value {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|_| {
        panic!(
            "browser said: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// As `publisher`, in network namespace `netns` if given, with `env` set.
pub fn publisher_in(
    netns: Option<&str>,
    env: &[(&str, &str)],
    chromium: &str,
    web: &Path,
    args: &[&str],
) -> std::process::Child {
    node_page("webrtc_publish.mjs", netns, env, chromium, web, args)
}
