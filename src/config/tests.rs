use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("secret".into()),
        "PORT" => Some("9090".into()),
        _ => None,
    }
}

fn load_str(text: &str) -> Result<Loaded, ConfigErrors> {
    parse(Path::new("/etc/kiln/server.xml"), text, &env)
}

const GOOD: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Server version="8">
  <Name>edge-1</Name>
  <Type>origin</Type>
  <IP>127.0.0.1</IP>
  <Bind>
    <Managers><API><Port>${env:PORT}</Port><WorkerCount>1</WorkerCount></API></Managers>
    <Providers>
      <RTMP><Port>1935</Port></RTMP>
      <SRT><Port>9999/udp</Port></SRT>
      <MPEGTS><Port>4000-4003/udp</Port></MPEGTS>
      <WebRTC><Signalling><Port>3333</Port></Signalling></WebRTC>
    </Providers>
  </Bind>
  <Managers>
    <Host><Names><Name>*</Name></Names></Host>
    <API>
      <AccessToken>${env:TOKEN}</AccessToken>
      <CrossDomains><Url>*.example.com</Url><Url>http://x.org</Url></CrossDomains>
      <Limits><HeadTimeoutMs>500</HeadTimeoutMs></Limits>
    </API>
  </Managers>
  <VirtualHosts>
    <VirtualHost>
      <Name>default</Name>
      <Host><Names><Name>*</Name></Names></Host>
      <AdmissionWebhooks>
        <ControlServerUrl>http://hook.local/a</ControlServerUrl>
        <SecretKey></SecretKey>
        <Timeout>3000</Timeout>
        <Enables><Providers>rtmp,srt</Providers></Enables>
      </AdmissionWebhooks>
      <Applications>
        <Application>
          <Name>app</Name>
          <Type>live</Type>
          <OutputProfiles>
            <OutputProfile>
              <Name>bypass</Name>
              <OutputStreamName>${OriginStreamName}</OutputStreamName>
              <Encodes>
                <Video><Name>bypass_video</Name><Bypass>true</Bypass></Video>
                <Audio><Name>bypass_audio</Name><Bypass>true</Bypass></Audio>
              </Encodes>
            </OutputProfile>
          </OutputProfiles>
          <Providers><RTMP/><SRT/><MPEGTS><StreamMap><Stream><Name>stream_${Port}</Name><Port>4000-4001</Port></Stream></StreamMap></MPEGTS><WebRTC/></Providers>
          <Publishers><Push/><LLHLS/></Publishers>
        </Application>
      </Applications>
    </VirtualHost>
  </VirtualHosts>
</Server>
"#;

#[test]
fn good_config_loads() {
    let loaded = load_str(GOOD).unwrap();
    let c = &loaded.config;
    assert_eq!(c.name.as_deref(), Some("edge-1"));
    assert_eq!(c.ip.to_string(), "127.0.0.1");
    let api = c.api.as_ref().unwrap();
    assert_eq!(api.port, Some(9090));
    assert_eq!(api.tls_port, None);
    assert_eq!(api.access_token, "secret");
    assert_eq!(api.cross_domains, vec!["*.example.com", "http://x.org"]);
    assert_eq!(api.limits.head_timeout, Duration::from_millis(500));
    assert_eq!(api.limits.max_body_bytes, 1024 * 1024);
    assert_eq!(c.providers.rtmp_port, Some(1935));
    assert_eq!(c.providers.srt_port, Some(9999));
    assert_eq!(c.providers.mpegts_ports, vec![4000, 4001, 4002, 4003]);
    assert_eq!(c.vhosts.len(), 1);
    let v = &c.vhosts[0];
    assert_eq!(v.spec.name, "default");
    assert_eq!(v.spec.admission_webhooks.as_ref().unwrap().timeout, 3000);
    let app = &v.applications[0];
    assert_eq!(app.name, "app");
    assert!(app.rtmp && app.srt && app.push);
    assert_eq!(
        app.output_profiles[0].output_stream_name,
        "${OriginStreamName}"
    );
    assert_eq!(app.output_profiles[0].encodes.len(), 2);
    assert_eq!(app.mpegts.as_ref().unwrap()[0].ports, vec![4000, 4001]);
    assert_eq!(c.state_file, PathBuf::from("/etc/kiln/kiln-state.json"));
    // Type and WorkerCount are warned about; LLHLS is applied.
    let warned: Vec<&str> = loaded.warnings.iter().map(|w| w.path.as_str()).collect();
    assert!(warned.contains(&"Server/Type"), "{warned:?}");
    assert!(warned.contains(&"Server/Bind/Managers/API/WorkerCount"));
    assert_eq!(app.llhls, Some(crate::state::app::LlhlsSpec::default()));
    // WebRTC publishing: the providers' bind serves as the one WebRTC
    // bind (no publishers' one here), and the app takes WHIP.
    assert_eq!(c.providers.webrtc.as_ref().unwrap().port, Some(3333));
    assert_eq!(
        app.webrtc_ingest,
        Some(crate::state::app::WebRtcIngestSpec::default())
    );
}

