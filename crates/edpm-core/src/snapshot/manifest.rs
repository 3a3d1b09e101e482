//! Parses the text of one manifest file into documents, as kubectl reads it.
//!
//! Pure: a file name (for messages) and its text in, documents out. Text whose first character
//! opens a JSON object is a stream of JSON values; anything else is YAML, split at `---` lines
//! into sections that can be parsed independently (on several cores: see `source::dir`). A
//! document may be a `kind: List` (or `ConfigMapList`, ...) whose `items` are the objects.

use crate::yaml::{self, Node, Section};

/// One object found in a manifest, with the line it starts on.
#[derive(Debug, Clone)]
pub struct Document<'a> {
    pub line: u64,
    pub node: Node<'a>,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}:{line}:{column}: {message}")]
pub struct ParseError {
    pub path: String,
    pub line: u64,
    pub column: u64,
    pub kind: yaml::ErrorKind,
    pub message: String,
}

impl ParseError {
    fn new(path: &str, e: yaml::Error) -> ParseError {
        ParseError {
            path: path.to_string(),
            line: e.line,
            column: e.column,
            kind: e.kind,
            message: e.message,
        }
    }
}

/// How a file is read: JSON in one piece, or YAML in kubectl's sections.
#[derive(Debug, Clone)]
pub enum Layout {
    Json,
    Yaml(Vec<Section>),
}

/// Decides how to read `text`, splitting YAML into its sections. A file named `.json` whose
/// text does not open an object is read as YAML, as kubectl would.
pub fn layout(path: &str, text: &str) -> Result<Layout, ParseError> {
    if yaml::looks_like_json(text) {
        // A `.yaml` file may hold a YAML flow mapping that is not JSON; kubectl would fail on
        // it, but YAML reads it, so only a real JSON file insists on JSON.
        if path.ends_with(".json") || yaml::json_documents(text).is_ok() {
            return Ok(Layout::Json);
        }
    }
    yaml::sections(text).map(Layout::Yaml).map_err(|e| ParseError::new(path, e))
}

/// The documents of a JSON file, `kind: List` items expanded.
pub fn json<'a>(path: &str, text: &'a str) -> Result<Vec<Document<'a>>, ParseError> {
    let docs = yaml::json_documents(text).map_err(|e| ParseError::new(path, e))?;
    let mut out = Vec::with_capacity(docs.len());
    for node in docs {
        expand_list(Document { line: u64::from(node.line), node }, &mut out);
    }
    Ok(out)
}

/// The document of one YAML section (none for a section of comments), `kind: List` expanded.
pub fn section<'a>(path: &str, text: &'a str, s: &Section) -> Result<Vec<Document<'a>>, ParseError> {
    let mut out = Vec::new();
    if let Some(node) = yaml::section(text, s).map_err(|e| ParseError::new(path, e))? {
        expand_list(Document { line: u64::from(node.line), node }, &mut out);
    }
    Ok(out)
}

/// What a streaming read gave ([`section_streaming`], [`json_streaming`]).
pub enum Streamed<'a> {
    /// Nothing was streamed: these are the documents.
    Documents(Vec<Document<'a>>),
    /// The root was a `kind: List`: its items went, one by one, to the caller.
    List,
    /// Items went to the caller, but the root was no List (or the JSON text held several
    /// documents): drop what was made of them and read the text again without streaming.
    Again,
}

/// The documents of one YAML section, a `kind: List`'s items given to `items` one by one as
/// they are read (see `yaml::section_streaming`), so that each can be decoded and its tree
/// freed before the next is built.
pub fn section_streaming<'a>(
    path: &str,
    text: &'a str,
    s: &Section,
    items: &mut dyn FnMut(Document<'a>),
) -> Result<Streamed<'a>, ParseError> {
    let mut streamed = 0;
    let mut sink = |node: Node<'a>| {
        streamed += 1;
        let mut docs = Vec::new();
        expand_list(Document { line: u64::from(node.line), node }, &mut docs);
        docs.into_iter().for_each(&mut *items);
    };
    let root = yaml::section_streaming(text, s, &mut sink).map_err(|e| ParseError::new(path, e))?;
    Ok(finish(root, streamed))
}

/// The documents of a JSON file, a single `kind: List`'s items given to `items` one by one.
pub fn json_streaming<'a>(
    path: &str,
    text: &'a str,
    items: &mut dyn FnMut(Document<'a>),
) -> Result<Streamed<'a>, ParseError> {
    let lead = text.len() - text.trim_start().len();
    let line = 1 + text[..lead].bytes().filter(|&b| b == b'\n').count() as u64;
    let mut streamed = 0;
    let mut sink = |node: Node<'a>| {
        streamed += 1;
        let mut docs = Vec::new();
        // JSON nodes carry no line: items are placed at their List.
        expand_list(Document { line, node }, &mut docs);
        docs.into_iter().for_each(&mut *items);
    };
    match yaml::json_document_streaming(text, &mut sink).map_err(|e| ParseError::new(path, e))? {
        None => Ok(Streamed::Again),
        root => Ok(finish(root, streamed)),
    }
}

fn finish(root: Option<Node<'_>>, streamed: usize) -> Streamed<'_> {
    let Some(root) = root else { return Streamed::Documents(Vec::new()) };
    if streamed == 0 {
        let mut docs = Vec::new();
        expand_list(Document { line: u64::from(root.line), node: root }, &mut docs);
        return Streamed::Documents(docs);
    }
    if root.get("kind").and_then(Node::as_str).is_some_and(|k| k.ends_with("List")) {
        Streamed::List
    } else {
        Streamed::Again
    }
}

/// Every document of `text`, read from `path`, on this thread. Null documents are skipped.
pub fn parse<'a>(path: &str, text: &'a str) -> Result<Vec<Document<'a>>, ParseError> {
    match layout(path, text)? {
        Layout::Json => json(path, text),
        Layout::Yaml(sections) => {
            let mut out = Vec::new();
            for s in &sections {
                out.extend(section(path, text, s)?);
            }
            Ok(out)
        }
    }
}

