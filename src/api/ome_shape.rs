//! Applications and output profiles in OME's JSON, both ways.
//!
//! In: what OME's own `GET .../apps/{app}` returns must be accepted as a
//! body (DECISIONS section 8): numbers and booleans written as strings
//! (`"segmentCount": "10"`, `"bypass": "true"`), `crossDomains` as
//! `{"urls": [...]}`, and elements OME knows that kiln does not use
//! (`providers.ovt`, `publishers.thumbnail`, `outputProfiles.hwaccels`,
//! ...), which are dropped with one WARN each, as the config file's are.
//! Anything else unknown is still refused by the typed structs.
//!
//! Out: [`present`] writes a value as OME's GET does: every setting as a
//! string, `crossDomains` as `{"urls": [...]}`.

use serde_json::{Map, Value};

/// Settings whose value is a boolean in kiln's structs.
const BOOL_KEYS: &[&str] = &[
    "bypass",
    "blockDuplicateStreamName",
    "rtx",
    "enable",
    "eventPlaylistType",
];

/// Settings whose value is a number in kiln's structs.
const NUMBER_KEYS: &[&str] = &[
    "timeout",
    "chunkDuration",
    "partHoldBack",
    "segmentDuration",
    "segmentCount",
    "firstSegmentTimeout",
    "masterPlaylistMaxAge",
    "chunklistMaxAge",
    "chunklistWithDirectivesMaxAge",
    "segmentMaxAge",
    "partialSegmentMaxAge",
    "maxDuration",
];

/// Elements OME knows and kiln does not use, by the object they are in
/// (the last key of its path; `*` any), as OME's GET names them.
const IGNORED: &[(&str, &str)] = &[
    ("providers", "ovt"),
    ("providers", "rtspPull"),
    ("providers", "rtsp"),
    ("publishers", "ovt"),
    ("publishers", "thumbnail"),
    ("publishers", "appWorkerCount"),
    ("publishers", "streamWorkerCount"),
    ("publishers", "dash"),
    ("publishers", "lldash"),
    ("outputProfiles", "hwaccels"),
    ("outputProfiles", "hardwareAcceleration"),
    ("outputProfiles", "decodes"),
    ("outputProfiles", "mediaOptions"),
    ("outputProfile", "playlists"),
    ("outputProfile", "playlist"),
    ("encodes", "images"),
    ("llhls", "originMode"),
    ("llhls", "createDefaultPlaylist"),
    ("llhls", "drm"),
    ("llhls", "defaultQueryString"),
    ("hls", "createDefaultPlaylist"),
    ("hls", "originMode"),
    ("webrtc", "jitterBuffer"),
    ("webrtc", "ulpfec"),
    ("webrtc", "createDefaultPlaylist"),
    ("webrtc", "playoutDelay"),
    ("webrtc", "bandwidthEstimation"),
    ("webrtc", "crossDomains"),
];

/// Makes an application body (OME's or kiln's) kiln's shape, in place;
/// returns the dotted paths of the OME elements it dropped.
pub(super) fn normalize_app(value: &mut Value) -> Vec<String> {
    let mut dropped = Vec::new();
    normalize(value, "", "", &mut dropped);
    dropped
}

/// The same for one output profile (`POST/PATCH .../outputProfiles`).
pub(super) fn normalize_profile(value: &mut Value) -> Vec<String> {
    let mut dropped = Vec::new();
    normalize(value, "outputProfile", "", &mut dropped);
    dropped
}

fn normalize(value: &mut Value, key: &str, path: &str, dropped: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            // The entries of an `outputProfile` array are named by it.
            let here = key;
            let names: Vec<String> = map.keys().cloned().collect();
            for name in names {
                let child = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                let ignored = IGNORED
                    .iter()
                    .any(|(parent, k)| (*parent == here || *parent == "*") && *k == name);
                if ignored {
                    map.remove(&name);
                    dropped.push(child);
                    continue;
                }
                if let Some(v) = map.get_mut(&name) {
                    coerce(&name, v);
                    normalize(v, &name, &child, dropped);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                normalize(item, key, &format!("{path}[{i}]"), dropped);
            }
        }
        _ => {}
    }
}

