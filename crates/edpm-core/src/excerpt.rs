//! Input echoed in messages, cut to a readable length.
//!
//! An error that quotes the offending line or value helps only while it stays readable: a
//! 10 MB line must not become a 10 MB message. Every message that echoes user input passes it
//! through [`echo`], which keeps the first [`LIMIT`] characters (cut on a character boundary)
//! and says how long the whole was. The line number or field path beside it points to the rest.
//!
//! This shortens; it does not hide. Values that may come from a Secret must still be redacted
//! (or left out) by the caller before they are echoed.

use std::borrow::Cow;
use std::fmt;

/// The most characters of input a message quotes. Longer input keeps this many, then the
/// marker.
pub const LIMIT: usize = 100;

/// `s` as a message may quote it: [`Echo::head`] is at most [`LIMIT`] characters of it.
pub fn echo(s: &str) -> Echo<'_> {
    // A char has at least one byte: input of LIMIT bytes or fewer needs no counting.
    let head = if s.len() <= LIMIT {
        s
    } else {
        match s.char_indices().nth(LIMIT) {
            Some((i, _)) => &s[..i],
            None => s,
        }
    };
    Echo { head, total: s.len() }
}

/// Input cut for a message. `Display` writes the kept part and, when it was cut, the marker:
/// `…` and the whole input's length, `… (10485760 bytes in all)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo<'a> {
    head: &'a str,
    total: usize,
}

impl<'a> Echo<'a> {
    /// The part of the input that is kept: all of it, or its first [`LIMIT`] characters.
    pub fn head(&self) -> &'a str {
        self.head
    }

    pub fn is_cut(&self) -> bool {
        self.head.len() < self.total
    }

    /// What follows the kept part: empty, or `… (N bytes in all)`.
    pub fn marker(&self) -> String {
        if self.is_cut() { format!("… ({} bytes in all)", self.total) } else { String::new() }
    }

    /// The kept part written by `quote` (Python's repr, Rust's `{:?}`), then the marker outside
    /// the quotes, so that the quoted text is still valid in its own syntax.
    pub fn quoted(&self, quote: impl FnOnce(&str) -> String) -> String {
        quote(self.head) + &self.marker()
    }

    /// The kept part as Rust's `{:?}` quotes it, then the marker.
    pub fn debug(&self) -> String {
        self.quoted(|h| format!("{h:?}"))
    }
}

impl fmt::Display for Echo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.head)?;
        if self.is_cut() {
            write!(f, "… ({} bytes in all)", self.total)?;
        }
        Ok(())
    }
}

/// A message that quotes input inside double quotes (serde's `invalid type: string "…",
/// expected u16`), with the quoted part cut by [`echo`]: the words around it stay whole.
pub fn cut_quoted(message: &str) -> String {
    match (message.find('"'), message.rfind('"')) {
        (Some(a), Some(b)) if b > a + LIMIT => {
            let inner = &message[a + 1..b];
            let e = echo(inner);
            format!("{}\"{}\"{}{}", &message[..a], e.head(), e.marker(), &message[b + 1..])
        }
        _ => message.to_string(),
    }
}

/// `s` safe to print on a terminal: every control character (C0, DEL, C1) is written as an
/// escape (`\e`, `\r`, `\n`, `\t`, `\x07`, `\u{9b}`), so that text from input (a host name,
/// a node key, a task's message, a disabled reason) can never move the cursor, rewrite a line,
/// ring the bell or fake a table row. A backslash stays as it is: the escapes are for a
/// person reading, not a parser. For one-line places (table cells, log lines, messages).
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_printable(&mut out, c);
    }
    Cow::Owned(out)
}

/// Like [`printable`], but keeps line breaks (`\n`) and tabs: for multi-line human output
/// (an explanation, a failed task's output) whose lines are the reader's own.
pub fn printable_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| unsafe_char(c) && c != '\n' && c != '\t') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c == '\n' || c == '\t' {
            out.push(c);
        } else {
            push_printable(&mut out, c);
        }
    }
    Cow::Owned(out)
}

/// Whether `s` holds a character [`printable`] would escape.
pub fn has_control(s: &str) -> bool {
    s.chars().any(unsafe_char)
}

/// A control character, or one that reorders or breaks what a terminal shows: the bidi
/// overrides and isolates (U+202A–202E, U+2066–2069: "Trojan Source" text that reads one way and
/// is another), the marks U+200E/200F and U+061C, and the line and paragraph separators
/// U+2028/2029.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{2028}' | '\u{2029}')
}

