//! An oslo.config engine: the tokenizer and file model of `oslo_config/iniparser.py` and
//! `cfg.ConfigParser`, oslo's layering rules across `--config-file`/`--config-dir`, a writer
//! whose output oslo reads back to the same values, a single-file merge equivalent to the
//! layering, and lint checks for CustomServiceConfig snippets.
//!
//! Pure: text in, values out. Reading files and directories is the caller's job
//! (`app`), which hands in [`layer::Layer`]s. Faithfulness is checked against the real
//! `oslo.config` package by the differential tests in `tests/oslo.rs`.

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
        // Space, \t \n \x0b \x0c \r, and the separators \x1c..\x1f.
        matches!(c, ' ' | '\t'..='\r' | '\u{1c}'..='\u{1f}')
    } else {
        c.is_whitespace()
    }
}

/// Python's `str.strip()`.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_space)
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
    fn python_whitespace() {
        assert_eq!(py_strip("\u{1c}\t a b\u{a0}\u{3000}"), "a b");
        assert!(!py_space('\u{feff}'));
    }
}
