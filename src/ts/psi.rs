//! Program Specific Information: the PAT (program association table) and the
//! PMT (program map table) of ISO/IEC 13818-1, parsed and built as sections,
//! plus the [`SectionAssembler`] that reassembles sections from TS packet
//! payloads (pointer_field, sections spanning packets, several sections in one
//! packet, 0xFF stuffing).
//!
//! Elementary stream types kiln understands are mapped to [`EsKind`]:
//! 0x1B H.264, 0x24 H.265, 0x0F AAC (ADTS), 0x03/0x04 MPEG audio (kiln relays
//! layer III only), and 0x06 private PES carrying Opus (registration
//! descriptor 'Opus' plus DVB extension descriptor 0x7F / tag 0x80 with the
//! channel configuration, the mapping ffmpeg uses). Everything else is
//! [`EsKind::Unknown`] and ignored by the demuxer.
//!
//! This module is not the packet layer (sync, continuity counters, adaptation
//! fields): see `demux` and `mux`. It knows no other tables (no SDT/NIT/EIT).

use std::fmt;

use super::crc::crc32_mpeg2;

/// table_id of a PAT section.
pub const TABLE_ID_PAT: u8 = 0x00;
/// table_id of a PMT section.
pub const TABLE_ID_PMT: u8 = 0x02;

/// stream_type: MPEG-1 audio.
pub const STREAM_TYPE_MPEG1_AUDIO: u8 = 0x03;
/// stream_type: MPEG-2 audio.
pub const STREAM_TYPE_MPEG2_AUDIO: u8 = 0x04;
/// stream_type: PES private data (Opus when registered as such).
pub const STREAM_TYPE_PRIVATE_PES: u8 = 0x06;
/// stream_type: AAC with ADTS transport syntax.
pub const STREAM_TYPE_AAC_ADTS: u8 = 0x0F;
/// stream_type: H.264 / AVC.
pub const STREAM_TYPE_H264: u8 = 0x1B;
/// stream_type: H.265 / HEVC.
pub const STREAM_TYPE_H265: u8 = 0x24;

/// Largest section_length allowed for PAT and PMT (the section is at most
/// 1024 bytes including the 3-byte header).
pub const MAX_PSI_SECTION_LENGTH: usize = 1021;

/// Descriptor tag of the registration descriptor.
const DESCRIPTOR_REGISTRATION: u8 = 0x05;
/// Descriptor tag of the DVB extension descriptor.
const DESCRIPTOR_DVB_EXTENSION: u8 = 0x7F;
/// Extension descriptor tag of the Opus channel configuration.
const DVB_EXTENSION_OPUS: u8 = 0x80;

/// Why a section was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsiError {
    /// Shorter than its header or its section_length says.
    Truncated,
    /// section_length beyond the PSI limit.
    TooLong,
    /// Not the table this parser reads.
    WrongTableId(u8),
    /// section_syntax_indicator is 0.
    NoSyntax,
    /// The CRC-32 does not match.
    Crc,
    /// A descriptor or stream loop runs past its end.
    Malformed,
}

impl fmt::Display for PsiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PsiError::Truncated => write!(f, "PSI section truncated"),
            PsiError::TooLong => write!(f, "PSI section longer than 1024 bytes"),
            PsiError::WrongTableId(id) => write!(f, "unexpected table_id 0x{id:02x}"),
            PsiError::NoSyntax => write!(f, "PSI section without section syntax"),
            PsiError::Crc => write!(f, "PSI section CRC mismatch"),
            PsiError::Malformed => write!(f, "malformed PSI section"),
        }
    }
}

impl std::error::Error for PsiError {}

/// The fields of the long section header common to PAT and PMT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SectionHeader {
    pub table_id: u8,
    /// transport_stream_id (PAT) or program_number (PMT).
    pub table_id_extension: u16,
    pub version: u8,
    pub current_next: bool,
    pub section_number: u8,
    pub last_section_number: u8,
}

