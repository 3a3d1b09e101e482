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
//!
//! The model borrows from the text it was parsed from: a key, a section name, a comment and a
//! one-line value are slices of it, and only a value with continuation lines is built anew.
//! Parsing allocates nothing per entry, which is most of what layering 1,000 nodes' files
//! costs (BENCHMARKS.md). Models built in code (merge, tests) hold owned strings instead.

use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::hash_map::Entry as Slot;

use super::{py_strip, py_trim_end, py_trim_start};
use crate::excerpt::echo;

/// One assignment, with the line its key was on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    pub key: Cow<'a, str>,
    pub value: Cow<'a, str>,
    pub line: usize,
}

/// A section as written (`[name]`). A name re-opened later in the file is a separate
/// `Section` here; [`ConfigFile::sections_merged`] merges them as oslo's dict does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section<'a> {
    pub name: Cow<'a, str>,
    pub line: usize,
    pub entries: Vec<Entry<'a>>,
}

/// A comment line (`#` or `;` at column 0), kept for lint and for writers that preserve them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment<'a> {
    pub text: &'a str,
    pub line: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigFile<'a> {
    pub sections: Vec<Section<'a>>,
    pub comments: Vec<Comment<'a>>,
}

/// A section's keys with every value, in first-seen order.
pub type MergedKeys<'a, 'b> = Vec<(&'b str, Vec<&'b Entry<'a>>)>;

impl<'a> ConfigFile<'a> {
    /// Sections merged by exact name, in first-seen order, keys in first-seen order with every
    /// value: the `sections` dict `cfg.ConfigParser` fills (what `oslo parse` prints).
    ///
    /// Sections and keys are found through hash maps, as Python's dicts find them: a linear
    /// search per entry made `oslo parse` quadratic (a file of 100,000 sections took most of
    /// a minute).
    pub fn sections_merged(&self) -> Vec<(&str, MergedKeys<'a, '_>)> {
        let mut out: Vec<(&str, MergedKeys<'a, '_>)> = Vec::new();
        let mut sections: HashMap<Name<'_>, usize> = HashMap::new();
        // (section number in `out`, key) → key number in that section's list.
        let mut keys: HashMap<(usize, Name<'_>), usize> = HashMap::new();
        for s in &self.sections {
            let idx = *sections.entry(Name(&s.name)).or_insert_with(|| {
                out.push((&s.name, Vec::new()));
                out.len() - 1
            });
            let merged = &mut out[idx].1;
            for e in &s.entries {
                match keys.entry((idx, Name(&e.key))) {
                    Slot::Occupied(k) => merged[*k.get()].1.push(e),
                    Slot::Vacant(k) => {
                        k.insert(merged.len());
                        merged.push((&e.key, vec![e]));
                    }
                }
            }
        }
        out
    }
}

/// A section name or key as a hash-map key. Its equality counts, in unit tests, how often
/// two names are compared: [`ConfigFile::sections_merged`] must compare a name with few
/// others, not with every name before it (tests::merging_compares_each_name_a_few_times).
#[derive(Debug, Clone, Copy, Eq)]
struct Name<'b>(&'b str);

impl std::hash::Hash for Name<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.hash(h);
    }
}

impl PartialEq for Name<'_> {
    fn eq(&self, other: &Self) -> bool {
        #[cfg(test)]
        tests::COMPARISONS.with(|c| c.set(c.get() + 1));
        self.0 == other.0
    }
}

/// oslo's parse errors. `message` is oslo's text; `text` is the offending line as oslo
/// reports it (right-stripped; empty for "Section must be started before assignment"), whole.
/// `Display` is oslo's message with the line cut to a readable length ([`crate::excerpt`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at line {line}, {message}: {}", echo(text).quoted(super::pyrepr::repr))]
pub struct ParseError {
    pub line: usize,
    pub message: &'static str,
    pub text: String,
}