fn expand_list<'a>(mut doc: Document<'a>, out: &mut Vec<Document<'a>>) {
    if doc.node.is_null() {
        return;
    }
    let is_list = doc.node.get("kind").and_then(Node::as_str).is_some_and(|k| k.ends_with("List"))
        && doc.node.get("items").is_some_and(|i| matches!(i.data, yaml::Data::Seq(_)));
    if !is_list {
        out.push(doc);
        return;
    }
    if let Some(Node { data: yaml::Data::Seq(items), .. }) = doc.node.take("items") {
        out.reserve(items.len());
        for item in items {
            // JSON nodes carry no line: such items are placed at their List.
            let line = if item.line == 0 { doc.line } else { u64::from(item.line) };
            expand_list(Document { line, node: item }, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(docs: &[Document]) -> Vec<String> {
        docs.iter().map(|d| d.node.get("kind").and_then(Node::as_str).unwrap_or("-").to_string()).collect()
    }

    #[test]
    fn multi_document_yaml_keeps_start_lines() {
        let text = "---\nkind: A\nmetadata: {name: a}\n---\n# comment\nkind: B\n---\n";
        let docs = parse("x.yaml", text).unwrap();
        assert_eq!(kinds(&docs), ["A", "B"]);
        assert_eq!((docs[0].line, docs[1].line), (2, 6));
    }

    #[test]
    fn list_items_become_documents_at_their_own_lines() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- kind: ConfigMap\n- kind: Secret\n";
        let docs = parse("l.yaml", text).unwrap();
        assert_eq!(kinds(&docs), ["ConfigMap", "Secret"]);
        assert_eq!((docs[0].line, docs[1].line), (4, 5));
        let docs = parse("l.json", r#"{"kind": "ConfigMapList", "items": [{"kind": "ConfigMap"}]}"#).unwrap();
        assert_eq!((kinds(&docs), docs[0].line), (vec!["ConfigMap".to_string()], 1));
    }

    #[test]
    fn yaml_errors_name_file_and_line() {
        let err = parse("bad.yaml", "kind: A\nmetadata:\n  name: [unclosed\n").unwrap_err();
        assert_eq!(err.path, "bad.yaml");
        assert!(err.line >= 3, "{err}");
        assert!(!err.message.contains('\n'));
    }

    #[test]
    fn json_errors_name_file_and_line() {
        let err = parse("bad.json", "{\n  \"kind\": \n}").unwrap_err();
        assert_eq!((err.path.as_str(), err.line), ("bad.json", 3));
        assert!(err.message.ends_with("fix the JSON syntax"), "{err}");
    }

    #[test]
    fn json_streams_and_yaml_flow_mappings() {
        assert_eq!(kinds(&parse("s.json", "{\"kind\": \"A\"}\n{\"kind\": \"B\"}").unwrap()), ["A", "B"]);
        // Not JSON, but YAML: a .yaml file may hold a flow mapping.
        assert_eq!(kinds(&parse("f.yaml", "{kind: A, metadata: {name: x}}\n").unwrap()), ["A"]);
        assert!(parse("f.json", "{kind: A}\n").is_err());
    }

    fn streamed(text: &str, json: bool) -> (Vec<String>, &'static str) {
        let mut items = Vec::new();
        let result = if json {
            json_streaming("s.json", text, &mut |d| items.push(d))
        } else {
            let s = yaml::sections(text).unwrap()[0];
            section_streaming("s.yaml", text, &s, &mut |d| items.push(d))
        };
        let (docs, how) = match result.unwrap() {
            Streamed::Documents(docs) => (docs, "documents"),
            Streamed::List => (items, "list"),
            Streamed::Again => (items, "again"),
        };
        (kinds(&docs), how)
    }

    #[test]
    fn list_items_stream_and_other_documents_do_not() {
        let list = "apiVersion: v1\nitems:\n- {kind: A}\n- {kind: BList, items: [{kind: C}]}\nkind: List\n";
        assert_eq!(streamed(list, false), (vec!["A".to_string(), "C".to_string()], "list"));
        let json = r#"{"items": [{"kind": "A"}, {"kind": "B"}], "kind": "ConfigMapList"}"#;
        assert_eq!(streamed(json, true), (vec!["A".to_string(), "B".to_string()], "list"));
        // `items` in something that is no List: read again, as one document.
        assert_eq!(streamed("items: [{kind: A}]\nkind: Thing\n", false).1, "again");
        assert_eq!(streamed(r#"{"items": [1], "kind": "Thing"}"#, true).1, "again");
        assert_eq!(streamed(r#"{"kind": "A"} {"kind": "B"}"#, true).1, "again");
        assert_eq!(streamed("kind: A\n", false), (vec!["A".to_string()], "documents"));
        // An anchored list is kept whole: aliases may name it.
        assert_eq!(
            streamed("items: &i [{kind: A}]\nkind: List\n", false),
            (vec!["A".to_string()], "documents")
        );
    }

    #[test]
    fn empty_documents_are_skipped() {
        assert!(parse("e.yaml", "---\n---\n").unwrap().is_empty());
        assert!(parse("e.yaml", "").unwrap().is_empty());
        assert!(parse("e.yaml", "--- # nothing\n~\n").unwrap().is_empty());
    }
}
