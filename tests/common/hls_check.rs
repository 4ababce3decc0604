//! An LL-HLS checker for the tests, written from RFC 8216bis (HLS second
//! edition) and ISO/IEC 14496-12, not from kiln's packager: it reads the
//! chunklists and parts a real server sends and panics with the rule a
//! playlist breaks.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One HTTP/1.1 response, body as bytes.
pub struct Fetched {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Fetched {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `GET path` on 127.0.0.1:port with `Connection: close`, read to the end.
pub fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> Fetched {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.set_nodelay(true).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).expect("read the response");
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&all[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Fetched {
        status,
        headers,
        body: all[end + 4..].to_vec(),
    }
}

/// A partial segment as a chunklist lists it.
#[derive(Debug, Clone)]
pub struct PartRef {
    pub msn: u64,
    pub index: u64,
    pub uri: String,
    pub duration: f64,
    pub independent: bool,
}

#[derive(Debug, Clone)]
pub struct Chunklist {
    pub target_duration: f64,
    pub part_target: f64,
    pub media_sequence: u64,
    /// (msn, EXTINF duration, uri) of every full segment listed.
    pub segments: Vec<(u64, f64, String)>,
    pub parts: Vec<PartRef>,
    pub preload_hint: Option<String>,
    pub ended: bool,
}

impl Chunklist {
    /// Is the part at `uri` listed (as a part, not a hint)?
    pub fn lists_part(&self, uri: &str) -> bool {
        self.parts.iter().any(|p| p.uri == uri)
    }
}

fn attr<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split(',').find_map(|f| {
        let (k, v) = f.split_once('=')?;
        (k.rsplit(':').next()? == name).then(|| v.trim_matches('"'))
    })
}

/// Parses a media playlist and holds it to RFC 8216bis; panics with the
/// rule and the playlist when one is broken.
pub fn check_chunklist(text: &str) -> Chunklist {
    let fail = |why: String| -> ! { panic!("{why}\n--- playlist ---\n{text}") };
    let lines: Vec<&str> = text.lines().collect();
    if lines.first() != Some(&"#EXTM3U") {
        fail("the first line is not #EXTM3U".into());
    }
    let tag = |t: &str| lines.iter().find_map(|l| l.strip_prefix(t));
    let target_duration: f64 = tag("#EXT-X-TARGETDURATION:")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| fail("no EXT-X-TARGETDURATION (4.4.3.1)".into()));
    let part_inf = tag("#EXT-X-PART-INF:").unwrap_or_else(|| fail("no EXT-X-PART-INF".into()));
    let part_target: f64 = attr(part_inf, "PART-TARGET")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| fail("EXT-X-PART-INF without PART-TARGET".into()));
    let media_sequence: u64 = tag("#EXT-X-MEDIA-SEQUENCE:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let version: u32 = tag("#EXT-X-VERSION:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    if version < 6 {
        fail(format!(
            "EXT-X-VERSION {version}: EXT-X-MAP with fMP4 needs 6 or more"
        ));
    }
    if let Some(sc) = tag("#EXT-X-SERVER-CONTROL:") {
        if let Some(phb) = attr(sc, "PART-HOLD-BACK").and_then(|v| v.parse::<f64>().ok()) {
            if phb < 2.0 * part_target {
                fail(format!(
                    "PART-HOLD-BACK {phb} < 2 x PART-TARGET {part_target} (4.4.3.8)"
                ));
            }
        } else {
            fail(
                "EXT-X-SERVER-CONTROL without PART-HOLD-BACK while parts are listed (4.4.3.8)"
                    .into(),
            );
        }
        if let Some(skip) = attr(sc, "CAN-SKIP-UNTIL").and_then(|v| v.parse::<f64>().ok()) {
            if skip < 6.0 * target_duration {
                fail(format!(
                    "CAN-SKIP-UNTIL {skip} < 6 x TARGETDURATION (4.4.3.8)"
                ));
            }
        }
    }
    if tag("#EXT-X-MAP:").is_none() {
        fail("no EXT-X-MAP for fMP4 segments".into());
    }
    let ended = lines.contains(&"#EXT-X-ENDLIST");
    let skipped: u64 = tag("#EXT-X-SKIP:")
        .and_then(|s| attr(s, "SKIPPED-SEGMENTS"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut msn = media_sequence + skipped;
    let mut segments = Vec::new();
    let mut parts = Vec::new();
    let mut part_index = 0;
    let mut parts_sum = 0.0;
    let mut parts_in_segment = 0;
    let mut pending_extinf: Option<f64> = None;
    let mut saw_pdt = false;
    let mut preload_hint = None;
    for l in &lines {
        if let Some(p) = l.strip_prefix("#EXT-X-PART:") {
            let duration: f64 = attr(p, "DURATION")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| fail(format!("{l}: no DURATION")));
            if duration > part_target + 1e-3 {
                fail(format!(
                    "{l}: longer than PART-TARGET {part_target} (4.4.4.9)"
                ));
            }
            let uri = attr(p, "URI").unwrap_or_else(|| fail(format!("{l}: no URI")));
            parts.push(PartRef {
                msn,
                index: part_index,
                uri: uri.to_string(),
                duration,
                independent: attr(p, "INDEPENDENT") == Some("YES"),
            });
            part_index += 1;
            parts_sum += duration;
            parts_in_segment += 1;
        } else if let Some(d) = l.strip_prefix("#EXTINF:") {
            let d: f64 = d
                .split(',')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| fail(format!("{l}: bad duration")));
            if d.round() > target_duration {
                fail(format!(
                    "{l}: rounds above TARGETDURATION {target_duration} (4.4.3.1)"
                ));
            }
            if parts_in_segment > 0
                && (parts_sum - d).abs() > 0.002 * parts_in_segment as f64 + 0.002
            {
                fail(format!("{l}: its parts add up to {parts_sum:.3} s"));
            }
            pending_extinf = Some(d);
        } else if l.starts_with("#EXT-X-PROGRAM-DATE-TIME:") {
            saw_pdt = true;
        } else if let Some(h) = l.strip_prefix("#EXT-X-PRELOAD-HINT:") {
            if attr(h, "TYPE") == Some("PART") {
                preload_hint = attr(h, "URI").map(str::to_string);
            }
        } else if !l.starts_with('#') && !l.is_empty() {
            let d = pending_extinf
                .take()
                .unwrap_or_else(|| fail(format!("{l}: a segment without EXTINF")));
            segments.push((msn, d, l.to_string()));
            msn += 1;
            part_index = 0;
            parts_sum = 0.0;
            parts_in_segment = 0;
        }
    }
    if !saw_pdt {
        fail("no EXT-X-PROGRAM-DATE-TIME".into());
    }
    if !ended && preload_hint.is_none() {
        fail("a live chunklist without a part PRELOAD-HINT".into());
    }
    if ended && preload_hint.is_some() {
        fail("an ended chunklist still hints a part".into());
    }
    Chunklist {
        target_duration,
        part_target,
        media_sequence,
        segments,
        parts,
        preload_hint,
        ended,
    }
}