#[test]
fn wrong_version_is_refused() {
    let err = load_str(r#"<Server version="7"></Server>"#).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("version 7") && msg.contains("version 8"),
        "{msg}"
    );
}

#[test]
fn typo_is_an_error_with_position_and_path() {
    let text = GOOD
        .replace("<AccessToken>", "<AcessToken>")
        .replace("</AccessToken>", "</AcessToken>");
    let err = load_str(&text).unwrap_err();
    let first = &err.0[0];
    assert_eq!(first.path, "Server/Managers/API/AcessToken");
    assert!(first.message.contains("unknown element"));
    assert!(first.line > 10 && first.column > 1, "{first}");
    // and the missing token is reported too
    assert!(err.to_string().contains("AccessToken: required"), "{err}");
}

#[test]
fn missing_env_without_default_is_an_error() {
    let text = GOOD.replace("${env:TOKEN}", "${env:NOPE}");
    let err = load_str(&text).unwrap_err();
    assert!(err.to_string().contains("NOPE is not set"), "{err}");
    // One error, at <AccessToken>'s own line; no false "required".
    assert_eq!(err.0.len(), 1, "{err}");
    let token_line = GOOD
        .lines()
        .position(|l| l.contains("<AccessToken>"))
        .unwrap() as u64
        + 1;
    assert_eq!(err.0[0].line, token_line, "{err}");
    // An unset variable in the API's <Port>: that error alone.
    let text = GOOD.replace("${env:PORT}", "${env:NOPE}");
    let err = load_str(&text).unwrap_err();
    assert_eq!(err.0.len(), 1, "{err}");
    assert!(err.to_string().contains("NOPE is not set"), "{err}");
    let text = GOOD.replace("${env:TOKEN}", "${env:NOPE:fallback}");
    assert_eq!(
        load_str(&text).unwrap().config.api.unwrap().access_token,
        "fallback"
    );
}

#[test]
fn api_rules() {
    let no_port = GOOD.replace("<Port>${env:PORT}</Port>", "");
    assert!(load_str(&no_port)
        .unwrap_err()
        .to_string()
        .contains("neither <Port> nor <TLSPort>"));
    let tls_without_cert = GOOD.replace("<Port>${env:PORT}</Port>", "<TLSPort>8443</TLSPort>");
    assert!(load_str(&tls_without_cert)
        .unwrap_err()
        .to_string()
        .contains("<Managers><Host><TLS>"));
    let empty_token = GOOD.replace("${env:TOKEN}", "");
    let err = load_str(&empty_token).unwrap_err();
    assert!(
        err.to_string().contains("AccessToken: must not be empty"),
        "{err}"
    );
    let token_line = GOOD
        .lines()
        .position(|l| l.contains("<AccessToken>"))
        .unwrap() as u64
        + 1;
    assert_eq!((err.0.len(), err.0[0].line), (1, token_line), "{err}");
}

#[test]
fn api_absent_means_off() {
    let text = GOOD.replace(
        "<Managers><API><Port>${env:PORT}</Port><WorkerCount>1</WorkerCount></API></Managers>",
        "",
    );
    assert!(load_str(&text).unwrap().config.api.is_none());
}

