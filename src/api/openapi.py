#!/usr/bin/env python3
"""Writes src/api/openapi.yaml: kiln's OpenAPI 3.1 document, in YAML's JSON
syntax (every JSON document is YAML 1.2), so that kiln's own tests read it
with serde_json. Edit this script, then run it: python3 src/api/openapi.py"""
import json, os

S = lambda t, **kw: dict(type=t, **kw)
INT = S("integer", minimum=0)
STR = S("string")
BOOL = S("boolean")
TIME = S("string", format="date-time")
ref = lambda n: {"$ref": f"#/components/schemas/{n}"}

def obj(props, required=None):
    o = S("object", properties=props)
    if required:
        o["required"] = required
    return o

schemas = {
    "Status": obj({"statusCode": INT, "message": STR}, ["statusCode", "message"]),
    "Pull": obj({"name": STR, "urls": S("array", items=STR),
                 "properties": obj({"persistent": BOOL, "noInputFailoverTimeoutMs": INT, "unusedStreamDeletionTimeoutMs": INT})},
                ["name", "urls"]),
    "Names": S("array", items=STR),
    "ScheduleItem": obj({"url": STR, "start": S("integer"), "duration": S("integer")}, ["url"]),
    "ScheduledChannel": obj({
        "stream": obj({"name": STR, "bypassTranscoder": BOOL, "videoTrack": BOOL, "audioTrack": BOOL,
                       "audioMap": S("array", items=obj({"name": STR, "language": STR, "characteristics": STR}))}, ["name"]),
        "fallbackProgram": obj({"items": S("array", items=ref("ScheduleItem"))}),
        "programs": S("array", items=obj({"name": STR, "scheduled": STR, "repeat": BOOL,
                                           "items": S("array", items=ref("ScheduleItem"))}, ["scheduled", "items"])),
    }, ["stream"]),
    "ScheduledChannelInfo": obj({
        "currentProgram": S("object"), "fallbackProgram": S("object"), "programs": S("array"),
        "stream": S("object"), "source": STR}, ["programs", "stream", "source"]),
    "MultiplexChannel": obj({
        "outputStream": obj({"name": STR}, ["name"]),
        "sourceStreams": S("array", items=obj({"name": STR, "url": STR, "trackMap": S("array", items=obj({
            "sourceTrackName": STR, "newTrackName": STR, "bitrateConf": INT, "framerateConf": S("number")},
            ["sourceTrackName", "newTrackName"]))}, ["url", "trackMap"])),
        "playlists": S("array", items=obj({"name": STR, "fileName": STR, "options": S("object"),
            "renditions": S("array", items=obj({"name": STR, "video": STR, "audio": STR}))}, ["fileName", "renditions"])),
    }, ["outputStream", "sourceStreams"]),
    "PullState": obj({"name": STR, "state": S("string", enum=["connecting", "live", "waiting"]), "urls": S("array", items=STR),
                      "url": STR, "persistent": BOOL, "onDemand": BOOL, "lastError": STR},
                     ["name", "state", "urls", "url", "persistent", "onDemand"]),
    "Version": obj({"version": S("string", description="the OvenMediaEngine release whose API kiln answers as"), "gitVersion": STR,
                    "name": STR, "kilnVersion": STR, "apiVersion": STR}, ["version", "gitVersion", "name", "kilnVersion", "apiVersion"]),
    "WebRtc": obj({"enabled": BOOL, "signallingPort": INT, "signallingTlsPort": INT,
                   "iceCandidates": S("array", items=STR), "tcpRelay": S("array", items=STR), "sessions": INT, "publishers": INT,
                   "keyframeRequests": INT, "droppedDatagrams": INT},
                  ["enabled", "iceCandidates", "tcpRelay", "sessions", "publishers", "keyframeRequests", "droppedDatagrams"]),
    "Session": obj({"id": S("string", description="publisher, rtmp-N, srt-N, webrtc-KEY, llhls-TOKEN or hls-TOKEN (a player session), llhls-ADDRESS or hls-ADDRESS (a player without a token)"),
                    "protocol": STR, "role": S("string", enum=["publisher", "viewer"]), "remoteAddress": STR,
                    "since": TIME, "bytes": INT, "connected": BOOL}, ["id", "protocol", "role", "since", "bytes"]),
    "LogLine": obj({"time": TIME, "level": S("string", enum=["WARN", "ERROR"]), "message": STR}, ["time", "level", "message"]),
    "Vhost": obj({
        "name": STR, "distribution": STR,
        "host": obj({"names": S("array", items=STR), "tls": obj({"certPath": STR, "keyPath": STR, "chainCertPath": STR})}, ["names"]),
        "signedPolicy": S("object"), "admissionWebhooks": S("object"), "origins": S("object"), "originMapStore": S("object"),
        "crossDomains": obj({"urls": S("array", items=STR)}, ["urls"]),
    }, ["name", "distribution", "host"]),
    "Encode": obj({"name": STR, "bypass": {"oneOf": [BOOL, S("string", enum=["true", "false"])]}, "codec": STR, "bypassIfMatch": S("object")}, ["name"]),
    "OutputProfile": obj({
        "name": STR, "outputStreamName": STR,
        "encodes": obj({k: S("array", items=ref("Encode")) for k in ["videos", "audios", "datas"]}),
    }, ["name"]),
    "App": obj({
        "name": STR, "dynamic": BOOL, "type": S("string", enum=["live"]),
        "outputProfiles": obj({"outputProfile": S("array", items=ref("OutputProfile"))}),
        "providers": S("object"), "publishers": S("object"),
    }, ["name", "type"]),
    "Track": obj({
        "id": S("integer", minimum=0, description="the track's position in the stream's list, from 0 (OME's ids; push and record trackIds)"),
        "name": STR, "type": S("string", enum=["Video", "Audio", "Data"]),
        "video": obj({"bypass": BOOL, "codec": STR, "width": INT, "height": INT, "maxWidth": INT, "maxHeight": INT,
                      **{k: S("number") for k in ["framerate", "framerateAvg", "framerateConf", "framerateLatest",
                                                   "keyFrameInterval", "keyFrameIntervalAvg", "keyFrameIntervalConf", "keyFrameIntervalLatest"]},
                      **{k: INT for k in ["bitrate", "bitrateAvg", "bitrateConf", "bitrateLatest", "deltaFramesSinceLastKeyFrame"]},
                      "hasBframes": BOOL}),
        "audio": obj({"bypass": BOOL, "codec": STR, "samplerate": INT, "channel": INT,
                      **{k: INT for k in ["bitrate", "bitrateAvg", "bitrateConf", "bitrateLatest"]},
                      "label": STR, "language": STR, "characteristics": STR}),
    }, ["id", "name", "type"]),
    "Playlist": obj({"name": STR, "fileName": STR,
                     "options": obj({"enableTsPackaging": BOOL, "hlsChunklistPathDepth": S("integer"), "webrtcAutoAbr": BOOL}),
                     "renditions": S("array", items=obj({"name": STR, "videoVariantName": STR, "audioVariantName": STR}, ["name"]))},
                    ["name", "fileName", "options", "renditions"]),
    "Stream": obj({
        "name": STR,
        "input": obj({"sourceType": S("string", enum=["Rtmp", "Rtmps", "Srt", "MpegTs", "RtspPull", "SrtPull", "RtmpPull", "WebRTC", "Scheduled", "Multiplex"]), "sourceUrl": STR, "createdTime": TIME, "tracks": S("array", items=ref("Track"))}, ["sourceType", "createdTime", "tracks"]),
        "outputs": S("array", items=obj({"name": STR, "playlists": S("array", items=ref("Playlist")), "tracks": S("array", items=ref("Track"))}, ["name", "playlists", "tracks"])),
    }, ["name", "input", "outputs"]),
    "Push": obj({
        "id": STR, "state": S("string", enum=["ready", "connecting", "pushing", "stopping", "stopped", "error"]),
        "vhost": STR, "app": STR,
        "stream": obj({"name": STR, "trackIds": S("array", items=INT), "variantNames": S("array", items=STR)}, ["name"]),
        "protocol": S("string", enum=["rtmp", "srt", "mpegts"]), "url": STR, "streamKey": STR,
        "sentBytes": INT, "sentTime": INT, "sequence": INT, "totalsentBytes": INT, "totalsentTime": INT,
        "createdTime": TIME, "startTime": TIME, "finishTime": TIME, "lastError": STR, "lastErrorTime": TIME, "droppedFrames": INT, "isConfig": BOOL,
    }, ["isConfig", "id", "state", "vhost", "app", "stream", "protocol", "url", "sentBytes", "sentTime", "sequence", "totalsentBytes", "totalsentTime", "createdTime", "startTime", "finishTime"]),
    "Record": obj({
        "state": S("string", enum=["ready", "recording", "stopping", "error"]),
        "id": STR, "vhost": STR, "app": STR,
        "stream": obj({"name": STR, "trackIds": S("array", items=INT), "variantNames": S("array", items=STR)}, ["name"]),
        "filePath": S("string", description="as OME shows it: from the application's <RootPath>"), "infoPath": STR, "outputFilePath": STR, "outputInfoPath": STR, "isConfig": BOOL,
        "interval": INT, "schedule": STR, "segmentationRule": S("string", enum=["continuity", "discontinuity"]), "metadata": STR,
        "keyframesEvery": S("integer", minimum=100, description="kiln: a time-lapse, one keyframe per this many ms"), "timeLapseFps": S("integer", minimum=1, maximum=60),
        "preRoll": S("integer", minimum=1, description="kiln: the first file started this many ms before the call"),
        "sequence": INT, "recordBytes": INT, "recordTime": INT, "totalRecordBytes": INT, "totalRecordTime": INT,
        "createdTime": TIME, "startTime": TIME, "finishTime": TIME, "lastError": STR, "lastErrorTime": TIME,
    }, ["isConfig", "state", "id", "vhost", "app", "stream", "filePath", "infoPath", "segmentationRule", "sequence", "recordBytes", "recordTime", "totalRecordBytes", "totalRecordTime", "createdTime"]),
    "StartRecord": obj({
        "id": STR,
        "stream": obj({"name": STR, "trackIds": S("array", items=INT), "variantNames": S("array", items=STR)}, ["name"]),
        "filePath": S("string", description="ends in .mp4 (fragmented) or .ts; under <Publishers><FILE><RootPath>, absolute or not (OME's rule; an absolute path already inside the root is kept)"),
        "infoPath": STR, "interval": S("integer", minimum=1000), "schedule": S("string", description="<second> <minute> <hour>, each *, */n or n"),
        "segmentationRule": S("string", enum=["continuity", "discontinuity"]), "metadata": STR,
        "keyframesEvery": S("integer", minimum=100, maximum=86400000, description="kiln extension: a time-lapse; one video keyframe per this many ms of the stream is written, nothing else (no audio)"),
        "timeLapseFps": S("integer", minimum=1, maximum=60, description="kiln extension, with keyframesEvery: frames per second of film (default 1)"),
        "preRoll": S("integer", minimum=0, description="kiln extension: start the file this many ms before the call, at the keyframe at or before then (at most the application's <Publishers><FILE><MaxPreRoll>)"),
    }, ["id", "stream"]),
    "StartHlsDump": obj({
        "outputStreamName": STR, "id": STR,
        "outputPath": S("string", description="a directory; relative: under <LLHLS><Dumps><RootPath>"),
        "playlist": S("array", items=STR), "infoFile": STR, "userData": STR,
    }, ["id", "outputPath"]),
    "HlsDump": obj({
        "id": STR, "vhost": STR, "app": STR, "outputStreamName": STR, "outputPath": STR,
        "playlist": S("array", items=STR), "infoFile": STR, "userData": STR,
        "enabled": BOOL, "status": S("string", enum=["Running", "Completed", "Error"]),
        "segments": INT, "bytes": INT, "createdTime": TIME, "lastError": STR,
    }, ["id", "vhost", "app", "outputStreamName", "outputPath", "playlist", "enabled", "status", "segments", "bytes", "createdTime"]),
    "Connections": obj({k: INT for k in ["webrtc", "llhls", "hlsv3", "ovt", "file", "push", "thumbnail", "srt", "rtmp"]}),
    "Metrics": obj({
        "createdTime": TIME, "lastUpdatedTime": TIME, "totalBytesIn": INT, "totalBytesOut": INT,
        "totalConnections": INT, "maxTotalConnections": INT, "maxTotalConnectionTime": TIME,
        "lastRecvTime": TIME, "lastSentTime": TIME,
        "avgThroughputIn": INT, "avgThroughputOut": INT, "maxThroughputIn": INT, "maxThroughputOut": INT,
        "lastThroughputIn": INT, "lastThroughputOut": INT, "connections": ref("Connections"),
    }, ["createdTime", "lastUpdatedTime", "totalBytesIn", "totalBytesOut", "totalConnections", "connections"]),
    "Event": obj({
        "eventFormat": S("string", description="id3v2 or cue (case-insensitive); scte35 is refused"),
        "eventType": S("string", enum=["event", "video", "audio"]),
        "urgent": BOOL,
        "events": S("array", minItems=1, items=obj({"frameType": STR, "info": STR, "data": STR, "cueType": S("string", enum=["out", "in"]), "duration": INT})),
    }, ["eventFormat", "events"]),
}

