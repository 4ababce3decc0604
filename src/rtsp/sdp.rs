//! The SDP of an RTSP DESCRIBE answer (RFC 8866), as far as a pull needs
//! it: each media section's kind, payload type, codec, clock rate,
//! channels, `fmtp` parameters and `control` URL. Bounded: at most
//! [`MAX_MEDIA`] sections are kept; anything not understood is ignored.

use crate::media::MediaKind;

/// Media sections kept (a camera has two or three).
pub const MAX_MEDIA: usize = 8;

/// The codecs the RTSP client depacketizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtpCodec {
    H264,
    H265,
    /// MPEG4-GENERIC AAC (RFC 3640, AAC-hbr or AAC-lbr).
    Aac,
}

/// One `m=` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdpMedia {
    pub kind: MediaKind,
    pub payload_type: u8,
    /// `None`: a codec kiln does not take (the section is not set up).
    pub codec: Option<RtpCodec>,
    /// The rtpmap's encoding name as written (for messages).
    pub encoding: String,
    pub clock_rate: u32,
    pub channels: u8,
    /// `a=fmtp` parameters, names lower-cased.
    pub fmtp: Vec<(String, String)>,
    /// `a=control` (absolute, or relative to the base URL); `None`: the
    /// base URL itself.
    pub control: Option<String>,
}

