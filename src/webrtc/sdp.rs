//! Touches to the SDP text str0m writes.

/// An answer's refused m-sections made valid SDP. str0m answers an offered
/// kind it has no codec for (audio of a video-only stream, video of an
/// H.265 one) with port 0 and an empty format list, which RFC 8866's
/// grammar does not allow and strict parsers (str0m's own) refuse. Each
/// such section gets the offer's first format for that m-line, with its
/// `a=rtpmap` (RFC 8829 section 5.3.1 keeps the offered formats of a
/// rejected section), and `a=inactive`. Sections are paired by order, as
/// RFC 3264 pairs them. str0m writes the ICE candidates in the first
/// section; when that one is refused they move to the first accepted
/// section (the BUNDLE tag): Firefox reads no candidate from a refused
/// section and would have none at all.
pub fn complete_refused_sections(answer: &str, offer: &str) -> String {
    // Per offered m-section: its first format and that format's rtpmap.
    let mut offered: Vec<(&str, Option<&str>)> = Vec::new();
    for line in offer.lines() {
        if let Some(m) = line.strip_prefix("m=") {
            offered.push((m.split_whitespace().nth(3).unwrap_or(""), None));
        } else if let (Some(a), Some((fmt, map))) =
            (line.strip_prefix("a=rtpmap:"), offered.last_mut())
        {
            if map.is_none() && a.split(' ').next() == Some(*fmt) {
                *map = Some(line);
            }
        }
    }
    let eol = if answer.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let mut out = String::with_capacity(answer.len() + 64);
    let mut section = None;
    // The rtpmap still to write in the current (refused) section.
    let mut owed: Option<&str> = None;
    let mut refused = false;
    // Candidates of refused sections, for the next accepted one (written
    // before its first attribute, where RFC 8866 puts attributes).
    let mut candidates: Vec<&str> = Vec::new();
    let mut place_candidates = false;
    for line in answer.lines() {
        if place_candidates && line.starts_with("a=") {
            for c in candidates.drain(..) {
                out.push_str(c);
                out.push_str(eol);
            }
            place_candidates = false;
        }
        if refused && (line.starts_with("a=candidate:") || line == "a=end-of-candidates") {
            candidates.push(line);
            continue;
        }
        if let Some(m) = line.strip_prefix("m=") {
            if let Some(map) = owed.take() {
                out.push_str(map);
                out.push_str(eol);
            }
            let i = section.map_or(0, |i| i + 1);
            section = Some(i);
            let fields: Vec<&str> = m.split_whitespace().collect();
            refused = fields.get(1) == Some(&"0");
            place_candidates = !refused && !candidates.is_empty();
            if let (true, 3, Some(&(fmt, map))) = (refused, fields.len(), offered.get(i)) {
                if !fmt.is_empty() {
                    out.push_str(&format!("m={} 0 {} {fmt}{eol}", fields[0], fields[2]));
                    owed = map;
                    continue;
                }
            }
        } else if refused && matches!(line, "a=sendonly" | "a=recvonly" | "a=sendrecv") {
            out.push_str("a=inactive");
            out.push_str(eol);
            continue;
        }
        out.push_str(line);
        out.push_str(eol);
    }
    if let Some(map) = owed {
        out.push_str(map);
        out.push_str(eol);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_section_keeps_a_format_and_goes_inactive() {
        let offer = "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96 97\r\na=mid:0\r\na=rtpmap:96 H264/90000\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111 63\r\na=mid:1\r\na=rtpmap:63 red/48000/2\r\na=rtpmap:111 opus/48000/2\r\n";
        let answer = "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:0\r\na=sendonly\r\nm=audio 0 UDP/TLS/RTP/SAVPF \r\na=mid:1\r\na=sendonly\r\n";
        assert_eq!(
            complete_refused_sections(answer, offer),
            "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:0\r\na=sendonly\r\nm=audio 0 UDP/TLS/RTP/SAVPF 111\r\na=mid:1\r\na=inactive\r\na=rtpmap:111 opus/48000/2\r\n"
        );
        // The first section refused: its candidates go to the accepted
        // one, before its attributes.
        let answer = "v=0\r\na=group:BUNDLE 1\r\nm=video 0 UDP/TLS/RTP/SAVPF \r\nc=IN IP4 0.0.0.0\r\na=candidate:1 1 udp 2130706175 10.0.0.1 10000 typ host\r\na=end-of-candidates\r\na=mid:0\r\na=sendonly\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=mid:1\r\na=sendonly\r\n";
        assert_eq!(
            complete_refused_sections(answer, offer),
            "v=0\r\na=group:BUNDLE 1\r\nm=video 0 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=inactive\r\na=rtpmap:96 H264/90000\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=candidate:1 1 udp 2130706175 10.0.0.1 10000 typ host\r\na=end-of-candidates\r\na=mid:1\r\na=sendonly\r\n"
        );
        // Nothing refused: the answer as it was.
        let whole = "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=sendonly\r\n";
        assert_eq!(complete_refused_sections(whole, offer), whole);
    }
}
