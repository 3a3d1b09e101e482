//! Ansible's `split_host_pattern` (a limit into patterns) and `_split_subscript` (a pattern
//! into its expression and subscript), with `parse_address` where the split depends on it.

/// Python's `str.isspace`, which `strip()` and `\s` use: Unicode's White_Space and the four
/// information separators U+001C..U+001F.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// `split_host_pattern`: at commas when there is one; else the whole when it is one address
/// (`parse_address(pattern, allow_ranges=True)`), else the runs of anything but whitespace,
/// `:`, `[` and `]`, and of whole `[…]` expressions. Each stripped, empty ones dropped.
pub fn split_host_pattern(limit: &str) -> Result<Vec<String>, String> {
    if limit.contains(['\n', '\r']) {
        // Python's `$` and `.` treat a newline apart in the expressions below; no host name
        // holds one.
        return Err("it holds a line break".into());
    }
    let parts: Vec<&str> = if limit.contains(',') {
        limit.split(',').collect()
    } else {
        let runs = runs(limit);
        if runs.len() == 1 && runs[0] == strip(limit) {
            // One pattern however Ansible reads it.
            runs
        } else if is_address(limit)? {
            vec![limit]
        } else {
            runs
        }
    };
    Ok(parts.into_iter().map(strip).filter(|p| !p.is_empty()).map(str::to_string).collect())
}

/// `re.findall(r"(?:[^\s:\[\]]|\[[^\]]*\])+", pattern)`.
fn runs(s: &str) -> Vec<&str> {
    let b: Vec<(usize, char)> = s.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        while let Some(&(_, c)) = b.get(i) {
            if c == '[' {
                // A whole bracketed expression, or the `[` stops the run.
                match b[i + 1..].iter().position(|&(_, x)| x == ']') {
                    Some(k) => i += k + 2,
                    None => break,
                }
            } else if is_space(c) || c == ':' || c == ']' {
                break;
            } else {
                i += 1;
            }
        }
        if i > start {
            let end = b.get(i).map_or(s.len(), |&(at, _)| at);
            out.push(&s[b[start].0..end]);
        } else {
            i += 1;
        }
    }
    out
}