#[test]
fn a_transcoding_encode_is_skipped_with_a_warning() {
    let text = GOOD.replace(
        "<Audio><Name>bypass_audio</Name><Bypass>true</Bypass></Audio>",
        "<Audio><Name>opus</Name><Codec>opus</Codec><Bitrate>128000</Bitrate></Audio>",
    );
    let loaded = load_str(&text).unwrap();
    assert!(loaded
        .warnings
        .iter()
        .any(|w| w.to_string().contains("encode [opus] transcodes")));
    let encodes = &loaded.config.vhosts[0].applications[0].output_profiles[0].encodes;
    assert_eq!(encodes.len(), 1, "the bypass video encode still applies");
}

#[test]
fn ports() {
    assert_eq!(parse_ports("1935").unwrap(), (vec![1935], None));
    assert_eq!(parse_ports("1935/tcp").unwrap(), (vec![1935], Some("tcp")));
    assert_eq!(
        parse_ports("4000-4002/udp").unwrap(),
        (vec![4000, 4001, 4002], Some("udp"))
    );
    assert!(parse_ports("0").is_err());
    assert!(parse_ports("70000").is_err());
    assert!(parse_ports("10/sctp").is_err());
    assert!(parse_ports("5-1").is_err());
}

#[test]
fn duplicate_port_is_an_error() {
    let text = GOOD.replace(
        "<RTMP><Port>1935</Port></RTMP>",
        "<RTMP><Port>9090</Port></RTMP>",
    );
    assert!(load_str(&text)
        .unwrap_err()
        .to_string()
        .contains("are both 9090"));
}

#[test]
fn syntax_error_is_reported() {
    let err = load_str("<Server version=\"8\">\n<Bind>\n</Server>").unwrap_err();
    assert_eq!(err.0[0].line, 3);
}

#[test]
fn env_substitution_leaves_ome_variables() {
    let r = substitute_env("a${env:TOKEN}b${OriginStreamName}", &env).unwrap();
    assert_eq!(r, "asecretb${OriginStreamName}");
}

#[test]
fn srt_options_passphrase_and_key_length() {
    let xml = |opts: &str| {
        format!(
            r#"<Server version="8"><Bind><Providers><SRT><Port>9999</Port><Options>{opts}</Options></SRT></Providers></Bind></Server>"#
        )
    };
    let ok = parse(
        Path::new("s.xml"),
        &xml("<Option><Key>SRTO_PASSPHRASE</Key><Value>0123456789</Value></Option><Option><Key>SRTO_PBKEYLEN</Key><Value>32</Value></Option><Option><Key>SRTO_LATENCY</Key><Value>200</Value></Option>"),
        &|_| None,
    )
    .unwrap();
    let c = ok.config.providers.srt_crypto.unwrap();
    assert_eq!(c.key_len, 32);
    assert!(ok
        .warnings
        .iter()
        .any(|w| w.to_string().contains("SRTO_LATENCY")));
    let err = parse(
        Path::new("s.xml"),
        &xml("<Option><Key>SRTO_PASSPHRASE</Key><Value>short</Value></Option>"),
        &|_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("10-79"), "{err}");
}

