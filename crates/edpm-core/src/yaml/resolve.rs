//! Scalar resolution exactly as go-yaml v2 (`resolve.go`, the fork inside sigs.k8s.io/yaml) does
//! it, followed by the JSON conversion sigs.k8s.io/yaml applies before the API server sees the
//! object (`convertToJSONableObject`, then `json.Marshal`).
//!
//! Pure string functions. The rules, in go-yaml's order:
//! - a fixed table: `y Y yes Yes YES true True TRUE on On ON` are true, the same with
//!   `n no false off` are false, `"" ~ null Null NULL` are null, `.inf`/`.nan` forms are floats;
//!   nothing else that starts with one of `yYnNtTfFoO~` is special;
//! - a leading `.` is tried as a float (Go's `ParseFloat`);
//! - a leading digit or sign: underscores are removed, then Go's `ParseInt(s, 0, 64)` (so `0640` is
//!   octal, `0x1F`, `0o17` and `0b11` are prefixed), then `ParseUint`, then a decimal float with an
//!   optional exponent (`1e3` and `08` are floats), then go-yaml's own `0b-1` quirk;
//! - everything else is a string. There are no sexagesimal numbers; timestamps stay strings.
//!
//! Explicit tags (`!!int 12`) resolve the same way and must agree with the tag (`!!float` also
//! takes an int); `!!str` and custom tags keep the text; `!!binary` is base64. The merge key
//! `<<` is not a resolution (go-yaml's `isMerge` looks at the text): see `load`.

use std::borrow::Cow;

use super::node::Data;

pub const TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// Resolves a plain (unquoted, untagged) scalar.
#[cfg(test)]
pub fn plain(s: &str) -> Data<'_> {
    implicit(s).unwrap_or(Data::Str(Cow::Borrowed(s)))
}

/// What a plain (unquoted, untagged) scalar is, or `None` for a string.
pub fn implicit(s: &str) -> Option<Data<'static>> {
    resolve_untagged(s, false)
}

/// What go-yaml's first-byte table says about a scalar.
#[derive(Clone, Copy, PartialEq)]
enum Hint {
    None,
    Sign,
    Digit,
    Map,
    Dot,
}

fn hint(s: &str) -> Hint {
    match s.as_bytes().first() {
        None => Hint::Map,
        Some(b'+' | b'-') => Hint::Sign,
        Some(b'0'..=b'9') => Hint::Digit,
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => Hint::Map,
        Some(b'.') => Hint::Dot,
        Some(_) => Hint::None,
    }
}

fn table(s: &str) -> Option<Data<'static>> {
    Some(match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => Data::Bool(true),
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Data::Bool(false)
        }
        "" | "~" | "null" | "Null" | "NULL" => Data::Null,
        ".nan" | ".NaN" | ".NAN" => Data::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Data::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Data::Float(f64::NEG_INFINITY),
        _ => return None,
    })
}

/// go-yaml's `resolve` for the implicit part: `None` means "a string". `timestamps` says whether
/// a timestamp counts as its own type (only asked for by an explicit `!!timestamp`; a plain
/// timestamp is kept as its text, which is also what the fall-through gives).
fn resolve_untagged(s: &str, timestamps: bool) -> Option<Data<'static>> {
    let h = hint(s);
    if h == Hint::None {
        return None;
    }
    if let Some(v) = table(s) {
        return Some(v);
    }
    match h {
        Hint::Dot => go_parse_float(s).map(Data::Float),
        Hint::Digit | Hint::Sign => {
            if timestamps && is_timestamp(s) {
                return None;
            }
            let plain: Cow<str> =
                if s.contains('_') { Cow::Owned(s.replace('_', "")) } else { Cow::Borrowed(s) };
            if let Ok(i) = go_parse_int(&plain, 0) {
                return Some(Data::Int(i));
            }
            if let Ok(u) = go_parse_uint(&plain, 0) {
                return Some(Data::UInt(u));
            }
            if yaml_style_float(&plain)
                && let Some(f) = go_parse_float(&plain)
            {
                return Some(Data::Float(f));
            }
            // go-yaml's own binary branches, reached only by forms Go's prefix parsing refused
            // (`0b-1` is -1 there).
            if let Some(rest) = plain.strip_prefix("0b") {
                if let Ok(i) = go_parse_int(rest, 2) {
                    return Some(Data::Int(i));
                }
                if let Ok(u) = go_parse_uint(rest, 2) {
                    return Some(Data::UInt(u));
                }
            } else if let Some(rest) = plain.strip_prefix("-0b")
                && let Ok(i) = go_parse_int(&format!("-{rest}"), 2)
            {
                return Some(Data::Int(i));
            }
            None
        }
        Hint::Map | Hint::None => None,
    }
}

