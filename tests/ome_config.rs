//! An OvenMediaEngine-style Server.xml (written here in the shape of OME's
//! samples, which are under OME's licence) runs unchanged: kiln warns about
//! what it does not do, includes vhost files, keeps the `*` template, names
//! unnamed encodes OME's way, applies conditional bypasses, and serves the
//! API with OME's token; RTMP and SRT publishers show up with the output
//! track names of the profile.

mod common;
#[path = "common/hls_check.rs"]
mod hls_check;
#[path = "common/media.rs"]
mod media;
use common::*;
use media::*;
use std::time::Duration;

/// `ports`: (signalling, ICE candidate, TCP relay), each free: fixed ones
/// (OME's 3333, 10000-10004, 3478) would meet another server on the
/// machine.
fn ome_style(
    api: u16,
    rtmp: u16,
    srt: u16,
    llhls: u16,
    vhosts: &str,
    (signal, ice, relay): (u16, u16, u16),
) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Server version="8">
	<Name>OvenMediaEngine</Name>
	<Type>origin</Type>
	<IP>127.0.0.1</IP>
	<PrivacyProtection>false</PrivacyProtection>
	<StunServer>stun.example.com:3478</StunServer>
	<Modules>
		<HTTP2><Enable>true</Enable></HTTP2>
		<LLHLS><Enable>true</Enable></LLHLS>
		<P2P><Enable>false</Enable><MaxClientPeersPerHostPeer>2</MaxClientPeersPerHostPeer></P2P>
	</Modules>
	<Bind>
		<Managers>
			<API>
				<Port>{api}</Port>
				<WorkerCount>1</WorkerCount>
			</API>
		</Managers>
		<Providers>
			<RTSPC><WorkerCount>1</WorkerCount></RTSPC>
			<OVT><WorkerCount>1</WorkerCount></OVT>
			<RTMP><Port>{rtmp}</Port><WorkerCount>1</WorkerCount></RTMP>
			<SRT><Port>{srt}</Port><WorkerCount>1</WorkerCount></SRT>
			<WebRTC>
				<Signalling><Port>{signal}</Port><WorkerCount>1</WorkerCount></Signalling>
				<IceCandidates><IceCandidate>*:{ice}-{ice}/udp</IceCandidate><TcpRelay>*:{relay}</TcpRelay></IceCandidates>
			</WebRTC>
		</Providers>
		<Publishers>
			<OVT><Port>9000</Port></OVT>
			<LLHLS><Port>{llhls}</Port></LLHLS>
		</Publishers>
	</Bind>
	<Managers>
		<Host><Names><Name>*</Name></Names></Host>
		<API>
			<AccessToken>ome-access-token</AccessToken>
			<CrossDomains><Url>*.airensoft.com</Url></CrossDomains>
		</API>
	</Managers>
	<Defaults><CrossDomains><Url>*</Url></CrossDomains></Defaults>
	<VirtualHosts>
		<VirtualHost include="{vhosts}" />
		<VirtualHost>
			<Name>default</Name>
			<Distribution>ovenmediaengine.com</Distribution>
			<Host><Names><Name>*</Name></Names></Host>
			<Applications>
				<Application>
					<Name>app</Name>
					<Type>live</Type>
					<OutputProfiles>
						<Decodes><ThreadCount>2</ThreadCount><OnlyKeyframes>false</OnlyKeyframes></Decodes>
						<HWAccels><Decoder><Enable>false</Enable></Decoder><Encoder><Enable>false</Enable></Encoder></HWAccels>
						<OutputProfile>
							<Name>bypass_stream</Name>
							<OutputStreamName>${{OriginStreamName}}</OutputStreamName>
							<Playlist>
								<Name>default</Name>
								<FileName>master</FileName>
								<Options><WebRtcAutoAbr>true</WebRtcAutoAbr></Options>
								<RenditionTemplate>
									<Name>${{Height}}p</Name>
									<VideoTemplate><EncodingType>all</EncodingType></VideoTemplate>
									<AudioTemplate><EncodingType>all</EncodingType></AudioTemplate>
								</RenditionTemplate>
							</Playlist>
							<Encodes>
								<Video><Bypass>true</Bypass></Video>
								<Audio>
									<Name>aac_audio</Name>
									<Codec>aac</Codec>
									<Bitrate>128000</Bitrate>
									<Samplerate>48000</Samplerate>
									<Channel>2</Channel>
									<BypassIfMatch><Codec>eq</Codec></BypassIfMatch>
								</Audio>
								<Audio>
									<Name>opus_audio</Name>
									<Codec>opus</Codec>
									<Bitrate>128000</Bitrate>
									<BypassIfMatch><Codec>eq</Codec></BypassIfMatch>
								</Audio>
							</Encodes>
						</OutputProfile>
					</OutputProfiles>
					<Providers>
						<OVT />
						<RTMP />
						<SRT />
						<RTSPPull />
						<WebRTC><Timeout>30000</Timeout></WebRTC>
					</Providers>
					<Publishers>
						<AppWorkerCount>1</AppWorkerCount>
						<StreamWorkerCount>8</StreamWorkerCount>
						<OVT />
						<LLHLS><ChunkDuration>0.5</ChunkDuration><SegmentDuration>6</SegmentDuration></LLHLS>
					</Publishers>
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
"#
    )
}