/// Iterates over the boxes of an ISO BMFF byte range: (type, body).
fn boxes(mut data: &[u8]) -> impl Iterator<Item = ([u8; 4], &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < 8 {
            return None;
        }
        let size = u32::from_be_bytes(data[..4].try_into().unwrap()) as usize;
        let kind: [u8; 4] = data[4..8].try_into().unwrap();
        if size < 8 || size > data.len() {
            panic!(
                "box {:?} of size {size} in {} bytes",
                String::from_utf8_lossy(&kind),
                data.len()
            );
        }
        let body = &data[8..size];
        data = &data[size..];
        Some((kind, body))
    })
}

fn child<'a>(data: &'a [u8], kind: &[u8; 4]) -> Option<&'a [u8]> {
    boxes(data).find(|(k, _)| k == kind).map(|(_, b)| b)
}

/// The sample flags of the first sample of a `moof`+`mdat` part (trun's
/// first-sample-flags, or its per-sample flags, or tfhd's default).
pub fn first_sample_flags(part: &[u8]) -> u32 {
    let moof = child(part, b"moof").expect("a moof box");
    let traf = child(moof, b"traf").expect("a traf box");
    let tfhd = child(traf, b"tfhd").expect("a tfhd box");
    let tf_flags = u32::from_be_bytes([0, tfhd[1], tfhd[2], tfhd[3]]);
    let mut at = 8; // version/flags, track_ID
    let mut default_flags = 0;
    for (bit, len) in [(0x1, 8), (0x2, 4), (0x8, 4), (0x10, 4)] {
        if tf_flags & bit != 0 {
            at += len;
        }
    }
    if tf_flags & 0x20 != 0 {
        default_flags = u32::from_be_bytes(tfhd[at..at + 4].try_into().unwrap());
    }
    let trun = child(traf, b"trun").expect("a trun box");
    let tr_flags = u32::from_be_bytes([0, trun[1], trun[2], trun[3]]);
    let mut at = 8; // version/flags, sample_count
    if tr_flags & 0x1 != 0 {
        at += 4; // data_offset
    }
    if tr_flags & 0x4 != 0 {
        return u32::from_be_bytes(trun[at..at + 4].try_into().unwrap());
    }
    if tr_flags & 0x400 != 0 {
        let mut skip = 0;
        for (bit, len) in [(0x100, 4), (0x200, 4)] {
            if tr_flags & bit != 0 {
                skip += len;
            }
        }
        return u32::from_be_bytes(trun[at + skip..at + skip + 4].try_into().unwrap());
    }
    default_flags
}

/// Is the first sample a sync sample (sample_is_non_sync_sample clear)?
pub fn starts_with_sync_sample(part: &[u8]) -> bool {
    first_sample_flags(part) & 0x0001_0000 == 0
}