/// Checks length, syntax flag and CRC of a long-form section and returns its
/// header and the body between the header and the CRC.
pub fn parse_section(section: &[u8]) -> Result<(SectionHeader, &[u8]), PsiError> {
    if section.len() < 3 {
        return Err(PsiError::Truncated);
    }
    let section_length = (usize::from(section[1] & 0x0F) << 8) | usize::from(section[2]);
    if section_length > MAX_PSI_SECTION_LENGTH {
        return Err(PsiError::TooLong);
    }
    if section[1] & 0x80 == 0 {
        return Err(PsiError::NoSyntax);
    }
    // 5 bytes of long header + 4 bytes of CRC at least.
    if section_length < 9 || section.len() < 3 + section_length {
        return Err(PsiError::Truncated);
    }
    let section = &section[..3 + section_length];
    if crc32_mpeg2(section) != 0 {
        return Err(PsiError::Crc);
    }
    let header = SectionHeader {
        table_id: section[0],
        table_id_extension: u16::from_be_bytes([section[3], section[4]]),
        version: (section[5] >> 1) & 0x1F,
        current_next: section[5] & 0x01 != 0,
        section_number: section[6],
        last_section_number: section[7],
    };
    Ok((header, &section[8..section.len() - 4]))
}

/// One entry of a PAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatProgram {
    /// 0 means the entry points at the network PID (NIT), not a PMT.
    pub program_number: u16,
    /// The PMT PID (or network PID when program_number is 0).
    pub pid: u16,
}

/// One PAT section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pat {
    pub header: SectionHeader,
    pub programs: Vec<PatProgram>,
}

impl Pat {
    /// The first real program (program_number != 0), if any.
    pub fn first_program(&self) -> Option<PatProgram> {
        self.programs
            .iter()
            .copied()
            .find(|p| p.program_number != 0)
    }
}

/// Parses one PAT section (table_id 0, CRC checked).
pub fn parse_pat(section: &[u8]) -> Result<Pat, PsiError> {
    let (header, body) = parse_section(section)?;
    if header.table_id != TABLE_ID_PAT {
        return Err(PsiError::WrongTableId(header.table_id));
    }
    if body.len() % 4 != 0 {
        return Err(PsiError::Malformed);
    }
    let programs = body
        .chunks_exact(4)
        .map(|c| PatProgram {
            program_number: u16::from_be_bytes([c[0], c[1]]),
            pid: u16::from_be_bytes([c[2] & 0x1F, c[3]]),
        })
        .collect();
    Ok(Pat { header, programs })
}

/// What an elementary stream carries, as far as kiln cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EsKind {
    H264,
    H265,
    Aac,
    /// MPEG-1/2 audio (stream_type 0x03/0x04); kiln relays layer III.
    MpegAudio,
    /// Opus with its channel count from the extension descriptor (2 when
    /// absent).
    Opus {
        channels: u8,
    },
    /// Anything else: ignored.
    Unknown,
}

impl EsKind {
    /// Classifies a PMT entry from its stream_type and ES_info descriptors.
    pub fn classify(stream_type: u8, es_info: &[u8]) -> EsKind {
        match stream_type {
            STREAM_TYPE_H264 => EsKind::H264,
            STREAM_TYPE_H265 => EsKind::H265,
            STREAM_TYPE_AAC_ADTS => EsKind::Aac,
            STREAM_TYPE_MPEG1_AUDIO | STREAM_TYPE_MPEG2_AUDIO => EsKind::MpegAudio,
            STREAM_TYPE_PRIVATE_PES => {
                let mut opus = false;
                let mut channels = 2u8;
                for (tag, body) in Descriptors(es_info) {
                    match tag {
                        DESCRIPTOR_REGISTRATION if body.get(..4) == Some(b"Opus") => opus = true,
                        DESCRIPTOR_DVB_EXTENSION
                            if body.first() == Some(&DVB_EXTENSION_OPUS) && body.len() >= 2 =>
                        {
                            channels = opus_channels_from_code(body[1]);
                        }
                        _ => {}
                    }
                }
                if opus {
                    EsKind::Opus { channels }
                } else {
                    EsKind::Unknown
                }
            }
            _ => EsKind::Unknown,
        }
    }
}

/// channel_config_code of the Opus extension descriptor -> channel count.
/// 0 is dual mono (2 channels), 1..=8 are that many channels; the extended
/// codes (0x80 and up) are mapped to their channel count when plausible.
fn opus_channels_from_code(code: u8) -> u8 {
    match code {
        0 => 2,
        1..=8 => code,
        0x81..=0x88 => code & 0x0F,
        _ => 2,
    }
}