/// The YAML core tags go-yaml resolves (`resolvableTag`); others keep the text.
fn resolvable(tag: &str) -> bool {
    matches!(tag.strip_prefix(TAG_PREFIX), Some("str" | "bool" | "int" | "float" | "null" | "timestamp"))
}

/// Resolves a scalar with an explicit tag (the full URI, `tag:yaml.org,2002:int` for `!!int`).
/// An error is go-yaml's "cannot decode !!str `abc` as a !!int".
pub fn tagged<'a>(tag: &str, s: Cow<'a, str>) -> Result<Data<'a>, String> {
    let short = tag.strip_prefix(TAG_PREFIX);
    if !resolvable(tag) {
        return match short {
            Some("binary") => {
                decode_base64(&s).map(|b| Data::Str(Cow::Owned(go_string(&b)))).ok_or_else(|| {
                    "!!binary value contains invalid base64 data; fix the data or drop the tag".to_string()
                })
            }
            _ => Ok(Data::Str(s)),
        };
    }
    let want = short.unwrap_or_default();
    if want == "str" {
        return Ok(Data::Str(s));
    }
    let got = resolve_untagged(&s, want == "timestamp");
    let got_name = got.as_ref().map_or("!!str", Data::tag_name);
    let ok = match (&got, want) {
        (None, "timestamp") => is_timestamp(&s),
        (Some(Data::Null), "null") | (Some(Data::Bool(_)), "bool") => true,
        (Some(Data::Int(_) | Data::UInt(_)), "int") | (Some(Data::Float(_)), "float") => true,
        _ => false,
    };
    if !ok {
        // The int-to-float widening of go-yaml's deferred check.
        return match (got, want) {
            (Some(Data::Int(i)), "float") => Ok(Data::Float(i as f64)),
            _ => Err(format!(
                "`{}` cannot be read as !!{want} (it is a {got_name}); remove the tag or fix the value",
                crate::excerpt::echo(&s)
            )),
        };
    }
    Ok(match got {
        None => Data::Str(s),
        Some(v) => v,
    })
}

/// Go's `strconv.ParseUint(s, base, 64)` (underscores already removed by the caller; `base` 0
/// reads the `0x`/`0o`/`0b`/`0` prefixes).
fn go_parse_uint(s: &str, base: u32) -> Result<u64, ()> {
    if s.is_empty() {
        return Err(());
    }
    let b = s.as_bytes();
    let (base, digits) = if base != 0 {
        (base, b)
    } else if b[0] == b'0' {
        match b.get(1).map(u8::to_ascii_lowercase) {
            Some(b'b') if b.len() >= 3 => (2, &b[2..]),
            Some(b'o') if b.len() >= 3 => (8, &b[2..]),
            Some(b'x') if b.len() >= 3 => (16, &b[2..]),
            _ => (8, &b[1..]),
        }
    } else {
        (10, b)
    };
    let mut n: u64 = 0;
    for &c in digits {
        let d = match c {
            b'0'..=b'9' => u32::from(c - b'0'),
            _ if c.is_ascii_alphabetic() => u32::from(c.to_ascii_lowercase() - b'a') + 10,
            _ => return Err(()),
        };
        if d >= base {
            return Err(());
        }
        n = n.checked_mul(u64::from(base)).and_then(|n| n.checked_add(u64::from(d))).ok_or(())?;
    }
    Ok(n)
}

/// Go's `strconv.ParseInt(s, base, 64)`.
fn go_parse_int(s: &str, base: u32) -> Result<i64, ()> {
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let un = go_parse_uint(rest, base)?;
    if neg {
        if un > 1 << 63 {
            return Err(());
        }
        Ok((un as i64).wrapping_neg())
    } else {
        i64::try_from(un).map_err(|_| ())
    }
}

/// go-yaml's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's `strconv.ParseFloat(s, 64)` for what can reach it here: a decimal number with optional
/// sign, fraction, exponent and Go's digit-separating underscores. Out-of-range values are an
/// error in Go (and so a string in go-yaml), never an infinity.
fn go_parse_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let mut digits = 0;
    let mut seen_dot = false;
    while i < b.len() {
        match b[i] {
            b'0'..=b'9' => digits += 1,
            b'_' => {}
            b'.' if !seen_dot => seen_dot = true,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            i += 1;
        }
        if !b[start..i].iter().any(u8::is_ascii_digit) {
            return None;
        }
    }
    if i != b.len() || (s.contains('_') && !underscores_ok(s)) {
        return None;
    }
    let f: f64 = s.replace('_', "").parse().ok()?;
    f.is_finite().then_some(f)
}

