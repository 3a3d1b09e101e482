//! An oslo.config engine: the tokenizer and file model of `oslo_config/iniparser.py` and
//! `cfg.ConfigParser`, oslo's layering rules across `--config-file`/`--config-dir`, a writer
//! whose output oslo reads back to the same values, a single-file merge equivalent to the
//! layering, and lint checks for CustomServiceConfig snippets.
//!
//! Pure: text in, values out. Reading files and directories is the caller's job
//! (`app`), which hands in [`layer::Layer`]s. Faithfulness is checked against the real
//! `oslo.config` package by the differential tests in `tests/oslo_diff.rs`.

pub mod layer;
pub mod lint;
pub mod merge;
pub mod parse;
pub mod pyrepr;
pub mod write;

pub use parse::{ConfigFile, Entry, ParseError, Section, parse};

/// oslo's group-name normalization (`cfg._normalize_group_name`): lower-case, except the exact
/// string `DEFAULT`. So `[Database]` is `database`, but `[default]` is a group named `default`.
pub fn normalize_group(name: &str) -> String {
    if name == "DEFAULT" { name.to_string() } else { name.to_lowercase() }
}

/// Python's `str.isspace` for one character: Unicode White_Space plus the ASCII information
/// separators U+001C..U+001F, which Python also treats as whitespace.
pub fn py_space(c: char) -> bool {
    if c.is_ascii() {
        // Space, \t \n \x0b \x0c \r, and the separators \x1c..\x1f, as one bit test.
        const SPACES: u64 = 1 << 0x20 | 0b11111 << 0x09 | 0b1111 << 0x1c;
        (c as u32) <= 0x20 && SPACES >> (c as u32) & 1 == 1
    } else {
        c.is_whitespace()
    }
}

/// Python's `str.strip()`.
pub fn py_strip(s: &str) -> &str {
    py_trim_start(py_trim_end(s))
}

/// Python's `str.rstrip()`. Stops at the first ASCII byte that is not whitespace without
/// decoding anything, the common case; non-ASCII text takes the Unicode rules.
pub fn py_trim_end(s: &str) -> &str {
    let b = s.as_bytes();
    let mut end = b.len();
    while end > 0 {
        let c = b[end - 1];
        if !c.is_ascii() {
            return s[..end].trim_end_matches(py_space);
        }
        if !py_space(char::from(c)) {
            break;
        }
        end -= 1;
    }
    &s[..end]
}

/// Python's `str.lstrip()`, with the same ASCII fast path as [`py_trim_end`].
pub fn py_trim_start(s: &str) -> &str {
    let b = s.as_bytes();
    let mut start = 0;
    while start < b.len() {
        let c = b[start];
        if !c.is_ascii() {
            return s[start..].trim_start_matches(py_space);
        }
        if !py_space(char::from(c)) {
            break;
        }
        start += 1;
    }
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_normalization_keeps_only_exact_default() {
        assert_eq!(normalize_group("DEFAULT"), "DEFAULT");
        assert_eq!(normalize_group("default"), "default");
        assert_eq!(normalize_group("Default"), "default");
        assert_eq!(normalize_group("Database"), "database");
    }

    #[test]
    fn ascii_whitespace_is_pythons() {
        for b in 0u8..128 {
            let c = char::from(b);
            let python = matches!(c, ' ' | '\t'..='\r' | '\u{1c}'..='\u{1f}');
            assert_eq!(py_space(c), python, "{b:#x}");
        }
    }

    #[test]
    fn python_whitespace() {
        assert_eq!(py_strip("\u{1c}\t a b\u{a0}\u{3000}"), "a b");
        assert_eq!(py_strip(" \u{3000} a\u{a0} \t"), "a");
        assert_eq!(py_trim_end("é \u{2003}é\u{2003} "), "é \u{2003}é");
        assert_eq!(py_trim_start("\u{85} x "), "x ");
        assert_eq!(py_strip(" \u{feff} "), "\u{feff}");
        assert!(!py_space('\u{feff}'));
    }

    proptest::proptest! {
        #[test]
        fn fast_strips_equal_unicode_strips(s in "[ \t\u{b}\u{c}\u{1c}-\u{1f}\u{85}\u{a0}\u{2003}\u{3000}\u{feff}ax]{0,12}") {
            proptest::prop_assert_eq!(py_trim_end(&s), s.trim_end_matches(py_space));
            proptest::prop_assert_eq!(py_trim_start(&s), s.trim_start_matches(py_space));
            proptest::prop_assert_eq!(py_strip(&s), s.trim_matches(py_space));
        }
    }
}
