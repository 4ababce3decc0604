//! The layer order written at the top of `src/lib.rs`, held against every
//! `crate::` path in `src/` (issue 29). An import may point down to an
//! earlier layer, or sideways inside a layer marked `shared` (cores, model)
//! as long as the modules of that layer form no cycle; it may never point
//! up, nor sideways between the modules of a layer marked `apart` (the
//! features: two features share a piece by moving it down). Test code
//! (`#[cfg(test)]` items, `tests.rs` files) may use anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Debug)]
struct Layer {
    name: String,
    /// Modules of the layer may import each other (without a cycle).
    shared: bool,
    modules: Vec<String>,
}

/// Reads lines `//! layer <name> (shared|apart): <module> <module> ...`,
/// lowest first.
fn layers_of(lib: &str) -> Vec<Layer> {
    lib.lines()
        .filter_map(|l| l.strip_prefix("//! layer "))
        .map(|rest| {
            let (head, modules) = rest.split_once(':').expect("layer line has a ':'");
            let mut head = head.split_whitespace();
            let name = head.next().expect("layer name").to_string();
            let shared = match head.next() {
                Some("(shared)") => true,
                Some("(apart)") => false,
                other => panic!("layer {name}: expected (shared) or (apart), got {other:?}"),
            };
            Layer {
                name,
                shared,
                modules: modules.split_whitespace().map(str::to_string).collect(),
            }
        })
        .collect()
}

/// The top-level module a file of `src/` belongs to (`None`: lib.rs,
/// main.rs).
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    let m = first.strip_suffix(".rs").unwrap_or(first);
    (m != "lib" && m != "main").then(|| m.to_string())
}

/// Every `crate::<name>` a line names (a module, or a macro exported at
/// the root).
fn crate_paths(line: &str) -> Vec<String> {
    let code = match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    };
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `$crate::` in a macro, `kiln_crate::`
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue; // `use crate::{a, b}`: not used in src/
        }
        out.push(name);
    }
    out
}

/// The lines of a file that count (1-based numbers): everything but test
/// code, `#[cfg(test)]` items ending where their indentation closes.
fn counted_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if l.trim() == "#[cfg(test)]" {
            // Skip the item that follows: one line, or a block to its
            // closing brace at the same indentation.
            let Some(item) = lines.get(i + 1) else { break };
            let indent = item.len() - item.trim_start().len();
            if item.trim_end().ends_with('{') {
                let close = format!("{}}}", " ".repeat(indent));
                let end = (i + 2..lines.len())
                    .find(|&j| lines[j] == close)
                    .unwrap_or(lines.len());
                i = end + 1;
            } else {
                i += 2;
            }
            continue;
        }
        out.push((i + 1, l));
        i += 1;
    }
    out
}

/// One import that breaks the order.
#[derive(Debug, PartialEq)]
struct Breach {
    at: String,
    what: String,
}

/// Checks files (path under `src/`, text) against the layers; every
/// breach, each naming its file and line.
fn check(layers: &[Layer], files: &[(PathBuf, String)]) -> Vec<Breach> {
    let mut layer_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, l) in layers.iter().enumerate() {
        for m in &l.modules {
            assert!(
                layer_of.insert(m, i).is_none(),
                "module {m} is in two layers"
            );
        }
    }
    // Macros exported at the root (`crate::info!`) belong to the module
    // that defines them.
    let mut macros: BTreeMap<String, String> = BTreeMap::new();
    for (rel, text) in files {
        let Some(m) = module_of(rel) else { continue };
        for line in text.lines() {
            if let Some(rest) = line.trim_start().strip_prefix("macro_rules! ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                macros.insert(name, m.clone());
            }
        }
    }
    let mut breaches = Vec::new();
    // Edges inside shared layers, for the cycle check: (from, to) -> first place.
    let mut edges: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut seen_modules = BTreeSet::new();
    for (rel, text) in files {
        let Some(from) = module_of(rel) else { continue };
        seen_modules.insert(from.clone());
        let Some(&lf) = layer_of.get(from.as_str()) else {
            breaches.push(Breach {
                at: format!("src/{}", rel.display()),
                what: format!(
                    "module `{from}` is in no layer: add it to the layer lines at the top of src/lib.rs"
                ),
            });
            continue;
        };
        let test_file = rel
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n == "tests.rs" || n.ends_with("_tests.rs"))
            || rel.components().any(|c| c.as_os_str() == "tests");
        if test_file {
            continue;
        }
        for (n, line) in counted_lines(text) {
            for name in crate_paths(line) {
                let to = macros.get(&name).cloned().unwrap_or(name);
                if to == from {
                    continue;
                }
                let at = format!("src/{}:{n}", rel.display());
                let Some(&lt) = layer_of.get(to.as_str()) else {
                    // A root item (a function or macro of lib.rs): none today.
                    breaches.push(Breach {
                        at,
                        what: format!("`crate::{to}` is not a module in the layer lines"),
                    });
                    continue;
                };
                if lt > lf {
                    breaches.push(Breach {
                        at,
                        what: format!(
                            "{from} ({}) imports {to} ({}): up",
                            layers[lf].name, layers[lt].name
                        ),
                    });
                } else if lt == lf && !layers[lf].shared {
                    breaches.push(Breach {
                        at,
                        what: format!(
                            "{from} imports {to}: sideways between {}; move the shared piece down",
                            layers[lf].name
                        ),
                    });
                } else if lt == lf {
                    edges.entry((from.clone(), to.clone())).or_insert(at);
                }
            }
        }
    }
    // A cycle among the modules of a shared layer.
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        graph.entry(a).or_default().push(b);
    }
    if let Some(cycle) = find_cycle(&graph) {
        let path: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let at = &edges[&(w[0].to_string(), w[1].to_string())];
                format!("{} -> {} ({at})", w[0], w[1])
            })
            .collect();
        breaches.push(Breach {
            at: path[0].clone(),
            what: format!("import cycle: {}", path.join(", ")),
        });
    }
    breaches
}