/// OME's string forms of a setting made the JSON type kiln reads, and
/// OME's `crossDomains` object made kiln's list.
fn coerce(key: &str, v: &mut Value) {
    if key == "crossDomains" {
        if let Some(urls) = v.get("urls").or_else(|| v.get("url")).cloned() {
            *v = match urls {
                Value::String(s) => Value::Array(vec![Value::String(s)]),
                other => other,
            };
        }
        return;
    }
    let Value::String(s) = v else {
        return;
    };
    let t = s.trim();
    if BOOL_KEYS.contains(&key) {
        if t.eq_ignore_ascii_case("true") {
            *v = Value::Bool(true);
        } else if t.eq_ignore_ascii_case("false") {
            *v = Value::Bool(false);
        }
    } else if NUMBER_KEYS.contains(&key) {
        if let Ok(n) = t.parse::<i64>() {
            *v = Value::from(n);
        } else if let Some(n) = t.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
            *v = Value::Number(n);
        }
    }
}

/// A value as OME's GET shows settings: numbers and booleans as strings,
/// `crossDomains` lists as `{"urls": [...]}`.
pub(super) fn present(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if k == "crossDomains" {
                    if let Value::Array(urls) = v {
                        let mut o = Map::new();
                        o.insert("urls".into(), Value::Array(std::mem::take(urls)));
                        *v = Value::Object(o);
                        continue;
                    }
                }
                present(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(present),
        Value::Bool(b) => *value = Value::String(b.to_string()),
        Value::Number(n) => *value = Value::String(n.to_string()),
        _ => {}
    }
}

/// RFC 7396 merge of `patch` into `target`: objects merge key by key,
/// `null` removes, anything else replaces. OME merges a PATCH of an
/// application into it this way (`{"providers":{"rtmp":{}}}` keeps SRT).
pub(super) fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    merge(t.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn omes_own_get_answer_reads_as_kilns_shape() {
        let mut v = json!({
            "name": "app", "type": "live", "dynamic": false,
            "outputProfiles": {"hwaccels": {"decoder": {"enable": "false"}},
                "outputProfile": [{"name": "p", "outputStreamName": "${OriginStreamName}",
                    "playlists": [{"name": "default"}],
                    "encodes": {"videos": [{"bypass": "true", "name": "v"}]}}]},
            "providers": {"ovt": {}, "rtmp": {"blockDuplicateStreamName": "false"}, "rtspPull": {},
                          "webrtc": {"timeout": "30000", "crossDomains": {"urls": ["*"]}}},
            "publishers": {"appWorkerCount": "1", "thumbnail": {},
                "llhls": {"segmentCount": "10", "chunkDuration": "0.5", "originMode": "true",
                          "crossDomains": {"urls": ["*"]}}}
        });
        let dropped = normalize_app(&mut v);
        assert_eq!(
            dropped,
            [
                "outputProfiles.hwaccels",
                "outputProfiles.outputProfile[0].playlists",
                "providers.ovt",
                "providers.rtspPull",
                "providers.webrtc.crossDomains",
                "publishers.appWorkerCount",
                "publishers.llhls.originMode",
                "publishers.thumbnail"
            ]
        );
        assert_eq!(
            v["outputProfiles"]["outputProfile"][0]["encodes"]["videos"][0]["bypass"],
            true
        );
        assert_eq!(v["providers"]["rtmp"]["blockDuplicateStreamName"], false);
        assert_eq!(v["providers"]["webrtc"]["timeout"], 30000);
        assert_eq!(v["publishers"]["llhls"]["segmentCount"], 10);
        assert_eq!(v["publishers"]["llhls"]["chunkDuration"], 0.5);
        assert_eq!(v["publishers"]["llhls"]["crossDomains"], json!(["*"]));
        // A name that looks like a number stays a string.
        let mut p = json!({"name": "10", "encodes": {"audios": [{"name": "1", "bypass": true}]}});
        normalize_profile(&mut p);
        assert_eq!(p["name"], "10");
    }

    #[test]
    fn settings_are_shown_as_strings_and_patches_merge() {
        let mut v = json!({"llhls": {"segmentCount": 10, "crossDomains": ["*"], "x": true}});
        present(&mut v);
        assert_eq!(
            v,
            json!({"llhls": {"segmentCount": "10", "crossDomains": {"urls": ["*"]}, "x": "true"}})
        );
        let mut app = json!({"providers": {"rtmp": {}, "srt": {}}, "name": "a"});
        merge(
            &mut app,
            json!({"providers": {"rtmp": {"blockDuplicateStreamName": false}}}),
        );
        assert_eq!(
            app,
            json!({"providers": {"rtmp": {"blockDuplicateStreamName": false}, "srt": {}}, "name": "a"})
        );
        merge(&mut app, json!({"providers": {"srt": null}}));
        assert_eq!(
            app["providers"],
            json!({"rtmp": {"blockDuplicateStreamName": false}})
        );
    }
}