def envelope(inner=None):
    if inner is None:
        return ref("Status")
    return {"allOf": [ref("Status"), obj({"response": inner}, ["response"])]}

def json_response(desc, schema):
    return {"description": desc, "content": {"application/json": {"schema": schema}}}

def status(desc):
    return json_response(desc, ref("Status"))

# Responses many operations share are written once, under
# components/responses, and referenced (the document served from kiln's
# binary is a third of the size it would be with every copy).
SHARED = {}

def shared(name, response):
    SHARED[name] = response
    return {"$ref": f"#/components/responses/{name}"}

ERRORS = {"400": shared("BadRequest", status("Bad request (the message says what is wrong)")),
          "401": shared("Unauthorized", status("Authorization missing or wrong")),
          "404": shared("NotFound", status("Not found (the message names what)")),
          "405": shared("MethodNotAllowed", status("Method not allowed (see Allow)")),
          "500": shared("StateNotWritten", status("The state file could not be written; nothing changed"))}

def errs(*codes):
    return {c: ERRORS[c] for c in codes}

def batch(item):
    arr = S("array", items={"oneOf": [envelope(item), ref("Status")]})
    out = {c: json_response(d, arr) for c, d in [("200", "Every item created"), ("207", "Mixed results, one envelope per item"), ("409", "Every item already exists")]}
    # 400: every item refused (an array), or the body itself (one envelope)
    out["400"] = json_response("Every item refused, or the body is not a JSON array", {"oneOf": [arr, ref("Status")]})
    return out