impl SdpMedia {
    pub fn fmtp(&self, name: &str) -> Option<&str> {
        self.fmtp
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A session description.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sdp {
    /// Session-level `a=control`.
    pub control: Option<String>,
    pub media: Vec<SdpMedia>,
}

impl Sdp {
    /// Parses `text`; lines it does not understand are skipped. An SDP
    /// without any media section is an error.
    pub fn parse(text: &str) -> Result<Sdp, &'static str> {
        let mut sdp = Sdp::default();
        let mut current: Option<SdpMedia> = None;
        for line in text.lines() {
            let line = line.trim_end_matches('\r');
            let Some((kind, value)) = line.split_once('=') else {
                continue;
            };
            match kind {
                "m" => {
                    if let Some(m) = current.take() {
                        push_media(&mut sdp, m);
                    }
                    current = parse_m_line(value);
                }
                "a" => {
                    let (name, arg) = value.split_once(':').unwrap_or((value, ""));
                    match (name, current.as_mut()) {
                        ("control", None) => sdp.control = Some(arg.trim().to_string()),
                        ("control", Some(m)) => m.control = Some(arg.trim().to_string()),
                        ("rtpmap", Some(m)) => apply_rtpmap(m, arg),
                        ("fmtp", Some(m)) => apply_fmtp(m, arg),
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        if let Some(m) = current.take() {
            push_media(&mut sdp, m);
        }
        if sdp.media.is_empty() {
            return Err("the SDP has no media section");
        }
        Ok(sdp)
    }
}

fn push_media(sdp: &mut Sdp, m: SdpMedia) {
    if sdp.media.len() < MAX_MEDIA {
        sdp.media.push(m);
    }
}

/// `m=video 0 RTP/AVP 96`: only the first payload type is taken.
fn parse_m_line(value: &str) -> Option<SdpMedia> {
    let mut parts = value.split_whitespace();
    let kind = match parts.next()? {
        "video" => MediaKind::Video,
        "audio" => MediaKind::Audio,
        _ => MediaKind::Data,
    };
    let _port = parts.next()?;
    let _proto = parts.next()?;
    let payload_type: u8 = parts.next()?.parse().ok().filter(|pt| *pt < 128)?;
    // Static payload types this client could take have no rtpmap.
    Some(SdpMedia {
        kind,
        payload_type,
        codec: None,
        encoding: String::new(),
        clock_rate: 90_000,
        channels: 1,
        fmtp: Vec::new(),
        control: None,
    })
}

/// `a=rtpmap:96 H264/90000` or `a=rtpmap:97 MPEG4-GENERIC/44100/2`.
fn apply_rtpmap(m: &mut SdpMedia, arg: &str) {
    let Some((pt, rest)) = arg.trim().split_once(' ') else {
        return;
    };
    if pt.trim().parse::<u8>().ok() != Some(m.payload_type) {
        return;
    }
    let mut fields = rest.trim().split('/');
    let encoding = fields.next().unwrap_or("").trim();
    m.encoding = encoding.chars().take(64).collect();
    m.clock_rate = fields
        .next()
        .and_then(|r| r.trim().parse().ok())
        .filter(|r| *r > 0)
        .unwrap_or(90_000);
    m.channels = fields
        .next()
        .and_then(|c| c.trim().parse().ok())
        .filter(|c| *c > 0)
        .unwrap_or(1);
    m.codec = match (m.kind, encoding.to_ascii_uppercase().as_str()) {
        (MediaKind::Video, "H264") => Some(RtpCodec::H264),
        (MediaKind::Video, "H265") => Some(RtpCodec::H265),
        (MediaKind::Audio, "MPEG4-GENERIC") => Some(RtpCodec::Aac),
        _ => None,
    };
}

/// `a=fmtp:96 packetization-mode=1;sprop-parameter-sets=Z0IA,aM4=`.
fn apply_fmtp(m: &mut SdpMedia, arg: &str) {
    let Some((pt, rest)) = arg.trim().split_once(' ') else {
        return;
    };
    if pt.trim().parse::<u8>().ok() != Some(m.payload_type) {
        return;
    }
    for pair in rest.split(';').take(32) {
        if let Some((k, v)) = pair.split_once('=') {
            m.fmtp
                .push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
}

/// Resolves a media `control` against the base URL (RFC 2326 C.1.1: an
/// absolute URL as is, `*` or none is the base, else relative to it).
pub fn control_url(base: &str, control: Option<&str>) -> String {
    match control {
        None | Some("") | Some("*") => base.to_string(),
        Some(c) if c.contains("://") => c.to_string(),
        Some(c) => {
            let mut url = base.to_string();
            if !url.ends_with('/') {
                url.push('/');
            }
            url.push_str(c.trim_start_matches('/'));
            url
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GST: &str = "v=0\r\no=- 1188340656180883 1 IN IP4 127.0.0.1\r\ns=Session streamed with GStreamer\r\n\
i=rtsp-server\r\nt=0 0\r\na=tool:GStreamer\r\na=type:broadcast\r\na=control:*\r\na=range:npt=now-\r\n\
m=video 0 RTP/AVP 96\r\nc=IN IP4 0.0.0.0\r\nb=AS:2000\r\na=rtpmap:96 H264/90000\r\n\
a=framerate:25\r\na=fmtp:96 packetization-mode=1;sprop-parameter-sets=Z2QAH6zZQFAFuhAAAAMAEAAAAwPI8YMZYA==,aOvjyyLA;profile-level-id=64001f;level-asymmetry-allowed=1\r\n\
a=control:stream=0\r\na=ts-refclk:local\r\na=mediaclk:sender\r\n\
m=audio 0 RTP/AVP 97\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:97 MPEG4-GENERIC/48000/2\r\n\
a=fmtp:97 streamtype=5;profile-level-id=2;mode=AAC-hbr;config=1190;sizelength=13;indexlength=3;indexdeltalength=3\r\n\
a=control:stream=1\r\n";

    #[test]
    fn gstreamer_sdp_parses() {
        let sdp = Sdp::parse(GST).unwrap();
        assert_eq!(sdp.control.as_deref(), Some("*"));
        assert_eq!(sdp.media.len(), 2);
        let v = &sdp.media[0];
        assert_eq!(v.codec, Some(RtpCodec::H264));
        assert_eq!(v.clock_rate, 90_000);
        assert_eq!(v.fmtp("packetization-mode"), Some("1"));
        assert!(v.fmtp("sprop-parameter-sets").unwrap().starts_with("Z2QAH"));
        assert_eq!(v.control.as_deref(), Some("stream=0"));
        let a = &sdp.media[1];
        assert_eq!(a.codec, Some(RtpCodec::Aac));
        assert_eq!((a.clock_rate, a.channels), (48_000, 2));
        assert_eq!(a.fmtp("sizelength"), Some("13"));
        assert_eq!(a.fmtp("config"), Some("1190"));
        assert_eq!(
            control_url("rtsp://h:8554/cam", a.control.as_deref()),
            "rtsp://h:8554/cam/stream=1"
        );
        assert_eq!(
            control_url("rtsp://h/cam/", Some("rtsp://o/x")),
            "rtsp://o/x"
        );
        assert_eq!(control_url("rtsp://h/cam", Some("*")), "rtsp://h/cam");
    }

    #[test]
    fn unknown_codecs_and_garbage() {
        let sdp =
            Sdp::parse("m=video 0 RTP/AVP 26\r\nm=audio 0 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n")
                .unwrap();
        assert_eq!(sdp.media.len(), 2);
        assert!(sdp.media.iter().all(|m| m.codec.is_none()));
        assert!(Sdp::parse("v=0\r\n").is_err());
        assert!(Sdp::parse("m=video\r\n").is_err());
        let many = "m=video 0 RTP/AVP 96\r\n".repeat(100);
        assert_eq!(Sdp::parse(&many).unwrap().media.len(), MAX_MEDIA);
    }
}
