use super::*;
use crate::rtmp::flv::tests::{aac_track, h264_track, h265_track};

/// The boxes at one level: (type, body).
fn boxes(mut data: &[u8]) -> Vec<([u8; 4], &[u8])> {
    let mut out = Vec::new();
    while data.len() >= 8 {
        let size = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
        assert!(
            size >= 8 && size <= data.len(),
            "box size {size} of {}",
            data.len()
        );
        let kind = [data[4], data[5], data[6], data[7]];
        out.push((kind, &data[8..size]));
        data = &data[size..];
    }
    assert!(data.is_empty(), "trailing bytes");
    out
}

fn child<'a>(body: &'a [u8], kind: &[u8; 4]) -> &'a [u8] {
    boxes(body)
        .into_iter()
        .find(|(k, _)| k == kind)
        .map(|(_, b)| b)
        .unwrap_or_else(|| panic!("no {}", String::from_utf8_lossy(kind)))
}

fn stsd_entry(init: &[u8]) -> ([u8; 4], Vec<u8>) {
    let top = boxes(init);
    assert_eq!(&top[0].0, b"ftyp");
    let moov = top[1].1;
    let trak = child(moov, b"trak");
    let stbl = child(child(child(trak, b"mdia"), b"minf"), b"stbl");
    let stsd = child(stbl, b"stsd");
    let entries = boxes(&stsd[8..]);
    (entries[0].0, entries[0].1.to_vec())
}

#[test]
fn init_sections_carry_the_decoder_configuration() {
    for (track, kind, config_box, at) in [
        (h264_track(), b"avc1", b"avcC", 78),
        (h265_track(), b"hvc1", b"hvcC", 78),
        (aac_track(), b"mp4a", b"esds", 28),
    ] {
        let mut init = Vec::new();
        write_init(&track, 1, &mut init).unwrap();
        let (k, body) = stsd_entry(&init);
        assert_eq!(&k, kind);
        let inner = boxes(&body[at..]);
        assert_eq!(&inner[0].0, config_box);
    }
    // MP3 has no CMAF mapping here.
    let mut t = aac_track();
    t.codec = Codec::Mp3;
    assert!(write_init(&t, 1, &mut Vec::new()).is_err());
}

#[test]
fn codecs_strings() {
    assert_eq!(codecs_string(&h264_track()).as_deref(), Some("avc1.64001e"));
    assert_eq!(codecs_string(&aac_track()).as_deref(), Some("mp4a.40.2"));
    assert_eq!(
        codecs_string(&h265_track()).as_deref(),
        Some("hvc1.1.6.L60.90")
    );
}

#[test]
fn a_fragment_points_its_samples_at_the_mdat() {
    let samples = [
        Sample {
            duration: 3000,
            size: 5,
            flags: SYNC_SAMPLE,
            cts_offset: 6000,
        },
        Sample {
            duration: 3000,
            size: 3,
            flags: NON_SYNC_SAMPLE,
            cts_offset: 0,
        },
    ];
    let mut out = Vec::new();
    write_fragment(&mut out, 7, 1, 90_000, &samples, &[b"abcde", b"fgh"]);
    let top = boxes(&out);
    assert_eq!(&top[0].0, b"moof");
    assert_eq!(&top[1].0, b"mdat");
    assert_eq!(top[1].1, b"abcdefgh");
    let traf = child(top[0].1, b"traf");
    let tfdt = child(traf, b"tfdt");
    assert_eq!(u64::from_be_bytes(tfdt[4..12].try_into().unwrap()), 90_000);
    let trun = child(traf, b"trun");
    let count = u32::from_be_bytes(trun[4..8].try_into().unwrap());
    let offset = u32::from_be_bytes(trun[8..12].try_into().unwrap()) as usize;
    assert_eq!(count, 2);
    // From the start of the moof to the first sample byte.
    assert_eq!(&out[offset..offset + 5], b"abcde");
    let mfhd = child(top[0].1, b"mfhd");
    assert_eq!(u32::from_be_bytes(mfhd[4..8].try_into().unwrap()), 7);
}
