//! Python's `repr()` of a `str`, for error messages that match oslo's (`{line!r}`).
//!
//! Quotes: single, unless the text holds a `'` and no `"`. Escapes: `\\`, the chosen quote,
//! `\t`, `\n`, `\r`, and `\xhh`/`\uhhhh`/`\Uhhhhhhhh` for characters Python does not consider
//! printable. Printability is approximated without a Unicode database: control characters,
//! the Unicode separators, format characters in common use (soft hyphen, zero-width and
//! bidirectional marks, BOM) and noncharacters are escaped; other characters are printed.

pub fn repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !printable(c) => {
                let n = c as u32;
                if n < 0x100 {
                    out.push_str(&format!("\\x{n:02x}"));
                } else if n < 0x10000 {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

fn printable(c: char) -> bool {
    let n = c as u32;
    !(n < 0x20
        || (0x7f..=0xa0).contains(&n)
        || n == 0xad
        || n == 0x1680
        || n == 0x180e
        || (0x2000..=0x200f).contains(&n)
        || (0x2028..=0x202f).contains(&n)
        || (0x205f..=0x206f).contains(&n)
        || n == 0x3000
        || (0xd800..=0xdfff).contains(&n)
        || n == 0xfeff
        || (0xfff9..=0xfffb).contains(&n)
        || (0xe000..=0xf8ff).contains(&n)
        || (n & 0xfffe) == 0xfffe)
}

#[cfg(test)]
mod tests {
    use super::repr;

    #[test]
    fn matches_python() {
        assert_eq!(repr("abc"), "'abc'");
        assert_eq!(repr("it's"), "\"it's\"");
        assert_eq!(repr("it's \"q\""), "'it\\'s \"q\"'");
        assert_eq!(repr("\ta\\b"), "'\\ta\\\\b'");
        assert_eq!(repr("\u{feff}[DEFAULT]"), "'\\ufeff[DEFAULT]'");
        assert_eq!(repr("é\u{a0}\u{7f}"), "'é\\xa0\\x7f'");
        assert_eq!(repr(""), "''");
    }
}