# What the HTTP layer may answer on any path, before a handler runs.
HTTP_LAYER = {"400": shared("MalformedRequest", status("Malformed request (no or two Host headers, two Authorization headers, chunked on HTTP/1.0, bad framing)")),
              "401": ERRORS["401"],
              "405": ERRORS["405"],
              "408": shared("RequestTimeout", status("Request head or body too slow")),
              "413": shared("BodyTooLarge", status("Body over the limit")),
              "421": shared("Misdirected", status("Host (or TLS SNI) not served")),
              "431": shared("HeadTooLarge", status("Request head over the limit"))}

def op(summary, responses, body=None):
    o = {"summary": summary, "responses": {**HTTP_LAYER, **responses}}
    if body is not None:
        o["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return o

P = lambda *names: [{"name": n, "in": "path", "required": True, "schema": STR} for n in names]

paths = {
    "/v1/version": {"get": op("kiln's version", {"200": json_response("OK", envelope(ref("Version"))), **errs("401")})},
    "/v1/webrtc": {"get": op("Where WebRTC viewers and publishers connect: signalling ports (WHEP, WHIP, OME's WebSocket), ICE candidates, TCP relay URLs, sessions (kiln extension)", {"200": json_response("OK", envelope(ref("WebRtc"))), **errs("401")})},
    "/v1/logs": {"get": op("The last 200 WARN and ERROR log lines, oldest first (kiln extension; kept in memory)", {"200": json_response("OK", envelope(S("array", items=ref("LogLine")))), **errs("401")})},
    "/v1/vhosts": {
        "get": op("Virtual host names, creation order", {"200": json_response("OK", envelope(ref("Names"))), **errs("401")}),
        "post": op("Create virtual hosts (one envelope per item)", {**batch(ref("Vhost")), **errs("401")}, S("array", items=ref("Vhost"))),
    },
    "/v1/vhosts:reloadAllCertificates": {"post": op("Reload every host's certificate as one batch", {"200": status("OK"), **errs("401", "500")})},
    "/v1/vhosts/{vhost}": {"parameters": P("vhost"),
        "get": op("A virtual host", {"200": json_response("OK", envelope(ref("Vhost"))), **errs("401", "404")}),
        "delete": op("Delete an API-made host (403 for a config-file host)", {"200": status("OK"), "403": status("Read-only host"), **errs("401", "404", "500")})},
    "/v1/vhosts/{vhost}:reloadCertificate": {"parameters": P("vhost"), "post": op("Reload one host's certificate", {"200": status("OK"), **errs("401", "404", "500")})},
    "/v1/managers/api:reloadCertificate": {"post": op("Reload the API's certificate", {"200": status("OK"), **errs("400", "401", "500")})},
    "/v1/vhosts/{vhost}/apps": {"parameters": P("vhost"),
        "get": op("Application names", {"200": json_response("OK", envelope(ref("Names"))), **errs("401", "404")}),
        "post": op("Create applications (one envelope per item)", {**batch(ref("App")), "403": status("Read-only host"), **errs("401", "404")}, S("array", items=ref("App")))},
    "/v1/vhosts/{vhost}/apps/{app}": {"parameters": P("vhost", "app"),
        "get": op("An application", {"200": json_response("OK", envelope(ref("App"))), **errs("401", "404")}),
        "patch": op("Change an application (restarts it)", {"200": json_response("OK", envelope(ref("App"))), "403": status("Read-only host"), **errs("400", "401", "404", "500")}, S("object")),
        "delete": op("Delete an application with its push tasks", {"200": status("OK"), "403": status("Read-only host"), **errs("401", "404", "500")})},
    "/v1/vhosts/{vhost}/apps/{app}/outputProfiles": {"parameters": P("vhost", "app"),
        "get": op("Output profile names", {"200": json_response("OK", envelope(ref("Names"))), **errs("401", "404")}),
        "post": op("Create output profiles (restarts the app)", {**batch(ref("OutputProfile")), "403": status("Read-only host"), **errs("401", "404")}, S("array", items=ref("OutputProfile")))},
    "/v1/vhosts/{vhost}/apps/{app}/outputProfiles/{profile}": {"parameters": P("vhost", "app", "profile"),
        "get": op("An output profile", {"200": json_response("OK", envelope(ref("OutputProfile"))), **errs("401", "404")}),
        "patch": op("Change an output profile (restarts the app)", {"200": json_response("OK", envelope(ref("OutputProfile"))), "403": status("Read-only host"), **errs("400", "401", "404", "500")}, S("object")),
        "delete": op("Delete an output profile (restarts the app)", {"200": status("OK"), "403": status("Read-only host"), **errs("401", "404", "500")})},
    "/v1/vhosts/{vhost}/apps/{app}/streams": {"parameters": P("vhost", "app"),
        "get": op("Live stream names (once their tracks are known)", {"200": json_response("OK", envelope(ref("Names"))), **errs("401", "404")}),
        "post": op("Pull a stream in (rtsp://, srt://, rtmp[s]:// URLs tried in order); answered once it is live or failed", {
            "200": json_response("Live", envelope(ref("Stream"))),
            "409": status("The name is live or pulled already"),
            "502": status("Every URL failed (the message gives each reason)"),
            "504": status("Not live after 120 s"),
            **errs("400", "401", "404", "500")}, ref("Pull"))},
    "/v1/vhosts/{vhost}/apps/{app}/scheduledChannels": {"parameters": P("vhost", "app"),
        "get": op("Scheduled channel names (made by the API or by .sch files)", {"200": json_response("OK", envelope(ref("Names"))), **errs("401", "404")}),
        "post": op("Create a scheduled channel (durable; the body is a .sch file as JSON)", {
            "201": status("Created"), "409": status("A stream or channel of that name exists"),
            **errs("400", "401", "404", "500")}, ref("ScheduledChannel"))},
    "/v1/vhosts/{vhost}/apps/{app}/scheduledChannels/{channel}": {"parameters": P("vhost", "app", "channel"),
        "get": op("A scheduled channel, with what it plays now", {"200": json_response("OK", envelope(ref("ScheduledChannelInfo"))), **errs("401", "404")}),
        "patch": op("Replace its programmes or fallback (not its stream)", {"201": status("Created (OME answers a change as a creation)"), **errs("400", "401", "404", "500")}, S("object")),
        "delete": op("Delete a scheduled channel (one made by a file: delete the file)", {"200": status("OK"), **errs("400", "401", "404", "500")})},
    "/v1/vhosts/{vhost}/apps/{app}/multiplexChannels": {"parameters": P("vhost", "app"),
        "get": op("Multiplex channel names (made by the API or by .mux files)", {"200": json_response("OK", envelope(ref("Names"))), **errs("401", "404")}),
        "post": op("Create a multiplex channel (durable; the body is a .mux file as JSON)", {
            "201": status("Created"), "409": status("A stream or channel of that name exists"),
            **errs("400", "401", "404", "500")}, ref("MultiplexChannel"))},
    "/v1/vhosts/{vhost}/apps/{app}/multiplexChannels/{channel}": {"parameters": P("vhost", "app", "channel"),
        "get": op("A multiplex channel, with its state (Pulling until every source was seen, then Playing)", {"200": json_response("OK", envelope(S("object"))), **errs("401", "404")}),
        "delete": op("Delete a multiplex channel (one made by a file: delete the file)", {"200": status("OK"), **errs("400", "401", "404", "500")})},
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}": {"parameters": P("vhost", "app", "stream"),
        "get": op("A live stream, by input or output name", {"200": json_response("OK", envelope(ref("Stream"))), **errs("401", "404")}),
        "delete": op("End a pulled stream (and its pull) or disconnect a publisher", {"200": status("OK"), **errs("401", "404", "500")})},
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}/sessions": {"parameters": P("vhost", "app", "stream"),
        "get": op("Who publishes and watches the stream: its publisher, RTMP and SRT players, WebRTC viewers, LL-HLS and HLS viewer addresses (kiln extension)",
                  {"200": json_response("OK", envelope(S("array", items=ref("Session")))), **errs("401", "404")})},
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}/sessions/{session}": {"parameters": P("vhost", "app", "stream", "session"),
        "delete": op("End one session: a player or WebRTC viewer is disconnected, an LL-HLS or HLS viewer's address is refused for a minute (403), the publisher's stream ends (a pull reconnects: DELETE the stream to stop it) (kiln extension)",
                     {"200": status("OK"), **errs("401", "404")})},
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:sendEvent": {"parameters": P("vhost", "app", "stream"),
        "post": op("Timed metadata into the stream's LL-HLS parts (ID3v2.4 in emsg) or an ad-break cue", {"200": status("OK"), **errs("400", "401", "404")}, ref("Event"))},
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:sendEvents": {"parameters": P("vhost", "app", "stream"),
        "post": op("Several :sendEvent bodies, in order (one envelope per item)", {
            "200": json_response("Every event taken", S("array", items=ref("Status"))),
            "207": json_response("Mixed results, one envelope per item", S("array", items=ref("Status"))),
            "400": json_response("Every event refused, or the body is not a JSON array", {"oneOf": [S("array", items=ref("Status")), ref("Status")]}),
            **errs("401", "404")}, S("array", items=ref("Event")))},
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:concludeHlsLive": {"parameters": P("vhost", "app", "stream"),
        "post": op("End the stream's LL-HLS and HLS playlists now (EXT-X-ENDLIST, VOD from here); the stream goes on", {"200": status("OK"), **errs("400", "401", "404")}, S("object"))},
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:startHlsDump": {"parameters": P("vhost", "app", "stream"),
        "post": op("Dump the stream's LL-HLS output to files as it is made (VOD once stopped); answered as OME does, with no response (:hlsDumps lists it)", {"200": status("OK"), **errs("400", "401", "404")}, ref("StartHlsDump"))},
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:stopHlsDump": {"parameters": P("vhost", "app", "stream"),
        "post": op("End a dump (or every dump of the output stream): ENDLIST, info Completed, the id free", {"200": status("OK"), **errs("400", "401", "404")}, obj({"outputStreamName": STR, "id": STR}))},
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:hlsDumps": {"parameters": P("vhost", "app", "stream"),
        "post": op("The stream's dumps (a body {id} selects one)", {"200": json_response("OK", envelope(S("array", items=ref("HlsDump")))), **errs("400", "401", "404")})},
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:sendSubtitles": {"parameters": P("vhost", "app", "stream"),
        "post": op("OME v0.20's WebVTT subtitles: the body is checked as OME checks it; kiln's streams have no subtitle tracks, so a valid body is answered as OME answers a label that names none (500)",
                   {"500": status("Could not send WebVTT frame (no subtitle track has the label)"), **errs("400", "401", "404")},
                   obj({"format": S("string", enum=["webvtt"]), "data": S("array", items=obj({"label": STR, "subtitles": S("array", items=obj(
                       {"text": STR, "startOffset": S("integer"), "durationMs": INT, "settings": STR}, ["text"]))}, ["label", "subtitles"]))}, ["format", "data"]))},
    "/v1/vhosts/{vhost}/apps/{app}:startPush": {"parameters": P("vhost", "app"),
        "post": op("Start (or reserve) a push task", {"200": json_response("OK", envelope(ref("Push"))), "409": status("Duplicate ID"), **errs("400", "401", "404", "500")}, S("object"))},
    "/v1/vhosts/{vhost}/apps/{app}:stopPush": {"parameters": P("vhost", "app"),
        "post": op("Stop and remove a push task", {"200": status("OK"), **errs("400", "401", "404", "500")}, obj({"id": STR}, ["id"]))},
    "/v1/vhosts/{vhost}/apps/{app}:pushes": {"parameters": P("vhost", "app"),
        "post": op("Push tasks, creation order (a body {id} selects one); [] for an application without Push", {"200": json_response("OK", envelope(S("array", items=ref("Push")))), **errs("400", "401", "404")}),
        "get": op("The same (OME keeps this deprecated form)", {"200": json_response("OK", envelope(S("array", items=ref("Push")))), **errs("400", "401", "404")})},
    "/v1/vhosts/{vhost}/apps/{app}:pulls": {"parameters": P("vhost", "app"),
        "post": op("Every pull of the application, live or not, by name (kiln extension)", {"200": json_response("OK", envelope(S("array", items=ref("PullState")))), **errs("401", "404")})},
    "/v1/vhosts/{vhost}/apps/{app}:startRecord": {"parameters": P("vhost", "app"),
        "post": op("Start (or reserve) a record", {"200": json_response("OK", envelope(ref("Record"))), **errs("400", "401", "404", "500")}, ref("StartRecord"))},
    "/v1/vhosts/{vhost}/apps/{app}:stopRecord": {"parameters": P("vhost", "app"),
        "post": op("Stop a record: its file is closed and its id is free", {"200": json_response("OK", envelope(ref("Record"))), **errs("400", "401", "404", "500")}, obj({"id": STR}, ["id"]))},
    "/v1/vhosts/{vhost}/apps/{app}:records": {"parameters": P("vhost", "app"),
        "post": op("Records, creation order (a body {id} selects one); [] for an application without FILE", {"200": json_response("OK", envelope(S("array", items=ref("Record")))), **errs("400", "401", "404")}),
        "get": op("The same (OME keeps this deprecated form)", {"200": json_response("OK", envelope(S("array", items=ref("Record")))), **errs("400", "401", "404")})},
    "/v1/stats/history": {"get": op("The last five minutes of what the console graphs, one sample every intervalMs (kiln extension): series in:VH/APP/STREAM (input bits per second), fps:VH/APP/STREAM, push:/record:/pull:VH/APP/ID (states), viewers:PROTOCOL; oldest first, null where not sampled",
        {"200": json_response("OK", envelope(obj({"intervalMs": INT, "series": S("object", additionalProperties=S("array", items={"oneOf": [S("number"), STR, S("null")]}))}, ["intervalMs", "series"]))), **errs("401")})},
    "/v1/stats/current": {"get": op("Statistics of the server", {"200": json_response("OK", envelope(ref("Metrics"))), **errs("401")})},
    "/v1/stats/current/vhosts/{vhost}": {"parameters": P("vhost"), "get": op("Statistics of a virtual host", {"200": json_response("OK", envelope(ref("Metrics"))), **errs("401", "404")})},
    "/v1/stats/current/vhosts/{vhost}/apps/{app}": {"parameters": P("vhost", "app"), "get": op("Statistics of an application", {"200": json_response("OK", envelope(ref("Metrics"))), **errs("401", "404")})},
    "/v1/stats/current/vhosts/{vhost}/apps/{app}/streams/{stream}": {"parameters": P("vhost", "app", "stream"), "get": op("Statistics of a live stream", {"200": json_response("OK", envelope(ref("Metrics"))), **errs("401", "404")})},
    "/metrics": {"get": op("Prometheus text format (version 0.0.4)", {"200": {"description": "OK", "content": {"text/plain": {"schema": STR}}}, **errs("401")})},
    "/v1/openapi.yaml": {"get": op("This document", {"200": {"description": "OK", "content": {"application/yaml": {"schema": STR}}}, **errs("401")})},
}

