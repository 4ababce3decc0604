//! kiln's OpenAPI document as a checker of answers: the common test client
//! holds every answer of the test suite to it (status documented for the
//! path and method, JSON body valid against the schema).
#![allow(dead_code)]

use super::HttpResponse;
use serde_json::{json, Value};
use std::sync::OnceLock;

/// The document in the repository (the same bytes kiln serves).
pub fn spec() -> &'static Spec {
    static SPEC: OnceLock<Spec> = OnceLock::new();
    SPEC.get_or_init(|| {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/api/openapi.yaml"))
                .expect("src/api/openapi.yaml");
        Spec::parse(&text)
    })
}

pub struct Spec {
    pub doc: Value,
}

/// Does a concrete path match a template (`{x}` is one segment, without
/// `/` or `:`; `{x}:action` ends with the action)?
fn matches(template: &str, path: &str) -> bool {
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len()
        && t.iter().zip(&p).all(|(t, p)| match t.split_once('}') {
            Some((open, rest)) if open.starts_with('{') => {
                let Some(stem) = p.strip_suffix(rest) else {
                    return false;
                };
                !stem.is_empty() && !stem.contains(':')
            }
            _ => t == p,
        })
}

impl Spec {
    /// The document: YAML in JSON syntax after one comment line.
    pub fn parse(text: &str) -> Spec {
        let json = text.split_once('\n').map_or(text, |(_, rest)| rest);
        Spec {
            doc: serde_json::from_str(json).expect("the document is YAML in JSON syntax"),
        }
    }

    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r.rsplit('/').next().unwrap();
                self.resolve(&self.doc["components"]["schemas"][name])
            }
            None => schema,
        }
    }

    /// Errors of `value` against `schema` (a JSON Schema subset: $ref,
    /// allOf, oneOf, type, properties, required, items, enum, minimum).
    fn check(&self, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
        let schema = self.resolve(schema);
        if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
            for s in all {
                self.check(s, value, at, errors);
            }
        }
        if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
            let ok = one.iter().filter(|s| {
                let mut e = Vec::new();
                self.check(s, value, at, &mut e);
                e.is_empty()
            });
            if ok.count() == 0 {
                errors.push(format!("{at}: matches none of oneOf"));
            }
        }
        if let Some(t) = schema.get("type").and_then(Value::as_str) {
            let ok = match t {
                "object" => value.is_object(),
                "array" => value.is_array(),
                "string" => value.is_string(),
                "integer" => value.is_i64() || value.is_u64(),
                "number" => value.is_number(),
                "boolean" => value.is_boolean(),
                _ => true,
            };
            if !ok {
                errors.push(format!("{at}: not {t}: {value}"));
                return;
            }
        }
        if let Some(e) = schema.get("enum").and_then(Value::as_array) {
            if !e.contains(value) {
                errors.push(format!("{at}: {value} not in {e:?}"));
            }
        }
        if let (Some(min), Some(v)) = (
            schema.get("minimum").and_then(Value::as_f64),
            value.as_f64(),
        ) {
            if v < min {
                errors.push(format!("{at}: {v} < {min}"));
            }
        }
        if let Some(req) = schema.get("required").and_then(Value::as_array) {
            for r in req {
                if value.get(r.as_str().unwrap()).is_none() {
                    errors.push(format!("{at}: missing {r}"));
                }
            }
        }
        if let (Some(props), Some(obj)) = (
            schema.get("properties").and_then(Value::as_object),
            value.as_object(),
        ) {
            for (k, s) in props {
                if let Some(v) = obj.get(k) {
                    self.check(s, v, &format!("{at}.{k}"), errors);
                }
            }
        }
        if let (Some(items), Some(arr)) = (schema.get("items"), value.as_array()) {
            for (i, v) in arr.iter().enumerate() {
                self.check(items, v, &format!("{at}[{i}]"), errors);
            }
        }
    }

    /// Checks one answer: its status is documented for the path and method,
    /// and a JSON body validates against that status's schema.
    pub fn validate(&self, method: &str, path: &str, r: &HttpResponse) {
        let path = path.split('?').next().unwrap();
        let paths = self.doc["paths"].as_object().unwrap();
        let Some((template, item)) = paths.iter().find(|(t, _)| matches(t, path)) else {
            // Not an API path: the console's static files, or the router's
            // 404 (or an HTTP-layer error).
            if path == "/console" || path.starts_with("/console/") {
                return;
            }
            assert!(
                matches!(r.status, 400 | 401 | 404 | 408 | 413 | 421 | 431),
                "{path}: {} outside the document",
                r.status
            );
            return;
        };
        let method = if method == "HEAD" {
            "get"
        } else {
            &method.to_lowercase()
        };
        let Some(op) = item.get(method) else {
            // A method the path does not take: 405, a Status envelope and
            // an Allow header naming the documented methods.
            assert_eq!(r.status, 405, "{method} {template} is not documented");
            let allow = r.header("Allow").unwrap_or("").to_lowercase();
            for m in item
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| *k != "parameters")
            {
                assert!(allow.contains(m.as_str()), "Allow [{allow}] lacks {m}");
            }
            let mut errors = Vec::new();
            let status = json!({"$ref": "#/components/schemas/Status"});
            self.check(
                &status,
                &serde_json::from_str(&r.body).unwrap(),
                "$",
                &mut errors,
            );
            assert!(errors.is_empty(), "{errors:?}");
            return;
        };
        let status = r.status.to_string();
        let resp = op["responses"].get(&status).unwrap_or_else(|| {
            panic!(
                "{method} {template}: status {status} is not documented ({})",
                r.body
            )
        });
        // A response shared by many operations is a reference.
        let resp = match resp.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r
                    .strip_prefix("#/components/responses/")
                    .expect("a response reference");
                let shared = &self.doc["components"]["responses"][name];
                assert!(shared.is_object(), "{r} is not in the document");
                shared
            }
            None => resp,
        };
        if let Some(schema) = resp["content"]
            .get("application/json")
            .map(|c| &c["schema"])
        {
            let body: Value = serde_json::from_str(&r.body)
                .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {}", r.body));
            let mut errors = Vec::new();
            self.check(schema, &body, "$", &mut errors);
            assert!(
                errors.is_empty(),
                "{method} {path} {status}: {errors:#?}\n{}",
                r.body
            );
        }
    }
}