/// Iterates over (tag, body) of a descriptor loop; stops at the first
/// descriptor that runs past the end.
struct Descriptors<'a>(&'a [u8]);

impl<'a> Iterator for Descriptors<'a> {
    type Item = (u8, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let tag = *self.0.first()?;
        let len = usize::from(*self.0.get(1)?);
        let body = self.0.get(2..2 + len)?;
        self.0 = &self.0[2 + len..];
        Some((tag, body))
    }
}

/// One elementary stream entry of a PMT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmtStream {
    pub stream_type: u8,
    pub pid: u16,
    /// The raw ES_info descriptor loop.
    pub es_info: Vec<u8>,
    pub kind: EsKind,
}

/// One PMT section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pmt {
    pub header: SectionHeader,
    pub pcr_pid: u16,
    pub streams: Vec<PmtStream>,
}

impl Pmt {
    pub fn program_number(&self) -> u16 {
        self.header.table_id_extension
    }
}

/// Parses one PMT section (table_id 2, CRC checked).
pub fn parse_pmt(section: &[u8]) -> Result<Pmt, PsiError> {
    let (header, body) = parse_section(section)?;
    if header.table_id != TABLE_ID_PMT {
        return Err(PsiError::WrongTableId(header.table_id));
    }
    if body.len() < 4 {
        return Err(PsiError::Truncated);
    }
    let pcr_pid = u16::from_be_bytes([body[0] & 0x1F, body[1]]);
    let program_info_len = (usize::from(body[2] & 0x0F) << 8) | usize::from(body[3]);
    let mut rest = body
        .get(4 + program_info_len..)
        .ok_or(PsiError::Malformed)?;
    let mut streams = Vec::new();
    while !rest.is_empty() {
        if rest.len() < 5 {
            return Err(PsiError::Malformed);
        }
        let stream_type = rest[0];
        let pid = u16::from_be_bytes([rest[1] & 0x1F, rest[2]]);
        let es_info_len = (usize::from(rest[3] & 0x0F) << 8) | usize::from(rest[4]);
        let es_info = rest.get(5..5 + es_info_len).ok_or(PsiError::Malformed)?;
        streams.push(PmtStream {
            stream_type,
            pid,
            es_info: es_info.to_vec(),
            kind: EsKind::classify(stream_type, es_info),
        });
        rest = &rest[5 + es_info_len..];
    }
    Ok(Pmt {
        header,
        pcr_pid,
        streams,
    })
}

/// An ISO_639_language_descriptor for a track's language, when it is an
/// ISO 639-2 code (three letters: an RFC 5646 tag such as `en` or `pt-BR`
/// has no place in it).
pub fn language_descriptor(language: Option<crate::media::Language>) -> Option<[u8; 6]> {
    let code = language?;
    let code = code.as_str().as_bytes();
    let [a, b, c] = <[u8; 3]>::try_from(code).ok()?;
    Some([0x0A, 4, a, b, c, 0])
}

/// The language of an ES_info descriptor loop: the first code of its
/// ISO_639_language_descriptor (tag 10: three-letter code and audio type,
/// repeated), if it is three letters and not `und` (undetermined).
pub fn language(es_info: &[u8]) -> Option<crate::media::Language> {
    let mut rest = es_info;
    while let [tag, len, tail @ ..] = rest {
        let body = tail.get(..usize::from(*len))?;
        if *tag == 0x0A {
            let code = body.get(..3)?;
            return crate::media::Language::parse(code).filter(|l| l.as_str() != "und");
        }
        rest = &tail[body.len()..];
    }
    None
}