/// Go's `underscoreOK`: an underscore must sit between digits.
fn underscores_ok(s: &str) -> bool {
    let b = s.strip_prefix(['+', '-']).unwrap_or(s).as_bytes();
    let mut saw = b'^';
    for &c in b {
        if c.is_ascii_digit() {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
    }
    saw != b'_'
}

/// go-yaml's `parseTimestamp`: `YYYY-M-D`, optionally followed by `T`, `t` or a space and
/// `H:M:S[.fraction]`, with a `Z` or `±hh:mm` zone after a `T`/`t`. Only an explicit
/// `!!timestamp` asks; a plain timestamp is a string either way.
#[allow(
    clippy::too_many_lines,
    reason = "go-yaml's parseTimestamp, transcribed step by step so the two can be read side by side"
)]
pub fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let mut i = 5;
    let num = |i: &mut usize, max_len: usize| -> Option<u32> {
        let start = *i;
        while *i < b.len() && *i - start < max_len && b[*i].is_ascii_digit() {
            *i += 1;
        }
        (*i > start).then(|| s[start..*i].parse().ok()).flatten()
    };
    let year: u32 = s[..4].parse().unwrap_or(0);
    let Some(month) = num(&mut i, 2) else { return false };
    if b.get(i) != Some(&b'-') {
        return false;
    }
    i += 1;
    let Some(day) = num(&mut i, 2) else { return false };
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&month) || day < 1 || day > days[month as usize - 1] {
        return false;
    }
    if i == b.len() {
        return true;
    }
    let sep = b[i];
    if !matches!(sep, b'T' | b't' | b' ') {
        return false;
    }
    i += 1;
    let mut clock = [0u32; 3];
    for (n, part) in clock.iter_mut().enumerate() {
        let Some(v) = num(&mut i, 2) else { return false };
        *part = v;
        if n < 2 {
            if b.get(i) != Some(&b':') {
                return false;
            }
            i += 1;
        }
    }
    if clock[0] > 23 || clock[1] > 59 || clock[2] > 59 {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    if sep == b' ' {
        return i == b.len();
    }
    match &b[i..] {
        [b'Z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => {
            [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit())
                && (h1 - b'0') * 10 + (h2 - b'0') < 24
                && (m1 - b'0') * 10 + (m2 - b'0') < 60
        }
        _ => false,
    }
}

/// Go's `base64.StdEncoding.DecodeString` after go-yaml: padding required, `\r` and `\n`
/// ignored, trailing bits tolerated.
pub(crate) fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let clean: Vec<u8> = s.bytes().filter(|c| !matches!(c, b'\r' | b'\n')).collect();
    if !clean.len().is_multiple_of(4) {
        return None;
    }
    let value = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    };
    let mut out = Vec::with_capacity(clean.len() / 4 * 3);
    let quads = clean.chunks(4).count();
    for (n, quad) in clean.chunks(4).enumerate() {
        let pad = quad.iter().rev().take_while(|c| **c == b'=').count();
        if pad > 2 || (pad > 0 && n + 1 != quads) {
            return None;
        }
        let mut acc = 0u32;
        for &c in &quad[..4 - pad] {
            acc = acc << 6 | value(c)?;
        }
        acc <<= 6 * pad as u32;
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - pad]);
    }
    Some(out)
}

/// Bytes as Go's `json.Marshal` writes a string: each byte of invalid UTF-8 becomes U+FFFD.
fn go_string(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                out.push('\u{FFFD}');
                rest = &bad[1..];
            }
        }
    }
    out
}

/// A mapping key (a resolved scalar) as sigs.k8s.io/yaml turns it into a JSON object key. `Err` names what cannot
/// be a key (go-yaml's `null` and 64-bit unsigned keys).
pub fn key_text<'a>(key: Data<'a>) -> Result<Cow<'a, str>, &'static str> {
    Ok(match key {
        Data::Str(s) => s,
        Data::Int(i) => Cow::Owned(i.to_string()),
        Data::Bool(b) => Cow::Borrowed(if b { "true" } else { "false" }),
        Data::Float(f) => Cow::Owned(go_format_float32(f)),
        Data::Null => return Err("null"),
        Data::UInt(_) => return Err("an integer above 2^63-1"),
        // `load` resolves only scalars into keys.
        Data::Seq(_) | Data::Map(_) => return Err("a sequence or a mapping"),
    })
}

