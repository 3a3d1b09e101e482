//! Writes files that oslo reads back to exactly the values written (oslo-ansible-crates.md
//! §1.4), and refuses what cannot be written rather than writing something else:
//!
//! - a key: not empty, no `=` or `:`, no surrounding whitespace, not starting with `[`, `#`,
//!   `;`, no line breaks;
//! - a value's first line is quoted (`"…"`) when it has surrounding whitespace or starts and
//!   ends with the same quote character; an empty value is written `key =`;
//! - further lines are indented by four spaces; an empty or whitespace-only further line, or one
//!   with surrounding whitespace, cannot be written (oslo would end or strip it);
//! - section names: not empty, no line breaks.

use super::{ConfigFile, py_space};
use crate::excerpt::echo;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error("section name {} cannot be written: {reason}", echo(name).debug())]
    Section { name: String, reason: &'static str },
    #[error("[{}] key {} cannot be written: {reason}", echo(section), echo(key).debug())]
    Key { section: String, key: String, reason: &'static str },
    #[error(
        "[{}] {}: value {} cannot be written so that oslo reads it back: {reason}",
        echo(section),
        echo(key),
        echo(value).debug()
    )]
    Value { section: String, key: String, value: String, reason: &'static str },
}

fn has_break(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

pub fn check_section(name: &str) -> Result<(), WriteError> {
    let reason = if name.is_empty() {
        "it is empty"
    } else if has_break(name) {
        "it contains a line break"
    } else {
        return Ok(());
    };
    Err(WriteError::Section { name: name.into(), reason })
}

pub fn check_key(section: &str, key: &str) -> Result<(), WriteError> {
    let reason = if key.is_empty() {
        "it is empty"
    } else if key.contains(['=', ':']) {
        "it contains '=' or ':'"
    } else if has_break(key) {
        "it contains a line break"
    } else if key.starts_with(py_space) || key.ends_with(py_space) {
        "it has leading or trailing whitespace"
    } else if key.starts_with(['[', '#', ';']) {
        "it starts with '[', '#' or ';'"
    } else {
        return Ok(());
    };
    Err(WriteError::Key { section: section.into(), key: key.into(), reason })
}

/// Renders one value, or says why it cannot be.
pub fn format_value(section: &str, key: &str, value: &str) -> Result<String, WriteError> {
    let bad =
        |reason| WriteError::Value { section: section.into(), key: key.into(), value: value.into(), reason };
    if value.contains('\r') {
        return Err(bad("it contains a carriage return, which ends a line"));
    }
    let mut lines = value.split('\n');
    let first = lines.next().unwrap_or("");
    let needs_quotes = first.starts_with(py_space)
        || first.ends_with(py_space)
        || (first.starts_with(['"', '\'']) && first.chars().next() == first.chars().next_back());
    let mut out = if first.is_empty() {
        String::new()
    } else if needs_quotes {
        format!(" \"{first}\"")
    } else {
        format!(" {first}")
    };
    for more in lines {
        if more.trim_matches(py_space).is_empty() {
            return Err(bad("a continuation line is empty or blank, which would end the value"));
        }
        if more.starts_with(py_space) || more.ends_with(py_space) {
            return Err(bad("a continuation line has leading or trailing whitespace, which oslo strips"));
        }
        out.push_str("\n    ");
        out.push_str(more);
    }
    Ok(out)
}

/// Writes a whole file: header comments, then each section with its entries, a blank line
/// between sections.
pub fn write(file: &ConfigFile, header: &[&str]) -> Result<String, WriteError> {
    let mut out = String::new();
    for h in header {
        for line in h.split('\n') {
            out.push('#');
            if !line.is_empty() {
                out.push(' ');
                out.push_str(line);
            }
            out.push('\n');
        }
    }
    for (i, s) in file.sections.iter().enumerate() {
        check_section(&s.name)?;
        if i > 0 || !header.is_empty() {
            out.push('\n');
        }
        out.push('[');
        out.push_str(&s.name);
        out.push_str("]\n");
        for e in &s.entries {
            check_key(&s.name, &e.key)?;
            out.push_str(&e.key);
            out.push_str(" =");
            out.push_str(&format_value(&s.name, &e.key, &e.value)?);
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oslo::{Entry, Section, parse};

    fn one(value: &str) -> ConfigFile<'_> {
        ConfigFile {
            sections: vec![Section {
                name: "s".into(),
                line: 0,
                entries: vec![Entry { key: "k".into(), value: value.into(), line: 0 }],
            }],
            comments: vec![],
        }
    }

    #[test]
    fn round_trips_tricky_values() {
        for v in [
            "",
            " a ",
            "\"",
            "'x'",
            "\"x\"",
            "a # b",
            "x\ny\nz",
            " lead\nnext",
            "\nafter empty first",
            "$my_ip",
            "é;=:",
        ] {
            let text = write(&one(v), &[]).unwrap();
            let back = parse(&text).unwrap();
            assert_eq!(back.sections[0].entries[0].value, v, "{text:?}");
        }
    }

    #[test]
    fn refuses_what_oslo_would_change() {
        for v in ["a\n\nb", "a\n  b", "a\nb ", "a\rb"] {
            assert!(format_value("s", "k", v).is_err(), "{v:?}");
        }
        for k in ["", "a=b", " a", "#a", "[a", "a\nb"] {
            assert!(check_key("s", k).is_err(), "{k:?}");
        }
    }
}