/// Writes the common long header, lets `body` append the payload, then
/// patches section_length and appends the CRC. Appends to `out`.
fn build_section(
    out: &mut Vec<u8>,
    table_id: u8,
    extension: u16,
    version: u8,
    body: impl FnOnce(&mut Vec<u8>),
) {
    let start = out.len();
    out.extend_from_slice(&[table_id, 0, 0]);
    out.extend_from_slice(&extension.to_be_bytes());
    out.push(0xC0 | ((version & 0x1F) << 1) | 0x01);
    out.extend_from_slice(&[0, 0]); // section_number, last_section_number
    body(out);
    // section_length counts everything after itself, CRC included.
    let section_length = out.len() - start - 3 + 4;
    out[start + 1] = 0xB0 | ((section_length >> 8) as u8 & 0x0F);
    out[start + 2] = section_length as u8;
    let crc = crc32_mpeg2(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// Appends a single-section PAT mapping each `(program_number, pmt_pid)`.
pub fn build_pat(
    transport_stream_id: u16,
    version: u8,
    programs: &[PatProgram],
    out: &mut Vec<u8>,
) {
    build_section(out, TABLE_ID_PAT, transport_stream_id, version, |out| {
        for p in programs {
            out.extend_from_slice(&p.program_number.to_be_bytes());
            out.extend_from_slice(&(0xE000 | (p.pid & 0x1FFF)).to_be_bytes());
        }
    });
}

/// Appends a single-section PMT. Each stream's `es_info` is written as is;
/// see [`opus_es_info`] for the Opus descriptors.
pub fn build_pmt(
    program_number: u16,
    version: u8,
    pcr_pid: u16,
    streams: &[PmtStream],
    out: &mut Vec<u8>,
) {
    build_section(out, TABLE_ID_PMT, program_number, version, |out| {
        out.extend_from_slice(&(0xE000 | (pcr_pid & 0x1FFF)).to_be_bytes());
        out.extend_from_slice(&[0xF0, 0x00]); // no program_info
        for s in streams {
            out.push(s.stream_type);
            out.extend_from_slice(&(0xE000 | (s.pid & 0x1FFF)).to_be_bytes());
            let len = s.es_info.len().min(0x3FF);
            out.extend_from_slice(&(0xF000 | len as u16).to_be_bytes());
            out.extend_from_slice(&s.es_info[..len]);
        }
    });
}

/// The ES_info descriptors announcing Opus: registration 'Opus' and the DVB
/// extension descriptor with the channel_config_code (channels 1..=8).
pub fn opus_es_info(channels: u8) -> Vec<u8> {
    let code = channels.clamp(1, 8);
    vec![
        DESCRIPTOR_REGISTRATION,
        4,
        b'O',
        b'p',
        b'u',
        b's',
        DESCRIPTOR_DVB_EXTENSION,
        2,
        DVB_EXTENSION_OPUS,
        code,
    ]
}

/// Largest section the assembler keeps (PSI sections are at most 1024 bytes).
const MAX_SECTION_BYTES: usize = 3 + MAX_PSI_SECTION_LENGTH;

/// Reassembles PSI sections of one PID from TS packet payloads.
#[derive(Debug, Default)]
pub struct SectionAssembler {
    buf: Vec<u8>,
    /// True while `buf` holds the start of a section (or we are between
    /// sections in a packet that may carry more).
    active: bool,
}

impl SectionAssembler {
    pub fn new() -> SectionAssembler {
        SectionAssembler::default()
    }

    /// Forgets a partial section (after packet loss).
    pub fn reset(&mut self) {
        self.buf.clear();
        self.active = false;
    }

    /// Feeds the payload of one TS packet; complete sections (header through
    /// CRC, unchecked) are appended to `sections`.
    pub fn push(&mut self, unit_start: bool, payload: &[u8], sections: &mut Vec<Vec<u8>>) {
        if unit_start {
            let Some((&pointer, rest)) = payload.split_first() else {
                self.reset();
                return;
            };
            let pointer = usize::from(pointer);
            if pointer > rest.len() {
                self.reset();
                return;
            }
            if self.active {
                self.append(&rest[..pointer], sections);
            }
            self.buf.clear();
            self.active = true;
            self.append(&rest[pointer..], sections);
        } else if self.active {
            self.append(payload, sections);
        }
    }

    fn append(&mut self, data: &[u8], sections: &mut Vec<Vec<u8>>) {
        if !self.active {
            return;
        }
        self.buf.extend_from_slice(data);
        loop {
            match self.buf.first() {
                None => return,
                // table_id 0xFF: stuffing up to the end of the packet.
                Some(0xFF) => {
                    self.reset();
                    return;
                }
                Some(_) => {}
            }
            if self.buf.len() < 3 {
                return;
            }
            let total = 3 + ((usize::from(self.buf[1] & 0x0F) << 8) | usize::from(self.buf[2]));
            if total > MAX_SECTION_BYTES {
                self.reset();
                return;
            }
            if self.buf.len() < total {
                return;
            }
            sections.push(self.buf[..total].to_vec());
            self.buf.drain(..total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_pmt() -> Vec<u8> {
        let streams = vec![
            PmtStream {
                stream_type: STREAM_TYPE_H264,
                pid: 0x100,
                es_info: vec![],
                kind: EsKind::H264,
            },
            PmtStream {
                stream_type: STREAM_TYPE_PRIVATE_PES,
                pid: 0x101,
                es_info: opus_es_info(2),
                kind: EsKind::Opus { channels: 2 },
            },
            PmtStream {
                stream_type: 0x81, // AC-3 (ATSC): unknown to kiln
                pid: 0x102,
                es_info: vec![],
                kind: EsKind::Unknown,
            },
        ];
        let mut out = Vec::new();
        build_pmt(1, 3, 0x100, &streams, &mut out);
        out
    }

    #[test]
    fn pat_round_trip() {
        let mut out = Vec::new();
        let programs = [PatProgram {
            program_number: 1,
            pid: 0x1000,
        }];
        build_pat(7, 5, &programs, &mut out);
        let pat = parse_pat(&out).unwrap();
        assert_eq!(pat.header.table_id_extension, 7);
        assert_eq!(pat.header.version, 5);
        assert!(pat.header.current_next);
        assert_eq!(pat.programs, programs);
        assert_eq!(pat.first_program(), Some(programs[0]));
    }

    #[test]
    fn pmt_round_trip() {
        let out = sample_pmt();
        let pmt = parse_pmt(&out).unwrap();
        assert_eq!(pmt.program_number(), 1);
        assert_eq!(pmt.header.version, 3);
        assert_eq!(pmt.pcr_pid, 0x100);
        assert_eq!(pmt.streams.len(), 3);
        assert_eq!(pmt.streams[0].kind, EsKind::H264);
        assert_eq!(pmt.streams[1].kind, EsKind::Opus { channels: 2 });
        assert_eq!(pmt.streams[2].kind, EsKind::Unknown);
    }

    #[test]
    fn ffmpeg_opus_pmt() {
        // The PMT section ffmpeg 5 writes for one stereo Opus stream.
        let section = [
            0x02, 0xb0, 0x1c, 0x00, 0x01, 0xc1, 0x00, 0x00, 0xe1, 0x00, 0xf0, 0x00, 0x06, 0xe1,
            0x00, 0xf0, 0x0a, 0x05, 0x04, 0x4f, 0x70, 0x75, 0x73, 0x7f, 0x02, 0x80, 0x02, 0xa5,
            0xe2, 0xbd, 0x28,
        ];
        let pmt = parse_pmt(&section).unwrap();
        assert_eq!(pmt.streams[0].pid, 0x100);
        assert_eq!(pmt.streams[0].kind, EsKind::Opus { channels: 2 });
        let rebuilt = {
            let mut out = Vec::new();
            build_pmt(1, 0, 0x100, &pmt.streams, &mut out);
            out
        };
        assert_eq!(rebuilt, section);
    }

    #[test]
    fn crc_mismatch_rejected() {
        let mut out = sample_pmt();
        out[10] ^= 1;
        assert_eq!(parse_pmt(&out), Err(PsiError::Crc));
    }

    #[test]
    fn wrong_table() {
        let out = sample_pmt();
        assert_eq!(parse_pat(&out), Err(PsiError::WrongTableId(2)));
    }

    #[test]
    fn assembler_pointer_field_and_multiple_sections() {
        let mut pat = Vec::new();
        build_pat(
            1,
            0,
            &[PatProgram {
                program_number: 1,
                pid: 0x1000,
            }],
            &mut pat,
        );
        let pmt = sample_pmt();
        // Packet 1: the tail of an old section (dropped: we never saw its
        // start), then the PAT and the first 5 bytes of the PMT.
        let mut p1 = vec![3u8, 0xAA, 0xBB, 0xCC];
        p1.extend_from_slice(&pat);
        p1.extend_from_slice(&pmt[..5]);
        // Packet 2: the rest of the PMT, then stuffing.
        let mut p2 = pmt[5..].to_vec();
        p2.extend_from_slice(&[0xFF; 20]);
        let mut asm = SectionAssembler::new();
        let mut sections = Vec::new();
        asm.push(true, &p1, &mut sections);
        assert_eq!(sections, vec![pat.clone()]);
        asm.push(false, &p2, &mut sections);
        assert_eq!(sections, vec![pat.clone(), pmt.clone()]);
        // A continuation packet after stuffing is ignored.
        asm.push(false, &[1, 2, 3], &mut sections);
        assert_eq!(sections.len(), 2);

        // A section completed by the bytes before a pointer_field.
        let mut asm = SectionAssembler::new();
        let mut sections = Vec::new();
        let mut a = vec![0u8];
        a.extend_from_slice(&pmt[..10]);
        asm.push(true, &a, &mut sections);
        let rest = pmt.len() - 10;
        let mut b = vec![rest as u8];
        b.extend_from_slice(&pmt[10..]);
        b.extend_from_slice(&pat);
        asm.push(true, &b, &mut sections);
        assert_eq!(sections, vec![pmt, pat]);
    }

    #[test]
    fn assembler_bad_pointer() {
        let mut asm = SectionAssembler::new();
        let mut sections = Vec::new();
        asm.push(true, &[200, 0, 0], &mut sections);
        asm.push(true, &[], &mut sections);
        assert!(sections.is_empty());
    }

    proptest! {
        #[test]
        fn parsers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..1100)) {
            let _ = parse_pat(&data);
            let _ = parse_pmt(&data);
            let _ = parse_section(&data);
            let _ = EsKind::classify(STREAM_TYPE_PRIVATE_PES, &data);
        }

        #[test]
        fn assembler_never_panics(
            packets in proptest::collection::vec(
                (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..184)), 0..20)
        ) {
            let mut asm = SectionAssembler::new();
            let mut sections = Vec::new();
            for (start, payload) in &packets {
                asm.push(*start, payload, &mut sections);
            }
            for s in &sections {
                prop_assert!(s.len() <= MAX_SECTION_BYTES);
            }
        }

        #[test]
        fn assembler_any_split(cuts in proptest::collection::vec(1usize..60, 1..10)) {
            // PAT + PMT back to back, split into packet payloads at arbitrary
            // points: the first starts a unit with pointer_field 0.
            let mut stream = Vec::new();
            build_pat(1, 0, &[PatProgram { program_number: 1, pid: 0x1000 }], &mut stream);
            let pat_len = stream.len();
            stream.extend_from_slice(&sample_pmt());
            let mut asm = SectionAssembler::new();
            let mut sections = Vec::new();
            let mut pos = 0;
            let mut first = true;
            for cut in cuts.iter().chain(std::iter::repeat(&60)) {
                if pos >= stream.len() { break; }
                let end = (pos + cut).min(stream.len());
                if first {
                    let mut p = vec![0u8];
                    p.extend_from_slice(&stream[pos..end]);
                    asm.push(true, &p, &mut sections);
                    first = false;
                } else {
                    asm.push(false, &stream[pos..end], &mut sections);
                }
                pos = end;
            }
            prop_assert_eq!(sections.len(), 2);
            prop_assert_eq!(&sections[0][..], &stream[..pat_len]);
            prop_assert!(parse_pmt(&sections[1]).is_ok());
        }
    }

    #[test]
    fn the_language_descriptor_names_a_track() {
        // A registration descriptor, then ISO 639 "fre" (audio type 0).
        let es = [
            0x05, 0x04, b'O', b'p', b'u', b's', 0x0A, 0x04, b'f', b'r', b'e', 0,
        ];
        assert_eq!(
            language(&es).map(|l| l.as_str().to_owned()),
            Some("fre".into())
        );
        assert_eq!(language(&es[..6]), None);
        // Overrunning or not letters: none.
        assert_eq!(language(&[0x0A, 0x08, b'f', b'r']), None);
        assert_eq!(language(&[0x0A, 0x04, b'"', b'<', b'>', 0]), None);
    }
}