#[test]
fn an_ome_style_server_xml_runs_and_takes_publishers() {
    let dir = temp_dir("ome-style");
    std::fs::write(
        dir.join("VHost-extra.xml"),
        "<VirtualHost><Name>extra</Name><Host><Names><Name>extra.test</Name></Names></Host></VirtualHost>",
    )
    .unwrap();
    let (api, rtmp, srt, llhls) = (free_port(), free_port(), free_udp_port(), free_port());
    let config = dir.join("Server.xml");
    let webrtc = (free_port(), free_udp_port(), free_port());
    std::fs::write(
        &config,
        ome_style(api, rtmp, srt, llhls, "VHost*.xml", webrtc),
    )
    .unwrap();
    let mut s = Server {
        wrap: None,
        child: None,
        dir: dir.clone(),
        config,
        port: api,
        tls_port: None,
        log: dir.join("kiln.log"),
        media: MediaPorts {
            rtmp,
            srt,
            ..MediaPorts::default()
        },
    };
    s.spawn();
    let log = s.log_text();
    for what in [
        "Server/Modules",
        "Server/Defaults",
        "Publishers/OVT",
        "Playlist",
    ] {
        assert!(log.contains(what), "no warning about {what}\n{log}");
    }
    // OME's token, OME's Basic form.
    let r = s.request_with(
        "GET",
        "/v1/vhosts",
        &[("Authorization", "Basic b21lLWFjY2Vzcy10b2tlbg==")],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["response"],
        serde_json::json!(["extra", "default"])
    );
    let r = s.request_with(
        "GET",
        "/v1/vhosts/default/apps",
        &[("Authorization", "Basic b21lLWFjY2Vzcy10b2tlbg==")],
        None,
    );
    assert_eq!(
        r.json()["response"],
        serde_json::json!(["app"]),
        "the * template is not an app"
    );
    if !have_tool("ffmpeg") {
        return;
    }
    let auth = [("Authorization", "Basic b21lLWFjY2Vzcy10b2tlbg==")];
    let stream = |name: &str| {
        let r = s.request_with(
            "GET",
            &format!("/v1/vhosts/default/apps/app/streams/{name}"),
            &auth,
            None,
        );
        (r.status == 200).then(|| r.json()["response"].clone())
    };
    let mut rtmp_pub = ffmpeg_source(8, &[], "flv", &format!("rtmp://127.0.0.1:{rtmp}/app/cam"));
    let mut srt_pub = ffmpeg_source(
        8,
        &[],
        "mpegts",
        &format!("srt://127.0.0.1:{srt}?streamid=default/app/srtcam&pkt_size=1316"),
    );
    for name in ["cam", "srtcam"] {
        let v = wait_until(Duration::from_secs(10), || {
            stream(name).filter(|v| {
                v["outputs"][0]["tracks"]
                    .as_array()
                    .is_some_and(|t| media_count(t) == 2)
            })
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} never showed with two output tracks\n{}",
                s.log_text()
            )
        });
        let names: Vec<&str> = v["outputs"][0]["tracks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        // the unnamed bypass is video_0; the source's AAC passes as aac_audio;
        // OME's Data track last
        assert_eq!(names, ["video_0", "aac_audio", "Data"], "{v}");
    }
    let _ = rtmp_pub.kill();
    let _ = srt_pub.kill();
    let _ = rtmp_pub.wait();
    let _ = srt_pub.wait();
}

