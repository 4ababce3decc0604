use super::*;
use crate::media::{AudioParams, Codec, CodecConfig, VideoParams};

fn bx(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut o = ((body.len() + 8) as u32).to_be_bytes().to_vec();
    o.extend_from_slice(kind);
    o.extend_from_slice(body);
    o
}

fn full(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 4];
    b.extend_from_slice(body);
    bx(kind, &b)
}

fn u32s(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// An init segment kiln's fMP4 writer makes (real stsd boxes) with its
/// empty sample tables replaced by these.
fn moov_with(track: &Track, stbl_tables: &[u8]) -> Vec<u8> {
    let mut init = Vec::new();
    crate::fmp4::write_init(track, 1, &mut init).unwrap();
    // Find moov, then stsd inside it; rebuild stbl as stsd + our tables.
    let find = |data: &[u8], kind: &[u8; 4]| -> (usize, usize) {
        let i = data.windows(4).position(|w| w == kind).unwrap() - 4;
        let len = u32::from_be_bytes(data[i..i + 4].try_into().unwrap()) as usize;
        (i, len)
    };
    let (si, slen) = find(&init, b"stsd");
    let stsd = init[si..si + slen].to_vec();
    let mut stbl_body = stsd;
    stbl_body.extend_from_slice(stbl_tables);
    let stbl = bx(b"stbl", &stbl_body);
    let (bi, blen) = find(&init, b"stbl");
    let mut out = init[..bi].to_vec();
    out.extend_from_slice(&stbl);
    out.extend_from_slice(&init[bi + blen..]);
    // Sizes of the boxes around stbl changed: rebuild by fixing each
    // enclosing box's length (minf, mdia, trak, moov).
    let delta = stbl.len() as i64 - blen as i64;
    for kind in [b"minf", b"mdia", b"trak", b"moov"] {
        let i = out.windows(4).position(|w| w == kind).unwrap() - 4;
        let len = u32::from_be_bytes(out[i..i + 4].try_into().unwrap()) as i64 + delta;
        out[i..i + 4].copy_from_slice(&(len as u32).to_be_bytes());
    }
    let (mi, mlen) = find(&out, b"moov");
    out[mi + 8..mi + mlen].to_vec()
}

fn h264() -> Track {
    Track {
        id: 1,
        codec: Codec::H264,
        config: CodecConfig::H264 {
            sps: vec![bytes::Bytes::from_static(&[0x67, 0x64, 0, 0x1f, 0xac])],
            pps: vec![bytes::Bytes::from_static(&[0x68, 0xeb])],
        },
        video: Some(VideoParams {
            width: 640,
            height: 360,
            framerate: 0.0,
        }),
        audio: None,
        bitrate: 0,
        label: Default::default(),
    }
}

#[test]
fn sample_tables_give_offsets_times_and_keyframes() {
    // 5 samples in 2 chunks (3 + 2), 3000 ticks each at 90 kHz, sample 4
    // a sync sample besides the first, composition offsets on 2 and 3.
    let mut tables = Vec::new();
    tables.extend(full(b"stts", &u32s(&[1, 5, 3000])));
    tables.extend(full(b"ctts", &u32s(&[3, 1, 0, 2, 6000, 2, 0])));
    tables.extend(full(b"stsc", &u32s(&[2, 1, 3, 1, 2, 2, 1])));
    tables.extend(full(b"stsz", &u32s(&[0, 5, 10, 20, 30, 40, 50])));
    tables.extend(full(b"stco", &u32s(&[2, 1000, 5000])));
    tables.extend(full(b"stss", &u32s(&[2, 1, 4])));
    let moov = moov_with(&h264(), &tables);
    let movie = parse_moov(&moov).unwrap();
    assert_eq!(movie.tracks.len(), 1);
    let t = &movie.tracks[0];
    assert_eq!(t.track.codec, Codec::H264);
    assert_eq!(t.length_size, 4);
    let offsets: Vec<u64> = t.samples.iter().map(|s| s.offset).collect();
    assert_eq!(offsets, [1000, 1010, 1030, 5000, 5040]);
    let sync: Vec<bool> = t.samples.iter().map(|s| s.sync).collect();
    assert_eq!(sync, [true, false, false, true, false]);
    assert_eq!(t.samples[1].cts, 6000);
    assert_eq!(
        t.ticks(t.samples[4].dts),
        4 * 3000 * 90_000 / i64::from(t.timescale)
    );
    // Playing from 3.5 sample-times in starts at the sync sample before.
    let at_ms = t.ticks(t.samples[3].dts + 1500) / 90;
    let order = play_order(&movie, at_ms);
    assert_eq!(order.first(), Some(&(0, 3)));
}

#[test]
fn aac_tracks_read_their_config() {
    let aac = Track {
        id: 2,
        codec: Codec::Aac,
        config: CodecConfig::Aac {
            asc: bytes::Bytes::from_static(&[0x12, 0x10]),
        },
        video: None,
        audio: Some(AudioParams {
            sample_rate: 44_100,
            channels: 2,
        }),
        bitrate: 0,
        label: Default::default(),
    };
    let mut tables = Vec::new();
    tables.extend(full(b"stts", &u32s(&[1, 2, 1024])));
    tables.extend(full(b"stsc", &u32s(&[1, 1, 2, 1])));
    tables.extend(full(b"stsz", &u32s(&[7, 2])));
    tables.extend(full(b"stco", &u32s(&[1, 64])));
    let movie = parse_moov(&moov_with(&aac, &tables)).unwrap();
    let t = &movie.tracks[0];
    assert_eq!(t.track.codec, Codec::Aac);
    assert_eq!(t.track.config, aac.config);
    assert_eq!(t.samples.len(), 2);
    assert_eq!(t.samples[1].offset, 71);
}

#[test]
fn lies_are_errors_not_panics() {
    // A count larger than its box.
    let mut tables = Vec::new();
    tables.extend(full(b"stts", &u32s(&[1_000_000, 5, 3000])));
    tables.extend(full(b"stsc", &u32s(&[1, 1, 1, 1])));
    tables.extend(full(b"stsz", &u32s(&[0, 1, 10])));
    tables.extend(full(b"stco", &u32s(&[1, 0])));
    assert_eq!(
        parse_moov(&moov_with(&h264(), &tables)).unwrap_err(),
        Mp4Error::Truncated("stts")
    );
    // Sample sizes for fewer samples than stsz says.
    let mut tables = Vec::new();
    tables.extend(full(b"stts", &u32s(&[0])));
    tables.extend(full(b"stsc", &u32s(&[1, 1, 1, 1])));
    tables.extend(full(b"stsz", &u32s(&[0, 3, 10])));
    tables.extend(full(b"stco", &u32s(&[1, 0])));
    assert!(parse_moov(&moov_with(&h264(), &tables)).is_err());
    assert_eq!(parse_moov(&[]).unwrap_err(), Mp4Error::NoTracks);
    // Every truncation of a good moov, and bytes flipped: no panic.
    let mut tables = Vec::new();
    tables.extend(full(b"stts", &u32s(&[1, 2, 3000])));
    tables.extend(full(b"stsc", &u32s(&[1, 1, 2, 1])));
    tables.extend(full(b"stsz", &u32s(&[0, 2, 5, 5])));
    tables.extend(full(b"stco", &u32s(&[1, 0])));
    let moov = moov_with(&h264(), &tables);
    for n in 0..moov.len() {
        let _ = parse_moov(&moov[..n]);
        let mut m = moov.clone();
        m[n] ^= 0xff;
        let _ = parse_moov(&m);
    }
}