impl ParseError {
    /// What to do about it.
    pub fn hint(&self) -> &'static str {
        match self.message {
            NO_SECTION => "start the file with a section such as [DEFAULT]",
            UNEXPECTED_CONTINUATION => {
                "a line starting with whitespace continues the previous value: remove the indentation"
            }
            NO_SECTION_END => {
                "section headers take no trailing text (no inline comments): end the line with ]"
            }
            EMPTY_SECTION => "give the section a name, such as [DEFAULT]",
            NO_ASSIGNMENT if self.line == 1 && self.text.starts_with('\u{feff}') => {
                "the file starts with a byte-order mark, which oslo does not strip: save it without BOM"
            }
            NO_ASSIGNMENT => {
                "write options as `key = value`, or make the line a comment with # in the first column"
            }
            EMPTY_KEY => "put the option's name before the = or :",
            _ => "fix the line so that oslo.config can read it",
        }
    }
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
        match line_end(rest.as_bytes()) {
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

/// The first `\n` or `\r`.
fn line_end(b: &[u8]) -> Option<usize> {
    find_either(b, b'\n', b'\r')
}

/// The first byte equal to `x` or `y`, eight bytes at a time: finding line ends and
/// separators was the largest part of parsing. A byte equal to `t` makes `w ^ t` zero there,
/// which the usual has-zero-byte test (`(v - 0x01…) & !v & 0x80…`) detects without false
/// negatives; a hit is then located bytewise.
fn find_either(b: &[u8], x: u8, y: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    let (xs, ys) = (ONES * u64::from(x), ONES * u64::from(y));
    let mut chunks = b.chunks_exact(8);
    let mut i = 0;
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().unwrap_or_default());
        if has_zero(w ^ xs) || has_zero(w ^ ys) {
            break;
        }
        i += 8;
    }
    b[i..].iter().position(|&c| c == x || c == y).map(|p| p + i)
}

struct Pending<'a> {
    key: &'a str,
    first: &'a str,
    /// Continuation lines, when there are any (most values have none).
    more: Vec<&'a str>,
    line: usize,
}

