//! `<Origins>` / `origins.origin[]` (DECISIONS 12): where a stream that is
//! not live here can be pulled from. An origin's `Location` is a path
//! prefix; a request for `/{app}/{stream}` under it maps to each of its
//! URLs (`host:port/path`, with `Pass.Scheme`) plus the rest of the path.

use crate::state::vhost::VhostSpec;

/// The URLs to pull `/{app}/{stream}` from, per the host's first origin
/// whose `Location` covers it; `None` when none does.
pub fn origin_urls(spec: &VhostSpec, app: &str, stream: &str) -> Option<Vec<String>> {
    let path = format!("/{app}/{stream}");
    spec.origins.as_ref()?.origin.iter().find_map(|o| {
        let location = o.location.trim_end_matches('/');
        let rest = path.strip_prefix(location)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None; // "/ap" does not cover "/app/..."
        }
        let scheme = o.pass.scheme.to_ascii_lowercase();
        let urls: Vec<String> = o
            .pass
            .urls
            .url
            .iter()
            .map(|u| {
                let u = u.split_once("://").map_or(u.as_str(), |(_, rest)| rest);
                format!("{scheme}://{}{rest}", u.trim_end_matches('/'))
            })
            .collect();
        (!urls.is_empty()).then_some(urls)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::vhost::{Origin, OriginPass, OriginUrls, Origins};

    fn spec(origins: &[(&str, &str, &[&str])]) -> VhostSpec {
        let mut s: VhostSpec = serde_json::from_value(serde_json::json!({
            "name": "edge", "host": {"names": ["*"]}
        }))
        .unwrap();
        s.origins = Some(Origins {
            properties: None,
            origin: origins
                .iter()
                .map(|(location, scheme, urls)| Origin {
                    location: location.to_string(),
                    pass: OriginPass {
                        scheme: scheme.to_string(),
                        urls: OriginUrls {
                            url: urls.iter().map(|u| u.to_string()).collect(),
                        },
                    },
                })
                .collect(),
        });
        s
    }

    #[test]
    fn locations_map_to_urls() {
        let s = spec(&[
            ("/cams/door", "rtsp", &["10.0.0.5:554/h264/ch1"]),
            ("/app", "srt", &["origin-a:9999/app", "origin-b:9999/app"]),
        ]);
        assert_eq!(
            origin_urls(&s, "cams", "door"),
            Some(vec!["rtsp://10.0.0.5:554/h264/ch1".to_string()])
        );
        assert_eq!(
            origin_urls(&s, "app", "cam"),
            Some(vec![
                "srt://origin-a:9999/app/cam".to_string(),
                "srt://origin-b:9999/app/cam".to_string()
            ])
        );
        assert_eq!(origin_urls(&s, "cams", "yard"), None);
        assert_eq!(origin_urls(&s, "ap", "x"), None);
        assert_eq!(
            origin_urls(&spec(&[("/ap", "srt", &["h:1/x"])]), "app", "x"),
            None
        );
    }
}