/// OME's sample `Server.xml` with both of its commented-out `<Managers>`
/// blocks enabled, written here in its shape with free ports: its TLS files
/// are placeholders (`path/to/file.crt`) that cannot be loaded. DECISIONS 1:
/// kiln starts anyway, serves everything else, refuses handshakes on the
/// API's TLS port with a TLS alert, and a reload with real files brings
/// that port up.
fn ome_sample_with_managers(
    api: u16,
    api_tls: u16,
    rtmp: u16,
    srt: u16,
    llhls: u16,
    llhls_tls: u16,
) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Server version="8">
	<Name>OvenMediaEngine</Name>
	<Type>origin</Type>
	<IP>127.0.0.1</IP>
	<PrivacyProtection>false</PrivacyProtection>
	<StunServer>stun.ovenmediaengine.com:13478</StunServer>
	<Modules>
		<HTTP2><Enable>true</Enable></HTTP2>
		<LLHLS><Enable>true</Enable></LLHLS>
		<P2P><Enable>false</Enable><MaxClientPeersPerHostPeer>2</MaxClientPeersPerHostPeer></P2P>
	</Modules>
	<Bind>
		<Managers>
			<API>
				<Port>{api}</Port>
				<TLSPort>{api_tls}</TLSPort>
				<WorkerCount>1</WorkerCount>
			</API>
		</Managers>
		<Providers>
			<RTSPC><WorkerCount>1</WorkerCount></RTSPC>
			<OVT><WorkerCount>1</WorkerCount></OVT>
			<RTMP><Port>{rtmp}</Port><WorkerCount>1</WorkerCount></RTMP>
			<SRT><Port>{srt}</Port><WorkerCount>1</WorkerCount></SRT>
		</Providers>
		<Publishers>
			<LLHLS><Port>{llhls}</Port><TLSPort>{llhls_tls}</TLSPort><WorkerCount>1</WorkerCount></LLHLS>
		</Publishers>
	</Bind>
	<Managers>
		<Host>
			<Names>
				<Name>*</Name>
			</Names>
			<TLS>
				<CertPath>path/to/file.crt</CertPath>
				<KeyPath>path/to/file.key</KeyPath>
				<ChainCertPath>path/to/file.crt</ChainCertPath>
			</TLS>
		</Host>
		<API>
			<AccessToken>ome-access-token</AccessToken>
			<CrossDomains>
				<Url>*.airensoft.com</Url>
				<Url>http://*.sub-domain.airensoft.com</Url>
				<Url>http?://airensoft.*</Url>
			</CrossDomains>
		</API>
	</Managers>
	<VirtualHosts>
		<VirtualHost>
			<Name>default</Name>
			<Distribution>ovenmediaengine.com</Distribution>
			<Host><Names><Name>*</Name></Names></Host>
			<Applications>
				<Application>
					<Name>app</Name>
					<Type>live</Type>
					<OutputProfiles>
						<OutputProfile>
							<Name>bypass_stream</Name>
							<OutputStreamName>${{OriginStreamName}}</OutputStreamName>
							<Encodes>
								<Video><Bypass>true</Bypass></Video>
								<Audio><Bypass>true</Bypass></Audio>
							</Encodes>
						</OutputProfile>
					</OutputProfiles>
					<Providers><OVT /><RTMP /><SRT /></Providers>
					<Publishers>
						<AppWorkerCount>1</AppWorkerCount>
						<StreamWorkerCount>8</StreamWorkerCount>
						<LLHLS><ChunkDuration>0.5</ChunkDuration><SegmentDuration>6</SegmentDuration></LLHLS>
					</Publishers>
				</Application>
			</Applications>
		</VirtualHost>
	</VirtualHosts>
</Server>
"#
    )
}