fn push_printable(out: &mut String, c: char) {
    use fmt::Write as _;
    match c {
        '\u{1b}' => out.push_str("\\e"),
        '\r' => out.push_str("\\r"),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x80 && c.is_control() => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if unsafe_char(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        c => out.push(c),
    }
}

/// A decoder's message about a value that must not be shown (a Secret's): in serde's
/// `invalid type`/`invalid value` messages every quoted part (`` `…` `` or `"…"`) becomes
/// `(not shown)`, and a base64 complaint, which names the offending
/// character and its offset, becomes a plain "not valid base64".
pub fn hide_quoted(message: &str) -> String {
    if message.contains("Invalid symbol")
        || message.contains("Invalid last symbol")
        || message.contains("Invalid padding")
        || message.contains("Invalid byte")
        || message.contains("Invalid input length")
    {
        return "not valid base64 (the value is not shown: it is a Secret's); encode it with `base64 -w0`, or give it under stringData".to_string();
    }
    // Only serde's messages about a value quote it; field names (`missing field `x``) stay.
    if !(message.starts_with("invalid type") || message.starts_with("invalid value")) {
        return message.to_string();
    }
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find(['`', '"']) {
        let q = rest.as_bytes()[i] as char;
        match rest[i + 1..].find(q) {
            Some(j) => {
                out.push_str(&rest[..i]);
                out.push_str("(not shown)");
                rest = &rest[i + 1 + j + 1..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_nothing_else_changes() {
        assert!(matches!(printable("edpm-compute-0 ok é"), Cow::Borrowed(_)));
        assert_eq!(
            printable("a\u{1b}[2Jb\rc\u{7}d\ne\tf\u{7f}g\u{9b}h"),
            "a\\e[2Jb\\rc\\x07d\\ne\\tf\\x7fg\\u{9b}h"
        );
        assert_eq!(printable_lines("line 1\n\tline \u{1b}2\r"), "line 1\n\tline \\e2\\r");
        assert!(has_control("x\u{0}") && !has_control("x y"));
        assert_eq!(
            printable("a\u{202e}b\u{2028}c"),
            "a\\u{202e}b\\u{2028}c",
            "bidi overrides and separators too"
        );
    }

    proptest::proptest! {
        #[test]
        fn printable_text_has_no_control_character(s in proptest::collection::vec(proptest::char::any(), 0..64)) {
            let s: String = s.into_iter().collect();
            proptest::prop_assert!(!has_control(&printable(&s)));
            proptest::prop_assert!(!printable_lines(&s).chars().any(|c| c.is_control() && c != '\n' && c != '\t'));
        }
    }

    #[test]
    fn hidden_values_leave_the_words_around_them() {
        assert_eq!(
            hide_quoted("invalid type: integer `12345678901234`, expected a string"),
            "invalid type: integer (not shown), expected a string"
        );
        assert_eq!(
            hide_quoted("invalid type: string \"hunter2\", expected u8"),
            "invalid type: string (not shown), expected u8"
        );
        assert!(!hide_quoted("Invalid symbol 33, offset 16.").contains("33"));
        assert_eq!(hide_quoted("missing field `data`"), "missing field `data`");
    }

    #[test]
    fn quoted_input_in_a_message_is_cut_and_the_words_around_it_kept() {
        let long = "x".repeat(10_000);
        let m = cut_quoted(&format!("invalid type: string \"{long}\", expected u16"));
        assert!(m.starts_with("invalid type: string \"xxx") && m.ends_with(", expected u16"), "{m}");
        assert!(m.len() < 200 && m.contains("10000 bytes"), "{m}");
        assert_eq!(
            cut_quoted("invalid type: string \"ab\", expected u16"),
            "invalid type: string \"ab\", expected u16"
        );
        assert_eq!(cut_quoted("no quotes"), "no quotes");
    }

    #[test]
    fn short_input_is_echoed_whole() {
        assert_eq!(echo("").to_string(), "");
        let s = "x".repeat(LIMIT);
        assert_eq!(echo(&s).to_string(), s);
        assert!(!echo(&s).is_cut());
        // LIMIT characters of more than LIMIT bytes are not cut either.
        let s = "é".repeat(LIMIT);
        assert_eq!(echo(&s).to_string(), s);
    }

    #[test]
    fn long_input_keeps_its_head_and_says_how_long_it_was() {
        let s = "x".repeat(10 * 1024 * 1024);
        let e = echo(&s);
        assert!(e.is_cut());
        assert_eq!(e.head().len(), LIMIT);
        assert_eq!(e.to_string(), format!("{}… (10485760 bytes in all)", "x".repeat(LIMIT)));
        assert_eq!(e.debug(), format!("\"{}\"… (10485760 bytes in all)", "x".repeat(LIMIT)));
    }

    #[test]
    fn cuts_on_a_character_boundary() {
        let s = format!("a{}", "€".repeat(200));
        let e = echo(&s);
        assert_eq!(e.head().chars().count(), LIMIT);
        assert_eq!(e.head(), format!("a{}", "€".repeat(LIMIT - 1)));
        assert!(e.to_string().ends_with(&format!("… ({} bytes in all)", s.len())));
    }

    proptest::proptest! {
        #[test]
        fn the_head_is_a_prefix_of_at_most_limit_chars(s in "[a-zé€\u{1F600}]{0,300}") {
            let e = echo(&s);
            proptest::prop_assert!(s.starts_with(e.head()));
            proptest::prop_assert!(e.head().chars().count() <= LIMIT);
            proptest::prop_assert_eq!(e.is_cut(), s.chars().count() > LIMIT);
        }
    }
}
