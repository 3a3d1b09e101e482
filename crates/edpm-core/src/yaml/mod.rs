//! Reading manifests exactly as Kubernetes does, at any size.
//!
//! Pure: text in, value trees out. kubectl splits a YAML stream into documents at `---` lines
//! ([`sections`]), and the API server reads each one through sigs.k8s.io/yaml: go-yaml v2 with
//! YAML 1.1 scalars (`0640` is octal, `yes`/`on`/`y` are true, timestamps stay text, `<<`
//! merges), then a JSON round trip (non-string keys become strings, `1.0` becomes `1`,
//! `.inf` is refused). [`section`] does the same on granit-parser's events, building a
//! [`Node`] tree that borrows its strings from the text; typed objects are decoded straight
//! from it ([`decode`]). JSON text takes the same tree through serde_json ([`json_documents`]).
//!
//! Deliberately stricter than the API server: a key written twice in one mapping is refused
//! (the API server keeps the last, or the first that JSON ordering happens to give), and so is
//! a second document hidden after `...` in one section (kubectl drops it).
//!
//! Hostile input is refused with its line and the limit: nesting deeper than [`MAX_DEPTH`],
//! aliases expanding a document past [`ALIAS_NODES_FLOOR`] nodes (or
//! [`ALIAS_NODES_PER_WRITTEN`] per node written, if more). The total size of what is read is
//! capped by the directory reader (`source::dir`).

mod load;
pub mod node;
pub mod resolve;
mod split;

pub use node::{Data, DecodeFailure, Entry, Node, decode};
pub use split::{Section, sections};

/// The deepest nesting of mappings and lists a document may have.
pub const MAX_DEPTH: usize = 100;
/// Nodes that aliases may add to one document, whatever its size.
pub const ALIAS_NODES_FLOOR: usize = 1_000_000;
/// Nodes that aliases may add per node written, for documents large enough to need more.
pub const ALIAS_NODES_PER_WRITTEN: usize = 10;

/// What every duplicate-key error says about the policy.
pub const DUPLICATE_POLICY: &str = "the API server would silently keep one of them, so edpm-agent refuses the ambiguity on purpose: remove one";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Not YAML (or JSON) at all.
    Syntax,
    /// Well-formed, but not something Kubernetes would accept (or we refuse on purpose).
    Invalid,
    /// Past one of the limits on hostile input.
    Limit,
}

/// An error at a line and column (both 1-based) of the text. The message says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub line: u64,
    pub column: u64,
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn syntax(line: u64, column: u64, what: impl std::fmt::Display) -> Error {
        Error { line, column, kind: ErrorKind::Syntax, message: format!("{what}; fix the YAML syntax") }
    }

    pub fn invalid(line: u64, column: u64, message: String) -> Error {
        Error { line, column, kind: ErrorKind::Invalid, message }
    }

    pub fn limit(line: u64, column: u64, message: String) -> Error {
        Error { line, column, kind: ErrorKind::Limit, message }
    }
}

/// The document of one section of `text` (see [`sections`]), or `None` if it holds only
/// comments and blank lines.
pub fn section<'a>(text: &'a str, s: &Section) -> Result<Option<Node<'a>>, Error> {
    load::document(&text[s.start..s.end], s.first_line)
}

/// [`section`], giving the items of the root mapping's `items` list to `items` one by one as
/// they are read, and leaving that list empty: a `kind: List` is decoded item by item, never
/// held whole. Whether the root was a List (and so whether the items were objects to decode)
/// is the caller's to check; if not, read the section again with [`section`].
pub fn section_streaming<'a>(
    text: &'a str,
    s: &Section,
    items: &mut dyn FnMut(Node<'a>),
) -> Result<Option<Node<'a>>, Error> {
    load::document_streaming(&text[s.start..s.end], s.first_line, Some(items))
}

/// The one JSON document of `text`, giving its root `items` array to `items` element by
/// element (see [`section_streaming`]). `None` when the text holds several documents (a
/// stream): read those with [`json_documents`].
pub fn json_document_streaming<'a>(
    text: &'a str,
    items: &mut dyn FnMut(Node<'a>),
) -> Result<Option<Node<'a>>, Error> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(text);
    let mut doc = node::StreamSeed { sink: items, items: false }.deserialize(&mut de).map_err(json_error)?;
    if de.end().is_err() {
        return Ok(None);
    }
    let lead = text.len() - text.trim_start().len();
    doc.line = 1 + text[..lead].bytes().filter(|&b| b == b'\n').count() as u32;
    Ok(Some(doc))
}

/// Every document of a YAML stream, in order, on this thread.
/// The one set-up for YAML that Ansible and ansible-runner read (extra vars, env files,
/// inline playbooks, and the files our roles write on a node): serde-saphyr with PyYAML's
/// rule for repeated keys, the last one wins. Errors in our words (`saphyr_message`).
/// Manifests are not read here: `documents`/`section` read them as the API server does.
pub fn ansible<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    let options = serde_saphyr::options! { duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins };
    serde_saphyr::from_str_with_options::<T>(text, options).map_err(|e| saphyr_message(&e))
}

