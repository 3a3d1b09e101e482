//! Text as the job's log and the summary show it: one line, cut to a length, no colour codes.

use std::borrow::Cow;

/// Whitespace runs (newlines included) become one space; the ends are trimmed.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `limit` characters; a cut message ends with `…` (counted).
pub fn cut(s: &str, limit: usize) -> String {
    match s.char_indices().nth(limit) {
        None => s.to_string(),
        Some(_) => {
            let keep: String = s.chars().take(limit.saturating_sub(1)).collect();
            format!("{}…", keep.trim_end())
        }
    }
}

/// Removes terminal colour sequences (`ESC [ … letter`) that Ansible leaves in some messages.
pub fn strip_ansi(s: &str) -> Cow<'_, str> {
    if !s.contains('\u{1b}') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for n in chars.by_ref() {
                if n.is_ascii_alphabetic() {
                    break;
                }
            }
        } else if c != '\u{1b}' {
            out.push(c);
        }
    }
    Cow::Owned(out)
}