#[allow(
    clippy::too_many_lines,
    reason = "a line-by-line state machine, as oslo.config's iniparser is; its states share the pending option"
)]
pub fn parse(text: &str) -> Result<ConfigFile<'_>, ParseError> {
    let mut file = ConfigFile::default();
    let mut pending: Option<Pending> = None;
    let mut lineno = 0;
    let err =
        |line: usize, message: &'static str, text: &str| ParseError { line, message, text: text.to_string() };

    // The flush of a pending assignment: oslo reports a missing section at the line where
    // the flush happens, with empty line text.
    fn flush<'a>(
        file: &mut ConfigFile<'a>,
        pending: &mut Option<Pending<'a>>,
        lineno: usize,
    ) -> Result<(), ParseError> {
        if let Some(p) = pending.take() {
            let Some(section) = file.sections.last_mut() else {
                return Err(ParseError { line: lineno, message: NO_SECTION, text: String::new() });
            };
            let value = if p.more.is_empty() {
                Cow::Borrowed(p.first)
            } else {
                let mut v = String::from(p.first);
                for m in p.more {
                    v.push('\n');
                    v.push_str(m);
                }
                Cow::Owned(v)
            };
            section.entries.push(Entry { key: Cow::Borrowed(p.key), value, line: p.line });
        }
        Ok(())
    }

    for raw in lines(text) {
        lineno += 1;
        let line = py_trim_end(raw);
        if line.is_empty() {
            flush(&mut file, &mut pending, lineno)?;
            continue;
        }
        // Every test below is on an ASCII byte, which never occurs inside a UTF-8 sequence.
        let first = line.as_bytes()[0];
        if first == b' ' || first == b'\t' {
            match &mut pending {
                None => return Err(err(lineno, UNEXPECTED_CONTINUATION, line)),
                Some(p) => p.more.push(py_trim_start(line)),
            }
            continue;
        }
        flush(&mut file, &mut pending, lineno)?;
        if first == b'[' {
            if !line.ends_with(']') {
                return Err(err(lineno, NO_SECTION_END, line));
            }
            // Python's len() counts code points; more than 8 bytes is more than 2 of them.
            if line.len() <= 8 && line.chars().count() <= 2 {
                return Err(err(lineno, EMPTY_SECTION, line));
            }
            let name = &line[1..line.len() - 1];
            // Sections hold tens of entries; starting at 16 saves most regrowth copies.
            file.sections.push(Section {
                name: Cow::Borrowed(name),
                line: lineno,
                entries: Vec::with_capacity(16),
            });
        } else if first == b'#' || first == b';' {
            file.comments.push(Comment { text: py_trim_start(&line[1..]), line: lineno });
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
    let i = find_either(line.as_bytes(), b'=', b':')?;
    let key = py_strip(&line[..i]);
    let mut value = py_strip(&line[i + 1..]);
    // Quotes are ASCII, so comparing bytes compares the first and last characters.
    if let (Some(&first), Some(&last)) = (value.as_bytes().first(), value.as_bytes().last())
        && (first == b'"' || first == b'\'')
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

    thread_local! {
        /// How often [`Name`]s were compared on this thread (each test runs on its own).
        pub(super) static COMPARISONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn values(text: &str) -> Vec<(String, String, String)> {
        parse(text)
            .unwrap()
            .sections
            .iter()
            .flat_map(|s| {
                s.entries.iter().map(|e| (s.name.to_string(), e.key.to_string(), e.value.to_string()))
            })
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
        let names: Vec<_> = f.sections.iter().map(|s| &*s.name).collect();
        assert_eq!(names, [" db ", "[x]", "y]"]);
    }

    proptest::proptest! {
        #[test]
        fn find_either_finds_the_first(s in "[a\\n\\ré=:]{0,40}") {
            let naive = s.bytes().position(|c| c == b'\n' || c == b'\r');
            proptest::prop_assert_eq!(line_end(s.as_bytes()), naive);
            let naive = s.bytes().position(|c| c == b'=' || c == b':');
            proptest::prop_assert_eq!(find_either(s.as_bytes(), b'=', b':'), naive);
        }
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
        assert_eq!(a.1[0].1.iter().map(|e| &*e.value).collect::<Vec<_>>(), ["1", "3"]);
    }

    /// Merging must not compare each section or key with all those before it (a linear search
    /// per entry, as it once did, made `oslo parse` quadratic): with hash maps, names are
    /// compared only when their hashes look alike, a fraction of a comparison per entry.
    #[test]
    fn merging_compares_each_name_a_few_times() {
        let n = 2_000;
        let mut text = String::from("[DEFAULT]\n");
        for i in 0..n {
            text.push_str(&format!("key_{i} = {i}\n"));
        }
        for i in 0..n {
            text.push_str(&format!("[s{i}]\nk = {i}\n"));
        }
        // Re-opened sections and repeated keys: each must be found again.
        text.push_str("[DEFAULT]\nkey_7 = again\n[s5]\nk = again\n");
        let f = parse(&text).unwrap();
        COMPARISONS.with(|c| c.set(0));
        let merged = f.sections_merged();
        let comparisons = COMPARISONS.with(|c| c.get());
        assert_eq!(merged.len(), n + 1);
        assert_eq!(merged[0].1.len(), n);
        assert_eq!(merged[0].1[7].1.iter().map(|e| &*e.value).collect::<Vec<_>>(), ["7", "again"]);
        assert_eq!(merged[6].0, "s5");
        assert_eq!(merged[6].1[0].1.len(), 2);
        // A linear search makes about n * n / 2 = 2,000,000 comparisons here.
        let entries = 2 * n + 2;
        assert!(comparisons <= entries, "{comparisons} name comparisons for {entries} entries");
    }
}
