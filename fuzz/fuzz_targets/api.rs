#![no_main]
//! The management API as a whole, in memory: a registry with a config-file
//! host (`default`, application `app`) and an in-memory state store. The
//! input is a sequence of requests separated by NUL bytes; each record is
//! `[method][route+flags][name]\n[body]`. All requests go through the same
//! `Api`, so what one creates the next can list, change or delete.
use kiln::api::{Api, RequestInfo};
use kiln::config::Config;
use kiln::http::Request;
use kiln::state::store::StateStore;
use kiln::tls::VhostCertResolver;
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

const AUTH: &[u8] = b"Basic a2lsbjpmdXp6"; // base64("kiln:fuzz")

const CONFIG: &str = r#"<?xml version="1.0"?>
<Server version="8">
  <Name>kiln-fuzz</Name>
  <IP>127.0.0.1</IP>
  <Bind><Managers><API><Port>8081</Port></API></Managers>
    <Providers><RTMP><Port>1935</Port></RTMP><SRT><Port>9999</Port></SRT></Providers></Bind>
  <Managers>
    <Host><Names><Name>*</Name></Names></Host>
    <API><AccessToken>kiln:fuzz</AccessToken><CrossDomains><Url>*.example.com</Url></CrossDomains></API>
  </Managers>
  <VirtualHosts>
    <VirtualHost>
      <Name>default</Name>
      <Host><Names><Name>*</Name></Names></Host>
      <Applications><Application><Name>app</Name><Type>live</Type>
        <OutputProfiles><OutputProfile><Name>bypass</Name><Encodes>
          <Video><Name>bypass_video</Name><Bypass>true</Bypass></Video>
          <Audio><Name>bypass_audio</Name><Bypass>true</Bypass></Audio>
        </Encodes></OutputProfile></OutputProfiles>
        <Providers><RTMP/><SRT/></Providers><Publishers><Push/></Publishers>
      </Application></Applications>
    </VirtualHost>
  </VirtualHosts>
</Server>
"#;

fn config() -> &'static Config {
    static CONFIG_ONCE: OnceLock<Config> = OnceLock::new();
    CONFIG_ONCE.get_or_init(|| {
        kiln::config::parse(std::path::Path::new("/fuzz/server.xml"), CONFIG, &|_| None)
            .expect("the fuzz config parses")
            .config
    })
}

const METHODS: [&str; 8] = [
    "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "POST",
];

fn target(route: u8, name: &str) -> String {
    let n = if name.is_empty() { "default" } else { name };
    match route & 0x0f {
        0 => "/v1/version".into(),
        1 => "/v1/vhosts".into(),
        2 => format!("/v1/vhosts/{n}"),
        3 => "/v1/vhosts:reloadAllCertificates".into(),
        4 => format!("/v1/vhosts/{n}:reloadCertificate"),
        5 => "/v1/managers/api:reloadCertificate".into(),
        6 => format!("/v1/vhosts/{n}/apps"),
        7 => format!("/v1/vhosts/default/apps/{n}"),
        8 => "/v1/vhosts/default/apps/app:startPush".into(),
        9 => "/v1/vhosts/default/apps/app:stopPush".into(),
        10 => "/v1/vhosts/default/apps/app:pushes".into(),
        11 => "/v1/vhosts/default/apps/app/streams".into(),
        12 => format!("/v1/vhosts/default/apps/app/streams/{n}"),
        13 => format!("/v1/vhosts/{n}/apps/app:startPush"),
        14 => format!("/v1/vhosts/{n}/apps/{n}:pushes"),
        _ => name.into(),
    }
}

fuzz_target!(|data: &[u8]| {
    let config = config();
    let mut api = Api::new(
        config.api.as_ref(),
        config.registry(),
        StateStore::in_memory(&kiln::api::TASK_KINDS),
        None,
        Arc::<VhostCertResolver>::default(),
        0,
    );
    for record in data.split(|&b| b == 0).take(64) {
        let [m, route, rest @ ..] = record else {
            continue;
        };
        let (name, body) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &[][..]),
        };
        let name = String::from_utf8_lossy(name);
        let length = body.len().to_string();
        let mut headers: Vec<(&str, &[u8])> = vec![("Host", b"127.0.0.1")];
        if route & 0x10 == 0 {
            headers.push(("Authorization", AUTH));
        }
        if route & 0x20 != 0 {
            headers.push(("Origin", b"https://app.example.com"));
        }
        if !body.is_empty() {
            headers.push(("Content-Type", b"application/json"));
            headers.push(("Content-Length", length.as_bytes()));
        }
        let mut req = Request::new(
            METHODS[usize::from(*m) % METHODS.len()],
            &target(*route, &name),
            u8::from(route & 0x40 == 0),
            &headers,
        );
        req.body = body.to_vec();
        let resp = api.handle(
            &req,
            RequestInfo::default(),
            kiln::clock::Now::read(std::time::Instant::now()),
        );
        assert!((100..600).contains(&resp.status), "status {}", resp.status);
        if !resp.body.is_empty() {
            // Every answer with a body is JSON.
            if let Err(e) = serde_json::from_slice::<serde_json::Value>(&resp.body) {
                panic!(
                    "{} {} -> {} body not JSON ({e})",
                    req.method(), req.target(), resp.status
                );
            }
        }
        api.effects.clear();
    }
});