/// A `serde_saphyr` error (the reader for what Ansible reads with PyYAML's last-key-wins
/// rules: the runner's env files) in our words: its line, and the limit or problem with the
/// fix, never the library's type names (`budget breached: Depth { depth: 65 }`).
pub fn saphyr_message(e: &serde_saphyr::Error) -> String {
    use serde_saphyr::budget::BudgetBreach as B;
    let line = e.location().map(|l| l.line()).filter(|l| *l > 0);
    let what = match e {
        serde_saphyr::Error::Budget { breach, .. } => match breach {
            B::Depth { depth } => {
                format!("nested {depth} levels deep, past the reader's limit; flatten the structure")
            }
            B::Aliases { .. } | B::Anchors { .. } | B::AliasAnchorRatio { .. } => {
                "too many aliases or anchors (a guard against alias bombs); write the values out instead"
                    .to_string()
            }
            B::Events { .. } | B::Nodes { .. } | B::Documents { .. } => {
                "too large for the reader's limits; split it or trim it".to_string()
            }
            B::ScalarBytes { .. } => "a value is too long for the reader's limits; shorten it".to_string(),
            _ => "past one of the reader's limits on hostile input; simplify it".to_string(),
        },
        // Ansible (PyYAML's safe_load) reads one document: "expected a single document".
        serde_saphyr::Error::MultipleDocuments { .. } => {
            "one YAML document expected, and a `---` line starts another; remove it, or merge the \
             documents into one"
                .to_string()
        }
        serde_saphyr::Error::DuplicateMappingKey { key, .. } => match key {
            Some(k) => format!("key {k:?} appears twice in one mapping; remove one"),
            None => "a key appears twice in one mapping; remove one".to_string(),
        },
        other => {
            let text = other.to_string();
            let first = text.lines().next().unwrap_or("not valid YAML");
            // The library's own "error: line 1 column 9: " prefix: the line is added below.
            let bare = first.strip_prefix("error: ").unwrap_or(first);
            let bare = match bare.split_once(": ") {
                Some((place, rest)) if place.starts_with("line ") && place.contains(" column ") => rest,
                _ => bare,
            };
            // The same errors may arrive wrapped (with a snippet), so the text is checked too.
            if bare.contains("recursion limit") || bare.contains("Depth {") {
                "nested too deeply for the reader's limit; flatten the structure".to_string()
            } else if let Some(rest) = bare.strip_prefix("duplicate mapping key") {
                let key = rest.trim_start_matches(':').split(',').next().unwrap_or("").trim();
                format!("key {key:?} appears twice in one mapping; remove one")
            } else if bare.contains("from_str_multiple") || bare.contains("multiple YAML documents") {
                "one YAML document expected, and a `---` line starts another; remove it, or merge the \
                 documents into one"
                    .to_string()
            } else if bare.starts_with("budget breached") {
                "past one of the reader's limits on hostile input (size, aliases or nesting); simplify it"
                    .to_string()
            } else {
                bare.to_string()
            }
        }
    };
    match line {
        Some(l) => format!("line {l}: {what}"),
        None => what,
    }
}

pub fn documents(text: &str) -> Result<Vec<Node<'_>>, Error> {
    let mut out = Vec::new();
    for s in sections(text)? {
        out.extend(section(text, &s)?);
    }
    Ok(out)
}

/// Whether kubectl would read `text` as JSON: its first non-blank character opens an object.
pub fn looks_like_json(text: &str) -> bool {
    text.trim_start_matches(|c: char| c.is_ascii_whitespace() || c == '\u{feff}').starts_with('{')
}

/// Every value of a JSON stream (kubectl reads concatenated objects), each with the line it
/// starts on. Keys written twice and nesting deeper than [`MAX_DEPTH`] are refused as in YAML.
pub fn json_documents(text: &str) -> Result<Vec<Node<'_>>, Error> {
    let mut out = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<node::JsonDocument>();
    let mut offset = 0;
    let mut line = 1u64;
    loop {
        let start = stream.byte_offset();
        let Some(next) = stream.next() else { break };
        let mut doc = next.map_err(json_error)?.0;
        // The line of the value's first character, counted from where the last one ended.
        let skipped = text[start..].len() - text[start..].trim_start().len();
        line += text[offset..start + skipped].bytes().filter(|&b| b == b'\n').count() as u64;
        offset = start + skipped;
        doc.line = line as u32;
        out.push(doc);
    }
    Ok(out)
}

fn json_error(e: serde_json::Error) -> Error {
    let text = e.to_string();
    let message = match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let (line, column) = (e.line() as u64, e.column() as u64);
    if message.starts_with("nesting deeper") {
        Error::limit(line, column, message)
    } else if e.is_data() {
        Error::invalid(line, column, message)
    } else {
        Error { line, column, kind: ErrorKind::Syntax, message: format!("{message}; fix the JSON syntax") }
    }
}

/// Every document as a plain JSON value (YAML unless the text is JSON): for tests and tools
/// that compare with other readers.
pub fn to_json_values(text: &str) -> Result<Vec<serde_json::Value>, Error> {
    let docs = if looks_like_json(text) { json_documents(text)? } else { documents(text)? };
    Ok(docs.iter().map(Node::to_value).collect())
}

#[cfg(test)]
mod saphyr_tests {
    use super::saphyr_message;

    fn message(text: &str) -> String {
        let options = serde_saphyr::options! { duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error };
        let e = serde_saphyr::from_str_with_options::<serde_json::Value>(text, options).unwrap_err();
        saphyr_message(&e)
    }

    #[test]
    fn library_words_never_reach_the_user() {
        let deep = format!("a: {}1{}\n", "[".repeat(5000), "]".repeat(5000));
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n".to_string();
        for (text, want) in [
            (deep.as_str(), "nested"),
            ("a: 1\na: 2\n", "appears twice"),
            ("a: [1\n", "line"),
            (bomb.as_str(), ""),
            ("a: 1\n---\nb: 2\n", "line 3: one YAML document expected"),
        ] {
            let m = message(text);
            for internal in
                ["budget", "Budget", "Depth {", "DuplicateKeyPolicy", "Options", "untagged", "from_str"]
            {
                assert!(!m.contains(internal), "{m}");
            }
            assert!(m.contains(want), "{m}");
        }
    }
}