/// An OME-shaped config (written here, in the style of OME's samples) with
/// every construct OME's files use that kiln once refused.
const OME_STYLE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<Server version="8">
  <Name>OvenMediaEngine</Name>
  <Type>origin</Type>
  <IP>*</IP>
  <PrivacyProtection>false</PrivacyProtection>
  <StunServer>stun.example.com:3478</StunServer>
  <Modules><HTTP2><Enable>true</Enable></HTTP2><LLHLS><Enable>true</Enable></LLHLS></Modules>
  <Bind>
    <Providers>
      <RTMP><Port>1935</Port><WorkerCount>1</WorkerCount></RTMP>
      <SRT><Port>9999</Port><WorkerCount>1</WorkerCount>
        <Options><Option><Key>SRTO_LATENCY</Key><Value>200</Value></Option></Options>
      </SRT>
    </Providers>
    <Publishers><LLHLS><Port>3333</Port></LLHLS></Publishers>
  </Bind>
  <Defaults><CrossDomains><Url>*</Url></CrossDomains></Defaults>
  <VirtualHosts>
    <VirtualHost include="VHost*.xml" />
    <VirtualHost>
      <Name>default</Name>
      <Host><Names><Name>*</Name></Names></Host>
      <Applications>
        <Application>
          <Name>app</Name>
          <Type>live</Type>
          <OutputProfiles>
            <HWAccels><Decoder><Enable>false</Enable></Decoder></HWAccels>
            <OutputProfile>
              <Name>bypass_stream</Name>
              <OutputStreamName>${OriginStreamName}</OutputStreamName>
              <Playlist><Name>default</Name><FileName>master</FileName></Playlist>
              <Encodes>
                <Video><Bypass>true</Bypass></Video>
                <Video><Name>video_720</Name><Codec>h264</Codec><Width>1280</Width><Height>720</Height></Video>
                <Audio><Name>aac_audio</Name><Codec>aac</Codec><Bitrate>128000</Bitrate>
                  <BypassIfMatch><Codec>eq</Codec></BypassIfMatch></Audio>
                <Audio><Name>opus_audio</Name><Codec>opus</Codec>
                  <BypassIfMatch><Codec>eq</Codec><Samplerate>lte</Samplerate></BypassIfMatch></Audio>
              </Encodes>
            </OutputProfile>
          </OutputProfiles>
          <Providers><RTMP /><SRT /><OVT /><WebRTC><Timeout>30000</Timeout></WebRTC></Providers>
          <Publishers><AppWorkerCount>1</AppWorkerCount><LLHLS><ChunkDuration>0.5</ChunkDuration></LLHLS></Publishers>
        </Application>
        <Application>
          <Name>*</Name>
          <Type>live</Type>
          <Providers><OVT /></Providers>
        </Application>
      </Applications>
    </VirtualHost>
  </VirtualHosts>
</Server>
"#;