#[test]
fn ome_sample_with_placeholder_certificates_starts_serves_and_reloads() {
    let dir = temp_dir("ome-placeholder-tls");
    let (api, api_tls, rtmp, srt, llhls, llhls_tls) = (
        free_port(),
        free_port(),
        free_port(),
        free_udp_port(),
        free_port(),
        free_port(),
    );
    let config = dir.join("Server.xml");
    std::fs::write(
        &config,
        ome_sample_with_managers(api, api_tls, rtmp, srt, llhls, llhls_tls),
    )
    .unwrap();

    // --check-config: a WARN naming file:line:col, exit 0; --strict: exit 1.
    let check = std::process::Command::new(kiln_bin())
        .args(["--check-config", "-c"])
        .arg(&config)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{text}");
    assert!(
        text.contains("WARN")
            && text
                .contains("Server.xml:36:4: Server/Managers/Host/TLS: TLS file cannot be loaded: "),
        "{text}"
    );
    let strict = std::process::Command::new(kiln_bin())
        .args(["--check-config", "--strict", "-c"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(
        strict.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&strict.stderr)
    );

    let mut s = Server {
        wrap: None,
        child: None,
        dir: dir.clone(),
        config,
        port: api,
        tls_port: None,
        log: dir.join("kiln.log"),
        media: MediaPorts {
            rtmp,
            srt,
            llhls,
            ..MediaPorts::default()
        },
    };
    s.spawn();
    let log = s.log_text();
    assert!(
        log.contains(&format!(
            "API TLS port {api_tls} refuses TLS handshakes until a reload succeeds"
        )),
        "{log}"
    );
    let auth = [("Authorization", "Basic b21lLWFjY2Vzcy10b2tlbg==")];
    let r = s.request_with("GET", "/v1/vhosts", &auth, None);
    assert_eq!(r.status, 200, "{}", r.body);

    if have_tool("curl") {
        // The TLS port is bound and answers a handshake with an alert.
        let (code, _, out) = curl(
            &["-k", "-H", "Authorization: Basic b21lLWFjY2Vzcy10b2tlbg=="],
            &format!("https://127.0.0.1:{api_tls}/v1/vhosts"),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            out.status.code(),
            Some(35),
            "curl: a TLS error, not a hang: {err}"
        );
        assert!(err.contains("alert"), "a TLS alert: {err}");
        let log = s.log_text();
        assert!(
            log.contains(&format!(
                "API TLS port {api_tls}: handshake refused with a TLS alert"
            )),
            "{log}"
        );

        // Real files where the sample points, a reload: the port serves.
        let files = dir.join("path/to");
        std::fs::create_dir_all(&files).unwrap();
        let (cert, key) = make_cert(&files, "real");
        std::fs::rename(&cert, files.join("file.crt")).unwrap();
        std::fs::rename(&key, files.join("file.key")).unwrap();
        let r = s.request_with("POST", "/v1/managers/api:reloadCertificate", &auth, None);
        assert_eq!(r.status, 200, "{}", r.body);
        let ca = files.join("file.crt").display().to_string();
        let (code, body, out) = curl(
            &[
                "--cacert",
                &ca,
                "-H",
                "Authorization: Basic b21lLWFjY2Vzcy10b2tlbg==",
            ],
            &format!("https://127.0.0.1:{api_tls}/v1/vhosts"),
        );
        assert_eq!(code, 200, "{body} {}", String::from_utf8_lossy(&out.stderr));
    }

    if !have_tool("ffmpeg") {
        eprintln!("skipped the publish part: ffmpeg is missing");
        return;
    }
    let mut rtmp_pub = ffmpeg_source(30, &[], "flv", &format!("rtmp://127.0.0.1:{rtmp}/app/cam"));
    let mut srt_pub = ffmpeg_source(
        30,
        &[],
        "mpegts",
        &format!("srt://127.0.0.1:{srt}?streamid=default/app/srtcam&pkt_size=1316"),
    );
    for name in ["cam", "srtcam"] {
        let got = wait_until(Duration::from_secs(20), || {
            let r = hls_check::get(llhls, &format!("/app/{name}/llhls.m3u8"), &[]);
            (r.status == 200 && r.text().contains("#EXT-X-STREAM-INF")).then(|| r.text())
        });
        let master = got.unwrap_or_else(|| panic!("no LL-HLS master for {name}\n{}", s.log_text()));
        let chunklist = master
            .lines()
            .find(|l| l.starts_with("chunklist_") && l.contains("video"))
            .map(|l| l.split('?').next().unwrap_or(l))
            .unwrap_or_else(|| panic!("no video chunklist in {master}"))
            .to_string();
        let parts = wait_until(Duration::from_secs(20), || {
            let r = hls_check::get(llhls, &format!("/app/{name}/{chunklist}"), &[]);
            (r.status == 200 && r.text().contains("#EXT-X-PART:")).then_some(())
        });
        assert!(parts.is_some(), "{name}: no parts\n{}", s.log_text());
    }
    let _ = rtmp_pub.kill();
    let _ = srt_pub.kill();
    let _ = rtmp_pub.wait();
    let _ = srt_pub.wait();
}
