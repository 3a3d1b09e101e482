//! The tokenizer and file model, line for line as `iniparser.BaseParser.parse` and
//! `cfg.ConfigParser` (oslo-ansible-crates.md §1.1):
//!
//! - lines end at `\n`, `\r\n` or a lone `\r` (Python's universal newlines); a BOM is kept;
//! - each line is right-stripped; a blank line ends a pending value;
//! - a line starting with a space or tab continues the pending value (left-stripped);
//! - `[name]` opens a section (name verbatim, no stripping); `#`/`;` at column 0 is a comment;
//! - anything else is `key = value` split at the first `=` or `:`, both sides stripped, one
//!   pair of identical surrounding quotes removed from the value's first line;
//! - there are no inline comments and no escapes;
//! - repeated keys and re-opened sections accumulate, in order.
//!
//! The six errors carry oslo's messages, line numbers and line text.

use super::{py_space, py_strip};

/// One assignment, with the line its key was on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: String,
    pub line: usize,
}

/// A section as written (`[name]`). A name re-opened later in the file is a separate
/// `Section` here; [`ConfigFile::sections_merged`] merges them as oslo's dict does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub line: usize,
    pub entries: Vec<Entry>,
}

/// A comment line (`#` or `;` at column 0), kept for lint and for writers that preserve them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub text: String,
    pub line: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigFile {
    pub sections: Vec<Section>,
    pub comments: Vec<Comment>,
}

/// A section's keys with every value, in first-seen order.
pub type MergedKeys<'a> = Vec<(&'a str, Vec<&'a Entry>)>;

impl ConfigFile {
    /// Sections merged by exact name, in first-seen order, keys in first-seen order with every
    /// value: the `sections` dict `cfg.ConfigParser` fills (what `oslo parse` prints).
    pub fn sections_merged(&self) -> Vec<(&str, MergedKeys<'_>)> {
        let mut out: Vec<(&str, MergedKeys<'_>)> = Vec::new();
        for s in &self.sections {
            let idx = match out.iter().position(|(n, _)| *n == s.name) {
                Some(i) => i,
                None => {
                    out.push((&s.name, Vec::new()));
                    out.len() - 1
                }
            };
            let keys = &mut out[idx].1;
            for e in &s.entries {
                match keys.iter_mut().find(|(k, _)| *k == e.key) {
                    Some((_, v)) => v.push(e),
                    None => keys.push((&e.key, vec![e])),
                }
            }
        }
        out
    }
}

/// oslo's parse errors. `message` is oslo's text; `text` is the offending line as oslo
/// reports it (right-stripped; empty for "Section must be started before assignment").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at line {line}, {message}: {}", super::pyrepr::repr(text))]
pub struct ParseError {
    pub line: usize,
    pub message: &'static str,
    pub text: String,
}

pub const UNEXPECTED_CONTINUATION: &str = "Unexpected continuation line";
pub const NO_SECTION_END: &str = "Invalid section (must end with ])";
pub const EMPTY_SECTION: &str = "Empty section name";
pub const NO_ASSIGNMENT: &str = "No ':' or '=' found in assignment";
pub const EMPTY_KEY: &str = "Key cannot be empty";
pub const NO_SECTION: &str = "Section must be started before assignment";

/// Splits text into lines the way Python's text-mode file iteration does.
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        // A byte search: both terminators are ASCII, so this never splits a UTF-8 sequence.
        match rest.bytes().position(|b| b == b'\n' || b == b'\r') {
            Some(i) => {
                let line = &rest[..i];
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
                Some(line)
            }
            None => {
                let line = rest;
                rest = "";
                Some(line)
            }
        }
    })
}

struct Pending<'a> {
    key: &'a str,
    first: &'a str,
    /// Continuation lines, when there are any (most values have none).
    more: Vec<&'a str>,
    line: usize,
}

pub fn parse(text: &str) -> Result<ConfigFile, ParseError> {
    let mut file = ConfigFile::default();
    let mut pending: Option<Pending> = None;
    let mut lineno = 0;
    let err =
        |line: usize, message: &'static str, text: &str| ParseError { line, message, text: text.to_string() };

    // The flush of a pending assignment: oslo reports a missing section at the line where
    // the flush happens, with empty line text.
    fn flush(file: &mut ConfigFile, pending: &mut Option<Pending>, lineno: usize) -> Result<(), ParseError> {
        if let Some(p) = pending.take() {
            let Some(section) = file.sections.last_mut() else {
                return Err(ParseError { line: lineno, message: NO_SECTION, text: String::new() });
            };
            let value = if p.more.is_empty() {
                p.first.to_string()
            } else {
                let mut v = String::from(p.first);
                for m in p.more {
                    v.push('\n');
                    v.push_str(m);
                }
                v
            };
            section.entries.push(Entry { key: p.key.to_string(), value, line: p.line });
        }
        Ok(())
    }

    for raw in lines(text) {
        lineno += 1;
        let line = raw.trim_end_matches(py_space);
        if line.is_empty() {
            flush(&mut file, &mut pending, lineno)?;
            continue;
        }
        if line.starts_with([' ', '\t']) {
            match &mut pending {
                None => return Err(err(lineno, UNEXPECTED_CONTINUATION, line)),
                Some(p) => p.more.push(line.trim_start_matches(py_space)),
            }
            continue;
        }
        flush(&mut file, &mut pending, lineno)?;
        if line.starts_with('[') {
            if !line.ends_with(']') {
                return Err(err(lineno, NO_SECTION_END, line));
            }
            // Python's len() counts code points.
            if line.chars().count() <= 2 {
                return Err(err(lineno, EMPTY_SECTION, line));
            }
            let name = &line[1..line.len() - 1];
            file.sections.push(Section { name: name.to_string(), line: lineno, entries: Vec::new() });
        } else if let Some(rest) = line.strip_prefix(['#', ';']) {
            file.comments.push(Comment { text: rest.trim_start_matches(py_space).to_string(), line: lineno });
        } else {
            let (key, value) = split_key_value(line).ok_or_else(|| err(lineno, NO_ASSIGNMENT, line))?;
            if key.is_empty() {
                return Err(err(lineno, EMPTY_KEY, line));
            }
            pending = Some(Pending { key, first: value, more: Vec::new(), line: lineno });
        }
    }
    flush(&mut file, &mut pending, lineno)?;
    Ok(file)
}

