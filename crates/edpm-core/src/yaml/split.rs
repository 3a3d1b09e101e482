//! Splitting a YAML stream into documents the way kubectl does (apimachinery's `YAMLReader`):
//! every line that starts with `---` ends the document before it, and only a comment may
//! follow the `---` on that line. Each section is then read on its own, which is also what lets
//! one large file be parsed on every core.

use super::Error;

/// The lines between two `---` separators: bytes `start..end` of the text, starting at line
/// `first_line` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    pub start: usize,
    pub end: usize,
    pub first_line: u32,
}

/// The sections of `text`, in order; empty ones (two separators in a row) are left out.
pub fn sections(text: &str) -> Result<Vec<Section>, Error> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut first_line = 1u32;
    let mut line_no = 1u32;
    let mut pos = 0;
    while pos < bytes.len() {
        let end = memchr(b'\n', &bytes[pos..]).map_or(bytes.len(), |i| pos + i + 1);
        let line = &text[pos..end];
        if let Some(rest) = line.strip_prefix("---") {
            let rest = rest.trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                return Err(Error::invalid(
                    line_no as u64,
                    4,
                    format!(
                        "`{}`: kubectl accepts only a comment after the document separator `---`; move `{rest}` to the next line",
                        line.trim_end()
                    ),
                ));
            }
            if start < pos {
                out.push(Section { start, end: pos, first_line });
            }
            start = end;
            first_line = line_no + 1;
        }
        pos = end;
        line_no += 1;
    }
    if start < bytes.len() {
        out.push(Section { start, end: bytes.len(), first_line });
    }
    Ok(out)
}

/// The index of the first `needle` in `haystack`, a word at a time: separators are searched for
/// in every line of multi-megabyte files.
fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let pattern = LO * u64::from(needle);
    let mut i = 0;
    while i + 8 <= haystack.len() {
        let word = u64::from_le_bytes(haystack[i..i + 8].try_into().unwrap_or([0; 8])) ^ pattern;
        if (word.wrapping_sub(LO) & !word & HI) != 0 {
            break;
        }
        i += 8;
    }
    haystack[i..].iter().position(|&b| b == needle).map(|p| i + p)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn texts(text: &str) -> Vec<(&str, u32)> {
        sections(text).unwrap().iter().map(|s| (&text[s.start..s.end], s.first_line)).collect()
    }

    #[test]
    fn splits_on_separator_lines_only() {
        let text = "# lead\na: 1\n---\nb: 2\n--- # note\n---\n  --- not a separator\nc: \"---\"\n";
        assert_eq!(
            texts(text),
            [("# lead\na: 1\n", 1), ("b: 2\n", 4), ("  --- not a separator\nc: \"---\"\n", 7)]
        );
        assert_eq!(texts("---\na: 1"), [("a: 1", 2)]);
        assert!(texts("---\n---\n").is_empty());
        assert_eq!(texts("a\r\n---\r\nb\r\n"), [("a\r\n", 1), ("b\r\n", 3)]);
    }

    #[test]
    fn content_after_a_separator_is_refused_as_kubectl_does() {
        for bad in ["--- {a: 1}\n", "a: 1\n--- |\n x\n", "----\n", "---x\n"] {
            let err = sections(bad).unwrap_err();
            assert!(err.message.contains("kubectl accepts only a comment"), "{bad:?}: {err}");
        }
        assert_eq!(sections("a: 1\n--- |\n x\n").unwrap_err().line, 2);
    }

    proptest! {
        #[test]
        fn memchr_matches_a_plain_search(hay in proptest::collection::vec(prop::sample::select(vec![b'a', b'\n', b'-', 0x80]), 0..40)) {
            prop_assert_eq!(memchr(b'\n', &hay), hay.iter().position(|&b| b == b'\n'));
        }
    }
}
