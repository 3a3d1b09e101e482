//! Parses the text of one manifest file into documents.
//!
//! Pure: a file name (for messages) and its text in, documents out. A file may hold several
//! YAML documents, and a document may be a `kind: List` whose `items` are the objects.
//! JSON files go through `serde_json` so that their errors carry JSON line numbers.

use serde_json::Value;

/// One object found in a manifest, with the line its document (or list item) starts on.
#[derive(Debug, Clone)]
pub struct Document {
    pub line: u64,
    pub value: Value,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}:{line}:{column}: {message}")]
pub struct ParseError {
    pub path: String,
    pub line: u64,
    pub column: u64,
    pub message: String,
}

/// Parses `text`, read from `path`, into its documents. Empty documents are skipped.
pub(crate) fn parse(path: &str, text: &str) -> Result<Vec<Document>, ParseError> {
    let raw = if path.ends_with(".json") { parse_json(path, text)? } else { parse_yaml(path, text)? };
    let mut docs = Vec::with_capacity(raw.len());
    for doc in raw {
        expand_list(doc, &mut docs);
    }
    Ok(docs)
}

fn parse_json(path: &str, text: &str) -> Result<Vec<Document>, ParseError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ParseError {
        path: path.to_string(),
        line: e.line() as u64,
        column: e.column() as u64,
        message: strip_position(&e.to_string()),
    })?;
    Ok(vec![Document { line: 1, value }])
}

fn parse_yaml(path: &str, text: &str) -> Result<Vec<Document>, ParseError> {
    let docs: Vec<serde_saphyr::Spanned<Value>> =
        serde_saphyr::from_multiple(text).map_err(|e| yaml_error(path, &e))?;
    Ok(docs
        .into_iter()
        .filter(|d| !d.value.is_null())
        .map(|d| Document { line: d.referenced.line(), value: d.value })
        .collect())
}

fn yaml_error(path: &str, e: &serde_saphyr::Error) -> ParseError {
    let (line, column) = e.location().map(|l| (l.line(), l.column())).unwrap_or((0, 0));
    // The rendered form carries a source snippet over several lines; keep the first line, which
    // states the problem, since callers print one line.
    let rendered = e.to_string();
    let message = rendered
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("invalid YAML")
        .trim_start_matches("error: ")
        .to_string();
    // saphyr prefixes the position we already print.
    let message = match message.split_once(": ") {
        Some((pos, rest)) if pos.starts_with("line ") && pos.contains(" column ") => rest.to_string(),
        _ => message,
    };
    ParseError { path: path.to_string(), line, column, message: strip_position(&message) }
}

/// serde_json appends " at line X column Y"; the caller prints the position itself.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

fn expand_list(doc: Document, out: &mut Vec<Document>) {
    let is_list =
        doc.value.get("kind").and_then(Value::as_str).is_some_and(|k| k == "List" || k.ends_with("List"))
            && doc.value.get("items").is_some_and(Value::is_array);
    if !is_list {
        out.push(doc);
        return;
    }
    let Value::Object(mut map) = doc.value else { unreachable!("checked above") };
    if let Some(Value::Array(items)) = map.remove("items") {
        for item in items {
            expand_list(Document { line: doc.line, value: item }, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_keeps_start_lines() {
        let text = "---\nkind: A\nmetadata: {name: a}\n---\n# comment\nkind: B\n---\n";
        let docs = parse("x.yaml", text).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].value["kind"], "A");
        assert_eq!(docs[1].value["kind"], "B");
        assert!(docs[1].line > docs[0].line);
    }

    #[test]
    fn list_items_become_documents() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- kind: ConfigMap\n- kind: Secret\n";
        let docs = parse("l.yaml", text).unwrap();
        let kinds: Vec<_> = docs.iter().map(|d| d.value["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ConfigMap", "Secret"]);
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
    }

    #[test]
    fn empty_documents_are_skipped() {
        assert!(parse("e.yaml", "---\n---\n").unwrap().is_empty());
        assert!(parse("e.yaml", "").unwrap().is_empty());
    }
}