/// Splits at the first `=` or `:`, strips both sides, and drops one pair of identical
/// surrounding quotes from the value.
fn split_key_value(line: &str) -> Option<(&str, &str)> {
    let i = line.find(['=', ':'])?;
    let key = py_strip(&line[..i]);
    let mut value = py_strip(&line[i + 1..]);
    let mut chars = value.chars();
    if let (Some(first), Some(last)) = (chars.next(), value.chars().next_back())
        && (first == '"' || first == '\'')
        && first == last
    {
        // A lone quote is both first and last: it becomes empty, as `value[1:-1]` does.
        value = if value.len() == 1 { "" } else { &value[1..value.len() - 1] };
    }
    Some((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> Vec<(String, String, String)> {
        parse(text)
            .unwrap()
            .sections
            .iter()
            .flat_map(|s| s.entries.iter().map(|e| (s.name.clone(), e.key.clone(), e.value.clone())))
            .collect()
    }

    fn v(s: &str, k: &str, val: &str) -> (String, String, String) {
        (s.into(), k.into(), val.into())
    }

    #[test]
    fn reference_example() {
        let text = "[DEFAULT]\na = 1\n  # not a comment\nml =\n  x\nb = 2\n  [other]\n";
        assert_eq!(
            values(text),
            [
                v("DEFAULT", "a", "1\n# not a comment"),
                v("DEFAULT", "ml", "\nx"),
                v("DEFAULT", "b", "2\n[other]")
            ]
        );
    }

    #[test]
    fn split_at_first_separator_and_strip_one_quote_pair() {
        let text = "[s]\nurl = http://h:80/x\nk: v = w\nq = \"x\"\nqq = \"\"x\"\"\nlone = \"\nmix = \"a\" \"b\"\ninline = b # c\n";
        assert_eq!(
            values(text),
            [
                v("s", "url", "http://h:80/x"),
                v("s", "k", "v = w"),
                v("s", "q", "x"),
                v("s", "qq", "\"x\""),
                v("s", "lone", ""),
                v("s", "mix", "a\" \"b"),
                v("s", "inline", "b # c"),
            ]
        );
    }

    #[test]
    fn section_names_are_verbatim() {
        let f = parse("[ db ]\n[[x]]\n[y]]\n").unwrap();
        let names: Vec<_> = f.sections.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, [" db ", "[x]", "y]"]);
    }

    #[test]
    fn line_endings_follow_universal_newlines() {
        assert_eq!(values("[s]\r\na = 1\rb = 2\n"), [v("s", "a", "1"), v("s", "b", "2")]);
    }

    #[test]
    fn the_six_errors() {
        let e = |t: &str| parse(t).unwrap_err();
        assert_eq!(e("  x\n"), ParseError { line: 1, message: UNEXPECTED_CONTINUATION, text: "  x".into() });
        assert_eq!(
            e("[s]\n[DEFAULT] # c\n"),
            ParseError { line: 2, message: NO_SECTION_END, text: "[DEFAULT] # c".into() }
        );
        assert_eq!(e("[]\n"), ParseError { line: 1, message: EMPTY_SECTION, text: "[]".into() });
        assert_eq!(e("[s]\njunk\n"), ParseError { line: 2, message: NO_ASSIGNMENT, text: "junk".into() });
        assert_eq!(e("[s]\n= v\n"), ParseError { line: 2, message: EMPTY_KEY, text: "= v".into() });
        assert_eq!(e("[s]\n = v\n").message, UNEXPECTED_CONTINUATION);
        assert_eq!(e("a = 1\n\n"), ParseError { line: 2, message: NO_SECTION, text: String::new() });
        assert_eq!(e("a = 1"), ParseError { line: 1, message: NO_SECTION, text: String::new() });
        assert_eq!(e("\u{feff}[DEFAULT]\n").message, NO_ASSIGNMENT);
    }

    #[test]
    fn reopened_sections_merge_by_exact_name() {
        let f = parse("[a]\nk = 1\n[b]\nk = 2\n[a]\nk = 3\nj = 4\n").unwrap();
        let merged = f.sections_merged();
        assert_eq!(merged.len(), 2);
        let a = &merged[0];
        assert_eq!(a.0, "a");
        assert_eq!(a.1[0].1.iter().map(|e| e.value.as_str()).collect::<Vec<_>>(), ["1", "3"]);
    }
}