#[test]
fn ome_style_config_loads_with_one_warning_per_unapplied_element() {
    let dir = std::env::temp_dir().join(format!("kiln-ome-style-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Two included hosts, in name order; a file that does not match.
    std::fs::write(
        dir.join("VHost-b.xml"),
        "<VirtualHost><Name>b</Name><Host><Names><Name>b.test</Name></Names></Host></VirtualHost>",
    )
    .unwrap();
    std::fs::write(
        dir.join("VHost-a.xml"),
        "<VirtualHost><Name>a</Name><Host><Names><Name>a.test</Name></Names></Host><Applications><Application><Name>live</Name><Providers><RTMP/></Providers></Application></Applications></VirtualHost>",
    )
    .unwrap();
    std::fs::write(dir.join("Other.xml"), "<nothing/>").unwrap();
    let file = dir.join("Server.xml");
    let loaded = parse(&file, OME_STYLE, &|_| None).unwrap_or_else(|e| panic!("{e}"));
    let c = &loaded.config;
    let names: Vec<&str> = c.vhosts.iter().map(|v| v.spec.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "default"]);
    assert_eq!(c.vhosts[0].applications[0].name, "live");
    let default = &c.vhosts[2];
    assert_eq!(
        default.applications.len(),
        1,
        "the * template is not an app"
    );
    assert_eq!(default.app_template.as_ref().unwrap().name, "*");
    let encodes = &default.applications[0].output_profiles[0].encodes;
    let got: Vec<(&str, Option<&str>)> = encodes
        .iter()
        .map(|e| (e.name.as_str(), e.if_codec.as_deref()))
        .collect();
    // unnamed bypass -> video_0 (OME's naming); the 720p transcode skipped;
    // the conditional AAC and Opus bypasses kept
    assert_eq!(
        got,
        [
            ("video_0", None),
            ("aac_audio", Some("aac")),
            ("opus_audio", Some("opus"))
        ]
    );
    let warnings: Vec<String> = loaded.warnings.iter().map(|w| w.to_string()).collect();
    let has = |s: &str| warnings.iter().any(|w| w.contains(s));
    for want in [
        "Server/Type",
        "Server/PrivacyProtection",
        "Server/Modules",
        "Server/Defaults",
        "Server/Bind/Providers/RTMP/WorkerCount",
        "SRTO_LATENCY",
        "OutputProfiles/HWAccels",
        "OutputProfile/Playlist",
        "encode [video_720] transcodes",
        "encode [opus_audio]: only <BypassIfMatch><Codec> is checked",
        "Providers/OVT",
        "Publishers/AppWorkerCount",
    ] {
        assert!(has(want), "no warning about {want}: {warnings:#?}");
    }
    // each with its line
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("Server.xml:4:3: Server/Type")),
        "{warnings:#?}"
    );
    // A typo, known to OME nowhere, is still an error.
    let typo = OME_STYLE
        .replace("<PrivacyProtection>", "<PrivacyProtektion>")
        .replace("</PrivacyProtection>", "</PrivacyProtektion>");
    let err = parse(&file, &typo, &|_| None).unwrap_err().to_string();
    assert!(err.contains("unknown element <PrivacyProtektion>"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn llhls_cross_domains_and_cache_control_are_applied() {
    let text = GOOD.replace(
        "<LLHLS/>",
        "<LLHLS><FirstSegmentTimeout>20</FirstSegmentTimeout>\
         <CrossDomains><Url>*.example.com</Url></CrossDomains>\
         <CacheControl><MasterPlaylistMaxAge>5</MasterPlaylistMaxAge>\
         <SegmentMaxAge>-1</SegmentMaxAge></CacheControl></LLHLS>\
         <HLS><CrossDomains><Url>*</Url></CrossDomains></HLS>",
    );
    let loaded = load_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let app = &loaded.config.vhosts[0].applications[0];
    let llhls = app.llhls.as_ref().unwrap();
    assert_eq!(
        llhls.cross_domains.as_deref(),
        Some(&["*.example.com".to_string()][..])
    );
    // kiln's own: how long a playlist waits for the first segment.
    assert_eq!(
        llhls.config().first_segment_wait(),
        std::time::Duration::from_secs(20)
    );
    assert_eq!(
        crate::state::app::LlhlsSpec::default()
            .config()
            .first_segment_wait(),
        std::time::Duration::from_secs(18)
    );
    let cache = llhls.cache_control.unwrap().resolved();
    use crate::hls::serve::Cache;
    assert_eq!(cache.master, Cache::MaxAge(5));
    assert_eq!(cache.chunklist, Cache::NoStore);
    assert_eq!(cache.blocking_chunklist, Cache::MaxAge(60));
    assert_eq!(cache.segment, Cache::Absent);
    assert_eq!(
        app.hls.as_ref().unwrap().cross_domains.as_deref(),
        Some(&["*".to_string()][..])
    );
    assert!(
        loaded.warnings.iter().all(|w| !w.path.contains("LLHLS")),
        "{:?}",
        loaded.warnings
    );
    let bad = text.replace("<SegmentMaxAge>-1<", "<SegmentMaxAge>-2<");
    let err = load_str(&bad).unwrap_err().to_string();
    assert!(
        err.contains("SegmentMaxAge") && err.contains("-1 (no header)"),
        "{err}"
    );
}

#[test]
fn webrtc_publisher_binds_and_app_settings_as_ome_writes_them() {
    let text = GOOD
        .replace(
            "</Providers>\n  </Bind>",
            "</Providers>\n    <Publishers><LLHLS><Port>3334</Port></LLHLS><WebRTC>\
             <Signalling><Port>3334</Port><TLSPort>3335</TLSPort><WorkerCount>1</WorkerCount></Signalling>\
             <IceCandidates><IceCandidate>*:10000-10002/udp</IceCandidate>\
             <IceCandidate>[::]:10010/udp</IceCandidate><IceCandidate>*:10020</IceCandidate>\
             <TcpRelay>*:3478</TcpRelay></IceCandidates></WebRTC></Publishers>\n  </Bind>",
        )
        .replace(
            "<Publishers><Push/>",
            "<Publishers><Push/><WebRTC><Timeout>5000</Timeout><Rtx>false</Rtx><JitterBuffer>true</JitterBuffer></WebRTC>",
        );
    let loaded = load_str(&text).unwrap();
    let w = loaded.config.providers.webrtc.clone().unwrap();
    assert_eq!((w.port, w.tls_port), (Some(3334), Some(3335)));
    assert_eq!(
        w.candidates,
        vec![
            ("*".to_string(), vec![10000, 10001, 10002]),
            ("[::]".to_string(), vec![10010])
        ]
    );
    let app = &loaded.config.vhosts[0].applications[0];
    assert_eq!(app.webrtc.as_ref().unwrap().timeout, Some(5000));
    let warned: Vec<String> = loaded
        .warnings
        .iter()
        .map(|w| format!("{}: {}", w.path, w.message))
        .collect();
    assert_eq!(w.relays, vec![("*".to_string(), 3478)]);
    for what in [
        "IceCandidate: [*:10020] names no transport, which OME takes as TCP",
        "WorkerCount",
        "JitterBuffer",
        "Rtx",
        // The providers' bind (port 3333) differs from the publishers'.
        "one WebRTC stack for publishers and viewers",
    ] {
        assert!(
            warned.iter().any(|w| w.contains(what)),
            "{what}: {warned:#?}"
        );
    }
    // A bad candidate and an out-of-range timeout are errors with a place.
    let bad = text.replace("[::]:10010/udp", "nowhere:10010/udp");
    assert!(load_str(&bad)
        .unwrap_err()
        .to_string()
        .contains("[nowhere] must be"));
    let bad = text.replace("<Timeout>5000</Timeout>", "<Timeout>5</Timeout>");
    assert!(load_str(&bad)
        .unwrap_err()
        .to_string()
        .contains("1000 to 600000"));
    // An ICE port that is also SRT's is refused.
    let bad = text.replace("*:10000-10002/udp", "*:9999/udp");
    assert!(load_str(&bad)
        .unwrap_err()
        .to_string()
        .contains("also an SRT or MPEGTS port"));
}

/// OME's NAT settings: `${PublicIP}` in candidates and relays with a
/// `<StunServer>` (host:port, the port 3478 when left out); an address
/// not on the machine is taken as written (it is offered, bound on every
/// interface); `${PublicIP}` without `<StunServer>` is an error at its
/// place.
#[test]
fn public_ip_candidates_need_a_stun_server() {
    let text = GOOD.replace(
        "</Providers>\n  </Bind>",
        "</Providers>\n    <Publishers><WebRTC><Signalling><Port>3334</Port></Signalling>\
         <IceCandidates><IceCandidate>${PublicIP}:10000-10001/udp</IceCandidate>\
         <IceCandidate>203.0.113.9:10005/udp</IceCandidate>\
         <TcpRelay>${PublicIP}:3478</TcpRelay></IceCandidates></WebRTC></Publishers>\n  </Bind>",
    );
    let with_stun = text.replace(
        "<Bind>",
        "<StunServer>stun.example.com:19302</StunServer><Bind>",
    );
    let loaded = load_str(&with_stun).unwrap();
    assert_eq!(
        loaded.config.stun_server,
        Some(("stun.example.com".to_string(), 19302))
    );
    let w = loaded.config.providers.webrtc.unwrap();
    assert_eq!(
        w.candidates,
        vec![
            ("${PublicIP}".to_string(), vec![10000, 10001]),
            ("203.0.113.9".to_string(), vec![10005])
        ]
    );
    assert_eq!(w.relays, vec![("${PublicIP}".to_string(), 3478)]);
    let port_left_out = text.replace("<Bind>", "<StunServer>192.0.2.1</StunServer><Bind>");
    assert_eq!(
        load_str(&port_left_out).unwrap().config.stun_server,
        Some(("192.0.2.1".to_string(), 3478))
    );
    let err = load_str(&text).unwrap_err().to_string();
    assert!(
        err.contains("IceCandidate") && err.contains("needs <Server><StunServer>"),
        "{err}"
    );
    assert!(err.contains("TcpRelay"), "{err}");
    let bad = text.replace(
        "<Bind>",
        "<StunServer>stun.example.com:x</StunServer><Bind>",
    );
    assert!(load_str(&bad)
        .unwrap_err()
        .to_string()
        .contains("must be host:port"));
}

#[test]
fn disk_budgets_are_read_at_server_and_application_level() {
    let text = GOOD
        .replacen(
            "<IP>127.0.0.1</IP>",
            "<IP>127.0.0.1</IP><DiskBudget><MinFreeMB>500</MinFreeMB></DiskBudget>",
            1,
        )
        .replacen(
            "<Type>live</Type>",
            "<Type>live</Type><DiskBudget><MaxTotalMB>50</MaxTotalMB></DiskBudget>",
            1,
        );
    let loaded = load_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let reg = loaded.config.registry();
    let server = reg.disk_budget.unwrap();
    assert_eq!((server.max_total_mb, server.min_free_mb), (None, Some(500)));
    let app = loaded.config.vhosts[0].applications[0].disk_budget.unwrap();
    assert_eq!((app.max_total_mb, app.min_free_mb), (Some(50), None));
    // A typo inside is an error, as anywhere.
    let bad = GOOD.replacen(
        "<IP>127.0.0.1</IP>",
        "<IP>127.0.0.1</IP><DiskBudget><MaxTotalGB>1</MaxTotalGB></DiskBudget>",
        1,
    );
    assert!(load_str(&bad).is_err());
}

#[test]
fn omes_dvr_element_is_read_unchanged() {
    // OME's documented form (docs: LL-HLS, DVR).
    let text = GOOD.replace(
        "<LLHLS/>",
        "<LLHLS><DVR><Enable>true</Enable><TempStoragePath>/tmp/ome_dvr/</TempStoragePath><MaxDuration>3600</MaxDuration><EventPlaylistType>false</EventPlaylistType></DVR></LLHLS>",
    );
    let loaded = load_str(&text).unwrap();
    assert!(
        !loaded.warnings.iter().any(|w| w.path.contains("DVR")),
        "{:?}",
        loaded.warnings
    );
    let ll = loaded.config.vhosts[0].applications[0]
        .llhls
        .clone()
        .unwrap();
    let dvr = ll.dvr.unwrap();
    assert!(dvr.enable);
    assert_eq!(dvr.path(), "/tmp/ome_dvr/");
    assert_eq!(dvr.window(), std::time::Duration::from_secs(3600));
    // Defaults: OME's folder and an hour.
    let text = GOOD.replace(
        "<LLHLS/>",
        "<LLHLS><DVR><Enable>true</Enable></DVR></LLHLS>",
    );
    let dvr = load_str(&text).unwrap().config.vhosts[0].applications[0]
        .llhls
        .clone()
        .unwrap()
        .dvr
        .unwrap();
    assert_eq!(dvr.path(), "/tmp/ll_hls_dvr");
    assert_eq!(dvr.window(), std::time::Duration::from_secs(3600));
    // A relative folder or a zero window is an error that says why.
    for bad in [
        "<TempStoragePath>dvr</TempStoragePath>",
        "<MaxDuration>0</MaxDuration>",
    ] {
        let text = GOOD.replace(
            "<LLHLS/>",
            &format!("<LLHLS><DVR><Enable>true</Enable>{bad}</DVR></LLHLS>"),
        );
        let err = load_str(&text).unwrap_err().to_string();
        assert!(err.contains("DVR"), "{err}");
    }
}

/// OME's `<AudioMap>` under the SRT and MPEGTS providers: items in
/// order; a language that is not a tag, or a name with a quote, is an
/// error at its place.
#[test]
fn audio_maps_label_srt_and_mpegts_audio() {
    let map = "<AudioMap><Item><Name>English</Name><Language>en</Language>\
        <Characteristics>public.accessibility.describes-video</Characteristics></Item>\
        <Item><Name>Korean</Name><Language>ko</Language></Item></AudioMap>";
    let text = GOOD
        .replace("<SRT/>", &format!("<SRT>{map}</SRT>"))
        .replace("<MPEGTS><StreamMap>", &format!("<MPEGTS>{map}<StreamMap>"));
    let loaded = load_str(&text).unwrap();
    let app = &loaded.config.vhosts[0].applications[0];
    for m in [&app.srt_audio_map, &app.mpegts_audio_map] {
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].name, "English");
        assert_eq!(m[0].language.as_deref(), Some("en"));
        assert_eq!(
            m[0].characteristics.as_deref(),
            Some("public.accessibility.describes-video")
        );
        assert_eq!(m[1].language.as_deref(), Some("ko"));
    }
    assert_eq!(app.mpegts.as_ref().unwrap()[0].ports, vec![4000, 4001]);
    let bad = text.replacen("<Language>en</Language>", "<Language>English</Language>", 1);
    let e = load_str(&bad).unwrap_err().to_string();
    assert!(
        e.contains("AudioMap") && e.contains("[English] is not a language tag"),
        "{e}"
    );
    let bad = text.replacen("<Name>Korean</Name>", "<Name>Ko\"rean</Name>", 1);
    let e = load_str(&bad).unwrap_err().to_string();
    assert!(e.contains("quote"), "{e}");
}