/// One cycle of the graph as a closed path (first node repeated at the end).
fn find_cycle<'a>(graph: &BTreeMap<&'a str, Vec<&'a str>>) -> Option<Vec<&'a str>> {
    fn visit<'a>(
        n: &'a str,
        graph: &BTreeMap<&'a str, Vec<&'a str>>,
        stack: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(i) = stack.iter().position(|s| *s == n) {
            let mut c = stack[i..].to_vec();
            c.push(n);
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        stack.push(n);
        for next in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(next, graph, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(n);
        None
    }
    let mut done = BTreeSet::new();
    for n in graph.keys() {
        if let Some(c) = visit(n, graph, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

fn source_files(dir: &Path, root: &Path, out: &mut Vec<(PathBuf, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("src/ is readable")
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            source_files(&p, root, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&p).expect("source is UTF-8");
            out.push((p.strip_prefix(root).unwrap().to_path_buf(), text));
        }
    }
}

fn repo_layers() -> Vec<Layer> {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("src/lib.rs");
    let layers = layers_of(&lib);
    assert!(layers.len() >= 4, "src/lib.rs names its layers");
    layers
}

#[test]
fn every_import_points_down_the_layers_of_lib_rs() {
    let layers = repo_layers();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &src, &mut files);
    assert!(files.len() > 50, "read the sources ({} files)", files.len());
    let breaches = check(&layers, &files);
    let report: Vec<String> = breaches
        .iter()
        .map(|b| format!("{}: {}", b.at, b.what))
        .collect();
    assert!(
        breaches.is_empty(),
        "{} imports break the layer order of src/lib.rs:\n{}",
        breaches.len(),
        report.join("\n")
    );
}

/// The check catches what it is for: planted violations in copies of
/// real files, each named with its file and line.
#[test]
fn the_check_fails_on_planted_violations() {
    let layers = repo_layers();
    let feature = |m: &str| {
        layers
            .iter()
            .any(|l| !l.shared && l.modules.iter().any(|x| x == m))
    };
    assert!(
        feature("push") && feature("pull"),
        "push and pull are features"
    );
    let planted = vec![
        // a feature reaching into another feature (sideways)
        (
            PathBuf::from("push/planted.rs"),
            "use crate::media::Frame;\nuse crate::pull::table::PullTable;\n".to_string(),
        ),
        // a core reaching up into the model
        (
            PathBuf::from("codec/planted.rs"),
            "fn f(r: &crate::state::Registry) {}\n".to_string(),
        ),
        // the model reaching up into the API
        (
            PathBuf::from("state/planted.rs"),
            "\n\nuse crate::api::Api;\n#[cfg(test)]\nmod tests {\n    use crate::server::Server;\n}\n"
                .to_string(),
        ),
        // a cycle between two cores
        (
            PathBuf::from("rtmp/planted.rs"),
            "use crate::ts::mux;\n".to_string(),
        ),
        (
            PathBuf::from("ts/planted.rs"),
            "use crate::rtmp::flv;\n".to_string(),
        ),
        // a module nobody placed
        (PathBuf::from("channels/mod.rs"), "\n".to_string()),
    ];
    let got = check(&layers, &planted);
    let text: Vec<String> = got
        .iter()
        .map(|b| format!("{}: {}", b.at, b.what))
        .collect();
    let has = |at: &str, what: &str| {
        got.iter()
            .any(|b| b.at.starts_with(at) && b.what.contains(what))
    };
    assert!(has("src/push/planted.rs:2", "sideways"), "{text:#?}");
    assert!(has("src/codec/planted.rs:1", "up"), "{text:#?}");
    assert!(has("src/state/planted.rs:3", "up"), "{text:#?}");
    assert!(
        has("rtmp -> ts (src/rtmp/planted.rs:1)", "import cycle"),
        "{text:#?}"
    );
    assert!(has("src/channels/mod.rs", "in no layer"), "{text:#?}");
    // test code is exempt; a core importing a core is fine
    assert_eq!(got.len(), 5, "{text:#?}");
}

#[test]
fn paths_are_read_as_the_compiler_does() {
    assert_eq!(
        crate_paths("use crate::push::request::{a, b}; // crate::api"),
        vec!["push"]
    );
    assert_eq!(
        crate_paths("    crate::info!(\"x\"); $crate::log::f()"),
        vec!["info"]
    );
    assert_eq!(
        crate_paths("let r: crate::state::Registry = crate::config::parse();"),
        vec!["state", "config"]
    );
}
