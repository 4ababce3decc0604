//! kiln's OpenAPI document against the running server: it is served at
//! `/v1/openapi.yaml`, and every answer of a walk through the whole API
//! (each route, success and error statuses, a live stream and push) has
//! its status documented for its path and method and validates against the
//! documented schema.

mod common;
#[path = "common/media.rs"]
mod media;
use common::openapi::Spec;
use common::*;
use media::*;
use serde_json::{json, Value};
use std::time::Duration;

#[test]
fn every_answer_of_a_walk_through_the_api_matches_the_document() {
    let s = Server::start_media("openapi");
    let doc = s.request("GET", "/v1/openapi.yaml", None);
    assert_eq!(doc.status, 200);
    assert_eq!(doc.header("Content-Type"), Some("application/yaml"));
    let spec = Spec::parse(&doc.body);
    // kiln serves exactly the document in the repository
    assert_eq!(
        spec.doc,
        common::openapi::spec().doc,
        "the served document is the repository's"
    );
    let call = |method: &str, path: &str, body: Option<Value>| {
        let text = body.map(|b| b.to_string());
        let r = s.request(method, path, text.as_deref());
        spec.validate(method, path, &r);
        r
    };
    // the unauthenticated answer is documented too
    let r = s.request_with("GET", "/v1/vhosts", &[], None);
    spec.validate("GET", "/v1/vhosts", &r);

    call("GET", "/v1/version", None);
    call("GET", "/v1/vhosts", None);
    call(
        "POST",
        "/v1/vhosts",
        Some(json!([{"name":"studio","host":{"names":["studio.test"]}}])),
    );
    call(
        "POST",
        "/v1/vhosts",
        Some(json!([{"name":"studio","host":{"names":["x.test"]}}, {"name":"bad name"}])),
    );
    call("GET", "/v1/vhosts/studio", None);
    call("GET", "/v1/vhosts/nope", None);
    call("POST", "/v1/vhosts:reloadAllCertificates", None);
    call("POST", "/v1/vhosts/studio:reloadCertificate", None);
    call("POST", "/v1/managers/api:reloadCertificate", None);
    call("GET", "/v1/vhosts/default/apps", None);
    call(
        "POST",
        "/v1/vhosts/studio/apps",
        Some(json!([{"name":"live","providers":{"rtmp":{}},"publishers":{"push":{}}}])),
    );
    call("POST", "/v1/vhosts/default/apps", Some(json!([])));
    call("GET", "/v1/vhosts/studio/apps/live", None);
    call(
        "PATCH",
        "/v1/vhosts/studio/apps/live",
        Some(json!({"providers":{"rtmp":{},"srt":{}}})),
    );
    call("GET", "/v1/vhosts/studio/apps/live/outputProfiles", None);
    call(
        "POST",
        "/v1/vhosts/studio/apps/live/outputProfiles",
        Some(json!([{"name":"p","encodes":{"videos":[{"name":"v","bypass":true}]}}])),
    );
    call("GET", "/v1/vhosts/studio/apps/live/outputProfiles/p", None);
    call(
        "PATCH",
        "/v1/vhosts/studio/apps/live/outputProfiles/p",
        Some(json!({"outputStreamName":"x"})),
    );
    call(
        "DELETE",
        "/v1/vhosts/studio/apps/live/outputProfiles/p",
        None,
    );
    call("GET", "/v1/vhosts/studio/apps/live/outputProfiles/p", None);
    call("PUT", "/v1/vhosts/studio/apps/live", None);

    // a live stream and a push
    if have_tool("ffmpeg") {
        let mut src = ffmpeg_source(
            8,
            &[],
            "flv",
            &format!("rtmp://127.0.0.1:{}/app/cam", s.media.rtmp),
        );
        s.wait_for_tracks("cam");
        call(
            "POST",
            "/v1/vhosts/default/apps/app:startPush",
            Some(
                json!({"id":"u","stream":{"name":"cam"},"protocol":"mpegts","url":format!("udp://127.0.0.1:{}", free_udp_port())}),
            ),
        );
        call(
            "POST",
            "/v1/vhosts/default/apps/app:startPush",
            Some(
                json!({"id":"u","stream":{"name":"cam"},"protocol":"mpegts","url":"udp://127.0.0.1:9"}),
            ),
        );
        wait_until(Duration::from_secs(10), || {
            (s.push_task("u")?["state"] == "pushing").then_some(())
        });
        std::thread::sleep(Duration::from_millis(1200));
        call("GET", "/v1/vhosts/default/apps/app/streams", None);
        call("GET", "/v1/vhosts/default/apps/app/streams/cam", None);
        call("POST", "/v1/vhosts/default/apps/app:pushes", None);
        call(
            "POST",
            "/v1/vhosts/default/apps/app:pushes",
            Some(json!({"id":"u"})),
        );
        call("GET", "/v1/stats/current", None);
        call("GET", "/v1/stats/current/vhosts/default", None);
        call("GET", "/v1/stats/current/vhosts/default/apps/app", None);
        call(
            "GET",
            "/v1/stats/current/vhosts/default/apps/app/streams/cam",
            None,
        );
        call("GET", "/metrics", None);
        call(
            "POST",
            "/v1/vhosts/default/apps/app:stopPush",
            Some(json!({"id":"u"})),
        );
        let _ = src.kill();
        let _ = src.wait();
    }
    call(
        "POST",
        "/v1/vhosts/default/apps/app:startPush",
        Some(json!({"protocol":"rtmp"})),
    );
    call(
        "POST",
        "/v1/vhosts/default/apps/app:stopPush",
        Some(json!({"id":"none"})),
    );
    call("GET", "/v1/vhosts/default/apps/app/streams/none", None);
    call("GET", "/v1/stats/current/vhosts/nope", None);
    call("DELETE", "/v1/vhosts/studio/apps/live", None);
    call("DELETE", "/v1/vhosts/default", None);
    call("DELETE", "/v1/vhosts/studio", None);
    call("GET", "/v1/openapi.yaml", None);
}