doc = {
    "openapi": "3.1.0",
    "info": {"title": "kiln management API", "version": "1",
             "description": "OvenMediaEngine's v1 REST API as kiln serves it. Every answer but /metrics and this document is an envelope {statusCode, message, response?}; errors carry the envelope alone. A method a path does not take is answered 405 with that envelope and an Allow header. Generated by src/api/openapi.py."},
    "servers": [{"url": "http://127.0.0.1:8081"}],
    "security": [{"basic": []}],
    "components": {"securitySchemes": {"basic": {"type": "http", "scheme": "basic"}}, "schemas": schemas,
                   "responses": SHARED},
    "paths": paths,
}
def layout(value, depth=0, open_levels=3):
    """JSON with one entry per line down to `open_levels` (each path,
    schema and shared response on its own line), compact below: readable
    in a diff, small in kiln's binary."""
    if depth >= open_levels or not isinstance(value, dict) or not value:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    pad = " " * (depth + 1)
    items = [f"{pad}{json.dumps(k)}: {layout(v, depth + 1, open_levels)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"

out = os.path.join(os.path.dirname(__file__), "openapi.yaml")
with open(out, "w") as f:
    f.write("# kiln's OpenAPI 3.1 document, in YAML's JSON syntax. Generated by src/api/openapi.py; edit that.\n")
    f.write(layout(doc))
    f.write("\n")
print("wrote", os.path.normpath(out))