/// `strconv.FormatFloat(f, 'g', -1, 32)` with sigs.k8s.io/yaml's `.inf`/`.nan` spellings: the
/// shortest decimal that reads back as the same float32, in `%e` form when the decimal exponent
/// is below -4 or at least 6 (Go's rule for the shortest `%g`).
pub fn go_format_float32(f: f64) -> String {
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    let x = f as f32;
    if x.is_infinite() {
        return if x > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "d.ddde±x".
    let e = format!("{:e}", x.abs());
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if x < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1;
    if point <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
    } else if point as usize >= digits.len() {
        format!("{sign}{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{sign}{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Data<'_> {
        plain(s)
    }

    #[test]
    fn booleans_in_every_form_go_yaml_accepts() {
        for t in ["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"] {
            assert_eq!(p(t), Data::Bool(true), "{t}");
        }
        for f in ["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"] {
            assert_eq!(p(f), Data::Bool(false), "{f}");
        }
        for s in ["yEs", "oN", "tRUE", "nO", "yes!", "t", "f"] {
            assert_eq!(p(s), Data::Str(s.into()), "{s}");
        }
    }

    #[test]
    fn nulls() {
        for n in ["", "~", "null", "Null", "NULL"] {
            assert_eq!(p(n), Data::Null, "{n:?}");
        }
        assert_eq!(p("nULL"), Data::Str("nULL".into()));
    }

    #[test]
    fn integers_with_go_prefixes() {
        let cases: &[(&str, i64)] = &[
            ("0640", 0o640),
            ("0400", 256),
            ("0", 0),
            ("00", 0),
            ("-0", 0),
            ("+12", 12),
            ("0x1F", 31),
            ("0X1f", 31),
            ("-0x10", -16),
            ("0o17", 15),
            ("0O17", 15),
            ("0b101", 5),
            ("0B11", 3),
            ("-0b101", -5),
            ("1_000", 1000),
            ("0_640", 0o640),
            ("0x_1F", 31),
            ("1_", 1),
            ("9223372036854775807", i64::MAX),
            ("-9223372036854775808", i64::MIN),
            ("0b-1", -1),
            ("0b+1", 1),
        ];
        for (s, want) in cases {
            assert_eq!(p(s), Data::Int(*want), "{s}");
        }
        assert_eq!(p("18446744073709551615"), Data::UInt(u64::MAX));
        assert_eq!(p("0xFFFFFFFFFFFFFFFF"), Data::UInt(u64::MAX));
    }

    #[test]
    fn floats_as_go_parses_them() {
        let cases: &[(&str, f64)] = &[
            ("1.5", 1.5),
            ("1.", 1.0),
            (".5", 0.5),
            ("+.5", 0.5),
            ("-.5", -0.5),
            ("1e3", 1000.0),
            ("1E+3", 1000.0),
            ("1.5e-3", 0.0015),
            ("08", 8.0),
            ("09.5", 9.5),
            ("1_000.5", 1000.5),
            (".5_5", 0.55),
            ("99999999999999999999", 1e20),
            ("1e-400", 0.0),
        ];
        for (s, want) in cases {
            assert_eq!(p(s), Data::Float(*want), "{s}");
        }
        assert!(matches!(p(".nan"), Data::Float(f) if f.is_nan()));
        assert_eq!(p("-.Inf"), Data::Float(f64::NEG_INFINITY));
        assert_eq!(p("+.INF"), Data::Float(f64::INFINITY));
    }

    #[test]
    fn strings_go_yaml_does_not_resolve() {
        for s in [
            "1:30",
            "1:30.5",
            "190:20:30",
            "0x",
            "0o",
            "0b",
            "1e999",
            ".5e999",
            "+",
            "-",
            "._5",
            "0xFFFFFFFFFFFFFFFFF",
            "2001-12-14",
            "2001-12-14t21:59:43.10-05:00",
            "12:00",
            "1.2.3",
            "+-1",
            "0x-1",
            "0.5.",
            ".",
            "-.nan",
            "=",
            "10.0.0.1",
            "inf",
            "nan",
            ".infinity",
            "1e",
            "e3",
            "<<",
        ] {
            assert_eq!(p(s), Data::Str(s.into()), "{s}");
        }
        assert_eq!(p("<<"), Data::Str("<<".into()));
    }

    #[test]
    fn explicit_tags() {
        let t = |tag: &str, s: &'static str| tagged(&format!("{TAG_PREFIX}{tag}"), Cow::Borrowed(s));
        assert_eq!(t("str", "12"), Ok(Data::Str("12".into())));
        assert_eq!(t("int", "0640"), Ok(Data::Int(416)));
        assert_eq!(t("float", "12"), Ok(Data::Float(12.0)));
        assert_eq!(t("bool", "on"), Ok(Data::Bool(true)));
        assert_eq!(t("null", ""), Ok(Data::Null));
        assert_eq!(t("timestamp", "2001-12-14"), Ok(Data::Str("2001-12-14".into())));
        assert_eq!(t("binary", "aGVsbG8="), Ok(Data::Str("hello".into())));
        assert_eq!(t("binary", "aGVs\nbG8="), Ok(Data::Str("hello".into())));
        assert_eq!(t("binary", "/w=="), Ok(Data::Str("\u{FFFD}".into())));
        assert_eq!(t("merge", "<<"), Ok(Data::Str("<<".into())));
        assert_eq!(t("map", "x"), Ok(Data::Str("x".into())));
        assert_eq!(tagged("!custom", Cow::Borrowed("12")), Ok(Data::Str("12".into())));
        assert_eq!(tagged("!", Cow::Borrowed("yes")), Ok(Data::Str("yes".into())));
        for (tag, s) in [
            ("int", "abc"),
            ("int", "1.5"),
            ("bool", "1"),
            ("null", "x"),
            ("timestamp", "12"),
            ("binary", "!!"),
        ] {
            let err = t(tag, s).unwrap_err();
            assert!(err.contains(s) || tag == "binary", "{err}");
        }
        assert_eq!(
            t("int", "abc").unwrap_err(),
            "`abc` cannot be read as !!int (it is a !!str); remove the tag or fix the value"
        );
    }

    #[test]
    fn timestamps_go_accepts() {
        for s in [
            "2001-12-14",
            "2001-1-2",
            "2001-12-14T21:59:43.10Z",
            "2001-12-14t21:59:43+05:00",
            "2001-12-14 21:59:43.10",
            "2000-02-29",
        ] {
            assert!(is_timestamp(s), "{s}");
        }
        for s in [
            "2001-13-01",
            "2001-02-29",
            "2001-12-14 21:59:43 -5",
            "01-12-14",
            "2001-12-14T21:59:43",
            "2001-12-14x",
        ] {
            assert!(!is_timestamp(s), "{s}");
        }
    }

    #[test]
    fn keys_become_json_strings_as_sigs_k8s_io_yaml_makes_them() {
        let k = |s: &'static str| key_text(plain(s));
        assert_eq!(k("8080").unwrap(), "8080");
        assert_eq!(k("0640").unwrap(), "416");
        assert_eq!(k("yes").unwrap(), "true");
        assert_eq!(k("off").unwrap(), "false");
        assert_eq!(k("1.0").unwrap(), "1");
        assert_eq!(k("1.5").unwrap(), "1.5");
        assert_eq!(k("0.1").unwrap(), "0.1");
        assert_eq!(k("1e6").unwrap(), "1e+06");
        assert_eq!(k("100000").unwrap(), "100000");
        assert_eq!(k("123456.7").unwrap(), "123456.7");
        assert_eq!(k("1234567.0").unwrap(), "1.234567e+06");
        assert_eq!(k("0.0001").unwrap(), "0.0001");
        assert_eq!(k("0.00001").unwrap(), "1e-05");
        assert_eq!(k("3.141592653589793").unwrap(), "3.1415927");
        assert_eq!(k("-2.5").unwrap(), "-2.5");
        assert_eq!(k(".inf").unwrap(), ".inf");
        assert_eq!(k("2001-12-14").unwrap(), "2001-12-14");
        assert!(k("~").is_err());
        assert!(k("18446744073709551615").is_err());
    }

    #[test]
    fn base64_is_strict_about_padding() {
        assert_eq!(decode_base64("aGk=").unwrap(), b"hi");
        assert_eq!(decode_base64("").unwrap(), b"");
        assert!(decode_base64("aGk").is_none());
        assert!(decode_base64("aG=k").is_none());
        assert!(decode_base64("a Gk=").is_none());
    }
}