/// Whether `parse_address(pattern, allow_ranges=True)` accepts the pattern: an optional
/// `:port` (after `[…]` or a host), then an IPv4 or IPv6 address or a host name, any with
/// `[x:y]` ranges. Only ASCII is judged: `\w` and `re.I` beyond it are Python's own.
fn is_address(pattern: &str) -> Result<bool, String> {
    if !pattern.is_ascii() {
        return Err(format!(
            "{} holds no comma, and whether Ansible reads it as one address or as patterns separated by ':' depends on Python's reading of characters beyond ASCII",
            crate::excerpt::echo(&crate::excerpt::printable(pattern)).debug()
        ));
    }
    let re = |p: &str| regex::Regex::new(p).map_err(|e| format!("internal: {e}"));
    const RANGE_NUM: &str = r"\[(?:[0-9]+:[0-9]+)(?::[0-9]+)?\]";
    const RANGE_HEX: &str = r"\[(?:[0-9a-fA-F]+:[0-9a-fA-F]+)(?::[0-9]+)?\]";
    const RANGE_ALNUM: &str = r"\[(?:[a-zA-Z]:[a-zA-Z]|[0-9]+:[0-9]+)(?::[0-9]+)?\]";
    let mut address = pattern.to_string();
    for hostport in [r"^\[(.+)\]:([0-9]+)$", r"^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$"] {
        if let Some(c) = re(hostport)?.captures(&address) {
            address = c[1].to_string();
        }
    }
    let i4 = format!(r"(?:[01]?[0-9]{{1,2}}|2[0-4][0-9]|25[0-5]|{RANGE_NUM})");
    let ipv4 = format!(r"^(?:{i4}\.){{3}}{i4}$");
    let c = format!(r"(?:[0-9a-fA-F]{{1,4}}|{RANGE_HEX})");
    let ipv6 = format!(
        r"^(?:(?:{c}:){{7}}{c}|(?:{c}:){{1,6}}:|(?:{c}:)(?::{c}){{1,6}}|(?:{c}:){{2}}(?::{c}){{1,5}}|(?:{c}:){{3}}(?::{c}){{1,4}}|(?:{c}:){{4}}(?::{c}){{1,3}}|(?:{c}:){{5}}(?::{c}){{1,2}}|(?:{c}:){{6}}(?::{c})|:(?::{c}){{1,6}}|{c}?::|(?:0:){{6}}(?:{c}\.){{3}}{c}|::(?:[fF]{{4}}:)?(?:{c}\.){{3}}{c}|(?:0:){{5}}[fF]{{4}}:(?:{c}\.){{3}}{c})$"
    );
    // A label: a word character or range first, then word characters, `-` or ranges, not
    // ending in `_` or `-` (Python's lookbehind, written out).
    let end = format!(r"(?:[a-zA-Z0-9]|{RANGE_ALNUM})");
    let label = format!(r"(?:{end}|(?:[a-zA-Z0-9_]|{RANGE_ALNUM})(?:[a-zA-Z0-9_-]|{RANGE_ALNUM})*{end})");
    let hostname = format!(r"^{label}(?:\.{label})*$");
    for p in [ipv4, ipv6, hostname] {
        if re(&p)?.is_match(&address) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A subscript: `[n]`, or `[start:end]` (`[start-end]` alike; `end` empty is the last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Subscript {
    Index(i128),
    Range(i128, Option<i128>),
}

/// `_split_subscript` (for a pattern that is no regex): `(.+)\[(-?[0-9]+|[0-9]+[:-][0-9]*)\]$`.
pub(super) fn subscript(pattern: &str) -> (&str, Option<Subscript>) {
    let none = (pattern, None);
    let Some(body) = pattern.strip_suffix(']') else { return none };
    let Some(open) = body.rfind('[') else { return none };
    let (expr, inner) = (&body[..open], &body[open + 1..]);
    if expr.is_empty() {
        return none;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let number =
        |s: &str| s.parse::<i128>().unwrap_or(if s.starts_with('-') { i128::MIN } else { i128::MAX });
    let single = inner.strip_prefix('-').unwrap_or(inner);
    if digits(single) {
        return (expr, Some(Subscript::Index(number(inner))));
    }
    let Some(sep) = inner.find([':', '-']) else { return none };
    let (start, end) = (&inner[..sep], &inner[sep + 1..]);
    if !digits(start) || !(end.is_empty() || digits(end)) {
        return none;
    }
    let end = if end.is_empty() { None } else { Some(number(end)) };
    (expr, Some(Subscript::Range(number(start), end)))
}

impl Subscript {
    /// `_apply_subscript`: `None` where Ansible raises (an index past the hosts; so is
    /// `[n:0]`, which it reads as `[n]`).
    pub(super) fn apply(self, hosts: Vec<usize>) -> Option<Vec<usize>> {
        if hosts.is_empty() {
            return Some(hosts);
        }
        let len = i128::try_from(hosts.len()).unwrap_or(i128::MAX);
        let at = |i: i128| {
            let i = if i < 0 { i + len } else { i };
            (0..len).contains(&i).then(|| vec![hosts[usize::try_from(i).unwrap_or(0)]])
        };
        match self {
            Subscript::Index(i) | Subscript::Range(i, Some(0)) => at(i),
            Subscript::Range(start, end) => {
                let stop = end.map_or(len, |e| e.saturating_add(1)).min(len);
                let start = start.min(len);
                if start >= stop {
                    return Some(Vec::new());
                }
                let (a, b) = (usize::try_from(start).unwrap_or(0), usize::try_from(stop).unwrap_or(0));
                Some(hosts[a..b].to_vec())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Vec<String> {
        split_host_pattern(s).unwrap()
    }

    #[test]
    fn commas_then_colons_and_spaces_unless_one_address() {
        assert_eq!(split("a, b ,c,,"), ["a", "b", "c"]);
        assert_eq!(split("a b,c"), ["a b", "c"], "with a comma, spaces stay");
        assert_eq!(split("a:b"), ["a", "b"]);
        assert_eq!(split("a b"), ["a", "b"]);
        assert_eq!(split("web[1:3]"), ["web[1:3]"]);
        assert_eq!(split("web:22"), ["web:22"], "a host and its port is one address");
        assert_eq!(split("fe80::1"), ["fe80::1"]);
        assert_eq!(split("~edpm-compute-[0-6]$"), ["~edpm-compute-[0-6]$"]);
        assert_eq!(split("~a:b"), ["~a", "b"]);
        assert_eq!(split("a]b"), ["a", "b"]);
        assert_eq!(split("a[1:2"), ["a", "1", "2"]);
        assert_eq!(split(" "), Vec::<String>::new());
        assert!(split_host_pattern("a\nb").is_err());
    }

    #[test]
    fn subscripts_as_ansible_splits_and_applies_them() {
        assert_eq!(subscript("g[0]"), ("g", Some(Subscript::Index(0))));
        assert_eq!(subscript("g[-1]"), ("g", Some(Subscript::Index(-1))));
        assert_eq!(subscript("g[1:3]"), ("g", Some(Subscript::Range(1, Some(3)))));
        assert_eq!(subscript("g[1-]"), ("g", Some(Subscript::Range(1, None))));
        assert_eq!(subscript("g[a]"), ("g[a]", None));
        assert_eq!(subscript("[0]"), ("[0]", None));
        assert_eq!(subscript("g[0][1]"), ("g[0]", Some(Subscript::Index(1))));
        let h = vec![10, 11, 12];
        assert_eq!(Subscript::Index(-1).apply(h.clone()), Some(vec![12]));
        assert_eq!(Subscript::Index(3).apply(h.clone()), None);
        assert_eq!(Subscript::Range(1, None).apply(h.clone()), Some(vec![11, 12]));
        assert_eq!(Subscript::Range(1, Some(9)).apply(h.clone()), Some(vec![11, 12]));
        assert_eq!(Subscript::Range(2, Some(0)).apply(h.clone()), Some(vec![12]), "[n:0] is [n]");
        assert_eq!(Subscript::Range(5, Some(0)).apply(h.clone()), None);
        assert_eq!(Subscript::Range(5, Some(7)).apply(h.clone()), Some(vec![]));
        assert_eq!(Subscript::Index(7).apply(vec![]), Some(vec![]), "no hosts: nothing to refuse");
    }
}
