//! A small element tree read from XML with the `xml` crate, each element
//! remembering where it started, so config errors can name line and column.
//! Text of an element is its character data, trimmed; comments are dropped.
//! Limits keep a hostile file from exhausting memory (depth, element count).

use xml::common::Position;
use xml::reader::{EventReader, ParserConfig, XmlEvent};

const MAX_DEPTH: usize = 64;
const MAX_ELEMENTS: usize = 200_000;

#[derive(Debug, Clone)]
pub struct Element {
    pub name: String,
    pub attributes: Vec<(String, String)>,
    pub children: Vec<Element>,
    pub text: String,
    /// 1-based line and column where the start tag begins.
    pub line: u64,
    pub column: u64,
}

impl Element {
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A syntax error with its position (1-based).
#[derive(Debug)]
pub struct SyntaxError {
    pub line: u64,
    pub column: u64,
    pub message: String,
}

/// Parses a whole document into its root element.
pub fn parse(text: &str) -> Result<Element, SyntaxError> {
    let config = ParserConfig::new()
        .trim_whitespace(false)
        .whitespace_to_characters(false)
        .cdata_to_characters(true)
        .ignore_comments(true);
    let mut reader = EventReader::new_with_config(text.as_bytes(), config);
    let mut stack: Vec<Element> = Vec::new();
    let mut count = 0usize;
    // The root once it is closed: what follows must be nothing but
    // whitespace, comments and processing instructions.
    let mut root: Option<Element> = None;
    let after_root = |line: u64, column: u64, what: &str, root: &Element| SyntaxError {
        line,
        column,
        message: format!("{what} after the end of the root element </{}>", root.name),
    };
    loop {
        let event = reader.next().map_err(|e| {
            let p = e.position();
            SyntaxError {
                line: p.row + 1,
                column: p.column + 1,
                message: without_position(&e.msg()).to_string(),
            }
        })?;
        let pos = reader.position();
        match event {
            XmlEvent::StartElement {
                name, attributes, ..
            } => {
                if let Some(r) = &root {
                    return Err(after_root(
                        pos.row + 1,
                        pos.column + 1,
                        &format!("element <{}>", name.local_name),
                        r,
                    ));
                }
                count += 1;
                if stack.len() >= MAX_DEPTH || count > MAX_ELEMENTS {
                    return Err(SyntaxError {
                        line: pos.row + 1,
                        column: pos.column + 1,
                        message: "document too deep or too large".into(),
                    });
                }
                stack.push(Element {
                    name: name.local_name,
                    attributes: attributes
                        .into_iter()
                        .map(|a| (a.name.local_name, a.value))
                        .collect(),
                    children: Vec::new(),
                    text: String::new(),
                    line: pos.row + 1,
                    column: pos.column + 1,
                });
            }
            XmlEvent::Characters(s) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&s);
                } else if let Some(r) = root.as_ref().filter(|_| !s.trim().is_empty()) {
                    return Err(after_root(pos.row + 1, pos.column + 1, "text", r));
                }
            }
            XmlEvent::EndElement { .. } => {
                let Some(mut done) = stack.pop() else {
                    continue;
                };
                done.text = done.text.trim().to_string();
                match stack.last_mut() {
                    Some(parent) => parent.children.push(done),
                    None => root = Some(done),
                }
            }
            XmlEvent::EndDocument => {
                return root.ok_or(SyntaxError {
                    line: pos.row + 1,
                    column: pos.column + 1,
                    message: "no root element".into(),
                })
            }
            _ => {}
        }
    }
}

/// Some xml-rs messages start with their own `row:col `; the error already
/// carries the position, so it is said once.
fn without_position(msg: &str) -> &str {
    let Some((pos, rest)) = msg.split_once(' ') else {
        return msg;
    };
    match pos.split_once(':') {
        Some((r, c))
            if !r.is_empty()
                && !c.is_empty()
                && r.bytes().all(|b| b.is_ascii_digit())
                && c.bytes().all(|b| b.is_ascii_digit()) =>
        {
            rest
        }
        _ => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_text() {
        let doc = "<?xml version=\"1.0\"?>\n<Server version=\"8\">\n  <Name> kiln </Name>\n  <!-- c -->\n  <Bind/>\n</Server>\n";
        let root = parse(doc).unwrap();
        assert_eq!(root.name, "Server");
        assert_eq!(root.attribute("version"), Some("8"));
        assert_eq!((root.line, root.column), (2, 1));
        assert_eq!(root.children[0].text, "kiln");
        assert_eq!((root.children[0].line, root.children[0].column), (3, 3));
        assert_eq!(root.children[1].name, "Bind");
    }

    #[test]
    fn nothing_but_comments_may_follow_the_root() {
        let ok = parse("<Server/>\n<!-- fine -->\n  \n").unwrap();
        assert_eq!(ok.name, "Server");
        let second = parse("<Server>\n</Server>\n<Server version=\"8\"/>\n").unwrap_err();
        assert_eq!(second.line, 3, "{second:?}");
        assert!(
            second
                .message
                .contains("after the end of the root element </Server>"),
            "{second:?}"
        );
        let garbage = parse("<Server>\n</Server>\ngarbage & <<<\n").unwrap_err();
        assert_eq!(garbage.line, 3, "{garbage:?}");
    }

    #[test]
    fn syntax_error_has_position() {
        let err = parse("<Server>\n  <Name>x</Nme>\n</Server>").unwrap_err();
        assert_eq!(err.line, 2);
    }
}
