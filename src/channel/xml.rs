//! Reading `.sch` and `.mux` files: the config's bounded element tree
//! ([`crate::config::dom`]) walked into the same specs the API takes, each
//! error naming its line and column. Unknown elements are errors (a typo
//! must not silently change a channel).

use crate::config::dom::{self, Element};

/// What is wrong with a file, and where (1-based; 0 when the file as a
/// whole is wrong).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmlError {
    pub line: u64,
    pub column: u64,
    pub message: String,
}

impl std::fmt::Display for XmlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

pub(crate) fn error(el: &Element, message: impl Into<String>) -> XmlError {
    XmlError {
        line: el.line,
        column: el.column,
        message: message.into(),
    }
}

/// The document's root, which must be named `root`.
pub(crate) fn root(text: &str, root: &str) -> Result<Element, XmlError> {
    let doc = dom::parse(text).map_err(|e| XmlError {
        line: e.line,
        column: e.column,
        message: e.message,
    })?;
    if doc.name != root {
        return Err(error(
            &doc,
            format!("the root element must be <{root}>, not <{}>", doc.name),
        ));
    }
    Ok(doc)
}

/// Refuses a child of `el` not in `known`.
pub(crate) fn only(el: &Element, known: &[&str]) -> Result<(), XmlError> {
    for c in &el.children {
        if !known.contains(&c.name.as_str()) {
            return Err(error(
                c,
                format!("<{}> is not known inside <{}>", c.name, el.name),
            ));
        }
    }
    Ok(())
}

pub(crate) fn text<'a>(el: &'a Element, name: &str) -> Option<&'a str> {
    el.children
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.text.as_str())
}

pub(crate) fn boolean(el: &Element, name: &str, default: bool) -> Result<bool, XmlError> {
    let Some(c) = el.children.iter().find(|c| c.name == name) else {
        return Ok(default);
    };
    match c.text.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(error(
            c,
            format!("<{name}> must be true or false, not [{other}]"),
        )),
    }
}

pub(crate) fn attr_bool(el: &Element, name: &str) -> Result<bool, XmlError> {
    match el.attribute(name).map(str::to_ascii_lowercase).as_deref() {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(error(
            el,
            format!("{name}=\"{other}\" must be true or false"),
        )),
    }
}

pub(crate) fn attr_ms(el: &Element, name: &str, default: i64) -> Result<i64, XmlError> {
    match el.attribute(name) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= -1)
            .ok_or_else(|| error(el, format!("{name}=\"{v}\" must be milliseconds"))),
    }
}

pub(crate) fn number<T: std::str::FromStr>(
    el: &Element,
    name: &str,
) -> Result<Option<T>, XmlError> {
    match el.children.iter().find(|c| c.name == name) {
        None => Ok(None),
        Some(c) => c
            .text
            .parse()
            .map(Some)
            .map_err(|_| error(c, format!("<{name}> must be a number, not [{}]", c.text))),
    }
}
